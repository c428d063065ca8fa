"""GlusterRecoveryWorkflow's decisions on a time-skipping server, with the GlusterFS activities
replaced by a small in-memory GlusterFS world registered under the same activity names (the
end-to-end runs against clustersim's GlusterFS model are in tests/gluster/test_gluster_recovery.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, Worker

from activities.cluster.models import PodRef
from activities.gluster.models import (
    Brick,
    BrickStatus,
    DeletePodResult,
    GlusterPod,
    GlusterReadInput,
    GlusterReport,
    HealBrick,
    HealInfo,
    NodeAddresses,
    ReplacementInput,
    ReplacementState,
    VolumeInfo,
    VolumeStartInput,
    VolumeStartResult,
    VolumeStatus,
)
from tests.support.replay import recording, store
from tests.kit.test_kit_alerts import CLEAR, FIRING, NODE_LINE, URL, AlertsFake
from tests.support.wf_fakes import preflight_activity
from workflows import WORKFLOWS
from workflows.gluster import GlusterRecoveryWorkflow
from workflows.gluster.models import GlusterHealthParams, GlusterRecoveryInput, GlusterRecoveryResult, GlusterRecoveryStatus
from workflows.kit.inputs import AlertGatePolicy
from workflows.kit.models import ApproveInput, GateState, RejectInput

pytestmark = pytest.mark.timeout(120)

HOSTS = {"10.0.0.10": "master01", "10.0.0.11": "master02", "10.0.0.12": "master03"}
ORDER = ["10.0.0.11", "10.0.0.12", "10.0.0.10"]


class World:
    """Three hosts, volumes of three bricks (one per host). A deleted pod is replaced at once
    with a new uid; the host's bricks then start, except ``sticky`` ones (until start force).
    ``heal``: entries per volume, falling by ``heal_step`` per read once every brick is up."""

    def __init__(self, volumes: list[str], down: dict[str, list[str]] | None = None, sticky: set[tuple[str, str]] = frozenset(),
                 heal_step: int = 5) -> None:
        self.volumes = volumes
        self.online = {(v, h): True for v in volumes for h in ORDER}
        for v, hosts in (down or {}).items():
            for h in hosts:
                self.online[(v, h)] = False
        self.sticky = set(sticky)
        self.uids = dict.fromkeys(HOSTS.values(), 1)
        self.heal = dict.fromkeys(volumes, 0)
        self.heal_step = heal_step
        self.deletes: list[PodRef] = []
        self.start_force: list[str] = []
        self.reads = 0
        self.history: Any = None  # the last run's (``_run``)

    def pod(self, node: str) -> GlusterPod:
        ip = next(ip for ip, n in HOSTS.items() if n == node)
        return GlusterPod(name=f"glusterfs-storage-{node}-{self.uids[node]}", uid=f"{node}-{self.uids[node]}", node=node,
                          pod_ip=ip, host_ip=ip, phase="Running", ready=True)

    @activity.defn(name="read_gluster")
    async def read_gluster(self, input: GlusterReadInput) -> GlusterReport:
        self.reads += 1
        for v in self.volumes:
            if all(self.online[(v, h)] for h in ORDER):
                self.heal[v] = max(0, self.heal[v] - self.heal_step)
        info = [VolumeInfo(name=v, type="Replicate", status="Started", replica_count=3, brick_count=3,
                           bricks=[Brick(host=h, path=f"/b/{v}") for h in ORDER]) for v in self.volumes]
        status = [VolumeStatus(name=v, bricks=[BrickStatus(host=h, path=f"/b/{v}", online=self.online[(v, h)]) for h in ORDER])
                  for v in self.volumes]
        heal = {}
        if input.heal:
            for v in self.volumes:
                if input.heal_volumes is not None and v not in input.heal_volumes:
                    continue
                heal[v] = HealInfo(volume=v, bricks=[
                    HealBrick(host=h, path=f"/b/{v}", entries=(self.heal[v] if i == 0 else 0) if self.online[(v, h)] else None,
                              status="Connected" if self.online[(v, h)] else "Transport endpoint is not connected")
                    for i, h in enumerate(ORDER)])
        return GlusterReport(pods=[self.pod(n) for n in HOSTS.values()],
                             nodes=[NodeAddresses(name=n, addresses=[ip], ready=True) for ip, n in HOSTS.items()],
                             exec_pod=self.pod("master01").name, info=info, status=status, heal=heal)

    @activity.defn(name="delete_gluster_pod")
    async def delete_gluster_pod(self, ref: PodRef) -> DeletePodResult:
        node = ref.uid.rsplit("-", 1)[0]
        if self.pod(node).uid != ref.uid:
            return DeletePodResult(already_gone=True, detail="gone")
        self.deletes.append(ref)
        self.uids[node] += 1
        ip = next(ip for ip, n in HOSTS.items() if n == node)
        for v in self.volumes:
            if (v, ip) not in self.sticky:
                if not self.online[(v, ip)]:
                    self.heal[v] += 12  # writes while the brick was down
                self.online[(v, ip)] = True
        return DeletePodResult(deleted=True, detail="deleted")

    @activity.defn(name="find_gluster_replacement")
    async def find_gluster_replacement(self, input: ReplacementInput) -> ReplacementState:
        p = self.pod(input.node)
        return ReplacementState(replacement=p if p.uid != input.old_uid else None)

    @activity.defn(name="gluster_volume_start_force")
    async def gluster_volume_start_force(self, input: VolumeStartInput) -> VolumeStartResult:
        self.start_force.append(input.volume)
        for h in ORDER:
            self.sticky.discard((input.volume, h))
            self.online[(input.volume, h)] = True
        return VolumeStartResult(pod="p", output=f"volume start: {input.volume}: success", ok=True)

    def activities(self) -> list[Callable[..., Any]]:
        return [self.read_gluster, self.delete_gluster_pod, self.find_gluster_replacement, self.gluster_volume_start_force]


def _input(**kw: Any) -> GlusterRecoveryInput:
    kw.setdefault("heal", GlusterHealthParams(interval_seconds=5, timeout_seconds=600, stall_after_seconds=120))
    return GlusterRecoveryInput(search_attributes=False, approvals={"requested_by": "alice"}, reread_delay_seconds=1, **kw)


async def _status(handle: WorkflowHandle, pred: Callable[[GlusterRecoveryStatus], bool], env: Any) -> GlusterRecoveryStatus:
    for _ in range(300):
        st = await handle.query("status", result_type=GlusterRecoveryStatus)
        if pred(st):
            return st
        await env.sleep(2)  # let the time-skipping server move workflow time on (timers of the waits)
    raise AssertionError(f"status never matched; last: {st.step} {st.waiting_for}")


def _waiting(prefix: str) -> Callable[[GlusterRecoveryStatus], bool]:
    return lambda st: any(g.state == GateState.WAITING and g.id.startswith(prefix) for g in st.gates)


async def _run(env: Any, queue: str, world: World, inp: GlusterRecoveryInput, steer: Callable[[WorkflowHandle], Any] | None = None,
               more: Sequence[Callable[..., Any]] = ()) -> GlusterRecoveryResult:
    async with Worker(env.client, task_queue=queue, workflows=WORKFLOWS, activities=[*world.activities(), *more]):
        handle = await env.client.start_workflow(GlusterRecoveryWorkflow.run, inp, id=f"gluster-{uuid.uuid4().hex[:8]}",
                                                 task_queue=queue, result_type=GlusterRecoveryResult)
        if steer is not None:
            await steer(handle)
        result = await handle.result()
    # Every run's history replays against the workflow code: no non-determinism in any path.
    world.history = await handle.fetch_history()
    await Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter).replay_workflow(world.history)
    return result


async def test_seed_case_one_brick_offline_is_recovered(time_skipping_env, wf_task_queue) -> None:
    world = World(["reg", "heketidbstorage"], down={"reg": ["10.0.0.12"]})

    async def steer(h: WorkflowHandle) -> None:
        st = await _status(h, _waiting("delete/10.0.0.12"), time_skipping_env)
        gate = next(g for g in st.gates if g.id == "delete/10.0.0.12")
        assert "glusterfs-storage-master03-1" in gate.comment and "reg: brick 10.0.0.12:/b/reg (Online N)" in gate.comment
        assert world.deletes == []  # nothing deleted before the approval
        await h.execute_update(GlusterRecoveryWorkflow.approve, ApproveInput(identity="bob"))

    res = await _run(time_skipping_env, wf_task_queue, world, _input(), steer)
    if recording():
        await store(world.history, "GlusterRecoveryWorkflow.one-brick-offline")
    assert res.outcome == "completed" and res.ok and res.healthy, res.message
    assert [d.uid for d in world.deletes] == ["master03-1"]
    (host,) = res.hosts
    assert (host.host, host.node, host.step, host.restarts, host.pod) == ("10.0.0.12", "master03", "done", 1, "glusterfs-storage-master03-2")
    assert host.deletes[0].uid == "master03-1" and host.deletes[0].node == "master03"
    reg = next(v for v in res.volumes if v.name == "reg")
    assert reg.online and reg.heal_entries_end == 0 and any("deleted pod" in a for a in reg.actions)
    assert res.assessment_start.offline == ["reg: 10.0.0.12:/b/reg"]


async def test_no_pod_is_deleted_while_an_alert_blocks(time_skipping_env, wf_task_queue) -> None:
    """The recovery's ``alerts`` (the kit's ProcedureInput field a cluster upgrade hands its
    phases): the host waits at the alert gate, deleting nothing, until Prometheus is clear."""
    world, fake = World(["reg"], down={"reg": ["10.0.0.12"]}), AlertsFake(FIRING, CLEAR)
    policy = AlertGatePolicy(url=URL, filter="^Watchdog$", poll_seconds=60, override=False)

    async def steer(h: WorkflowHandle) -> None:
        st = await _status(h, lambda s: bool(s.hosts) and s.hosts[0].step == "alerts", time_skipping_env)
        assert NODE_LINE in (st.health["alerts/host/10.0.0.12"].last or ""), st.health
        assert world.deletes == [] and len(fake.calls) == 1

    res = await _run(time_skipping_env, wf_task_queue, world, _input(approve_pod_delete=False, alerts=policy), steer,
                     more=[fake.activity()])
    assert res.outcome == "completed" and res.ok, res.message
    assert [d.uid for d in world.deletes] == ["master03-1"] and len(fake.calls) == 2  # asked again after its poll: clear
    quiet = AlertsFake(FIRING)
    res = await _run(time_skipping_env, wf_task_queue, World(["reg"], down={"reg": ["10.0.0.12"]}), _input(approve_pod_delete=False),
                     more=[quiet.activity()])
    assert res.outcome == "completed" and quiet.calls == []  # without a gate nobody is asked


async def test_check_mode_reports_and_changes_nothing(time_skipping_env, wf_task_queue) -> None:
    world = World(["reg"], down={"reg": ["10.0.0.12"]})
    res = await _run(time_skipping_env, wf_task_queue, world, _input(mode="check"))
    assert res.outcome == "unhealthy" and not res.ok and world.deletes == []
    healthy = await _run(time_skipping_env, wf_task_queue, World(["reg"]), _input(mode="check"))
    assert healthy.outcome == "completed" and healthy.ok


async def test_two_bricks_of_one_volume_stop_before_any_delete(time_skipping_env, wf_task_queue) -> None:
    world = World(["reg", "app"], down={"app": ["10.0.0.11", "10.0.0.12"]})
    res = await _run(time_skipping_env, wf_task_queue, world, _input())
    assert res.outcome == "stopped" and not res.ok and world.deletes == []
    assert "10.0.0.11:/b/app" in res.message and "10.0.0.12:/b/app" in res.message


async def test_unsafe_restart_asks_a_person_and_deletes_nothing(time_skipping_env, wf_task_queue) -> None:
    world = World(["reg", "app"], down={"reg": ["10.0.0.12"], "app": ["10.0.0.11"]})

    async def steer(h: WorkflowHandle) -> None:
        st = await _status(h, _waiting("unsafe/"), time_skipping_env)
        gate = next(g for g in st.gates if g.state == GateState.WAITING)
        assert "would take 2 bricks" in gate.comment
        await h.execute_update(GlusterRecoveryWorkflow.reject, RejectInput(identity="bob"))

    res = await _run(time_skipping_env, wf_task_queue, world, _input(), steer)
    assert res.outcome == "stopped" and world.deletes == [] and "unsafe" in res.message


async def test_sticky_brick_gets_bounded_restarts_then_start_force(time_skipping_env, wf_task_queue) -> None:
    world = World(["reg"], down={"reg": ["10.0.0.12"]}, sticky={("reg", "10.0.0.12")})

    async def steer(h: WorkflowHandle) -> None:
        await _status(h, _waiting("delete/"), time_skipping_env)
        await h.execute_update(GlusterRecoveryWorkflow.approve, ApproveInput(identity="bob"))
        st = await _status(h, _waiting("start-force/"), time_skipping_env)
        assert len(world.deletes) == 2 and world.start_force == []
        assert "gluster volume start VOL force" in st.gates[-1].comment
        await h.execute_update(GlusterRecoveryWorkflow.approve, ApproveInput(identity="bob"))

    res = await _run(time_skipping_env, wf_task_queue, world, _input(allow_volume_start_force=True), steer)
    assert res.outcome == "completed" and res.ok, res.message
    assert world.start_force == ["reg"] and res.hosts[0].restarts == 2
    # The CLI beats while it runs: every gluster CLI activity has a heartbeat timeout of at most
    # 30 s, so a worker that dies mid-command is seen then, not at the command's timeout.
    cli = [e.activity_task_scheduled_event_attributes for e in world.history.events
           if e.activity_task_scheduled_event_attributes.activity_type.name in ("read_gluster", "gluster_volume_start_force")]
    assert {a.activity_type.name for a in cli} == {"read_gluster", "gluster_volume_start_force"}
    assert all(0 < a.heartbeat_timeout.ToTimedelta().total_seconds() <= 30 for a in cli), cli


async def test_heal_stall_opens_a_gate(time_skipping_env, wf_task_queue) -> None:
    world = World(["reg"], down={"reg": ["10.0.0.12"]}, heal_step=0)

    async def steer(h: WorkflowHandle) -> None:
        await _status(h, _waiting("delete/"), time_skipping_env)
        await h.execute_update(GlusterRecoveryWorkflow.approve, ApproveInput(identity="bob"))
        st = await _status(h, _waiting("gluster-health/heal/10.0.0.12/"), time_skipping_env)
        assert st.heal["reg"].entries == 12 and not st.heal["reg"].falling
        assert "heal made no progress" in st.gates[-1].comment
        await h.execute_update(GlusterRecoveryWorkflow.reject, RejectInput(identity="bob"))

    res = await _run(time_skipping_env, wf_task_queue, world, _input(), steer)
    assert res.outcome == "stopped" and "heal made no progress" in res.message


class UnmappedWorld(World):
    """As World, but node master03 and its pod are not in the read: brick host 10.0.0.12 maps
    to no node or pod."""

    @activity.defn(name="read_gluster")
    async def read_gluster(self, input: GlusterReadInput) -> GlusterReport:
        report = await World.read_gluster(self, input)
        report.pods = [p for p in report.pods if p.node != "master03"]
        report.nodes = [n for n in report.nodes if n.name != "master03"]
        return report


async def test_unmapped_brick_host_is_refused_before_the_lease_and_any_delete(time_skipping_env, wf_task_queue) -> None:
    """Issue 39: a brick host that maps to no node or pod is a failed precondition, checked by
    the kit before the first write: the run ends refused, one line per problem, nothing deleted."""
    world = UnmappedWorld(["reg"], down={"reg": ["10.0.0.12"]})
    res = await _run(time_skipping_env, wf_task_queue, world, _input())
    assert res.outcome == "refused" and not res.ok and world.deletes == [], res.message
    assert len(res.problems) == 1 and "brick hosts" in res.problems[0] and "10.0.0.12" in res.problems[0], res.problems
    assert [r.state for r in res.preconditions if r.precondition.kind == "input"][:2] == ["ok", "failed"]
    assert sum(e.event_type == 10 for e in world.history.events) == 1  # ACTIVITY_TASK_SCHEDULED: the read alone
    assert [r for r in res.gate_history] == []


async def test_dry_run_lists_every_check_and_the_plan_and_deletes_nothing(time_skipping_env, wf_task_queue) -> None:
    world = World(["reg"], down={"reg": ["10.0.0.12"]})
    checks = preflight_activity()
    async with Worker(time_skipping_env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=[*world.activities(), checks]):
        res = await time_skipping_env.client.execute_workflow(
            GlusterRecoveryWorkflow.run, _input(dry_run=True, exclude_node="master01"), id=f"gluster-{uuid.uuid4().hex[:8]}",
            task_queue=wf_task_queue, result_type=GlusterRecoveryResult)
    assert res.outcome == "dry-run" and world.deletes == [], res.message
    assert "would restart the GlusterFS pod of 1 host(s)" in res.message and "10.0.0.12" in res.message
    assert [(r.precondition.kind, r.state) for r in res.preconditions] == [
        ("names-exist", "ok"), ("input", "ok"), ("input", "ok"), ("input", "ok")]
    assert [p.kind for c in checks.calls for p in c.preconditions] == ["names-exist"]  # the one the API answers
