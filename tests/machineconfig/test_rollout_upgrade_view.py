"""``lockkeeper status`` of a MachineConfig rollout as ``oc adm upgrade status`` lays it out
(lockkeeper/upgrade_status.py): pool ASSESSMENT/COMPLETION/STATUS counts, per-node ASSESSMENT,
PHASE, VERSION, EST (from this run's done nodes, never ``?`` once one node is done), MESSAGE,
health insights naming the pod, the PodDisruptionBudget and the daemon's deadline; the same in
``-o json``; cheap at 5,000 nodes."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rich.console import Console

from activities.cluster.models import BlockedPod, DrainReport, PDBReport
from lockkeeper.output import status_view
from lockkeeper import upgrade_status
from lockkeeper.upgrade_status import estimates, upgrade_view
from workflows.kit.models import Gate, GateKind, GateState, NodePhase, NodeStatus
from workflows.kit.plan import batches
from workflows.machineconfig.models import NodeDisruption, PoolPlan, RolloutPlan, RolloutStatus

T0 = datetime(2026, 11, 1, 10, 0, tzinfo=UTC)
OLD, NEW = "rendered-worker-aaa", "rendered-worker-bbb"


def rollout(n: int = 6, window: int = 2, *, mcn: bool = True) -> RolloutStatus:
    names = [f"w{i}" for i in range(n)]
    pool = PoolPlan(name="worker", target_config=NEW, size=n + 1, max_unavailable=window, capacity=window, nodes=names,
                    skipped=["w-already"], batches=batches(names, window),
                    disruption=[NodeDisruption(from_config=OLD, nodes=names)])
    return RolloutStatus(workflow_id="mcr-1", plan=RolloutPlan(pools=[pool], machine_config_nodes=mcn),
                         nodes={x: NodeStatus(name=x, pool="worker") for x in names})


def done(st: RolloutStatus, name: str, start_min: float, minutes: float) -> None:
    st.nodes[name] = NodeStatus(name=name, pool="worker", phase=NodePhase.DONE, step="finished",
                                started_at=T0 + timedelta(minutes=start_min),
                                finished_at=T0 + timedelta(minutes=start_min + minutes))


def blocked(st: RolloutStatus, name: str, started: datetime) -> None:
    pdb = PDBReport(namespace="openshift-ingress", name="router-default", min_available=1, current_healthy=1,
                    desired_healthy=1, disruptions_allowed=0, expected_pods=2)
    st.nodes[name] = NodeStatus(
        name=name, pool="worker", phase=NodePhase.BLOCKED, step="drain", started_at=started, blocked_since=started,
        deadline=started + timedelta(hours=1),
        drain_report=DrainReport(blocked_pods=[BlockedPod(
            namespace="openshift-ingress", name="router-default-1", pdbs=[pdb],
            message="Cannot evict pod as it would violate the pod's disruption budget.")]),
        decision_gate=Gate(id=f"drain/{name}", kind=GateKind.DRAIN, node=name, state=GateState.WAITING,
                           opened_at=started + timedelta(minutes=10)))


def test_no_estimate_before_the_first_node_then_one_for_every_remaining_node() -> None:
    st = rollout()
    st.nodes["w0"] = NodeStatus(name="w0", pool="worker", phase=NodePhase.RUNNING, step="drain", started_at=T0)
    view = upgrade_view(st, T0 + timedelta(minutes=1))
    assert {r["est"] for r in view["nodes"]} == {"?"}

    done(st, "w0", 0, 10)  # first node took 10 min; w1 started at minute 5
    st.nodes["w1"] = NodeStatus(name="w1", pool="worker", phase=NodePhase.RUNNING, step="wait-reboot",
                                started_at=T0 + timedelta(minutes=5))
    now = T0 + timedelta(minutes=10)
    est, means = estimates(st, now)
    assert means == {"worker": 600.0}
    # w1: started 5 min ago, 10 min each -> 5 min left; window 2: w2 starts now (+10), w3 when w1 ends (+15), ...
    assert {k: v / 60 for k, v in est.items()} == {"w1": 5.0, "w2": 10.0, "w3": 15.0, "w4": 20.0, "w5": 25.0}
    view = upgrade_view(st, now)
    rows = {r["name"]: r for r in view["nodes"]}
    assert set(rows) == {"w1", "w2", "w3", "w4", "w5"}  # the completed ones are not listed
    assert all(r["est"] != "?" for r in rows.values()) and rows["w5"]["est"] == "+25m"
    assert rows["w1"]["phase"] == "UpdateExecuted/RebootedNode" and rows["w1"]["assessment"] == "Progressing"
    assert rows["w2"]["phase"] == "Pending" and rows["w2"]["assessment"] == "Outdated"
    assert rows["w2"]["version"] == OLD and rows["w2"]["target"] == NEW
    (pool,) = view["pools"]
    assert pool["assessment"] == "Progressing" and pool["completion"] == 28  # 2 of 7 (w-already, w0)
    assert pool["status"] == "7 Total, 6 Available, 1 Progressing, 5 Outdated, 0 Draining, 0 Excluded, 0 Degraded"


def test_without_machine_config_nodes_the_phase_is_lockkeepers_step() -> None:
    st = rollout(mcn=False)
    st.nodes["w0"] = NodeStatus(name="w0", pool="worker", phase=NodePhase.RUNNING, step="wait-reboot", started_at=T0)
    (row, *_) = upgrade_view(st, T0)["nodes"]
    assert row["phase"] == "wait-reboot"


def test_a_blocked_drain_names_pod_budget_and_the_daemon_deadline() -> None:
    st = rollout()
    done(st, "w0", 0, 10)
    blocked(st, "w1", T0 + timedelta(minutes=10))
    st.nodes["w2"] = NodeStatus(name="w2", pool="worker", phase=NodePhase.SKIPPED)
    st.nodes["w3"] = NodeStatus(name="w3", pool="worker", phase=NodePhase.DEGRADED, reason="failed to drain node")
    now = T0 + timedelta(minutes=30)
    view = upgrade_view(st, now)
    (pool,) = view["pools"]
    assert pool["assessment"] == "Degraded"
    assert pool["status"] == "7 Total, 5 Available, 1 Progressing, 5 Outdated, 1 Draining, 1 Excluded, 1 Degraded"
    rows = {r["name"]: r for r in view["nodes"]}
    assert rows["w1"]["message"] == ("Drain blocked for 20m by pod openshift-ingress/router-default-1 "
                                     "(PodDisruptionBudget router-default: 0 disruptions allowed)")
    assert (rows["w2"]["assessment"], rows["w3"]["assessment"]) == ("Excluded", "Degraded")
    drain = next(i for i in view["insights"] if "Drain of node w1" in i["message"])
    assert {(r["kind"], r["name"]) for r in drain["resources"]} == {
        ("Node", "w1"), ("Pod", "router-default-1"), ("PodDisruptionBudget", "router-default")}
    assert "PodDisruptionBudget openshift-ingress/router-default (minAvailable 1" in drain["message"]
    assert "machine-config-daemon degrades node w1 at 11:10:00 UTC (in 40m)" in drain["message"]
    assert drain["deadline"] == (T0 + timedelta(minutes=70)).isoformat() and drain["level"] == "Warning"
    assert drain["reference"] == "lockkeeper decide mcr-1 w1 wait|skip|delete-pod|abort"
    st.nodes["w1"].decision_gate = None  # blocked, gate not open yet: no command that would be refused
    early = next(i for i in upgrade_view(st, now)["insights"] if "Drain of node w1" in i["message"])
    assert early["reference"] == "lockkeeper status mcr-1" and "decision gate is not open yet" in early["message"]
    assert any(i["level"] == "Error" and "w3" in i["message"] for i in view["insights"])
    assert upgrade_view(st, T0 + timedelta(minutes=65))["insights"][0]["level"] == "Error"  # 5 min left

    console = Console(width=300, record=True)
    console.print(status_view(st, now))
    text = console.export_text()
    for piece in ("ASSESSMENT", "COMPLETION", "7 Total, 5 Available", "EST", "+", "router-default-1",
                  "degrades node w1 at 11:10:00 UTC"):
        assert piece in text, piece


def test_completed_and_pending_pools() -> None:
    st = rollout(n=2)
    assert upgrade_view(st, T0)["pools"][0]["assessment"] == "Pending"
    done(st, "w0", 0, 1)
    done(st, "w1", 1, 1)
    (pool,) = upgrade_view(st, T0)["pools"]
    assert (pool["assessment"], pool["completion"], pool["outdated"]) == ("Completed", 100, 0)


def test_sequential_pools_queue_after_each_other() -> None:
    st = rollout(n=2, window=1)
    master = PoolPlan(name="master", target_config="rendered-master-b", size=2, max_unavailable=1, capacity=1,
                      nodes=["m0", "m1"])
    st.plan.pools.insert(0, master)
    st.nodes.update({"m0": NodeStatus(name="m0", pool="master", phase=NodePhase.DONE, started_at=T0,
                                      finished_at=T0 + timedelta(minutes=4)),
                     "m1": NodeStatus(name="m1", pool="master", phase=NodePhase.RUNNING, started_at=T0 + timedelta(minutes=4))})
    est, _ = estimates(st, T0 + timedelta(minutes=4))
    # m1 ends at +4; the worker pool (no done node: the run's mean, 4 min) then takes w0, w1 one at a time.
    assert {k: v / 60 for k, v in est.items()} == {"m1": 4.0, "w0": 8.0, "w1": 12.0}


def counted(calls: Counter[str], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, counting its calls in ``calls[name]``."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return fn(*args, **kwargs)
    return wrapper


def test_5000_nodes_cost_little_and_json_carries_the_view(monkeypatch: pytest.MonkeyPatch) -> None:
    st = rollout(n=5000, window=500)
    for i in range(0, 2000):
        done(st, f"w{i}", i / 100, 5)
    for i in range(2000, 2500):
        st.nodes[f"w{i}"] = NodeStatus(name=f"w{i}", pool="worker", phase=NodePhase.RUNNING, step="drain",
                                       started_at=T0 + timedelta(minutes=20))
    # "Costs little": the view's work grows with the nodes, not with their square: the estimates
    # are computed once, each pool's versions once, a node's duration once per node of the run,
    # its phase and message once per node shown (3,000: the 2,000 done ones are not).
    calls: Counter[str] = Counter()
    for name in ("estimates", "_versions", "_phase", "_node_message", "_duration"):
        monkeypatch.setattr(upgrade_status, name, counted(calls, name, getattr(upgrade_status, name)))
    view = upgrade_view(st, T0 + timedelta(minutes=22))
    assert calls == {"estimates": 1, "_versions": 1, "_duration": 5000, "_phase": 3000, "_node_message": 3000}, calls
    assert view["nodes_shown"] == 3000 and all(r["est"] != "?" for r in view["nodes"])
    assert view["pools"][0]["draining"] == 500
    json.dumps(view)  # plain data


def test_the_status_document_carries_the_view() -> None:
    from types import SimpleNamespace

    from lockkeeper.cli.status_doc import document

    st = rollout()
    done(st, "w0", 0, 10)
    raw = SimpleNamespace(workflow_execution_info=SimpleNamespace(versioning_info=SimpleNamespace(
        behavior=0, HasField=lambda f: False), HasField=lambda f: False))
    desc = SimpleNamespace(id="mcr-1", run_id="r", workflow_type="MachineConfigRolloutWorkflow", status=None,
                           raw_description=raw)
    doc = document(desc, SimpleNamespace(name="machineconfig-rollout"), status=st)
    assert doc["upgrade"]["pools"][0]["status"].startswith("7 Total, 7 Available, 0 Progressing, 5 Outdated")
    assert len(doc["upgrade"]["nodes"]) == 5 and all(r["est"].startswith("+") for r in doc["upgrade"]["nodes"])
