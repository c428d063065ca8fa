"""ControlPlaneUpgradeWorkflow's decisions on a time-skipping server with the masters replaced by
an in-memory world under the real activity names: strictly one master at a time, manifests
recorded before they are written, an API that does not come back opens a gate with the
master-logs tail and never touches the next master, retry / restart again / abort."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import WorkflowFailureError, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from tests.support.replay import record
from tests.support.wf_fakes import preflight_activity
from activities.control_plane.models import MasterPods, MasterPodsInput, MirrorPod, ProbeMasterApiInput, ProbeMasterApiResult
from activities.host.models import CommandResult, HostAccess, RunCommandInput
from workflows.control_plane import ControlPlaneUpgradeWorkflow
from workflows.control_plane.models import (
    ControlPlaneResult,
    ControlPlaneStatus,
    ControlPlaneUpgradeInput,
    MasterAction,
    MasterSpec,
    StaticPodManifest,
)
from workflows.kit.lease import LeaseWorkflow
from workflows.kit.models import (
    ApproveInput,
    DecideInput,
    GateState,
    HoldInput,
    NodeControlInput,
    NodePhase,
    RejectInput,
    ReleaseInput,
)

pytestmark = pytest.mark.timeout(180)

MASTERS = ["m1", "m2", "m3"]
MANIFEST = "/etc/origin/node/pods/apiserver.yaml"
NEW = "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - image: openshift/origin-control-plane:v3.10\n"


class Masters:
    """Each master: files, API up/down. ``master-restart api`` takes the API down; it comes back
    after ``down_probes`` probes unless the master is ``blocked`` (the missing LDAP CA)."""

    def __init__(self, blocked: tuple[str, ...] = (), down_probes: int = 2) -> None:
        self.files = {m: {MANIFEST: "old manifest\n"} for m in MASTERS}
        self.up = dict.fromkeys(MASTERS, True)
        self.wait = dict.fromkeys(MASTERS, 0)
        self.blocked = set(blocked)
        self.down_probes = down_probes
        self.log: list[tuple[str, list[str]]] = []
        self.max_down = 0
        self.failing_checks: dict[str, str] = {}  # precondition kind or subject -> why it fails
        self.tee_fails: set[str] = set()  # masters whose next manifest write fails for good (once)

    def _host(self, inp: RunCommandInput) -> str:
        return inp.access.node or inp.access.host

    def activities(self) -> list[Any]:
        @activity.defn(name="run_node_command")
        async def run_node_command(inp: RunCommandInput) -> CommandResult:
            m, argv = self._host(inp), inp.argv
            self.log.append((m, argv))
            files = self.files[m]
            if argv[0] == "sha256sum":
                if argv[1] not in files:
                    return CommandResult(argv=argv, exit_code=1, stderr="No such file")
                return CommandResult(argv=argv, exit_code=0, stdout=f"{hashlib.sha256(files[argv[1]].encode()).hexdigest()}  {argv[1]}\n")
            if argv[0] == "cat":
                return CommandResult(argv=argv, exit_code=0, stdout=files.get(argv[1], ""))
            if argv[0] == "mkdir":
                return CommandResult(argv=argv, exit_code=0)
            if argv[0] == "tee":
                if m in self.tee_fails:
                    self.tee_fails.discard(m)
                    raise ApplicationError(f"ssh {m}: connection reset", type="HostUnreachable", non_retryable=True)
                files[argv[1]] = inp.stdin or ""
                return CommandResult(argv=argv, exit_code=0, stdout=inp.stdin or "")
            if argv[0].endswith("master-restart"):
                if argv[1] == "api":
                    self.up[m] = False
                    self.wait[m] = self.down_probes
                    self.max_down = max(self.max_down, sum(1 for v in self.up.values() if not v))
                return CommandResult(argv=argv, exit_code=0)
            if argv[0].endswith("master-logs"):
                line = "error: could not load config: ca file /etc/origin/master/ldap_ca.crt: no such file" if m in self.blocked else "started"
                return CommandResult(argv=argv, exit_code=0, stdout=f"I1214 starting API\nF1214 {line}\n")
            return CommandResult(argv=argv, exit_code=127, stderr="command not found")

        @activity.defn(name="probe_master_api")
        async def probe_master_api(inp: ProbeMasterApiInput) -> ProbeMasterApiResult:
            m = inp.url.split("//")[1].split(":")[0]
            if not self.up[m] and m not in self.blocked:
                self.wait[m] -= 1
                if self.wait[m] <= 0:
                    self.up[m] = True
            if self.up[m]:
                return ProbeMasterApiResult(ready=True, status=200, body="ok")
            return ProbeMasterApiResult(ready=False, error="ClientConnectorError: connection refused")

        @activity.defn(name="read_master_pods")
        async def read_master_pods(inp: MasterPodsInput) -> MasterPods:
            return MasterPods(pods=[MirrorPod(name=f"master-{c}-{inp.master}", component=c, exists=True, ready=self.up[inp.master],
                                              image="openshift/origin-control-plane:v3.10") for c in inp.components])

        self.preflight = preflight_activity(self.failing_checks)
        return [run_node_command, probe_master_api, read_master_pods, self.preflight]

    def restarts(self) -> list[str]:
        return [m for m, argv in self.log if argv[0].endswith("master-restart") and argv[1] == "api"]


def cp_input(**kw: Any) -> ControlPlaneUpgradeInput:
    return ControlPlaneUpgradeInput(
        masters=[MasterSpec(name=m, api_url=f"https://{m}:8443", access=HostAccess(backend="ssh", host=m, node=m)) for m in MASTERS],
        action=MasterAction(kind="static-pods", manifests=[StaticPodManifest(path=MANIFEST, content=NEW)]),
        etcd_backup_skip_reason="test world without etcd", etcd_health_skip_reason="test world without etcd", gluster_check=False, approve_first=False,
        search_attributes=False, api_ready_timeout_seconds=30, api_poll_seconds=1, pods_ready_timeout_seconds=30, **kw,
    )


async def start(env: Any, world: Masters, inp: ControlPlaneUpgradeInput) -> tuple[Worker, WorkflowHandle]:
    tq = f"cp-{uuid.uuid4().hex[:8]}"
    worker = Worker(env.client, task_queue=tq, workflows=[ControlPlaneUpgradeWorkflow, LeaseWorkflow], activities=world.activities())
    handle = await env.client.start_workflow(ControlPlaneUpgradeWorkflow.run, inp, id=f"cp-{uuid.uuid4().hex[:6]}", task_queue=tq)
    return worker, handle


async def wait_gate(handle: WorkflowHandle, prefix: str, env: Any = None) -> tuple[str, ControlPlaneStatus]:
    """The first waiting gate whose ID starts with ``prefix``. With ``env`` (the time-skipping
    environment) each wait skips a second of workflow time: a query does not let the test server
    skip time, so a gate behind a 30 s API deadline would otherwise take 30 real seconds."""
    for _ in range(600):
        st = await handle.query(ControlPlaneUpgradeWorkflow.status)
        for g in st.gates:
            if g.id.startswith(prefix) and g.state == GateState.WAITING:
                return g.id, st
        await (env.sleep(1) if env is not None else asyncio.sleep(0.05))
    raise AssertionError(f"no gate {prefix}")


async def test_masters_one_at_a_time_with_manifests_recorded(time_skipping_env: Any) -> None:
    world = Masters()
    worker, handle = await start(time_skipping_env, world, cp_input())
    async with worker:
        result: ControlPlaneResult = await handle.result()
        await record(handle, "ControlPlaneUpgradeWorkflow.three-masters")
    assert result.outcome == "completed", result.message
    assert world.restarts() == MASTERS and world.max_down == 1
    # per master: record (sha256sum, cat) before tee, tee before the restart
    for m in MASTERS:
        cmds = [a[0].rsplit("/", 1)[-1] for h, a in world.log if h == m]
        assert cmds.index("cat") < cmds.index("tee") < cmds.index("master-restart"), cmds
        assert world.files[m][MANIFEST] == NEW
    rec = result.masters[0].records[0]
    assert rec.content_before == "old manifest\n" and rec.sha256_after == hashlib.sha256(NEW.encode()).hexdigest()
    assert "etcd-backup" in result.checks and result.checks["etcd-health"].startswith("not checked")
    # master m2 never restarted before m1's API was back: the log is strictly ordered
    order = [h for h, a in world.log if a[0].endswith("master-restart")]
    assert order == ["m1", "m1", "m2", "m2", "m3", "m3"]


async def test_a_master_without_master_restart_is_refused_before_any_write(time_skipping_env: Any) -> None:
    """Issue 39: the preconditions (the masters named, ``master-restart`` and ``master-logs`` on
    each master's host) are checked before the first master; one that fails ends the run
    ``refused`` with its line, no lease taken and no host command run. The dry run lists every
    check with its result."""
    world = Masters()
    world.failing_checks["master-restart on m2"] = "not found on the host's PATH (command -v exited 1)"
    worker, handle = await start(time_skipping_env, world, cp_input())
    async with worker:
        result: ControlPlaneResult = await handle.result()
        dry_handle = await time_skipping_env.client.start_workflow(
            ControlPlaneUpgradeWorkflow.run, cp_input(dry_run=True), id=f"cp-dry-{uuid.uuid4().hex[:6]}",
            task_queue=worker.task_queue, result_type=ControlPlaneResult)
        dry: ControlPlaneResult = await dry_handle.result()
    assert result.outcome == "refused" and result.problems == [
        "master-restart on m2: not found on the host's PATH (command -v exited 1) (needed: restarts api, controllers after the master action)"]
    assert world.log == [] and world.restarts() == []
    kinds = [r.precondition.kind for r in dry.preconditions]
    # issue 41: the update of the cluster's version and the etcd backup (skipped: the input says why) are checks too
    assert dry.outcome == "dry-run" and kinds == ["names-exist", "update-step", "input"] + ["host-executable"] * 6, kinds
    assert dry.preconditions[2].detail == "skipped: test world without etcd"
    assert [r.state for r in dry.preconditions].count("failed") == 1 and "1 precondition(s) failed" in dry.message


async def test_api_not_back_opens_gate_with_logs_and_never_touches_next_master(time_skipping_env: Any) -> None:
    world = Masters(blocked=("m1",))
    worker, handle = await start(time_skipping_env, world, cp_input())
    async with worker:
        gate_id, st = await wait_gate(handle, "api/m1/", time_skipping_env)
        row = st.masters[0]
        assert row.state == "waiting-gate" and "ldap_ca.crt" in (row.logs_tail or "")
        assert "ldap_ca.crt" in next(g.comment for g in st.gates if g.id == gate_id)
        assert not any(h == "m2" for h, _ in world.log)  # m2 untouched
        # the operator creates the CA file, then chooses retry
        world.blocked.clear()
        await handle.execute_update(ControlPlaneUpgradeWorkflow.approve, ApproveInput(gate_id=gate_id, identity="ops", comment="CA restored"))
        result: ControlPlaneResult = await handle.result()
    assert result.outcome == "completed"
    assert world.restarts() == MASTERS  # retry waited; it did not restart m1 again


async def test_gate_restart_again_runs_master_restart_once_more(time_skipping_env: Any) -> None:
    world = Masters(blocked=("m1",))
    worker, handle = await start(time_skipping_env, world, cp_input())
    async with worker:
        gate_id, _ = await wait_gate(handle, "api/m1/", time_skipping_env)
        world.blocked.clear()
        await handle.execute_update(ControlPlaneUpgradeWorkflow.decide, DecideInput(node=gate_id, decision="restart", identity="ops"))
        result: ControlPlaneResult = await handle.result()
    assert result.outcome == "completed"
    assert world.restarts() == ["m1", "m1", "m2", "m3"]


async def test_an_approval_whose_comment_starts_with_restart_only_waits(time_skipping_env: Any) -> None:
    """Issue 36: the gate's choice is explicit (``decide ... restart``); an approval whose
    comment happens to start with "restart" ("restarted by hand") waits again and runs nothing."""
    world = Masters(blocked=("m1",))
    worker, handle = await start(time_skipping_env, world, cp_input())
    async with worker:
        gate_id, st = await wait_gate(handle, "api/m1/", time_skipping_env)
        assert next(g for g in st.gates if g.id == gate_id).choices == ["wait", "restart"]
        world.blocked.clear()
        await handle.execute_update(ControlPlaneUpgradeWorkflow.approve,
                                    ApproveInput(gate_id=gate_id, identity="ops", comment="restarted by hand"))
        result: ControlPlaneResult = await handle.result()
    assert result.outcome == "completed"
    assert world.restarts() == MASTERS  # m1's API restart ran once, by the action


async def test_gate_reject_aborts_and_next_master_never_starts(time_skipping_env: Any) -> None:
    """Also: the master in progress (its API gate waiting) cannot be skipped half-way."""
    world = Masters(blocked=("m1",))
    worker, handle = await start(time_skipping_env, world, cp_input())
    async with worker:
        gate_id, _ = await wait_gate(handle, "api/m1/", time_skipping_env)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(ControlPlaneUpgradeWorkflow.skip_node, NodeControlInput(node="m1", identity="ops"))
        assert "cannot be skipped half-way" in str(refused.value.cause)
        await handle.execute_update(ControlPlaneUpgradeWorkflow.reject, RejectInput(gate_id=gate_id, identity="ops", comment="stop"))
        result: ControlPlaneResult = await handle.result()
    assert result.outcome == "aborted"
    assert not any(h in ("m2", "m3") for h, _ in world.log)


async def test_preflight_refuses_when_a_master_api_is_down(time_skipping_env: Any) -> None:
    world = Masters(blocked=("m2",))
    world.up["m2"] = False
    worker, handle = await start(time_skipping_env, world, cp_input())
    async with worker:
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    assert "master API not ready on m2" in str(info.value.cause)
    assert world.restarts() == [] and not any(a[0] == "tee" for _, a in world.log)


async def test_manifest_already_new_is_not_written_again(time_skipping_env: Any) -> None:
    world = Masters()
    world.files["m1"][MANIFEST] = NEW
    worker, handle = await start(time_skipping_env, world, cp_input())
    async with worker:
        result: ControlPlaneResult = await handle.result()
    assert result.outcome == "completed"
    assert not any(h == "m1" and a[0] == "tee" for h, a in world.log)


def test_etcd_backup_is_required_unless_a_reason_is_given() -> None:
    with pytest.raises(ValueError, match="etcd backup barrier is required"):
        cp_input().model_copy(update={"etcd_backup_skip_reason": None}).model_validate(
            {**cp_input().model_dump(), "etcd_backup_skip_reason": None})


async def test_the_etcd_backup_barrier_is_a_precondition_taken_by_this_run(time_skipping_env: Any) -> None:
    """Issue 41: with the barrier, the plan lists the etcd backup as taken by this run before the
    first master, and the preflight says when this run took it (not before the run's start)."""
    from tests.support.etcd_fakes import FakeEtcd, etcd_members
    from temporalio.worker import Worker as _Worker

    from workflows.etcd.backup import EtcdBackupWorkflow
    from workflows.etcd.models import EtcdBackupInput

    class HealthyEtcd(FakeEtcd):
        def status(self) -> Any:
            st = super().status()
            leader = st.endpoints[0].member_id
            return st.model_copy(update={"members_source": "member list",
                                         "endpoints": [e.model_copy(update={"leader": leader}) for e in st.endpoints]})

    world, members = Masters(), etcd_members()
    etcd = HealthyEtcd(members)
    etcd_acts = [a for a in etcd.activities() if a.__temporal_activity_definition.name in ("etcd_snapshot_save", "etcd_cluster_status")]
    inp = cp_input().model_copy(update={"etcd_backup": EtcdBackupInput(members=members, search_attributes=False),
                                        "etcd_backup_skip_reason": None, "etcd_health_skip_reason": None})
    tq = f"cp-{uuid.uuid4().hex[:8]}"
    worker = _Worker(time_skipping_env.client, task_queue=tq, workflows=[ControlPlaneUpgradeWorkflow, LeaseWorkflow, EtcdBackupWorkflow],
                     activities=world.activities() + etcd_acts)
    async with worker:
        dry = await time_skipping_env.client.execute_workflow(
            ControlPlaneUpgradeWorkflow.run, inp.model_copy(update={"dry_run": True}), id=f"cp-dry-{uuid.uuid4().hex[:6]}",
            task_queue=tq, result_type=ControlPlaneResult)
        result: ControlPlaneResult = await time_skipping_env.client.execute_workflow(
            ControlPlaneUpgradeWorkflow.run, inp, id=f"cp-{uuid.uuid4().hex[:6]}", task_queue=tq, result_type=ControlPlaneResult)
    [backup] = [r for r in dry.preconditions if r.precondition.kind == "input"]
    assert backup.line().startswith("ok       input              etcd backup: taken by this run before the first master "
                                    "(snapshot of etcd-0, etcd-1, etcd-2)"), backup.line()
    assert result.outcome == "completed", result.message
    taken = result.checks["etcd-backup"]
    assert taken.startswith("ok: all members backed up, taken by this run at "), taken
    assert result.started_at is not None and taken.rsplit(" at ", 1)[1] >= result.started_at.isoformat(), (taken, result.started_at)
    assert len(etcd.called("etcd_snapshot_save")) == 3


async def wait_status(handle: WorkflowHandle, env: Any, pred: Any, what: str) -> ControlPlaneStatus:
    """Poll ``status`` until ``pred(status)``, skipping a second of workflow time per poll (see
    :func:`wait_gate`)."""
    st = None
    for _ in range(600):
        st = await handle.query(ControlPlaneUpgradeWorkflow.status)
        if pred(st):
            return st
        await env.sleep(1)
    raise AssertionError(f"{what} not reached: {st.model_dump_json(indent=1) if st else None}")


async def test_the_masters_go_through_the_kit_window_with_the_gate_and_a_hold(time_skipping_env: Any) -> None:
    """Issue 36: the masters are the kit's node window (one at a time, in-process steps): the gate
    before the first master stands on the board (``master/m1``, the master waiting for approval),
    and ``hold_node`` on m2 keeps m2 and the masters after it waiting (the operator's order) until
    released."""
    env, world = time_skipping_env, Masters()
    worker, handle = await start(env, world, cp_input().model_copy(update={"approve_first": True}))
    async with worker:
        gate_id, st = await wait_gate(handle, "master/", env)
        assert gate_id == "master/m1" and next(g.comment for g in st.gates if g.id == gate_id) == "upgrade master m1 next"
        assert st.nodes["m1"].phase == NodePhase.WAITING_APPROVAL and st.nodes["m2"].phase == NodePhase.PENDING
        await handle.execute_update(ControlPlaneUpgradeWorkflow.hold_node, HoldInput(node="m2", identity="ops", reason="CHG-7 window"))
        await handle.execute_update(ControlPlaneUpgradeWorkflow.approve, ApproveInput(gate_id=gate_id, identity="ops"))
        st = await wait_status(handle, env, lambda s: s.nodes["m1"].phase == NodePhase.DONE and "hold on m2" in (s.waiting_for or ""),
                               "m1 done, the window waiting for the hold on m2")
        assert st.masters[0].state == "done" and [r.state for r in st.masters[1:]] == ["pending", "pending"]
        assert not any(h in ("m2", "m3") for h, _ in world.log)  # m3 waits behind the held m2
        await handle.execute_update(ControlPlaneUpgradeWorkflow.release_node, ReleaseInput(node="m2", identity="ops"))
        result: ControlPlaneResult = await handle.result()
    assert result.outcome == "completed", result.message
    assert world.restarts() == MASTERS and world.max_down == 1


async def test_a_master_whose_step_fails_pauses_the_upgrade_and_retry_node_goes_on(time_skipping_env: Any) -> None:
    """A master step that fails for good (m2's manifest write: SSH reset, not retryable) ends that
    master ``failed`` and pauses the upgrade naming it, as any node procedure's window does; m3
    never starts meanwhile. ``retry-node m2`` runs m2's steps again: the write (its record of the
    content before is kept, not taken again), then its restarts."""
    env, world = time_skipping_env, Masters()
    world.tee_fails.add("m2")
    worker, handle = await start(env, world, cp_input())
    async with worker:
        st = await wait_status(handle, env, lambda s: s.phase == "paused", "paused")
        assert "node m2 failed" in (st.paused_reason or "") and "connection reset" in (st.paused_reason or "")
        assert st.nodes["m2"].phase == NodePhase.FAILED and st.masters[1].state == "failed"
        assert st.nodes["m3"].phase == NodePhase.PENDING and not any(h == "m3" for h, _ in world.log)
        await handle.execute_update(ControlPlaneUpgradeWorkflow.retry_node, NodeControlInput(node="m2", identity="ops"))
        result: ControlPlaneResult = await handle.result()
    assert result.outcome == "completed", result.message
    assert world.restarts() == MASTERS and world.files["m2"][MANIFEST] == NEW
    assert len(result.masters[1].records) == 1 and result.masters[1].records[0].content_before == "old manifest\n"


async def test_rejecting_the_gate_before_the_first_master_aborts_before_any_write(time_skipping_env: Any) -> None:
    env, world = time_skipping_env, Masters()
    worker, handle = await start(env, world, cp_input().model_copy(update={"approve_first": True}))
    async with worker:
        gate_id, _ = await wait_gate(handle, "master/", env)
        await handle.execute_update(ControlPlaneUpgradeWorkflow.reject, RejectInput(gate_id=gate_id, identity="ops", comment="not today"))
        result: ControlPlaneResult = await handle.result()
    assert result.outcome == "aborted" and "gate master/m1 rejected" in result.message, result.message
    assert world.log == [] and [r.state for r in result.masters] == ["pending"] * 3


async def test_skipping_a_master_not_started_leaves_it_untouched_and_named(time_skipping_env: Any) -> None:
    """``skip-node`` of a master not started yet: it is never touched, and the upgrade ends as
    openshift-ansible's does when a master did not finish (MastersNotUpdated naming it)."""
    env, world = time_skipping_env, Masters()
    worker, handle = await start(env, world, cp_input().model_copy(update={"approve_first": True}))
    async with worker:
        gate_id, _ = await wait_gate(handle, "master/", env)
        await handle.execute_update(ControlPlaneUpgradeWorkflow.skip_node, NodeControlInput(node="m3", identity="ops", comment="spare"))
        await handle.execute_update(ControlPlaneUpgradeWorkflow.approve, ApproveInput(gate_id=gate_id, identity="ops"))
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    assert "did not finish updating: m3" in str(info.value.cause)
    assert world.restarts() == ["m1", "m2"] and not any(h == "m3" for h, _ in world.log)


async def test_no_master_starts_outside_a_maintenance_window(time_skipping_env: Any) -> None:
    """``windows`` (the kit's maintenance windows, as every node procedure's): with the only
    window two hours away the upgrade waits after its preflight, touching no master, and the
    first master starts once the window opens."""
    from datetime import timedelta

    from tests.kit.test_kit_windows_wf import window_around

    env, world = time_skipping_env, Masters()
    spec, opens, _ = window_around(await env.get_current_time() + timedelta(hours=2), 30)
    worker, handle = await start(env, world, cp_input(windows=[spec]))
    async with worker:
        st = await wait_status(handle, env, lambda s: "the window from" in (s.waiting_for or ""), "waiting for the window")
        assert [n.phase for n in st.nodes.values()] == [NodePhase.PENDING] * 3 and world.restarts() == []
        result: ControlPlaneResult = await handle.result()
        st = await handle.query(ControlPlaneUpgradeWorkflow.status)
    assert result.outcome == "completed", result.message
    assert world.restarts() == MASTERS
    assert st.nodes["m1"].started_at is not None and st.nodes["m1"].started_at >= opens
