"""RuntimeMigrationWorkflow's decisions on a time-skipping server: every activity is replaced by a
small in-memory world (one GlusterFS node ``g1`` with two peers, its host as a dict of units,
packages and files, its Node object) registered under the same activity names. The runs against
clustersim are in the other tests/runtime_migration/test_runtime_migration_*.py.

Covered here: the parent mirrors the child's gates (approve on the parent reaches the node); a
reboot whose activity is lost is confirmed by the new boot_id without a second reboot; a lost
reboot without a new boot_id opens the unknown-outcome gate whose mark-done needs a comment; a
lost scale-up opens the unknown-outcome gate and abort leaves the Node reported as deleted.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.worker import Worker

from activities.cluster.models import (
    CordonInput,
    CordonResult,
    DeleteNodeInput,
    DeleteNodeResult,
    DrainInput,
    DrainResult,
    NodeInfo,
    RecordEventInput,
    SaveRecordInput,
    SaveRecordResult,
    SetNodeLabelsInput,
    UncordonInput,
    UncordonResult,
)
from activities.gluster.models import (
    Brick,
    BrickStatus,
    GlusterPod,
    GlusterReadInput,
    GlusterReport,
    HealBrick,
    HealInfo,
    NodeAddresses,
    VolumeInfo,
    VolumeStatus,
)
from activities.host.models import CommandResult, HostAccess, RunCommandInput
from activities.runtime_migration.models import (
    ListNodesInput,
    NodeLabels,
    NodeObject,
    NodeObjectInput,
)
from lockkeeper.cli.operate import owner_of
from tests.support.wf_fakes import preflight_activity
from workflows import WORKFLOWS
from workflows.kit.inputs import CallTimeouts, DrainPolicy
from workflows.kit.models import ApprovalRules, ApproveInput, DecideInput, GateState, RejectInput
from workflows.runtime_migration import RuntimeMigrationWorkflow
from workflows.runtime_migration.models import (
    ExternalStep,
    GlusterTargetSpec,
    RuntimeMigrationInput,
    RuntimeMigrationResult,
    RuntimeMigrationStatus,
    Timing,
)

pytestmark = pytest.mark.timeout(180)

NODES = {"g1": "10.0.0.5", "g2": "10.0.0.6", "g3": "10.0.0.7"}
PKGS = {"docker": "1.13.1-161", "cri-o": "1.11.16-1", "atomic-openshift-node": "3.11.161-1", "atomic-openshift-excluder": "3.11.161-1",
        "dnsmasq": "2.76-16", "criu": "3.12-2"}
UPSTREAM = "search demo\nnameserver 192.168.122.1\n"
INFRA, COMPUTE = "node-role.kubernetes.io/infra", "node-role.kubernetes.io/compute"


class World:
    """``g1``'s host and Node plus two healthy peers. ``lose``: argv[0]/playbook words whose
    activity hangs past its timeout (outcome unknown); ``reboot_takes_effect``: a reboot really
    changes the boot_id."""

    def __init__(self, lose: set[str] = frozenset(), reboot_takes_effect: bool = True, failing: dict[str, str] | None = None) -> None:
        #: The kit's precondition check (wf_fakes.preflight_activity): these kinds or subjects fail.
        self.preflight = preflight_activity(failing)
        self.lose = set(lose)
        self.reboot_takes_effect = reboot_takes_effect
        self.units = {u: [True, True] for u in ("atomic-openshift-node", "crio", "dnsmasq")}  # enabled, active
        self.packages = dict(PKGS)
        self.files = {"/etc/resolv.conf": f"# 99-origin-dns.sh\nnameserver {NODES['g1']}\n", "/etc/origin/node/resolv.conf": UPSTREAM,
                      "/etc/sysconfig/atomic-openshift-node": "BOOTSTRAP_CONFIG_NAME=node-config-infra-crio\n",
                      "/etc/dnsmasq.d/origin-dns.conf": "x"}
        self.boot_id = "boot-1"
        self.reboots = 0
        self.node: dict[str, Any] | None = self._node("uid-1", "cri-o://1.11", {"glusterfs": "storage-host", "runtime": "cri-o", INFRA: "true"})
        self.externals: list[list[str]] = []
        self.bricks_up = True
        #: the record ConfigMaps written (namespace/name → data)
        self.configmaps: dict[str, dict[str, str]] = {}
        #: the peers: g2 in g1's node group (infra), g3 a compute node on newer builds
        self.peer_pkgs = {"g2": dict(PKGS), "g3": {**PKGS, "atomic-openshift-node": "3.11.170-1"}}
        self.kubelet = {"g1": "v1.11.0+old", "g2": "v1.11.0+old", "g3": "v1.11.0+new"}
        self.uncordoned: list[str] = []
        #: ``fail_scaleup``: the scale-up exits 2 this many times (a playbook failure, known outcome)
        self.fail_scaleup = 0
        #: every command run on g1's host, in order
        self.log: list[list[str]] = []

    @staticmethod
    def _node(uid: str, runtime: str, labels: dict[str, str], kubelet: str = "v1.11.0+old") -> dict[str, Any]:
        return {"metadata": {"name": "g1", "uid": uid, "labels": labels}, "spec": {},
                "status": {"conditions": [{"type": "Ready", "status": "True"}],
                           "nodeInfo": {"containerRuntimeVersion": runtime, "kubeletVersion": kubelet},
                           "addresses": [{"type": "InternalIP", "address": NODES["g1"]}]}}

    # --- host ------------------------------------------------------------------------------------

    def _run(self, argv: list[str]) -> tuple[str, str, int]:
        a = argv
        if a[:2] == ["systemctl", "is-active"]:
            return "".join(("active" if self.units.get(u, [0, 0])[1] else ("inactive" if u in self.units else "unknown")) + "\n" for u in a[2:]), "", 0
        if a[:2] == ["systemctl", "is-enabled"]:
            return "".join(("enabled" if self.units[u][0] else "disabled") + "\n" for u in a[2:] if u in self.units), "", 0
        if a[:2] in (["systemctl", "stop"], ["systemctl", "disable"]):
            if a[2] not in self.units:
                return "", f"Failed to {a[1]} {a[2]}.service: No such file or directory\n", 5 if a[1] == "stop" else 1
            self.units[a[2]][1 if a[1] == "stop" else 0] = False
            if a[2] == "crio" and a[1] == "stop":
                self.bricks_up = False
            return "", "", 0
        if a[0] == "rpm" and a[1] == "-qa":
            return "".join(f"{n} {v}\n" for n, v in self.packages.items()), "", 0
        if a[:2] == ["rpm", "-q"]:
            return "".join(f"{p}-{self.packages[p]}\n" if p in self.packages else f"package {p} is not installed\n" for p in a[2:]), "", 0
        if a[:3] == ["yum", "-y", "remove"]:
            for p in a[3:]:
                self.packages.pop(p, None)
            return "Complete!\n", "", 0
        if a[:3] == ["yum", "-y", "install"]:
            self.packages.update({p: "3.11.161-1" for p in a[3:]})
            return "Complete!\n", "", 0
        if a[0] == "cat":
            if a[1] == "/proc/sys/kernel/random/boot_id":
                return self.boot_id + "\n", "", 0
            return (self.files[a[1]], "", 0) if a[1] in self.files else ("", "no such file\n", 1)
        if a[0] == "grep":
            return self.files.get(a[2], ""), "", 0
        if a[:2] == ["cp", "-f"]:
            if a[2] not in self.files:
                return "", "cp: cannot stat\n", 1
            self.files[a[3]] = self.files[a[2]]
            return "", "", 0
        if a[:2] == ["test", "-e"]:
            return "", "", 0 if any(f == a[2] or f.startswith(a[2] + "/") for f in self.files) else 1
        if a[:2] == ["test", "-S"]:
            return "", "", 1
        if a[:2] == ["rm", "-rf"]:
            self.files = {f: c for f, c in self.files.items() if not any(f == p or f.startswith(p + "/") for p in a[2:])}
            return "", "", 0
        if a[0] == "find":
            inside = [f for f in self.files if f.startswith(a[1] + "/")]
            if "-exec" in a:
                for f in inside:
                    del self.files[f]
                return "", "", 0
            return "".join(f + "\n" for f in inside), "", 0
        if a[:2] == ["getent", "hosts"]:
            return ("192.168.122.10 master\n", "", 0) if "nameserver 192.168.122.1" in self.files.get("/etc/resolv.conf", "") else ("", "", 2)
        if a[0] == "hostname":
            return "g1\n", "", 0
        return "", f"sh: {a[0]}: command not found\n", 127

    @activity.defn(name="run_node_command")
    async def run_node_command(self, input: RunCommandInput) -> CommandResult:
        if input.access.backend == "local":  # an external step, on the worker
            return await self.run_external_command(input)
        if input.access.host != NODES["g1"]:
            pkgs = self.peer_pkgs[input.access.node or ""]
            out, err, code = ("".join(f"{n} {v}\n" for n, v in pkgs.items()), "", 0) if input.argv[:2] == ["rpm", "-qa"] else ("peer\n", "", 0)
            return CommandResult(argv=input.argv, exit_code=code, stdout=out, stderr=err)
        self.log.append(list(input.argv))
        if input.argv == ["systemctl", "reboot"]:
            self.reboots += 1
            if self.reboot_takes_effect:
                self.boot_id = f"boot-{self.reboots + 1}"
                for u in self.units.values():
                    u[1] = u[0]
            if "reboot" in self.lose:
                await asyncio.sleep(3600)  # the session never answers: the activity times out
            return CommandResult(argv=input.argv, exit_code=None, stderr="connection lost")
        out, err, code = self._run(list(input.argv))
        return CommandResult(argv=input.argv, exit_code=code, stdout=out, stderr=err)

    # --- cluster ---------------------------------------------------------------------------------

    @activity.defn(name="read_node_object")
    async def read_node_object(self, input: NodeObjectInput) -> NodeObject:
        from activities.runtime_migration.activities import node_object

        if input.node == "g1":
            return node_object(input.node, self.node)
        role = INFRA if input.node == "g2" else COMPUTE
        return node_object(input.node, self._node(f"uid-{input.node}", "cri-o://1.11", {"glusterfs": "storage-host", role: "true"},
                                                  self.kubelet[input.node]))

    @activity.defn(name="delete_node")
    async def delete_node(self, input: DeleteNodeInput) -> DeleteNodeResult:
        if self.node is None or self.node["metadata"]["uid"] != input.uid:
            return DeleteNodeResult(deleted=False)
        self.node = None
        return DeleteNodeResult(deleted=True, detail="deleted")

    @activity.defn(name="list_node_labels")
    async def list_node_labels(self, input: ListNodesInput) -> NodeLabels:
        return NodeLabels(nodes={n: {} for n in NODES})

    @activity.defn(name="set_node_labels")
    async def set_node_labels(self, input: SetNodeLabelsInput) -> NodeInfo:
        assert self.node is not None
        self.node["metadata"]["labels"].update({k: v for k, v in input.labels.items() if v is not None})
        return NodeInfo(name=input.node)

    async def run_external_command(self, input: RunCommandInput) -> CommandResult:
        self.externals.append(list(input.argv))
        if "scaleup.yml" in input.argv[-1]:
            if self.fail_scaleup > 0:
                self.fail_scaleup -= 1
                return CommandResult(argv=input.argv, exit_code=2, stdout="fatal: [g1]: FAILED! => unreachable repo\n")
            self.node = self._node("uid-2", "docker://1.13.1", {"glusterfs": "storage-host", INFRA: "true"}, "v1.11.0+new")
            self.bricks_up = True
            # the scale-up installs the Docker node packages, without the excluder (seed 003), and
            # the latest atomic-openshift-node build (no openshift_pkg_version: the scenario's drift)
            self.packages.update({p: PKGS[p] for p in ("docker", "dnsmasq")})
            self.packages["atomic-openshift-node"] = "3.11.170-1"
            if "scale-up" in self.lose:
                await asyncio.sleep(7200)
        return CommandResult(argv=input.argv, exit_code=0, stdout="PLAY RECAP ok\n")

    @activity.defn(name="cordon_node")
    async def cordon_node(self, input: CordonInput) -> CordonResult:
        return CordonResult(cordoned_by_us=True, was_unschedulable=False)

    @activity.defn(name="drain_node")
    async def drain_node(self, input: DrainInput) -> DrainResult:
        return DrainResult(done=True)

    @activity.defn(name="uncordon_node")
    async def uncordon_node(self, input: UncordonInput) -> UncordonResult:
        self.uncordoned.append(input.node)
        return UncordonResult(uncordoned=True)

    @activity.defn(name="save_node_record")
    async def save_node_record(self, input: SaveRecordInput) -> SaveRecordResult:
        self.configmaps.setdefault(f"{input.namespace}/{input.name}", {}).update(input.data)
        return SaveRecordResult(created=True)

    @activity.defn(name="record_node_event")
    async def record_node_event(self, input: RecordEventInput) -> None:
        return None

    @activity.defn(name="read_gluster")
    async def read_gluster(self, input: GlusterReadInput) -> GlusterReport:
        hosts = list(NODES.values())
        online = {h: (self.bricks_up or h != NODES["g1"]) for h in hosts}
        info = [VolumeInfo(name="vol", type="Replicate", status="Started", replica_count=3, brick_count=3,
                           bricks=[Brick(host=h, path="/b") for h in hosts])]
        status = [VolumeStatus(name="vol", bricks=[BrickStatus(host=h, path="/b", online=online[h]) for h in hosts])]
        heal = {"vol": HealInfo(volume="vol", bricks=[HealBrick(host=h, path="/b", entries=0 if online[h] else None,
                                                                status="Connected" if online[h] else "Transport endpoint is not connected")
                                                      for h in hosts])} if input.heal else {}
        pods = [GlusterPod(name=f"glusterfs-{n}", uid=n, node=n, pod_ip=ip, host_ip=ip, phase="Running", ready=online[ip])
                for n, ip in NODES.items()]
        return GlusterReport(pods=pods, nodes=[NodeAddresses(name=n, addresses=[ip], ready=True) for n, ip in NODES.items()],
                             exec_pod="glusterfs-g2", info=info, status=status, heal=heal)

    def activities(self) -> list[Callable[..., Any]]:
        return [self.run_node_command, self.read_node_object, self.delete_node,
                self.list_node_labels, self.set_node_labels, self.preflight, self.cordon_node,
                self.drain_node, self.uncordon_node, self.record_node_event, self.read_gluster, self.save_node_record]


def _input() -> RuntimeMigrationInput:
    access = {n: HostAccess(backend="ssh", host=ip, node=n) for n, ip in NODES.items()}
    return RuntimeMigrationInput(
        nodes=["g1"], host_access=access, gluster=GlusterTargetSpec(namespace="gs"), dns_probe_names=["master"],
        inventory_step=ExternalStep(argv=["hook", "{node}"]), scaleup_step=ExternalStep(argv=["ansible-playbook", "scaleup.yml"], timeout_seconds=600),
        inventory_restore_step=ExternalStep(argv=["hook", "restore", "{node}"]),
        timing=Timing(reboot_timeout=300, poll=2, poll_max=5, reboot_poll=2), calls=CallTimeouts(short_call_seconds=30, heartbeat_seconds=20),
        drain=DrainPolicy(wait_seconds=1, backoff_initial_seconds=1, backoff_max_seconds=60),
        approvals=ApprovalRules(requested_by="alice"), search_attributes=False,
    )


async def _status(env: Any, handle: WorkflowHandle, pred: Callable[[RuntimeMigrationStatus], bool]) -> RuntimeMigrationStatus:
    st = None
    for _ in range(400):
        st = await handle.query("status", result_type=RuntimeMigrationStatus)
        if pred(st):
            return st
        await env.sleep(1)
    raise AssertionError(f"status never matched; last: {st and st.waiting_for}")


def _waiting(gate_id: str) -> Callable[[RuntimeMigrationStatus], bool]:
    return lambda st: any(g.id == gate_id and g.state == GateState.WAITING for g in st.gates)


async def _update(env: Any, handle: WorkflowHandle, update: str, arg: Any) -> Any:
    """Send a gate's ``update`` where the gate lives, as the CLI routes it
    (:func:`lockkeeper.cli.operate.owner_of`): a node's gates in its child, the run's own here."""
    status = await handle.query("status", result_type=dict)
    gate = getattr(arg, "gate_id", None) or getattr(arg, "node", None)
    return await env.client.get_workflow_handle(owner_of(status, gate) or handle.id).execute_update(update, arg)


async def _approve(env: Any, handle: WorkflowHandle, gate_id: str) -> None:
    await _status(env, handle, _waiting(gate_id))
    await _update(env, handle, "approve", ApproveInput(gate_id=gate_id, identity="bob", comment="ok"))


async def _run(env: Any, world: World, body: Callable[[WorkflowHandle], Any], inp: RuntimeMigrationInput | None = None) -> RuntimeMigrationResult:
    tq = f"rm-{uuid.uuid4().hex[:8]}"
    async with Worker(env.client, task_queue=tq, workflows=WORKFLOWS, activities=world.activities()):
        handle = await env.client.start_workflow(RuntimeMigrationWorkflow.run, inp or _input(), id=f"rm-{uuid.uuid4().hex[:6]}",
                                                 task_queue=tq, result_type=RuntimeMigrationResult)
        await body(handle)
        return await handle.result()


async def test_gates_mirrored_lost_reboot_confirmed_by_boot_id(time_skipping_env: Any) -> None:
    env, world = time_skipping_env, World(lose={"reboot"})

    async def body(h: WorkflowHandle) -> None:
        await _approve(env, h, "g1/destructive/approve-migration")
        await _approve(env, h, "g1/destructive/approve-delete")
        await _approve(env, h, "post-check/install")

    result = await _run(env, world, body)
    assert result.outcome == "completed", result.message
    assert world.reboots == 1  # the lost reboot was confirmed by the new boot_id, never run again
    assert world.node is not None and world.node["metadata"]["uid"] == "uid-2"
    assert [f.package for f in result.findings if f.kind == "missing"] == ["atomic-openshift-excluder"]
    # Versions are compared within g1's node group (infra: g2), not with the compute peer g3,
    # which runs the same newer build and kubelet (against all peers, no version agrees).
    versions = {(f.package, f.group) for f in result.findings if f.kind == "version"}
    assert versions == {("atomic-openshift-node", "infra"), ("kubelet", "infra")}, result.findings
    # The outcome tells the truth: the excluder was installed again behind the gate.
    excluder = next(f for f in result.findings if f.package == "atomic-openshift-excluder")
    assert excluder.resolved is not None and excluder.resolved.startswith("installed after gate post-check/install"), excluder
    assert "atomic-openshift-excluder was missing on g1 and is installed again" in result.message, result.message
    assert "atomic-openshift-excluder missing" not in result.message, result.message
    assert result.removed["g1"] == ["criu", "docker", "atomic-openshift-excluder", "atomic-openshift-node", "cri-o", "dnsmasq"], result.removed
    # The node's record is in a ConfigMap, readable without Temporal.
    row = result.nodes[0].status
    [(where, data)] = world.configmaps.items()
    assert where.startswith("openshift-config/lockkeeper-record-rm-") and row.record_configmap == where
    rec = json.loads(data["g1.json"])
    assert (rec["uid"], rec["bootstrap_config"], rec["boot_id"]) == ("uid-1", "node-config-infra-crio", "boot-1")
    assert rec["labels"]["runtime"] == "cri-o" and rec["packages"]["atomic-openshift-excluder"] == "3.11.161-1"
    assert rec["node_object"]["status"]["addresses"] == [{"type": "InternalIP", "address": NODES["g1"]}]
    assert "before the destructive steps" in data["g1.state"]
    row = result.nodes[0].status
    assert row.new_boot_id == "boot-2" and row.record is not None and row.record.bootstrap_config == "node-config-infra-crio"
    assert "resolv-conf" in row.done_steps and row.done_steps.index("resolv-conf") < row.done_steps.index("dnsmasq")
    assert [a[0] for a in world.externals] == ["hook", "ansible-playbook", "hook"]


async def test_lost_reboot_without_new_boot_id_asks_and_mark_done_needs_a_comment(time_skipping_env: Any) -> None:
    env, world = time_skipping_env, World(lose={"reboot"}, reboot_takes_effect=False)

    async def body(h: WorkflowHandle) -> None:
        await _approve(env, h, "g1/destructive/approve-migration")
        # status says what the run waits for, since when and until when (the reboot timeout).
        st = await _status(env, h, lambda st: (st.nodes["g1"].waiting_for or "").startswith("a new boot_id"))
        row = st.nodes["g1"]
        assert st.waiting_for == f"node g1: reboot ({row.waiting_for})" and st.since == row.since
        assert row.deadline is not None and row.since is not None and st.deadline == row.deadline
        # since: the reboot step's start (the lost command's wait is in it); until: 300 s after the wait's.
        assert 300 <= (row.deadline - row.since).total_seconds() <= 400, (row.since, row.deadline)
        st = await _status(env, h, _waiting("reboot/g1/1"))  # the kit's reboot gate
        assert next(g for g in st.gates if g.id == "reboot/g1/1").choices == ["wait", "rerun", "mark-done"]
        with pytest.raises(WorkflowUpdateFailedError) as refused:  # mark-done says what was checked
            await _update(env, h, "decide", DecideInput(node="reboot/g1/1", decision="mark-done", identity="bob"))
        assert "needs a comment" in str(refused.value.cause), refused.value.cause
        await _update(env, h, "reject", RejectInput(gate_id="reboot/g1/1", identity="bob", comment="host never went down"))

    result = await _run(env, world, body)
    assert result.outcome == "aborted" and world.reboots == 1
    assert "reboot" in (result.nodes[0].reason or "")


async def test_unknown_gate_reruns_only_on_the_explicit_choice_never_on_a_comment(time_skipping_env: Any) -> None:
    """Issue 36: the unknown-outcome gate offers the choices ``mark-done`` / ``rerun``; an
    approval whose comment starts with "rerun" marks done, only the ``rerun`` choice runs again."""
    env, world = time_skipping_env, World(lose={"scale-up"})

    async def body(h: WorkflowHandle) -> None:
        await _approve(env, h, "g1/destructive/approve-migration")
        await _approve(env, h, "g1/destructive/approve-delete")
        st = await _status(env, h, _waiting("g1/unknown/scale-up"))
        assert next(g for g in st.gates if g.id == "g1/unknown/scale-up").choices == ["mark-done", "rerun"]
        with pytest.raises(WorkflowUpdateFailedError):  # not one of its choices
            await _update(env, h, "decide", DecideInput(node="g1/destructive/approve-delete", decision="rerun", identity="bob"))
        # `lockkeeper decide ID GATE rerun` (the kit's decide on the gate's choices)
        await _update(env, h, "decide", DecideInput(node="g1/unknown/scale-up", decision="rerun", identity="bob"))
        # the second run is lost too: this time an approval whose comment starts with "rerun" marks it done
        await _status(env, h, lambda st: sum(1 for a in world.externals if a[-1] == "scaleup.yml") == 2
                      and _waiting("g1/unknown/scale-up")(st))
        await _update(env, h, "approve", ApproveInput(gate_id="g1/unknown/scale-up", identity="bob", comment="rerun? no: checked, it ran"))
        await _approve(env, h, "post-check/install")

    result = await _run(env, world, body)
    assert sum(1 for a in world.externals if a[-1] == "scaleup.yml") == 2
    assert "scale-up" in result.nodes[0].status.done_steps


async def test_lost_scaleup_opens_unknown_gate_and_abort_reports_the_deleted_node(time_skipping_env: Any) -> None:
    env, world = time_skipping_env, World(lose={"scale-up"})

    async def body(h: WorkflowHandle) -> None:
        await _approve(env, h, "g1/destructive/approve-migration")
        await _approve(env, h, "g1/destructive/approve-delete")
        st = await _status(env, h, _waiting("g1/unknown/scale-up"))
        assert st.nodes["g1"].node_deleted
        await _update(env, h, "reject", RejectInput(gate_id="g1/unknown/scale-up", identity="bob", comment="abort"))

    result = await _run(env, world, body)
    assert result.outcome == "aborted"
    assert sum(1 for a in world.externals if a[-1] == "scaleup.yml") == 1
    assert "DELETED" in (result.nodes[0].reason or "")


async def test_a_missing_host_program_refuses_the_start_before_any_write(time_skipping_env: Any) -> None:
    """Issue 39: the preconditions come first; ``yum`` missing on g1 (``command -v`` through its
    SSH) refuses the run, one line per problem, before any lease, host command or Node write."""
    env, world = time_skipping_env, World(failing={"yum on g1": "not found (command -v yum printed nothing)"})

    async def body(h: WorkflowHandle) -> None:
        return None

    result = await _run(env, world, body)
    assert result.outcome == "refused", result.message
    assert result.problems == ["yum on g1: not found (command -v yum printed nothing) (needed: a host step of its migration runs it)"], result.problems
    assert world.log == [] and world.externals == [] and world.units["crio"] == [True, True] and world.node["spec"] == {}
    checked = world.preflight.calls[0].preconditions
    assert {p.subject() for p in checked} >= {"hook on the worker", "ansible-playbook on the worker", "systemctl on g1", "node g1"}


async def test_the_dry_run_checks_every_precondition_and_writes_nothing(time_skipping_env: Any) -> None:
    env, world = time_skipping_env, World(failing={"ansible-playbook on the worker": "not found on PATH"})

    async def body(h: WorkflowHandle) -> None:
        return None

    result = await _run(env, world, body, _input().model_copy(update={"dry_run": True}))
    assert result.outcome == "dry-run" and result.problems == ["ansible-playbook on the worker: not found on PATH (needed: an external "
                                                               "command of each node's migration runs it)"], result
    assert len(result.preconditions) == len(world.preflight.calls[0].preconditions) and world.log == [] and world.externals == []
