"""Issue 37: the alert gate on the procedures that are not a node window of their own, on the
time-skipping server with a scripted ``check_alerts`` (test_kit_alerts.AlertsFake): the standalone
drain cordons nothing while an alert blocks; the runtime migration starts no node's migration; the
nodeSelector migration patches nothing; the network migration reboots no batch (and hands its gate
to the takeover rollout); the cluster upgrade starts no phase that takes nodes down while one
blocks, and hands its gate to the node phase, which asks again before its node. Without a gate
nobody is asked."""

from __future__ import annotations

import uuid
from typing import Any

from tests.support.kit_fakes import poll, preflight_activity
from temporalio import activity
from temporalio.worker import Worker
from tests.machineconfig.test_blocked_drain import DecisionFake
from tests.kit.test_kit_alerts import CLEAR, FIRING, NODE_LINE, URL, AlertsFake
from tests.node_upgrade.test_upgrade_nodes_wf import World, upgrade_input

from activities.alerts.models import CHECK_ALERTS, AlertsAnswer, CheckAlertsInput
from workflows import WORKFLOWS
from workflows.cluster_upgrade.models import ClusterUpgradeInput, ClusterUpgradePlan, ClusterUpgradeResult
from workflows.cluster_upgrade.workflow import ClusterUpgradeWorkflow
from workflows.drain import NodeDrainWorkflow
from workflows.drain.models import NodeDrainInput, NodeDrainResult
from workflows.kit.inputs import AlertGatePolicy
from workflows.kit.lease import LeaseWorkflow
from workflows.node_upgrade import NodeUpgradeNodeWorkflow, NodeUpgradeWorkflow
from workflows.node_upgrade.models import BatchPolicy

POLICY = AlertGatePolicy(url=URL, filter="^Watchdog$", poll_seconds=60)


async def held(env: Any, fake: AlertsFake) -> None:
    """Skip time until the fake's held ask is in flight (the gate asked again after its poll)."""
    for _ in range(40):
        if fake.held.is_set():
            return
        await env.sleep(15)
    raise AssertionError(f"the gate never asked again: {len(fake.calls)} call(s)")


async def test_the_drain_cordons_nothing_while_an_alert_blocks(time_skipping_env: Any, wf_task_queue: str) -> None:
    env, cluster = time_skipping_env, DecisionFake({"worker": 1})
    fake = AlertsFake(FIRING, CLEAR, hold_from=2)
    async with Worker(env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=[*cluster.activities(), fake.activity()]):
        handle = await env.client.start_workflow(
            NodeDrainWorkflow.run, NodeDrainInput(node="worker-0", search_attributes=False, drain={"wait_seconds": 1}, alerts=POLICY),
            id=f"drain-{uuid.uuid4().hex[:8]}", task_queue=wf_task_queue, result_type=NodeDrainResult)
        st = await poll(handle, lambda s: s["health"].get("alerts/node/worker-0", {}).get("state") == "waiting"
                        and bool(s["health"]["alerts/node/worker-0"]["last"]))
        assert st["node"]["step"] == "alerts" and NODE_LINE in st["health"]["alerts/node/worker-0"]["last"], st
        assert NODE_LINE in st["waiting_for"], st["waiting_for"]
        await held(env, fake)
        assert cluster.called("cordon_node") == [] and not cluster.nodes["worker-0"].unschedulable
        fake.release.set()
        result = await handle.result()
    assert result.outcome == "completed" and result.drained, result.message
    assert [c.node for c in cluster.called("cordon_node")] == ["worker-0"] and len(fake.calls) == 2


async def test_the_drain_without_a_gate_asks_nobody(time_skipping_env: Any, wf_task_queue: str) -> None:
    env, cluster, fake = time_skipping_env, DecisionFake({"worker": 1}), AlertsFake(FIRING)
    async with Worker(env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=[*cluster.activities(), fake.activity()]):
        result = await env.client.execute_workflow(
            NodeDrainWorkflow.run, NodeDrainInput(node="worker-0", search_attributes=False, drain={"wait_seconds": 1}),
            id=f"drain-{uuid.uuid4().hex[:8]}", task_queue=wf_task_queue, result_type=NodeDrainResult)
    assert result.outcome == "completed" and fake.calls == []


async def test_the_cluster_upgrade_starts_no_node_phase_while_an_alert_blocks(time_skipping_env: Any) -> None:
    env, world = time_skipping_env, World(infra=1)
    fake = AlertsFake(FIRING, CLEAR, hold_from=2)
    tq = f"cu-{uuid.uuid4().hex[:8]}"
    plan = ClusterUpgradePlan(infra_nodes=upgrade_input("region=infra", BatchPolicy(serial=1)))
    inp = ClusterUpgradeInput(plan=plan, search_attributes=False, alerts=POLICY)
    async with Worker(env.client, task_queue=tq, workflows=[ClusterUpgradeWorkflow, NodeUpgradeWorkflow, NodeUpgradeNodeWorkflow, LeaseWorkflow],
                      activities=[*world.activities(), preflight_activity(), fake.activity()]):
        handle = await env.client.start_workflow(ClusterUpgradeWorkflow.run, inp, id=f"cu-{uuid.uuid4().hex[:6]}", task_queue=tq,
                                                 result_type=ClusterUpgradeResult)
        await held(env, fake)
        st = await handle.query("status", result_type=dict)
        phase = next(p for p in st["phases"] if p["name"] == "infra-nodes")
        assert phase["state"] == "pending" and phase["child_id"] is None, phase
        board = st["health"]["alerts/phase/infra-nodes"]
        assert board["state"] == "waiting" and NODE_LINE in board["last"], st["health"]
        assert NODE_LINE in st["waiting_for"] and world.events == [], st["waiting_for"]
        fake.release.set()
        result = await handle.result()
    assert result.outcome == "completed", result.message
    assert world.actions == ["infra1"]
    # Two asks at the phase gate, then the node phase asked with the same policy before its node.
    assert len(fake.calls) == 3 and all(c.url == URL and c.filter == "^Watchdog$" for c in fake.calls)


async def test_the_runtime_migration_starts_no_node_while_an_alert_blocks(time_skipping_env: Any) -> None:
    from tests.runtime_migration.test_runtime_migration_wf import World as RuntimeWorld
    from tests.runtime_migration.test_runtime_migration_wf import _approve, _input, _run
    from workflows.runtime_migration.models import RuntimeMigrationStatus

    env, fake = time_skipping_env, AlertsFake(FIRING, CLEAR, hold_from=2)

    class GatedWorld(RuntimeWorld):
        def activities(self) -> list[Any]:
            return [*super().activities(), fake.activity()]

    world = GatedWorld()
    inp = _input()
    inp.alerts = POLICY

    async def body(h: Any) -> None:
        await held(env, fake)
        st = await h.query("status", result_type=RuntimeMigrationStatus)
        assert st.stage == "nodes" and st.current is None and st.nodes["g1"].step in (None, ""), st.nodes["g1"]
        assert st.health["alerts/node/g1"].state == "waiting" and NODE_LINE in st.health["alerts/node/g1"].last, st.health
        destructive = [c for c in world.log if c[:2] in (["yum", "-y"], ["systemctl", "reboot"], ["rm", "-rf"])]
        assert destructive == [] and world.reboots == 0
        fake.release.set()
        await _approve(env, h, "g1/destructive/approve-migration")
        await _approve(env, h, "g1/destructive/approve-delete")
        await _approve(env, h, "post-check/install")

    result = await _run(env, world, body, inp)
    assert result.outcome == "completed", result.message
    assert world.reboots == 1 and len(fake.calls) == 2


async def test_the_network_migration_reboots_no_batch_while_an_alert_blocks(time_skipping_env: Any) -> None:
    from tests.network_migration.test_network_migration_wf import Cluster, inp, run

    answers = [FIRING, FIRING, CLEAR]
    rebooted_when_asked: list[int] = []

    class GatedCluster(Cluster):
        def activities(self) -> list[Any]:
            @activity.defn(name=CHECK_ALERTS)
            async def check_alerts(_: CheckAlertsInput) -> AlertsAnswer:
                rebooted_when_asked.append(len(self.reboots))
                return answers.pop(0) if len(answers) > 1 else answers[0]

            return [*super().activities(), check_alerts]

    c = GatedCluster(controller_dead=True)
    result, st = await run(time_skipping_env, c, inp("alerts", alerts=POLICY), {"takeover", "cleanup", "delete-broken-pods"})
    assert result.outcome == "completed", result.message
    batches = len(result.plan)
    # Blocked twice before the first batch (nothing rebooted), then once before each batch.
    assert rebooted_when_asked[:3] == [0, 0, 0] and len(rebooted_when_asked) == batches + 2, rebooted_when_asked
    assert sorted(c.reboots) == sorted(c.current)
    first = st.health["alerts/reboots/batch-1"]
    assert (first.state, first.polls) == ("ok", 3), first
    assert [(r.gate_id, r.action) for r in st.gate_history if r.gate_id.startswith("alerts/")] == [
        ("alerts/reboots/batch-1/1", "opened"), ("alerts/reboots/batch-1/1", "cancelled")]
    # The takeover rollout got the same gate (it asks before each of its nodes).
    assert c.child_runs and c.child_runs[0]["alerts"]["url"] == URL


async def test_the_node_selector_migration_patches_nothing_while_an_alert_blocks(time_skipping_env: Any) -> None:
    from tests.node_selectors.test_upgrade_node_selectors_wf import REF, World as SelectorWorld, inp as selector_input
    from workflows.node_selectors import NodeSelectorMigrationWorkflow
    from workflows.node_selectors.models import NodeSelectorMigrationResult

    env, fake = time_skipping_env, AlertsFake(FIRING, CLEAR, hold_from=2)
    world = SelectorWorld()
    tq = f"ns-{uuid.uuid4().hex[:8]}"
    async with Worker(env.client, task_queue=tq, workflows=[NodeSelectorMigrationWorkflow], activities=[*world.activities(), fake.activity()]):
        handle = await env.client.start_workflow(NodeSelectorMigrationWorkflow.run, selector_input(revert_window_seconds=0, alerts=POLICY),
                                                 id=f"ns-{uuid.uuid4().hex[:6]}", task_queue=tq, result_type=NodeSelectorMigrationResult)
        await held(env, fake)
        st = await handle.query("status", result_type=dict)
        board = st["health"]["alerts/selector/DeploymentConfig default/docker-registry"]
        assert board["state"] == "waiting" and NODE_LINE in board["last"], st["health"]
        assert world.obj(REF)["spec"]["template"]["spec"]["nodeSelector"] == {"region": "infra"}  # not patched yet
        fake.release.set()
        result = await handle.result()
    assert result.outcome == "completed", result.message
    assert world.obj(REF)["spec"]["template"]["spec"]["nodeSelector"] == {"node-role.kubernetes.io/infra": "true"}
    assert len(fake.calls) == 2


async def test_the_control_plane_upgrade_restarts_no_master_while_an_alert_blocks(time_skipping_env: Any) -> None:
    from tests.control_plane.test_upgrade_control_plane_wf import Masters, cp_input

    from workflows.control_plane import ControlPlaneUpgradeWorkflow
    from workflows.control_plane.models import ControlPlaneResult

    env, world = time_skipping_env, Masters()
    fake = AlertsFake(FIRING, CLEAR, hold_from=2)
    tq = f"cp-{uuid.uuid4().hex[:8]}"
    async with Worker(env.client, task_queue=tq, workflows=[ControlPlaneUpgradeWorkflow, LeaseWorkflow],
                      activities=[*world.activities(), fake.activity()]):
        handle = await env.client.start_workflow(ControlPlaneUpgradeWorkflow.run, cp_input(alerts=POLICY),
                                                 id=f"cp-{uuid.uuid4().hex[:6]}", task_queue=tq, result_type=ControlPlaneResult)
        st = await poll(handle, lambda s: s["health"].get("alerts/master/m1", {}).get("state") == "waiting"
                        and bool(s["health"]["alerts/master/m1"]["last"]))
        assert NODE_LINE in st["health"]["alerts/master/m1"]["last"], st["health"]
        await held(env, fake)
        assert world.log == [], world.log  # nothing on any master while the alert fires
        fake.release.set()
        result = await handle.result()
    assert result.outcome == "completed", result.message
    assert world.restarts() == ["m1", "m2", "m3"] and len(fake.calls) >= 4  # asked again before each master
