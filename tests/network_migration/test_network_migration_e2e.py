"""The SDN→OVN migration end to end (issue 15): real dev server, worker process, clustersim
``r1-sdn-to-ovn`` with its cluster-network-operator and machine-config-controller models."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from tests.support.harness import APPROVER, forget_dead_worker
from workflows.kit.models import ApproveInput, GateState
from workflows.network_migration.models import NetworkMigrationInput, NetworkMigrationResult, NetworkMigrationStatus

pytestmark = pytest.mark.e2e

SCALE = 0.05
MCP = "machineconfigpools.machineconfiguration.openshift.io"
NET_CFG = "networks.config.openshift.io"
NET_OP = "networks.operator.openshift.io"


def fast(**kw: Any) -> NetworkMigrationInput:
    base = dict(cluster="r1", approvals={"requested_by": "e2e"}, poll_seconds=1.0, stall_seconds=8.0, ready_timeout_seconds=120.0,
                pools_timeout_seconds=300.0, unknown_grace_seconds=15.0, search_attributes=False, calls={"short_call_seconds": 20.0})
    base.update(kw)
    return NetworkMigrationInput(**base)


class PoolsWatch:
    """When (Unix time) every pool last became Updated on a config with the OVN MachineConfig."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self.all_updated_at: float | None = None
        self.sub = sim.store.subscribe([MCP])
        self.task = asyncio.get_running_loop().create_task(self._run())

    def _settled(self) -> bool:
        for p in self.sim.store.list(MCP):
            conds = {c["type"]: c["status"] for c in p["status"]["conditions"]}
            ovn = any(s["name"].endswith("-ovn") for s in p["spec"]["configuration"]["source"])
            if not ovn or conds.get("Updated") != "True" or p["status"]["configuration"]["name"] != p["spec"]["configuration"]["name"]:
                return False
        return True

    async def _run(self) -> None:
        async for _ in self.sub:
            if self.all_updated_at is None and self._settled():
                self.all_updated_at = time.time()

    def stop(self) -> None:
        self.sub.close()
        self.task.cancel()


async def start(client: Any, task_queue: str, inp: NetworkMigrationInput) -> Any:
    return await client.start_workflow("NetworkMigrationWorkflow", inp, id=f"network-migration-e2e-{uuid.uuid4().hex[:8]}",
                                       task_queue=task_queue, result_type=NetworkMigrationResult)


async def drive(handle: Any, approve: set[str], timeout: float = 600.0, on_status: Any = None) -> NetworkMigrationResult:
    """Approve the listed gates when they wait; return the result."""
    end = time.monotonic() + timeout
    result_task = asyncio.ensure_future(handle.result())
    while not result_task.done():
        if time.monotonic() > end:
            result_task.cancel()
            raise AssertionError("migration did not finish in time")
        try:
            st = await handle.query("status", result_type=NetworkMigrationStatus)
        except Exception:  # noqa: BLE001 - a query can race with the end of the run
            st = None
        if st is not None:
            if on_status is not None:
                await on_status(st)
            for g in st.gates:
                if g.state == GateState.WAITING and g.id in approve:
                    await handle.execute_update("approve", ApproveInput(gate_id=g.id, identity=APPROVER, comment="e2e"))
        await asyncio.wait({result_task}, timeout=0.5)
    return result_task.result()


def network_type_patches(sim: Any) -> list[Any]:
    return [e for e in sim.requests.entries(verb="patch", resource="networks", group="config.openshift.io") if e.code == 200]


async def test_healthy_migration_switches_only_after_every_pool_updated(sim_factory, worker_for, temporal_client, task_queue) -> None:
    sim = await sim_factory("r1-sdn-to-ovn", time_scale=SCALE)
    watch = PoolsWatch(sim)
    await worker_for(sim)
    # The controller is healthy here: a stall window far above its pace, so that a loaded machine
    # (CI timed this test out once) never opens the takeover gate this test does not approve.
    handle = await start(temporal_client, task_queue, fast(max_unavailable=2, stall_seconds=90.0))
    result = await drive(handle, {"cleanup", "delete-broken-pods"})
    watch.stop()
    assert result.outcome == "completed", result.message
    patches = network_type_patches(sim)
    assert len(patches) == 1, "one switch of spec.networkType"
    assert watch.all_updated_at is not None and patches[0].time >= watch.all_updated_at, "switch only after every pool Updated"
    assert sim.components["cno"].switches[0]["pools_settled"] is True
    cfg = sim.store.get(NET_CFG, "cluster")
    assert cfg["status"]["networkType"] == "OVNKubernetes"
    op = sim.store.get(NET_OP, "cluster")
    assert "migration" not in op["spec"] and "openshiftSDNConfig" not in op["spec"]["defaultNetwork"]
    assert sim.store.try_get("namespaces", "openshift-sdn") is None or sim.store.get("namespaces", "openshift-sdn")["metadata"].get("deletionTimestamp")
    assert all(not p["spec"]["paused"] for p in sim.store.list(MCP)), "pools unpaused"
    assert {r.node for r in result.reboots if r.state == "done"} == {n["metadata"]["name"] for n in sim.store.list("nodes")}
    assert all(r.commands_sent == 1 for r in result.reboots)
    # Every node rebooted after the switch, so every sandbox was recreated on OVN: nothing broken.
    assert not any(r.gate_id == "delete-broken-pods" for r in result.gate_history), "no broken pods, no delete gate"


async def test_rollout_refused_while_the_migration_holds_the_cluster(sim_factory, worker_for, temporal_client, task_queue) -> None:
    """A real MachineConfig rollout of pool worker started while the migration waits at its
    cleanup gate (it holds cluster/r1, covering every pool and node) fails with LeaseHeld naming
    the migration, before it changes anything; the migration then completes."""
    from temporalio.client import WorkflowFailureError

    from workflows.machineconfig.models import MachineConfigRolloutInput

    sim = await sim_factory("r1-sdn-to-ovn", time_scale=SCALE)
    await worker_for(sim)
    handle = await start(temporal_client, task_queue, fast(max_unavailable=2))
    outcome: list[str] = []

    async def on_status(st: NetworkMigrationStatus) -> None:
        if outcome or not any(g.id == "cleanup" and g.state == GateState.WAITING for g in st.gates):
            return
        assert "cluster/r1" in st.leases and "pool/r1/worker" in st.leases
        old = st.baseline["worker"]  # somebody rolling the worker pool back to its old config
        before = len([e for e in sim.requests.entries() if e.verb in MUTATING])
        rollout = await temporal_client.start_workflow(
            "MachineConfigRolloutWorkflow", MachineConfigRolloutInput(cluster="r1", pools=["worker"], target_configs={"worker": old},
                                                                      approvals={"requested_by": "e2e"}, search_attributes=False),
            id=f"rollout-r1-{uuid.uuid4().hex[:6]}", task_queue=task_queue)
        try:
            await rollout.result()
            outcome.append("not refused")
        except WorkflowFailureError as err:
            cause = err.cause
            outcome.append(f"{getattr(cause, 'type', '')}: {cause}")
        assert len([e for e in sim.requests.entries() if e.verb in MUTATING]) == before, "the refused rollout wrote nothing"
        await handle.execute_update("approve", ApproveInput(gate_id="cleanup", identity=APPROVER, comment="e2e"))

    result = await drive(handle, {"delete-broken-pods"}, on_status=on_status)
    assert outcome and outcome[0].startswith("LeaseHeld: ") and handle.id in outcome[0], outcome
    assert result.outcome == "completed", result.message


def boot_changes_after_switch(sim: Any) -> tuple[dict[str, int], Any]:
    """Per node, how many times its boot id changed after the CNO applied the switch."""
    counts: dict[str, int] = {}
    sub = sim.store.subscribe(["nodes"])

    async def run() -> None:
        async for ev in sub:
            old = ((ev.old or {}).get("status") or {}).get("nodeInfo", {}).get("bootID")
            new = (ev.object.get("status") or {}).get("nodeInfo", {}).get("bootID")
            if sim.components["cno"].switches and old and new and old != new:
                counts[ev.object["metadata"]["name"]] = counts.get(ev.object["metadata"]["name"], 0) + 1

    task = asyncio.get_running_loop().create_task(run())

    def stop() -> None:
        sub.close()
        task.cancel()

    return counts, stop


async def test_controller_killed_mid_rollout_takeover_then_switch(sim_factory, worker_for, temporal_client, task_queue) -> None:
    sim = await sim_factory("r1-sdn-to-ovn", time_scale=SCALE, component_sections={"mcc": {"kill_after_nodes": 2}})
    watch = PoolsWatch(sim)
    await worker_for(sim)
    handle = await start(temporal_client, task_queue, fast(stall_seconds=5.0))
    seen_takeover_gate = []

    async def on_status(st: NetworkMigrationStatus) -> None:
        if any(g.id == "takeover" for g in st.gates) and not seen_takeover_gate:
            seen_takeover_gate.append(st.guard_behind)

    result = await drive(handle, {"takeover", "cleanup", "delete-broken-pods"}, on_status=on_status)
    watch.stop()
    assert not sim.components["mcc"].running, "the controller stayed dead: lockkeeper finished the pools"
    assert seen_takeover_gate and seen_takeover_gate[0], "the stall opened the takeover gate, naming what is behind"
    assert result.outcome == "completed", result.message
    st = await handle.query("status", result_type=NetworkMigrationStatus)
    assert st.takeovers, "the MachineConfig rollout ran as a child"
    patches = network_type_patches(sim)
    assert len(patches) == 1 and watch.all_updated_at is not None and patches[0].time >= watch.all_updated_at
    assert sim.store.get(NET_CFG, "cluster")["status"]["networkType"] == "OVNKubernetes"


async def test_premature_switch_reproduces_r1_and_the_guard_refuses_it(sim_factory) -> None:
    """With the early-switch fault a forced patch by the test breaks the cluster as in R1; the
    guard, asked at that moment, refuses and names what is behind."""
    from activities.kube.gateway import KubeGateway
    from activities.network_migration.activities import NetworkMigrationActivities
    from activities.network_migration.models import PoolsSettledInput

    sim = await sim_factory("r1-sdn-to-ovn", time_scale=SCALE, component_sections={"cno": {"early_switch": True}})
    gw = KubeGateway.from_kubeconfig(str(sim.kubeconfig_path))
    acts = NetworkMigrationActivities(lambda: gw)
    baseline = {p["metadata"]["name"]: p["spec"]["configuration"]["name"] for p in sim.store.list(MCP)}
    await asyncio.to_thread(gw.patch, "Network.operator.openshift.io", "cluster", {"spec": {"migration": {"networkType": "OVNKubernetes"}}})
    end = time.monotonic() + 60
    while len(sim.components["mcc"].handed_out) < 3 and time.monotonic() < end:
        await asyncio.sleep(0.05)
    verdict = await asyncio.to_thread(acts.check_pools_settled, PoolsSettledInput(baseline=baseline))
    # What is behind depends on how far the controller got by now (a slow machine: further):
    # a pool not Updated yet, or nodes not on their pool's new rendered config.
    assert not verdict.ok and verdict.behind
    assert all(b.startswith(("pool ", "node ")) for b in verdict.behind), verdict.behind
    await asyncio.to_thread(gw.patch, "Network", "cluster", {"spec": {"networkType": "OVNKubernetes"}})  # the premature patch
    while not sim.components["cno"].switches and time.monotonic() < end:
        await asyncio.sleep(0.05)
    assert sim.components["cno"].switches[0]["pools_settled"] is False

    def crashlooping() -> set[str]:
        return {p["spec"]["nodeName"] for p in sim.store.list("pods", "openshift-ovn-kubernetes")
                for c in p["status"].get("containerStatuses") or []
                if (c.get("state") or {}).get("waiting", {}).get("reason") == "CrashLoopBackOff"}

    while not crashlooping() and time.monotonic() < end:
        await asyncio.sleep(0.05)
    assert sim.agents is not None
    without = {n["metadata"]["name"] for n in sim.store.list("nodes")
               if n["metadata"]["annotations"]["machineconfiguration.openshift.io/currentConfig"] not in sim.agents.net.ovn_configs}
    assert crashlooping() and crashlooping() <= without
    gw.close()


async def test_premature_switch_breaks_only_pods_on_nodes_not_rebooted_since(sim_factory) -> None:
    """R1's stale pod IPs: after a premature switch the controller finishes the pools (rebooting
    the nodes behind); the pods still broken are exactly the pods created before the switch on
    nodes that had rebooted into the OVN config before it (their sandboxes are the old plugin's),
    as the gate's input (``read_migration_state`` with ``count_pods``) reports them."""
    from activities.kube.gateway import KubeGateway
    from activities.network_migration.activities import NetworkMigrationActivities
    from activities.network_migration.models import MigrationStateInput

    sim = await sim_factory("r1-sdn-to-ovn", time_scale=SCALE, component_sections={"cno": {"early_switch": True}})
    gw = KubeGateway.from_kubeconfig(str(sim.kubeconfig_path))
    acts = NetworkMigrationActivities(lambda: gw)
    assert sim.agents is not None
    net = sim.agents.net

    def current(n: dict[str, Any]) -> str:
        return n["metadata"]["annotations"]["machineconfiguration.openshift.io/currentConfig"]

    await asyncio.to_thread(gw.patch, "Network.operator.openshift.io", "cluster", {"spec": {"migration": {"networkType": "OVNKubernetes"}}})
    end = time.monotonic() + 120
    while time.monotonic() < end and not any(current(n) in net.ovn_configs for n in sim.store.list("nodes")):
        await asyncio.sleep(0.05)
    await asyncio.to_thread(gw.patch, "Network", "cluster", {"spec": {"networkType": "OVNKubernetes"}})  # premature
    while not sim.components["cno"].switches and time.monotonic() < end:
        await asyncio.sleep(0.05)
    switched_at = net.switched_at
    boot_at = dict(net.boot_at_switch)
    early = {n["metadata"]["name"] for n in sim.store.list("nodes") if current(n) in net.ovn_configs}
    assert early and len(early) < len(boot_at), f"some nodes rebooted before the switch, some not: {early}"

    def boot(n: dict[str, Any]) -> str:
        return n["status"]["nodeInfo"]["bootID"]

    def done() -> bool:
        nodes = sim.store.list("nodes")
        return all(current(n) in net.ovn_configs and boot(n) != boot_at[n["metadata"]["name"]] for n in nodes
                   if n["metadata"]["name"] not in early)

    end = time.monotonic() + 240  # the controller's reboots after the switch: its own deadline (slow machines)
    while not done() and time.monotonic() < end:
        await asyncio.sleep(0.1)
    assert done(), "the controller finished the pools after the switch"
    await asyncio.sleep(1.0)  # the kubelet agent recomputes pod status
    not_rebooted = {n["metadata"]["name"] for n in sim.store.list("nodes") if boot(n) == boot_at[n["metadata"]["name"]]}
    assert not_rebooted == early
    expected = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in sim.store.list("pods")
                if not p["spec"].get("hostNetwork") and p["spec"].get("nodeName") in not_rebooted
                and p["metadata"]["creationTimestamp"] < switched_at and not p["metadata"].get("deletionTimestamp")}
    healed = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in sim.store.list("pods")
              if not p["spec"].get("hostNetwork") and p["spec"].get("nodeName") not in not_rebooted
              and p["metadata"]["creationTimestamp"] < switched_at}
    state = await asyncio.to_thread(acts.read_migration_state, MigrationStateInput(count_pods=True))
    assert expected, "pods on the nodes rebooted before the switch"
    assert healed and not healed & set(state.broken_pods), "pre-switch pods on nodes rebooted since are not broken"
    assert set(state.broken_pods) == expected and state.broken_pod_count == len(expected)
    gw.close()


async def test_worker_killed_after_switch_and_during_reboots(sim_factory, worker_for, temporal_client, task_queue) -> None:
    sim = await sim_factory("r1-sdn-to-ovn", time_scale=SCALE)
    counts, stop_counts = boot_changes_after_switch(sim)
    worker = await worker_for(sim)
    handle = await start(temporal_client, task_queue, fast(max_unavailable=1))  # eight reboot batches: room for a kill
    kills: list[str] = []

    async def on_status(st: NetworkMigrationStatus) -> None:
        if st.switched and not kills:
            kills.append("after the switch")
            await worker.kill()
            await forget_dead_worker(temporal_client, task_queue)
            await worker.start()
        elif len(kills) == 1 and any(r.state == "done" for r in st.reboots) and not all(r.state == "done" for r in st.reboots):
            kills.append("during the reboots")
            await worker.kill()
            await forget_dead_worker(temporal_client, task_queue)
            await worker.start()

    result = await drive(handle, {"cleanup", "delete-broken-pods"}, on_status=on_status)
    stop_counts()
    assert kills == ["after the switch", "during the reboots"]
    assert result.outcome == "completed", result.message
    nodes = {n["metadata"]["name"] for n in sim.store.list("nodes")}
    assert counts == {n: 1 for n in nodes}, f"every node rebooted exactly once after the switch: {counts}"
    # A killed worker's reboot command is given up after a heartbeat timeout, not after the
    # command's whole bound (90 s): each one was scheduled with a short heartbeat timeout.
    reboots = [ev.activity_task_scheduled_event_attributes async for ev in handle.fetch_history_events()
               if ev.HasField("activity_task_scheduled_event_attributes")
               and ev.activity_task_scheduled_event_attributes.activity_type.name == "run_node_command"]
    assert len(reboots) >= len(nodes)
    assert all(0 < a.heartbeat_timeout.ToTimedelta().total_seconds() <= 10 for a in reboots), reboots[0].heartbeat_timeout


async def test_revert_before_cleanup_restores_sdn(sim_factory, worker_for, temporal_client, task_queue) -> None:
    sim = await sim_factory("r1-sdn-to-ovn", time_scale=SCALE)
    await worker_for(sim)
    handle = await start(temporal_client, task_queue, fast(max_unavailable=2))
    asked: list[str] = []

    async def on_status(st: NetworkMigrationStatus) -> None:
        if any(g.id == "cleanup" and g.state == GateState.WAITING for g in st.gates) and not asked:
            asked.append("revert")
            await handle.execute_update("revert", {"identity": APPROVER, "reason": "e2e"}, result_type=dict)

    result = await drive(handle, {"delete-broken-pods"}, on_status=on_status)
    assert asked and result.outcome == "reverted", result.message
    assert sim.store.get(NET_CFG, "cluster")["status"]["networkType"] == "OpenShiftSDN"
    assert sim.store.get(NET_CFG, "cluster")["spec"]["networkType"] == "OpenShiftSDN"
    assert "migration" not in sim.store.get(NET_OP, "cluster")["spec"]
    assert len(sim.store.list("pods", "openshift-sdn")) == 8 and sim.store.list("pods", "openshift-ovn-kubernetes") == []
    # the rollback's last step: the namespace of the plugin no longer run is deleted
    deletes = [e for e in sim.requests.entries() if e.verb == "delete" and e.resource == "namespaces"]
    assert [(e.name, e.code) for e in deletes] == [("openshift-ovn-kubernetes", 200)], deletes
    assert sim.store.try_get("namespaces", "openshift-ovn-kubernetes") is None
    assert all(not p["spec"]["paused"] for p in sim.store.list(MCP))


@pytest.mark.timeout(600)
async def test_revert_during_the_reboots_unpauses_the_pools_as_before_the_run(
        dev_server: Any, sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str) -> None:
    """Issue 39: ``lockkeeper revert ID`` while the nodes reboot (pools paused by the run). The
    rollback unpauses each pool through the run's own pause record (not a second record whose
    original is ``paused``), reads it back, and the run ends ``reverted`` with every pool's
    ``spec.paused`` as before the run. Every record is closed: ``revert --full`` of the reverted
    run then says there is nothing left to revert (exit 2), not that it has no full revert."""
    from tests.vxlan_port.test_e2e_cli import lk

    sim = await sim_factory("r1-sdn-to-ovn", time_scale=SCALE)
    await worker_for(sim)
    before = {p["metadata"]["name"]: bool(p["spec"].get("paused")) for p in sim.store.list(MCP)}
    handle = await start(temporal_client, task_queue, fast(max_unavailable=1))  # eight reboot batches: a revert lands among them
    asked: list[dict[str, bool]] = []

    async def on_status(st: NetworkMigrationStatus) -> None:
        if not asked and st.step == "reboots" and any(r.state == "done" for r in st.reboots) \
                and not all(r.state == "done" for r in st.reboots):
            asked.append({p["metadata"]["name"]: bool(p["spec"].get("paused")) for p in sim.store.list(MCP)})
            code, out, err = await lk(dev_server.address, task_queue, "revert", handle.id, "--identity", "bob")
            assert code == 0, out + err

    result = await drive(handle, set(), on_status=on_status)
    assert asked and all(asked[0].values()), asked
    assert result.outcome == "reverted", result.message
    assert {p["metadata"]["name"]: bool(p["spec"].get("paused")) for p in sim.store.list(MCP)} == before
    cfg = sim.store.get(NET_CFG, "cluster")
    assert cfg["spec"]["networkType"] == cfg["status"]["networkType"] == "OpenShiftSDN"
    assert "migration" not in sim.store.get(NET_OP, "cluster")["spec"]
    assert result.open_records == [], [e.name for e in result.open_records]
    code, out, err = await lk(dev_server.address, task_queue, "revert", handle.id, "--full", "--identity", "bob")
    assert code == 2 and "left no recorded change to revert" in err, out + err


MUTATING = {"create", "update", "patch", "delete", "deletecollection"}


async def test_type_already_set_changes_nothing(sim_factory, worker_for, temporal_client, task_queue) -> None:
    # The type already set.
    sim = await sim_factory("r1-sdn-to-ovn", time_scale=SCALE, component_sections={"mcc": {"running": False}})
    sim.store.mutate(NET_CFG, "cluster", None, lambda o: o["spec"].__setitem__("networkType", "OVNKubernetes"))
    await worker_for(sim)
    sim.requests.clear()
    result = await (await start(temporal_client, task_queue, fast())).result()
    assert result.outcome == "refused" and "already OVNKubernetes" in result.message
    assert not [e for e in sim.requests.entries() if e.verb in MUTATING]


async def test_degraded_pool_at_start_changes_nothing(sim_factory, worker_for, temporal_client, task_queue) -> None:
    sim2 = await sim_factory("r1-sdn-to-ovn", time_scale=SCALE)
    sim2.store.mutate("nodes", "qsu-worker-02", None, lambda o: o["metadata"]["annotations"].update({
        "machineconfiguration.openshift.io/state": "Degraded", "machineconfiguration.openshift.io/reason": "disk full"}))
    end = time.monotonic() + 30
    while time.monotonic() < end and not any(c["type"] == "Degraded" and c["status"] == "True"
                                             for c in sim2.store.get(MCP, "worker")["status"]["conditions"]):
        await asyncio.sleep(0.05)
    await worker_for(sim2)
    sim2.requests.clear()
    result = await (await start(temporal_client, task_queue, fast())).result()
    assert result.outcome == "refused" and "pool worker is Degraded" in result.message
    assert not [e for e in sim2.requests.entries() if e.verb in MUTATING]


async def test_reboots_over_ssh(sim_factory, worker_for, temporal_client, task_queue) -> None:
    import json
    from pathlib import Path

    sim = await sim_factory("r1-sdn-to-ovn", time_scale=SCALE)
    env = sim.components["hosts"].client_env()  # type: ignore[attr-defined]
    ssh_map = json.loads(Path(env["CLUSTERSIM_SSH_MAP"]).read_text())
    await worker_for(sim, env=env)
    handle = await start(temporal_client, task_queue, fast(max_unavailable=3, reboot_via="ssh", ssh_hosts=ssh_map, ssh_user="root"))
    result = await drive(handle, {"cleanup", "delete-broken-pods"})
    assert result.outcome == "completed", result.message
    assert all(r.state == "done" and r.commands_sent == 1 for r in result.reboots) and len(result.reboots) == 8


async def test_ssh_reboots_without_a_way_in_are_refused_before_any_write(sim_factory, worker_for, temporal_client, task_queue) -> None:
    """Issue 39 case 5 on ``r1-sdn-to-ovn``: ``--reboot-via ssh`` without the SSH map (the nodes'
    names do not resolve to the simulated sshd). The preflight connects to every node first and
    refuses, one problem per node, and the simulator served no mutating request at all: the
    network type and the migration field stay as they were."""
    sim = await sim_factory("r1-sdn-to-ovn", time_scale=SCALE)
    await worker_for(sim, env=sim.components["hosts"].client_env())  # type: ignore[attr-defined]
    sim.requests.clear()
    result = await (await start(temporal_client, task_queue, fast(reboot_via="ssh", ssh_user="root"))).result()
    assert result.outcome == "refused" and result.message.startswith("refused before any change"), result.message
    assert len(result.problems) == 8 and all("qsu-" in p for p in result.problems), result.problems
    assert not [e for e in sim.requests.entries() if e.verb in MUTATING]
    assert sim.store.get(NET_CFG, "cluster")["spec"]["networkType"] == "OpenShiftSDN"


#: What stays changed after a migration and its rollback (README note 16): the rendered
#: MachineConfigs the machine-config-controller leaves behind, unused (as the fault matrix
#: documents them); the sdn DaemonSet the cluster network operator deleted at the switch and
#: created again for the rollback; the annotation on multus's pod template that restarted multus
#: for the type.
ROLLBACK_DOCUMENTED = ["MachineConfig/rendered-*", "MachineConfig/99-*-ovn", "DaemonSet/openshift-sdn/sdn",
                       "DaemonSet/openshift-multus/multus#/spec/template/metadata/annotations/clustersim.lockkeeper.io~1network-type"]


@pytest.mark.timeout(900)
async def test_revert_full_of_a_run_aborted_past_the_switch_rolls_back_and_reads_back(
        dev_server: Any, sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str) -> None:
    """Issue 39: aborted at its cleanup gate (past the switch), the migration leaves the cluster
    on OVN-Kubernetes; ``lockkeeper revert ID --full`` starts the documented rollback as a new
    run (gate ``rollback``), which ends ``reverted, restored and read back``. The simulator's diff
    against a snapshot taken before the first run is then empty but for what the procedure
    documents (:data:`ROLLBACK_DOCUMENTED`, README note 16): the rendered MachineConfigs the
    controller leaves behind, unused, and the network operator's own work on the way back: the
    ``sdn`` DaemonSet it deleted at the switch created again (a new object), and the multus pod
    template's network-type annotation it sets to restart multus on a type change."""
    from clustersim import snapshots
    from tests.vxlan_port.test_e2e_cli import lk, wf_id_of
    from workflows.kit.models import ControlInput

    sim = await sim_factory("r1-sdn-to-ovn", time_scale=SCALE)
    await worker_for(sim)
    await snapshots.settle(sim.url, timeout=60)
    sid = await snapshots.take(sim.url, "before the migration")
    handle = await start(temporal_client, task_queue, fast(max_unavailable=2))

    async def abort_at_cleanup(st: NetworkMigrationStatus) -> None:
        if any(g.id == "cleanup" and g.state == GateState.WAITING for g in st.gates) and st.phase != "aborting":
            await handle.execute_update("abort", ControlInput(identity=APPROVER, reason="e2e: past the switch"))

    aborted = await drive(handle, {"delete-broken-pods"}, on_status=abort_at_cleanup)
    assert aborted.outcome == "aborted" and "past the point of no return" in aborted.message, aborted.message
    assert sim.store.get(NET_CFG, "cluster")["status"]["networkType"] == "OVNKubernetes"

    code, out, err = await lk(dev_server.address, task_queue, "revert", handle.id, "--identity", "bob")
    assert code == 2 and f"lockkeeper revert {handle.id} --full" in err, out + err
    code, out, err = await lk(dev_server.address, task_queue, "revert", handle.id, "--full", "--identity", "bob", "-o", "json")
    assert code == 0, out + err
    rollback = temporal_client.get_workflow_handle(wf_id_of(out), result_type=NetworkMigrationResult)
    result = await drive(rollback, {"rollback"})
    assert result.outcome == "reverted" and result.message.startswith("reverted, restored and read back"), result.message
    assert any(r.gate_id == "rollback" for r in result.gate_history)
    cfg, op = sim.store.get(NET_CFG, "cluster"), sim.store.get(NET_OP, "cluster")
    assert cfg["spec"]["networkType"] == cfg["status"]["networkType"] == "OpenShiftSDN" and "migration" not in op["spec"]
    assert all(not p["spec"]["paused"] for p in sim.store.list(MCP))
    assert {r.node for r in result.reboots if r.state == "done"} == {n["metadata"]["name"] for n in sim.store.list("nodes")}
    # the rollback run closed every record it took (issue 39): nothing is left for a full revert of it
    assert result.open_records == [], [e.name for e in result.open_records]
    code, out, err = await lk(dev_server.address, task_queue, "revert", rollback.id, "--full", "--identity", "bob")
    assert code == 2 and "left no recorded change to revert" in err, out + err

    await snapshots.settle(sim.url, timeout=60)
    diff = await snapshots.diff(sim.url, sid, ignore=ROLLBACK_DOCUMENTED)
    assert diff.empty, "\n".join(diff.lines())
