"""NodeUpgradeWorkflow's decisions on a time-skipping server, with the cluster replaced by a small
in-memory world registered under the real activity names: batches in serial order, the canary
gate before any other node, done nodes skipped, an action outcome never repeated, the
max_fail_percentage stop. (End-to-end runs against clustersim are in tests/node_upgrade/test_upgrade_nodes_*e2e.py.)"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import WorkflowHandle
from temporalio.worker import Worker

from tests.support.replay import record
from activities.cluster.models import CordonInput, CordonResult, DrainInput, DrainResult, UncordonInput, UncordonResult
from activities.host.models import CommandResult, RunCommandInput
from activities.node_upgrade.models import NodeFacts, NodeFactsInput, ReadUpgradeNodesInput, UpgradeNodes
from tests.support.kit_fakes import preflight_activity
from workflows.kit.lease import LeaseWorkflow
from workflows.kit.models import ApproveInput, GateState
from workflows.node_upgrade import NodeUpgradeNodeWorkflow, NodeUpgradeWorkflow
from workflows.node_upgrade.models import BatchPolicy, NodeAction, NodeSelection, NodeUpgradeInput, NodeUpgradeResult, NodeUpgradeStatus

pytestmark = pytest.mark.timeout(180)

OLD, NEW = "v1.9.1+a0ce1bc657", "v1.10.0+b81c8f8"


class World:
    """Nodes with labels and kubelet versions. The action ``upgrade {node}`` sets the version (the
    node is NotReady for ``notready_polls`` reads after it); nodes in ``fail`` make it exit 2."""

    def __init__(self, infra: int = 2, done: tuple[str, ...] = (), fail: tuple[str, ...] = ()) -> None:
        self.nodes: dict[str, NodeFacts] = {}
        for i in range(1, 4):
            n = f"master0{i}"
            self.nodes[n] = NodeFacts(name=n, labels={"node-role.kubernetes.io/master": "true", "region": "infra"},
                                      kubelet_version=OLD, ready=True)
        for i in range(1, infra + 1):
            n = f"infra{i}"
            self.nodes[n] = NodeFacts(name=n, labels={"region": "infra"}, kubelet_version=NEW if n in done else OLD, ready=True)
        for i in range(1, 3):
            n = f"compute{i}"
            self.nodes[n] = NodeFacts(name=n, labels={"region": "primary"}, kubelet_version=NEW if n in done else OLD, ready=True)
        self.fail = set(fail)
        self.cordoned: dict[str, str] = {}
        self.notready: dict[str, int] = {}
        self.actions: list[str] = []
        self.events: list[tuple[str, str]] = []  # (what, node) in order

    def activities(self) -> list[Any]:
        @activity.defn(name="read_upgrade_nodes")
        async def read_upgrade_nodes(inp: ReadUpgradeNodesInput) -> UpgradeNodes:
            return UpgradeNodes(nodes=[n.model_copy() for n in self.nodes.values()])

        @activity.defn(name="read_node_facts")
        async def read_node_facts(inp: NodeFactsInput) -> NodeFacts:
            n = self.nodes[inp.node]
            if self.notready.get(inp.node, 0) > 0:
                self.notready[inp.node] -= 1
                return n.model_copy(update={"ready": False})
            return n.model_copy(update={"unschedulable": inp.node in self.cordoned})

        @activity.defn(name="cordon_node")
        async def cordon_node(inp: CordonInput) -> CordonResult:
            self.events.append(("cordon", inp.node))
            if inp.node in self.cordoned:
                return CordonResult(cordoned_by_us=self.cordoned[inp.node] == inp.owner, was_unschedulable=True)
            self.cordoned[inp.node] = inp.owner
            return CordonResult(cordoned_by_us=True, was_unschedulable=False)

        @activity.defn(name="uncordon_node")
        async def uncordon_node(inp: UncordonInput) -> UncordonResult:
            if self.cordoned.get(inp.node) == inp.owner:
                del self.cordoned[inp.node]
                self.events.append(("uncordon", inp.node))
                return UncordonResult(uncordoned=True)
            return UncordonResult(uncordoned=False)

        @activity.defn(name="drain_node")
        async def drain_node(inp: DrainInput) -> DrainResult:
            self.events.append(("drain", inp.node))
            return DrainResult(done=True)

        @activity.defn(name="run_node_command")
        async def run_node_command(inp: RunCommandInput) -> CommandResult:
            node = inp.argv[-1]
            self.actions.append(node)
            self.events.append(("action", node))
            if node in self.fail:
                return CommandResult(argv=inp.argv, exit_code=2, stderr=f"fatal: [{node}]: FAILED!")
            self.nodes[node].kubelet_version = NEW
            self.notready[node] = 2
            return CommandResult(argv=inp.argv, exit_code=0, stdout="PLAY RECAP")

        return [read_upgrade_nodes, read_node_facts, cordon_node, uncordon_node, drain_node, run_node_command]


def upgrade_input(selector: str, policy: BatchPolicy, **kw: Any) -> NodeUpgradeInput:
    return NodeUpgradeInput(
        selection=NodeSelection(label_selector=selector, masters=["master01", "master02", "master03"]), policy=policy,
        target_version=NEW, action=NodeAction(argv=["upgrade", "{node}"]), search_attributes=False,
        ready_poll_seconds=1.0, **kw,
    )


async def start(env: Any, world: World, inp: NodeUpgradeInput, failing: dict[str, str] | None = None) -> tuple[Worker, WorkflowHandle]:
    tq = f"nu-{uuid.uuid4().hex[:8]}"
    world.preflight = preflight_activity(failing)
    worker = Worker(env.client, task_queue=tq, workflows=[NodeUpgradeWorkflow, NodeUpgradeNodeWorkflow, LeaseWorkflow],
                    activities=[*world.activities(), world.preflight])
    handle = await env.client.start_workflow(NodeUpgradeWorkflow.run, inp, id=f"node-upgrade-{uuid.uuid4().hex[:6]}", task_queue=tq)
    return worker, handle


async def wait_gate(handle: WorkflowHandle, gate_id: str) -> NodeUpgradeStatus:
    for _ in range(600):
        st = await handle.query(NodeUpgradeWorkflow.status)
        if any(g.id == gate_id and g.state == GateState.WAITING for g in st.gates):
            return st
        await asyncio.sleep(0.05)
    raise AssertionError(f"gate {gate_id} never opened")


@pytest.mark.parametrize(("infra", "batches"), [(2, [["infra1"], ["infra2"]]), (3, [["infra1"], ["infra2"], ["infra3"]])])
async def test_serial_50_percent_batches_one_node_at_a_time(time_skipping_env: Any, infra: int, batches: list[list[str]]) -> None:
    world = World(infra=infra)
    worker, handle = await start(time_skipping_env, world, upgrade_input("region=infra", BatchPolicy(serial="50%")))
    async with worker:
        result: NodeUpgradeResult = await handle.result()
    assert result.outcome == "completed", result.message
    assert result.plan is not None and result.plan.batches == batches
    # masters carry region=infra here and are never touched
    assert not any(n.startswith("master") for _, n in world.events)
    # strictly batch by batch: a node's uncordon comes before the next node's cordon
    order = [(w, n) for w, n in world.events if w in ("cordon", "uncordon")]
    assert order == [(w, n) for b in batches for n in b for w in ("cordon", "uncordon")]
    assert all(world.nodes[n].kubelet_version == NEW for b in batches for n in b)


async def test_canary_gate_opens_after_canary_and_before_any_other_node(time_skipping_env: Any) -> None:
    world = World(infra=2)
    worker, handle = await start(time_skipping_env, world, upgrade_input("region=infra", BatchPolicy(serial="50%", canary=1)))
    async with worker:
        st = await wait_gate(handle, "canary")
        assert world.actions == ["infra1"]
        assert st.nodes["infra1"].phase == "done" and st.nodes["infra2"].phase == "pending"
        await asyncio.sleep(0.5)  # nothing else moves while the gate waits
        assert world.actions == ["infra1"]
        await handle.execute_update(NodeUpgradeWorkflow.approve, ApproveInput(gate_id="canary", identity="alice"))
        result: NodeUpgradeResult = await handle.result()
        await record(handle, "NodeUpgradeWorkflow.canary")
        await record(time_skipping_env.client.get_workflow_handle(f"{handle.id}/node/infra2/1"), "NodeUpgradeNodeWorkflow.infra2")
    assert result.outcome == "completed" and world.actions == ["infra1", "infra2"]


async def test_rerun_skips_done_nodes_and_the_canary(time_skipping_env: Any) -> None:
    world = World(infra=2, done=("compute1",))
    worker, handle = await start(time_skipping_env, world,
                                 upgrade_input("region=primary", BatchPolicy(serial="50%", canary=["compute1"])))
    async with worker:
        result: NodeUpgradeResult = await handle.result()
    assert result.outcome == "completed"
    assert world.actions == ["compute2"]  # the canary was done before: no canary batch, no gate
    assert result.plan is not None and result.plan.done == ["compute1"] and not result.plan.canary_gate
    assert result.nodes["compute1"].phase == "skipped"


async def test_failure_above_max_fail_percentage_stops_after_the_batch(time_skipping_env: Any) -> None:
    world = World(infra=3, fail=("infra1",))
    worker, handle = await start(time_skipping_env, world, upgrade_input("region=infra", BatchPolicy(serial="50%")))
    async with worker:
        result: NodeUpgradeResult = await handle.result()
    assert result.outcome == "stopped" and "max_fail_percentage 0" in result.message
    assert world.actions == ["infra1"]  # the next batch never started
    assert world.cordoned == {"infra1": next(iter(world.cordoned.values()))}  # left cordoned for a person
    # with 50% allowed and batches of 1, one failure (100%) still stops; 2 per batch with one failing does not
    world = World(infra=3, fail=("infra1",))
    worker, handle = await start(time_skipping_env, world,
                                 upgrade_input("region=infra", BatchPolicy(serial=2, max_fail_percentage=50)))
    async with worker:
        result = await handle.result()
    assert result.outcome == "completed" and sorted(world.actions) == ["infra1", "infra2", "infra3"]
    assert result.nodes["infra1"].phase == "failed"


async def test_no_matching_node_is_refused_before_any_write(time_skipping_env: Any) -> None:
    world = World()
    worker, handle = await start(time_skipping_env, world, upgrade_input("region=nowhere", BatchPolicy()))
    async with worker:
        result: NodeUpgradeResult = await handle.result()
    assert result.outcome == "refused", result.message
    assert any("openshift_upgrade_nodes_label was specified but no nodes matched" in p for p in result.problems)
    assert world.events == []


async def test_an_action_that_cannot_run_is_refused_before_any_node_is_cordoned(time_skipping_env: Any) -> None:
    """Issue 39 case 1: the action's program is a precondition, checked before the first cordon
    (the field run cordoned node01 and evicted its pods, then failed with exit 127)."""
    world = World(infra=2)
    worker, handle = await start(time_skipping_env, world, upgrade_input("region=infra", BatchPolicy(serial="50%")),
                                 failing={"worker-executable": "upgrade: not found on the worker's PATH"})
    async with worker:
        result: NodeUpgradeResult = await handle.result()
        st = await handle.query(NodeUpgradeWorkflow.status)
    assert result.outcome == "refused" and len(result.problems) == 1, result
    assert result.problems[0].startswith("upgrade on the worker: upgrade: not found on the worker's PATH (needed: the node action")
    assert world.events == [] and world.actions == []  # nothing cordoned, drained or run
    assert st.preflight == "refused" and [r.precondition.kind for r in st.preconditions] == [
        "worker-executable", "selector-matches", "version-skew"]


async def test_an_unknown_canary_is_refused_before_any_write(time_skipping_env: Any) -> None:
    """Issue 39 case 7: an unknown --canary node ends refused (exit 2 at the CLI), not failed."""
    world = World(infra=2)
    worker, handle = await start(time_skipping_env, world, upgrade_input("region=infra", BatchPolicy(canary=["nosuch-node"])))
    async with worker:
        result: NodeUpgradeResult = await handle.result()
    assert result.outcome == "refused" and "nosuch-node" in " ".join(result.problems), result
    assert world.events == []


async def test_a_kubelet_newer_than_the_control_plane_is_refused(time_skipping_env: Any) -> None:
    world = World(infra=2)
    worker, handle = await start(time_skipping_env, world, upgrade_input("region=infra", BatchPolicy()),
                                 failing={"version-skew": f"kubelet {NEW} would be newer than the API server (v1.9.1)"})
    async with worker:
        result: NodeUpgradeResult = await handle.result()
    assert result.outcome == "refused" and "newer than the API server" in result.problems[0]
    assert world.events == []


def test_an_action_without_the_node_is_refused_at_the_edge() -> None:
    with pytest.raises(ValueError, match=r"does not name the node"):
        upgrade_input("region=infra", BatchPolicy()).model_copy(update={}).model_validate(
            {**upgrade_input("region=infra", BatchPolicy()).model_dump(), "action": {"argv": ["ansible-playbook", "upgrade_nodes.yml"]}})


async def test_dry_run_plans_and_changes_nothing(time_skipping_env: Any) -> None:
    world = World(infra=3)
    worker, handle = await start(time_skipping_env, world, upgrade_input("region=infra", BatchPolicy(serial="50%"), dry_run=True))
    async with worker:
        result: NodeUpgradeResult = await handle.result()
    assert result.outcome == "dry-run" and "batches: [infra1][infra2][infra3]" in result.message
    assert world.events == []


async def test_the_alert_gate_holds_every_node_start_until_the_alerts_clear(time_skipping_env: Any) -> None:
    """Issue 37 on the node upgrade: with ``alerts`` (``--alert-gate URL``) no node starts while
    Prometheus answers a blocking alert; the status names it; once it clears the upgrade goes on."""
    from tests.kit.test_kit_alerts import CLEAR, FIRING, URL, AlertsFake

    from workflows.kit.inputs import AlertGatePolicy

    env = time_skipping_env
    world = World(infra=2)
    fake = AlertsFake(FIRING, CLEAR, hold_from=2)  # the second ask waits for the test, then answers clear
    tq = f"nu-{uuid.uuid4().hex[:8]}"
    inp = upgrade_input("region=infra", BatchPolicy(serial="50%"), alerts=AlertGatePolicy(url=URL, poll_seconds=60))
    async with Worker(env.client, task_queue=tq, workflows=[NodeUpgradeWorkflow, NodeUpgradeNodeWorkflow, LeaseWorkflow],
                      activities=[*world.activities(), preflight_activity(), fake.activity()]):
        handle = await env.client.start_workflow(NodeUpgradeWorkflow.run, inp, id=f"node-upgrade-{uuid.uuid4().hex[:6]}", task_queue=tq)
        for _ in range(20):  # blocked once; the gate asks again after its poll (skipped time)
            if fake.held.is_set():
                break
            await env.sleep(15)
        assert fake.held.is_set(), fake.calls
        st: NodeUpgradeStatus = await handle.query(NodeUpgradeWorkflow.status)
        assert world.actions == [] and all(n.phase == "pending" for n in st.nodes.values()), (world.actions, st.nodes)
        waits = [h for name, h in st.health.items() if name.startswith("alerts/") and h.state == "waiting"]
        assert waits and "KubeNodeNotReady" in waits[0].last, st.health
        fake.release.set()
        result: NodeUpgradeResult = await handle.result()
    assert result.outcome == "completed" and sorted(world.actions) == ["infra1", "infra2"], result.message
    assert all(c.url == URL for c in fake.calls) and len(fake.calls) >= 3  # asked again before each later start
