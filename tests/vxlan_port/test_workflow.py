"""VxlanPortChangeWorkflow's decisions on a time-skipping server, every activity replaced by a
small in-memory world (two nodes and one master, their ports, firewalls, files, the DaemonSet as
a JSON object the kit's record activities patch, and the ClusterNetwork) registered under the
same names. The runs against clustersim are in test_e2e_*.py.

Covered here: a node that never switches opens the urgent gate; ``switch-back`` (a gate choice)
switches every node back, so the run is before its point of no return again and ``revert``
restores the DaemonSet (read back) and removes the rule; a ClusterNetwork re-created with the old
port opens the retry gate; an abort before the fan-out restores, after it names what stays
changed; a failed precondition refuses before any write; a late ``revert`` is refused.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tests.support.beats import all_within, heartbeat_timeouts, start_to_close
from tests.support.kit_fakes import KitFake
from tests.support.replay import record
from temporalio import activity
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.worker import Worker

from activities.host.models import CommandResult, ExecBackend, HostAccess, RunCommandInput
from activities.preflight.models import (
    CHECK_PRECONDITIONS,
    CheckPreconditionsInput,
    CheckPreconditionsResult,
    PreconditionResult,
    PreconditionState,
)
from activities.vxlan_port.models import (
    TRIGGERS_ANNOTATION,
    CheckResult,
    ClusterNetworkState,
    ControllersInput,
    ControllersState,
    DaemonSetRecord,
    DeleteClusterNetworkInput,
    DeleteClusterNetworkResult,
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
from workflows.kit.models import ApprovalRules, ApproveInput, ControlInput, DecideInput, GateState, RevertInput
from workflows.vxlan_port.models import MasterAccess, VxlanPortChangeInput, VxlanPortChangeResult, VxlanStatus

pytestmark = pytest.mark.timeout(180)

STOCK, CUSTOM, TRIG = "stock:v3.11", "custom:v3.11", '[{"from":{"kind":"ImageStreamTag","name":"node:v3.11"}}]'
NODES = ["m1", "n1", "n2"]
CONFIG = "kind: MasterConfig\nnetworkConfig:\n  networkPluginName: redhat/openshift-ovs-subnet\n"
DS_KEY = "DaemonSet openshift-sdn/sdn"
RECORD_ACTIVITIES = {"snapshot_fields", "patch_object", "restore_fields"}


class World:
    """The cluster the fake activities read and change (the DaemonSet lives in ``kit.objects``,
    changed by the kit's record activities as the API server would)."""

    def __init__(self) -> None:
        self.kit = KitFake()
        self.kit.objects[DS_KEY] = {"metadata": {"name": "sdn", "resourceVersion": "1", "annotations": {TRIGGERS_ANNOTATION: TRIG}},
                                    "spec": {"template": {"spec": {"containers": [{"name": "sdn", "image": STOCK}]}}}}
        self.ports = dict.fromkeys(NODES, 4789)
        self.refuse_switch: set[str] = set()
        self.rules: dict[str, set[int]] = {n: {4789} for n in NODES}
        self.images: dict[str, set[str]] = {n: {STOCK} for n in NODES}
        self.pod_image = dict.fromkeys(NODES, STOCK)
        self.cn: dict[str, Any] | None = {"vxlanPort": 4789, "metadata": {"uid": "cn-1"}}
        self.cn_created = 0
        self.config = {"m1": CONFIG}
        self.ctl_restarts = {"m1": 0}
        self.stale_creations = 0  # the next N re-creations use the old port (the hazard)
        self.record: dict[str, str] = {}
        self.failed_checks: dict[str, str] = {}  # precondition subject -> detail of its failure
        self.calls: list[str] = []

    @property
    def ds(self) -> tuple[str, str | None]:
        obj = self.kit.objects[DS_KEY]
        return obj["spec"]["template"]["spec"]["containers"][0]["image"], (obj["metadata"].get("annotations") or {}).get(TRIGGERS_ANNOTATION)

    def writes(self) -> list[str]:
        """The calls that change the cluster (the record activities' writes included)."""
        kit = [n for n, _ in self.kit.calls if n in ("patch_object", "restore_fields")]
        return kit + [c for c in self.calls if c in ("save_vxlan_record", "replace_sdn_pod", "delete_cluster_network", "write_master_config")
                      or c.startswith(("iptables -A", "docker pull", "ovs-set"))]

    def sh(self, node: str, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(" ".join(argv[:2]))
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
            image, triggers = w.ds
            return PreflightResult(
                nodes=dict.fromkeys(NODES, True),
                sdn_pods={n: SdnPod(node=n, name=f"sdn-{n}", ready=True, image=w.pod_image[n]) for n in NODES},
                daemonset=DaemonSetRecord(namespace="openshift-sdn", name="sdn", uid="ds", resource_version="1", container_index=0,
                                          image=image, triggers=triggers, update_strategy="OnDelete"),
                cluster_network=await get_cn(None), leader="m1", workload_restarts={"p1": 0})

        @activity.defn(name=CHECK_PRECONDITIONS)
        async def check(inp: CheckPreconditionsInput) -> CheckPreconditionsResult:
            now = datetime.now(UTC)
            return CheckPreconditionsResult(results=[
                PreconditionResult(precondition=p, state=PreconditionState.FAILED if p.subject() in w.failed_checks else PreconditionState.OK,
                                   detail=w.failed_checks.get(p.subject(), "fine"), checked_at=now) for p in inp.preconditions])

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
                    w.calls.append(f"ovs-set {t.node}")
                    row.applied, row.t_apply_start = True, 10.0
                    if t.node not in w.refuse_switch:
                        w.ports[t.node] = inp.port
                    row.after, row.t_apply_end = w.ports[t.node], 10.2
                    row.ok = row.after == inp.port
                    row.error = "" if row.ok else "ovs-vsctl: database connection failed"
                rows.append(row)
            return summarise(inp.port, rows)

        @activity.defn(name="replace_sdn_pod")
        async def replace(inp: ReplacePodInput) -> ReplacePodResult:
            w.calls.append("replace_sdn_pod")
            w.pod_image[inp.node] = inp.image
            return ReplacePodResult(node=inp.node, pod=f"sdn-{inp.node}-new")

        @activity.defn(name="get_cluster_network")
        async def get_cn(_: None) -> ClusterNetworkState:
            if w.cn is None:
                return ClusterNetworkState(exists=False)
            return ClusterNetworkState(exists=True, vxlan_port=w.cn["vxlanPort"], uid=w.cn["metadata"]["uid"], object=dict(w.cn))

        @activity.defn(name="delete_cluster_network")
        async def delete_cn(inp: DeleteClusterNetworkInput) -> DeleteClusterNetworkResult:
            w.calls.append("delete_cluster_network")
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
            w.calls.append("write_master_config")
            w.config[inp.host] = inp.content
            return WriteFileResult(written=True, sha256_after="h1")

        @activity.defn(name="save_vxlan_record")
        async def save(inp: SaveRecordInput) -> str:
            w.calls.append("save_vxlan_record")
            w.record.update(inp.data)
            return "1"

        @activity.defn(name="run_node_command")
        async def run_cmd(inp: RunCommandInput) -> CommandResult:
            code, out, err = w.sh(inp.access.node or "", inp.argv)
            return CommandResult(argv=inp.argv, exit_code=code, stdout=out, stderr=err)

        kit = [a for a in self.kit.activities() if activity._Definition.must_from_callable(a).name in RECORD_ACTIVITIES]
        return [preflight, check, resolve, switch, replace, get_cn, delete_cn, api, ctl, read, write, save, run_cmd, *kit]


def make_input(**kw: Any) -> VxlanPortChangeInput:
    access = {n: HostAccess(backend=ExecBackend.DEBUG_POD, node=n) for n in NODES}
    fields: dict[str, Any] = dict(new_port=4889, custom_image=CUSTOM, host_access=access, search_attributes=False,
                                  masters=[MasterAccess(name="m1", access=access["m1"], api_url="https://m1:8443")],
                                  approvals=ApprovalRules(requested_by="alice"))
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


async def start(client: Any, task_queue: str, inp: VxlanPortChangeInput | None = None) -> WorkflowHandle[Any, Any]:
    return await client.start_workflow("VxlanPortChangeWorkflow", inp or make_input(), id=f"vx-{uuid.uuid4().hex[:6]}",
                                       task_queue=task_queue, result_type=VxlanPortChangeResult)


async def test_failed_node_urgent_gate_switch_back_then_revert(time_skipping_env, wf_task_queue) -> None:
    world = World()
    world.refuse_switch = {"n2"}
    client = time_skipping_env.client
    async with Worker(client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=world.activities()):
        h = await start(client, wf_task_queue)
        st = await until(h, lambda s: waiting(s, "fanout-failed"), approve=("fanout",))
        gate = next(g for g in st.gates if g.id.startswith("fanout-failed"))
        assert gate.comment.startswith("URGENT") and "n2" in gate.comment and gate.choices == ["retry", "switch-back"]
        assert st.point_of_no_return and st.partial_switch and st.switched == "2/3 on 4889"
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await h.execute_update("revert", RevertInput(identity="bob"))
        assert "--full" in str(info.value.cause)
        await h.execute_update("decide", DecideInput(node=gate.id, decision="switch-back", identity="bob"))
        st = await until(h, lambda s: s.phase == "paused")
        assert world.ports == dict.fromkeys(NODES, 4789) and not st.point_of_no_return
        assert "switched back to 4789" in (st.paused_reason or "")
        await h.execute_update("revert", RevertInput(identity="bob"))
        result = await h.result()
        await record(h, "VxlanPortChangeWorkflow.failed-node-switched-back")
    assert result.outcome == "reverted", result.message
    assert world.ds == (STOCK, TRIG) and set(world.pod_image.values()) == {STOCK}
    assert all(r == {4789} for r in world.rules.values())
    assert world.cn == {"vxlanPort": 4789, "metadata": {"uid": "cn-1"}}
    assert any(r.startswith("DaemonSet openshift-sdn/sdn: restored") and "read back" in r for r in result.restored), result.restored
    assert not result.left_changed and not result.open_records


async def test_cluster_network_back_with_the_old_port_is_deleted_again_behind_a_gate(time_skipping_env, wf_task_queue) -> None:
    world = World()
    world.stale_creations = 1
    client = time_skipping_env.client
    async with Worker(client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=world.activities()):
        h = await start(client, wf_task_queue)
        st = await until(h, lambda s: waiting(s, "clusternetwork-retry"), approve=("fanout", "clusternetwork-delete"))
        gate = next(g for g in st.gates if g.id.startswith("clusternetwork-retry"))
        assert "vxlanPort 4789" in gate.comment and "m1" in gate.comment
        assert world.ds[0] == CUSTOM  # G waits for the right port
        assert st.nodes["m1"].phase == "done" and st.restart_order == ["m1"]  # the master on the kit's board
        await h.execute_update("approve", ApproveInput(gate_id=gate.id, identity="bob"))
        result = await h.result()
    assert result.outcome == "completed", result.message
    assert world.cn is not None and world.cn["vxlanPort"] == 4889 and world.cn_created == 2
    assert world.ctl_restarts["m1"] == 2
    assert world.ports == dict.fromkeys(NODES, 4889) and world.ds == (STOCK, TRIG)
    assert "vxlanPort: 4889" in world.config["m1"]
    assert result.cluster_network_record == {"vxlanPort": 4789, "metadata": {"uid": "cn-1"}}
    assert any("DaemonSet openshift-sdn/sdn: restored" in r for r in result.restored) and not result.open_records
    # The records mirrored for recovery without Temporal, taken before each change.
    assert world.record["daemonset.image"] == STOCK and world.record["daemonset.triggers"] == TRIG
    assert '"value":"stock:v3.11"' in world.record["daemonset.record.json"].replace(" ", "")
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


async def test_a_failed_precondition_refuses_before_any_write(time_skipping_env, wf_task_queue) -> None:
    """Case 3 of issue 39 in the workflow: one line per problem, nothing written."""
    world = World()
    world.failed_checks = {"port 4889/udp on n1": "in use on the host: 0.0.0.0:4889",
                           "iptables on n2": "not found on the host's PATH (command -v exited 1)"}
    client = time_skipping_env.client
    async with Worker(client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=world.activities()):
        result = await (await start(client, wf_task_queue)).result()
    assert result.outcome == "refused", result.message
    assert result.problems == ["port 4889/udp on n1: in use on the host: 0.0.0.0:4889 (needed: the new VXLAN port: nothing else "
                               "may use its number on any node)",
                               "iptables on n2: not found on the host's PATH (command -v exited 1) (needed: phases B and D run it "
                               "on every node)"]
    assert any(line.startswith("ok") and "vxlan0 on n1" in line for line in result.preconditions), result.preconditions
    assert world.writes() == [] and world.ds == (STOCK, TRIG)


@pytest.mark.parametrize("when", ["before", "after"])
async def test_abort_before_the_fanout_restores_after_it_names_what_stays(time_skipping_env, wf_task_queue, when: str) -> None:
    """Case 4 of issue 39 in the workflow: before the point of no return an abort restores the
    DaemonSet (read back), its pods and the rule, and ends ``aborted, restored``; after it the
    outcome names each thing that stays changed and ``lockkeeper revert ID --full``."""
    world = World()
    client = time_skipping_env.client
    async with Worker(client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=world.activities()):
        h = await start(client, wf_task_queue)
        gate = "fanout" if when == "before" else "clusternetwork-delete"
        await until(h, lambda s: waiting(s, gate), approve=("fanout",) if when == "after" else ())
        await h.execute_update("abort", ControlInput(identity="bob", reason="window closed"))
        result = await h.result()
    assert result.outcome == "aborted", result.message
    if when == "before":
        assert result.message.startswith("aborted, restored"), result.message
        assert world.ds == (STOCK, TRIG) and set(world.pod_image.values()) == {STOCK}
        assert all(r == {4789} for r in world.rules.values()) and world.ports == dict.fromkeys(NODES, 4789)
        assert len(result.restored) == 3 and not result.left_changed and not result.next_commands
        return
    full = f"lockkeeper revert {h.id} --full"
    assert "past the point of no return" in result.message and result.next_commands == [full]
    left = {(i.target, i.what.split(" (")[0]) for i in result.left_changed}
    assert left >= {("DaemonSet openshift-sdn/sdn", "/spec/template/spec/containers/0/image, /metadata/annotations/image.openshift.io~1triggers changed"),
                    ("host n1", "vxlan0 options:dst_port 4889"), ("host m1", "vxlan0 options:dst_port 4889")}, left
    assert {i.target for i in result.left_changed if "iptables" in i.what} == {"host m1", "host n1", "host n2"}
    assert world.ds == (CUSTOM, None) and result.open_records[0].name == "daemonset"


async def test_a_late_revert_is_refused_and_nothing_is_reverted_then_a_timely_one_reverts(time_skipping_env, wf_task_queue) -> None:
    """A ``revert`` that reaches the run after its deadline is refused (issue 18), a timely one
    with matching identities reverts it."""
    world = World()
    client = time_skipping_env.client
    async with Worker(client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=world.activities()):
        h = await start(client, wf_task_queue)
        await until(h, lambda s: waiting(s, "fanout"))
        now = datetime.now(UTC)
        late = RevertInput(identity="bob", reason="too late", sent_at=now - timedelta(minutes=5), deadline=now - timedelta(minutes=4))
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await h.execute_update("revert", late)
        msg = str(info.value.cause)
        assert "revert by bob" in msg and "refused, nothing was decided" in msg and "deadline" in msg, msg
        mismatch = RevertInput(identity="mallory", connection_identity="bob", deadline=now + timedelta(hours=1))
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await h.execute_update("revert", mismatch)
        assert "differs from the connection's identity" in str(info.value.cause)
        st = await until(h, lambda s: waiting(s, "fanout"))
        assert st.revert_requested_by is None, st
        ok = RevertInput(identity="bob", connection_identity="bob", sent_at=now, deadline=now + timedelta(hours=1))
        answer = await h.execute_update("revert", ok)
        assert answer["mode"] == "in-run" and "revert requested by bob" in answer["message"], answer
        result = await h.result()
    assert result.outcome == "reverted", result.message
    assert world.ds == (STOCK, TRIG)
