"""VxlanPortChangeWorkflow's decisions on a time-skipping server, every activity replaced by a
small in-memory world (two nodes and one master, their ports, firewalls, files, the DaemonSet and
the ClusterNetwork) registered under the same names. The runs against clustersim are in
tests/e2e/test_vxlan_*.py.

Covered here: a node that never switches opens the urgent gate; rejecting it switches every
node back, the run stops and ``revert`` is accepted again (point of no return undone) and
restores the DaemonSet; a ClusterNetwork re-created with the old port (a controllers instance on
the old config) opens the retry gate, and approving it deletes the object again and restarts the
leader's controllers until the port is right; ``revert`` past the fan-out is refused without
``full``.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any

import pytest
from beats import all_within, heartbeat_timeouts, start_to_close
from temporalio import activity
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.worker import Worker

from replay import record
from activities.host.models import CommandResult, ExecBackend, HostAccess, RunCommandInput
from activities.vxlan_port.models import (
    CheckResult,
    ClusterNetworkState,
    ControllersInput,
    ControllersState,
    DaemonSetRecord,
    DeleteClusterNetworkInput,
    DeleteClusterNetworkResult,
    DsPatchInput,
    DsPatchResult,
    FanoutInput,
    FanoutResult,
    FileRecord,
    MasterApiInput,
    NodeSwitch,
    PreflightInput,
    PreflightResult,
    ReadFileInput,
    ReplacePodInput,
    ReplacePodResult,
    ResolveTargetsInput,
    SaveRecordInput,
    SdnPod,
    SwitchTarget,
    WriteFileResult,
    WriteMasterConfigInput,
    summarise,
)
from workflows import WORKFLOWS
from workflows.kit.models import ApproveInput, GateState, RejectInput
from workflows.vxlan_port.models import MasterAccess, RevertInput, VxlanPortChangeInput, VxlanPortChangeResult, VxlanStatus

pytestmark = pytest.mark.timeout(180)

STOCK, CUSTOM, TRIG = "stock:v3.11", "custom:v3.11", '[{"from":{"kind":"ImageStreamTag","name":"node:v3.11"}}]'
NODES = ["m1", "n1", "n2"]
CONFIG = "kind: MasterConfig\nnetworkConfig:\n  networkPluginName: redhat/openshift-ovs-subnet\n"


class World:
    """The cluster the fake activities read and change."""

    def __init__(self) -> None:
        self.ports = dict.fromkeys(NODES, 4789)
        self.refuse_switch: set[str] = set()
        self.rules: dict[str, set[int]] = {n: {4789} for n in NODES}
        self.images: dict[str, set[str]] = {n: {STOCK} for n in NODES}
        self.ds_image, self.ds_triggers = STOCK, TRIG
        self.pod_image = dict.fromkeys(NODES, STOCK)
        self.cn: dict[str, Any] | None = {"vxlanPort": 4789, "metadata": {"uid": "cn-1"}}
        self.cn_created = 0
        self.config = {"m1": CONFIG}
        self.ctl_restarts = {"m1": 0}
        self.stale_creations = 0  # the next N re-creations use the old port (the hazard)
        self.record: dict[str, str] = {}

    def sh(self, node: str, argv: list[str]) -> tuple[int, str, str]:
        if argv[:3] == ["docker", "image", "inspect"]:
            return (0, "[{}]", "") if argv[3] in self.images[node] else (1, "[]", f"Error: No such image: {argv[3]}")
        if argv[:2] == ["docker", "pull"]:
            self.images[node].add(argv[2])
            return 0, "", ""
        if argv[0] == "iptables":
            port = int(argv[argv.index("--dport") + 1])
            if argv[1] == "-C":
                return (0, "", "") if port in self.rules[node] else (1, "", "iptables: Bad rule (does a matching rule exist in that chain?).")
            (self.rules[node].add if argv[1] == "-A" else self.rules[node].discard)(port)
            return 0, "", ""
        if argv[0].endswith("iptables.init"):
            return 0, "", ""
        if argv[0] == "grep":
            return (0, "x", "") if int(re.search(r"dport (\d+)", argv[2]).group(1)) in self.rules[node] else (1, "", "")  # type: ignore[union-attr]
        if argv[0].endswith("master-restart"):
            if argv[1] == "controllers":
                self.ctl_restarts[node] += 1
                if self.cn is None:
                    port = 4789 if self.stale_creations else int(re.search(r"vxlanPort: (\d+)", self.config[node]).group(1))  # type: ignore[union-attr]
                    self.stale_creations = max(0, self.stale_creations - 1)
                    self.cn_created += 1
                    self.cn = {"vxlanPort": port, "metadata": {"uid": f"cn-{self.cn_created + 1}"}}
            return 0, "", ""
        return 127, "", f"sh: {argv[0]}: command not found"

    def activities(self) -> list[Any]:
        w = self

        @activity.defn(name="preflight_vxlan_port")
        async def preflight(inp: PreflightInput) -> PreflightResult:
            return PreflightResult(
                nodes=dict.fromkeys(NODES, True),
                sdn_pods={n: SdnPod(node=n, name=f"sdn-{n}", ready=True, image=w.pod_image[n]) for n in NODES},
                daemonset=DaemonSetRecord(namespace="openshift-sdn", name="sdn", uid="ds", resource_version="1", container_index=0,
                                          image=w.ds_image, triggers=w.ds_triggers, update_strategy="OnDelete"),
                cluster_network=await get_cn(None), leader="m1", workload_restarts={"p1": 0})

        @activity.defn(name="resolve_sdn_targets")
        async def resolve(inp: ResolveTargetsInput) -> list[SwitchTarget]:
            return [SwitchTarget(node=n, pod=f"sdn-{n}") for n in inp.nodes]

        @activity.defn(name="switch_vxlan_port")
        async def switch(inp: FanoutInput) -> FanoutResult:
            rows = []
            for t in inp.targets:
                before = w.ports[t.node]
                row = NodeSwitch(node=t.node, before=before, after=before, ok=before == inp.port)
                if not row.ok and inp.apply:
                    row.applied, row.t_apply_start = True, 10.0
                    if t.node not in w.refuse_switch:
                        w.ports[t.node] = inp.port
                    row.after, row.t_apply_end = w.ports[t.node], 10.2
                    row.ok = row.after == inp.port
                    row.error = "" if row.ok else "ovs-vsctl: database connection failed"
                rows.append(row)
            return summarise(inp.port, rows)

        @activity.defn(name="patch_sdn_daemonset")
        async def patch(inp: DsPatchInput) -> DsPatchResult:
            if (w.ds_image, w.ds_triggers) == (inp.to_image, inp.to_triggers):
                return DsPatchResult(changed=False)
            assert (w.ds_image, w.ds_triggers) == (inp.from_image, inp.from_triggers)
            w.ds_image, w.ds_triggers = inp.to_image, inp.to_triggers
            return DsPatchResult(changed=True)

        @activity.defn(name="replace_sdn_pod")
        async def replace(inp: ReplacePodInput) -> ReplacePodResult:
            w.pod_image[inp.node] = inp.image
            return ReplacePodResult(node=inp.node, pod=f"sdn-{inp.node}-new")

        @activity.defn(name="get_cluster_network")
        async def get_cn(_: None) -> ClusterNetworkState:
            if w.cn is None:
                return ClusterNetworkState(exists=False)
            return ClusterNetworkState(exists=True, vxlan_port=w.cn["vxlanPort"], uid=w.cn["metadata"]["uid"], object=dict(w.cn))

        @activity.defn(name="delete_cluster_network")
        async def delete_cn(inp: DeleteClusterNetworkInput) -> DeleteClusterNetworkResult:
            if w.cn is None:
                return DeleteClusterNetworkResult(outcome="already-gone")
            if w.cn["metadata"]["uid"] != inp.uid:
                return DeleteClusterNetworkResult(outcome="replaced")
            w.cn = None
            return DeleteClusterNetworkResult(outcome="deleted")

        @activity.defn(name="check_master_api")
        async def api(inp: MasterApiInput) -> CheckResult:
            return CheckResult(ok=True, detail="200 ok")

        @activity.defn(name="check_master_controllers")
        async def ctl(inp: ControllersInput) -> ControllersState:
            n = w.ctl_restarts[inp.master]
            return ControllersState(ready=n >= inp.min_restarts, restarts=n, leader="m1")

        @activity.defn(name="read_host_file")
        async def read(inp: ReadFileInput) -> FileRecord:
            return FileRecord(host=inp.host, path=inp.path, sha256_before="h0", content_before=w.config[inp.host])

        @activity.defn(name="write_master_config")
        async def write(inp: WriteMasterConfigInput) -> WriteFileResult:
            w.config[inp.host] = inp.content
            return WriteFileResult(written=True, sha256_after="h1")

        @activity.defn(name="save_vxlan_record")
        async def save(inp: SaveRecordInput) -> str:
            w.record.update(inp.data)
            return "1"

        @activity.defn(name="run_node_command")
        async def run_cmd(inp: RunCommandInput) -> CommandResult:
            node = inp.access.node or ""
            code, out, err = w.sh(node, inp.argv)
            return CommandResult(argv=inp.argv, exit_code=code, stdout=out, stderr=err)

        return [preflight, resolve, switch, patch, replace, get_cn, delete_cn, api, ctl, read, write, save, run_cmd]


def make_input(**kw: Any) -> VxlanPortChangeInput:
    access = {n: HostAccess(backend=ExecBackend.DEBUG_POD, node=n) for n in NODES}
    fields: dict[str, Any] = dict(new_port=4889, custom_image=CUSTOM, host_access=access, search_attributes=False,
                                  masters=[MasterAccess(name="m1", access=access["m1"], api_url="https://m1:8443")],
                                  requested_by="alice")
    fields.update(kw)
    return VxlanPortChangeInput(**fields)


async def status(h: WorkflowHandle[Any, Any]) -> VxlanStatus:
    return await h.query("status", result_type=VxlanStatus)


async def until(h: WorkflowHandle[Any, Any], pred: Any, *, approve: tuple[str, ...] = (), timeout: float = 60) -> VxlanStatus:
    """Poll status, approving waiting gates whose id starts with one of ``approve``, until ``pred``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        st = await status(h)
        if pred(st):
            return st
        for g in st.gates:
            if g.state == GateState.WAITING and g.id.startswith(approve):
                await h.execute_update("approve", ApproveInput(gate_id=g.id, identity="bob"))
        await asyncio.sleep(0.1)
    raise AssertionError(f"condition not reached; last status {st.model_dump_json(indent=1)}")


def waiting(st: VxlanStatus, prefix: str) -> bool:
    return any(g.state == GateState.WAITING and g.id.startswith(prefix) for g in st.gates)


async def test_failed_node_urgent_gate_reject_switches_back_then_revert(time_skipping_env, wf_task_queue) -> None:
    world = World()
    world.refuse_switch = {"n2"}
    client = time_skipping_env.client
    async with Worker(client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=world.activities()):
        h = await client.start_workflow("VxlanPortChangeWorkflow", make_input(), id=f"vx-{uuid.uuid4().hex[:6]}",
                                        task_queue=wf_task_queue, result_type=VxlanPortChangeResult)
        st = await until(h, lambda s: waiting(s, "fanout-failed"), approve=("fanout",))
        gate = next(g for g in st.gates if g.id.startswith("fanout-failed"))
        assert gate.comment.startswith("URGENT") and "n2" in gate.comment and st.point_of_no_return
        assert st.partial_switch and st.switched == "2/3 on 4889"
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await h.execute_update("revert", RevertInput(identity="bob"))
        assert "--full" in str(info.value.cause)
        await h.execute_update("reject", RejectInput(gate_id=gate.id, identity="bob", comment="switch back"))
        st = await until(h, lambda s: s.phase == "paused")
        assert world.ports == dict.fromkeys(NODES, 4789) and not st.point_of_no_return
        assert "switched back to 4789" in (st.paused_reason or "")
        await h.execute_update("revert", RevertInput(identity="bob"))
        result = await h.result()
        await record(h, "VxlanPortChangeWorkflow.failed-node-switched-back")
    assert result.outcome == "reverted", result.message
    assert (world.ds_image, world.ds_triggers) == (STOCK, TRIG) and set(world.pod_image.values()) == {STOCK}
    assert all(r == {4789} for r in world.rules.values())
    assert world.cn == {"vxlanPort": 4789, "metadata": {"uid": "cn-1"}}


async def test_cluster_network_back_with_the_old_port_is_deleted_again_behind_a_gate(time_skipping_env, wf_task_queue) -> None:
    world = World()
    world.stale_creations = 1
    client = time_skipping_env.client
    async with Worker(client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=world.activities()):
        h = await client.start_workflow("VxlanPortChangeWorkflow", make_input(), id=f"vx-{uuid.uuid4().hex[:6]}",
                                        task_queue=wf_task_queue, result_type=VxlanPortChangeResult)
        st = await until(h, lambda s: waiting(s, "clusternetwork-retry"), approve=("fanout", "clusternetwork-delete"))
        gate = next(g for g in st.gates if g.id.startswith("clusternetwork-retry"))
        assert "vxlanPort 4789" in gate.comment and "m1" in gate.comment
        assert world.ds_image == CUSTOM  # G waits for the right port
        await h.execute_update("approve", ApproveInput(gate_id=gate.id, identity="bob"))
        result = await h.result()
    assert result.outcome == "completed", result.message
    assert world.cn is not None and world.cn["vxlanPort"] == 4889 and world.cn_created == 2
    assert world.ctl_restarts["m1"] == 2
    assert world.ports == dict.fromkeys(NODES, 4889) and (world.ds_image, world.ds_triggers) == (STOCK, TRIG)
    assert "vxlanPort: 4889" in world.config["m1"]
    assert result.cluster_network_record == {"vxlanPort": 4789, "metadata": {"uid": "cn-1"}}
    # The records mirrored for recovery without Temporal, taken before each change.
    assert world.record["daemonset.image"] == STOCK and world.record["daemonset.triggers"] == TRIG
    assert world.record["master-config.m1.yaml"] == CONFIG and '"vxlanPort": 4789' in world.record["clusternetwork.json"]
    # cat on each master, the preflight's reads and the target resolution beat while they run:
    # a dead worker is seen in 10 s.
    beats = await heartbeat_timeouts(h, {"read_host_file", "preflight_vxlan_port", "resolve_sdn_targets"})
    assert all_within(beats, 10), beats
    # Every host command's bound leaves room for its debug pod to start (120 s) before the
    # command's own timeout (30 s for a file, 60 s or more for a node command): a cold node's
    # image pull is not an unknown outcome.
    bounds = await start_to_close(h, {"read_host_file", "write_master_config", "run_node_command"})
    assert min(bounds["read_host_file"]) >= 30 + 120 and min(bounds["write_master_config"]) >= 60 + 4 * 120, bounds
    assert bounds["run_node_command"] and min(bounds["run_node_command"]) >= 120 + 30, bounds
