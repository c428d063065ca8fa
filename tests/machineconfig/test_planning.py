"""Table tests of the rollout's pure planning functions (workflows/kit/plan.py, workflows/machineconfig/plan.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from activities.cluster.models import NodeInfo
from activities.machineconfig.models import PoolInfo
from workflows.kit.models import GateKind
from workflows.kit.plan import ApprovalPolicy
from workflows.kit.plan import PlanError, is_unavailable, order_nodes, plan_gates, resolve_max_unavailable
from workflows.machineconfig.plan import DELETE_ALL_PODS_GATE, is_at_target, order_pools, plan_pool, plan_rollout

T0 = datetime(2024, 1, 1, tzinfo=UTC)
OLD, NEW = "rendered-worker-old", "rendered-worker-new"


def node(name: str, *, zone: str | None = "a", age: int = 0, current: str = OLD, desired: str | None = None,
         state: str = "Done", ready: bool = True, unschedulable: bool = False, cordoned_by: str | None = None,
         pool: str = "worker") -> NodeInfo:
    """A node created ``age`` hours before the newest; defaults: Ready, Done at the old config."""
    return NodeInfo(name=name, pool=pool, zone=zone, created=T0 - timedelta(hours=age), current_config=current,
                    desired_config=desired if desired is not None else current, state=state, ready=ready,
                    unschedulable=unschedulable, cordoned_by=cordoned_by)


@pytest.mark.parametrize(
    ("value", "size", "expected"),
    [
        (1, 10, 1),
        (3, 2, 3),  # an integer is not capped by the pool size (MCO neither)
        ("2", 10, 2),
        ("25%", 10, 2),  # 2.5 rounded down
        ("50%", 3, 1),  # 1.5 rounded down
        ("10%", 3, 1),  # 0.3 -> 0 -> at least 1
        ("100%", 7, 7),
        ("1%", 4, 1),  # 0.04 -> 0 -> at least 1: a rollout always progresses
        (" 30 % ", 10, 3),
    ],
)
def test_resolve_max_unavailable(value, size, expected):
    assert resolve_max_unavailable(value, size) == expected


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "%", -2, True, 0, "0%", "101%"])
def test_resolve_max_unavailable_rejects_malformed(value):
    # One parser for the CLI, the input models and planning (workflows.kit.inputs).
    with pytest.raises(PlanError, match="maxUnavailable"):
        resolve_max_unavailable(value, 10)


@pytest.mark.parametrize(
    ("pools", "explicit", "expected"),
    [
        (["worker", "master", "infra"], False, ["master", "infra", "worker"]),
        (["app", "infra"], False, ["app", "infra"]),
        (["master", "infra", "app"], True, ["master", "infra", "app"]),
        (["app", "master"], True, ["app", "master"]),  # the operator's order wins
        (["worker", "worker", "master"], False, ["master", "worker"]),
    ],
)
def test_order_pools(pools, explicit, expected):
    assert order_pools(pools, explicit=explicit) == expected


def test_order_nodes_zone_then_oldest_then_name():
    nodes = [
        node("w-young-b", zone="b", age=1),
        node("w-old-b", zone="b", age=5),
        node("w-young-a", zone="a", age=1),
        node("w-same-2", zone="a", age=3),
        node("w-same-1", zone="a", age=3),
        node("w-nozone", zone=None, age=0),
    ]
    assert [n.name for n in order_nodes(nodes)] == ["w-nozone", "w-same-1", "w-same-2", "w-young-a", "w-old-b", "w-young-b"]


def test_order_nodes_explicit_list_first_then_rest():
    nodes = [node("a1", zone="a"), node("b1", zone="b"), node("c1", zone="c")]
    assert [n.name for n in order_nodes(nodes, ["c1", "missing"])] == ["c1", "a1", "b1"]
    with pytest.raises(PlanError, match="node_order"):
        order_nodes(nodes, "random")


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (node("x", current=NEW, desired=NEW), True),
        (node("x", current=OLD, desired=NEW), False),  # update asked, not done
        (node("x", current=NEW, desired=NEW, state="Working"), False),
        (node("x", current=NEW, desired="rendered-worker-other"), False),
        (node("x", current=OLD), False),
    ],
)
def test_is_at_target(n, expected):
    assert is_at_target(n, NEW) is expected


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (node("x"), False),
        (node("x", ready=False), True),
        (node("x", state="Degraded"), True),
        (node("x", state="Unreconcilable"), True),
        (node("x", unschedulable=True), True),  # cordoned by somebody else
        (node("x", unschedulable=True, cordoned_by="rollout-1/node/x"), False),  # our own earlier cordon
    ],
)
def test_is_unavailable(n, expected):
    assert is_unavailable(n) is expected


@pytest.mark.parametrize(
    ("policy", "nodes", "expected"),
    [
        (ApprovalPolicy.NONE, ["a", "b"], []),
        (ApprovalPolicy.POOL, ["a", "b"], [("pool/worker", GateKind.POOL, "a", None)]),
        (ApprovalPolicy.NODE, ["a", "b"], [("node/a", GateKind.NODE, "a", None), ("node/b", GateKind.NODE, "b", None)]),
        (ApprovalPolicy.CANARY, ["a", "b", "c"], [("canary/worker", GateKind.CANARY, None, "a")]),
        (ApprovalPolicy.CANARY, ["a"], []),  # nothing follows the canary
        (ApprovalPolicy.POOL, [], []),  # nothing to roll, nothing to approve
    ],
)
def test_plan_gates(policy, nodes, expected):
    gates = plan_gates("worker", nodes, policy)
    assert [(g.id, g.kind, g.before_node, g.after_node) for g in gates] == expected


def test_plan_pool_skips_nodes_at_target_and_counts_unavailable_against_capacity():
    pool = PoolInfo(
        name="worker",
        target_config=NEW,
        nodes=[
            node("w1", age=4),
            node("w2", age=3, current=NEW, desired=NEW),  # at target: skipped
            node("w3", age=2, ready=False),  # not Ready: still rolled, but counts as unavailable
            node("w4", age=1, current=NEW, desired=NEW, unschedulable=True),  # at target, cordoned by somebody
            node("w5", age=0),
        ],
    )
    plan = plan_pool(pool, max_unavailable="60%", approval=ApprovalPolicy.POOL)
    assert plan.size == 5
    assert plan.max_unavailable == 3
    assert plan.nodes == ["w1", "w3", "w5"]
    assert plan.skipped == ["w2", "w4"]
    assert plan.unavailable == ["w3", "w4"]
    assert plan.capacity == 1
    assert plan.batches == [["w1"], ["w3"], ["w5"]]
    assert [g.id for g in plan.gates] == ["pool/worker"]


@pytest.mark.parametrize(
    ("max_unavailable", "unavailable", "capacity", "batches"),
    [
        (2, 0, 2, [["w0", "w1"], ["w2", "w3"]]),
        (2, 1, 1, [["w0"], ["w1"], ["w2"], ["w3"]]),
        (1, 1, 0, [["w0"], ["w1"], ["w2"], ["w3"]]),  # no capacity: the workflow waits/pauses
        ("50%", 0, 2, [["w0", "w1"], ["w2", "w3"]]),
    ],
)
def test_plan_pool_capacity(max_unavailable, unavailable, capacity, batches):
    nodes = [node(f"w{i}", age=10 - i) for i in range(4)]
    nodes += [node(f"x{i}", age=0, current=NEW, desired=NEW, ready=False) for i in range(unavailable)]
    plan = plan_pool(PoolInfo(name="worker", target_config=NEW, nodes=nodes), max_unavailable=max_unavailable)
    assert plan.capacity == capacity
    assert plan.batches == batches


def test_plan_rollout_orders_pools_and_adds_network_gate():
    pools = [
        PoolInfo(name="worker", target_config=NEW, nodes=[node("w1")]),
        PoolInfo(name="master", target_config="rendered-master-new", nodes=[node("m1", pool="master")]),
    ]
    plan = plan_rollout(pools, repair_network=True, network_type="OVNKubernetes")
    assert [p.name for p in plan.pools] == ["master", "worker"]
    assert plan.node_count == 2
    assert [g.id for g in plan.final_gates] == [DELETE_ALL_PODS_GATE]
    explicit = plan_rollout(pools, requested_pools=["worker", "master"])
    assert [p.name for p in explicit.pools] == ["worker", "master"]
    assert explicit.final_gates == []


def test_plan_rollout_rejects_unknown_node_in_explicit_order():
    pools = [PoolInfo(name="worker", target_config=NEW, nodes=[node("w1")])]
    with pytest.raises(PlanError, match="ghost"):
        plan_rollout(pools, node_order=["w1", "ghost"])
