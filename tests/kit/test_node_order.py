"""Issue 40 ("Order"): the four node orders of workflows/kit/plan.py (ties, missing timestamps,
zones), the shared ``node_order`` input type, and the rollout plan recording the order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel, ValidationError

from activities.cluster.models import NodeInfo
from activities.machineconfig.models import PoolInfo
from workflows.kit.inputs import NodeOrder
from workflows.kit.plan import (
    NEWEST_FIRST,
    NODE_ORDERS,
    OLDEST_FIRST,
    ZONE_OLDEST,
    PlanError,
    describe_order,
    order_name,
    order_nodes,
)
from workflows.machineconfig.models import MachineConfigRolloutInput
from workflows.machineconfig.plan import plan_rollout

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def n(name: str, zone: str | None = None, at: int | None = 0) -> NodeInfo:
    """A node created ``at`` seconds after T0 (None: no creationTimestamp)."""
    return NodeInfo(name=name, zone=zone, created=None if at is None else T0 + timedelta(seconds=at))


#: zone a: a-old (0 s), a-new (30 s); zone b: b-mid (10 s); no zone: x-newest (40 s);
#: a tie at 20 s across zones (t-2 in zone b, t-1 in zone c); no timestamp: z-none (zone a).
NODES = [n("a-new", "a", 30), n("b-mid", "b", 10), n("x-newest", None, 40), n("t-2", "b", 20), n("t-1", "c", 20),
         n("a-old", "a", 0), n("z-none", "a", None)]


def names(order: str | list[str]) -> list[str]:
    return [x.name for x in order_nodes(NODES, order)]


def test_zone_oldest_is_unchanged_zone_then_age_then_name():
    # no zone sorts first; a missing creationTimestamp is the oldest of its zone
    assert names(ZONE_OLDEST) == ["x-newest", "z-none", "a-old", "a-new", "b-mid", "t-2", "t-1"]
    assert names(ZONE_OLDEST) == [x.name for x in order_nodes(NODES)]  # the default


def test_oldest_first_ignores_the_zone_ties_by_name_missing_timestamp_first():
    assert names(OLDEST_FIRST) == ["z-none", "a-old", "b-mid", "t-1", "t-2", "a-new", "x-newest"]


def test_newest_first_ties_by_name_ascending_missing_timestamp_last():
    assert names(NEWEST_FIRST) == ["x-newest", "a-new", "t-1", "t-2", "b-mid", "a-old", "z-none"]


def test_newest_first_is_not_oldest_first_reversed_among_ties():
    same = [n("w-b", at=5), n("w-a", at=5), n("w-c", at=5)]
    assert [x.name for x in order_nodes(same, NEWEST_FIRST)] == ["w-a", "w-b", "w-c"]
    assert [x.name for x in order_nodes(same, OLDEST_FIRST)] == ["w-a", "w-b", "w-c"]


def test_orders_do_not_depend_on_the_input_order():
    for order in NODE_ORDERS:
        assert [x.name for x in order_nodes(list(reversed(NODES)), order)] == names(order), order


def test_explicit_list_first_then_the_rest_zone_oldest():
    assert names(["t-1", "a-new", "ghost"]) == ["t-1", "a-new", "x-newest", "z-none", "a-old", "b-mid", "t-2"]


@pytest.mark.parametrize("bad", ["random", "explicit", "Newest-First", ""])
def test_unknown_order_name_is_a_plan_error(bad):
    with pytest.raises(PlanError, match="node_order"):
        order_nodes(NODES, bad)


def test_order_name_and_description():
    assert order_name(NEWEST_FIRST) == "newest-first" and order_name(["a", "b"]) == "explicit"
    assert describe_order(NEWEST_FIRST) == "newest-first (creationTimestamp newest first, then name)"
    assert describe_order(["a", "b"]) == "explicit (a, b first, then zone-oldest)"


class _Holder(BaseModel):
    node_order: NodeOrder = "zone-oldest"


@pytest.mark.parametrize("good", ["zone-oldest", "oldest-first", "newest-first", ["a", "b"], []])
def test_node_order_type_accepts_the_orders_and_lists(good):
    assert _Holder(node_order=good).node_order == good


@pytest.mark.parametrize("bad", ["explicit", "newest", "random", 3, None, "a,b"])
def test_node_order_type_refuses_anything_else(bad):
    with pytest.raises(ValidationError):
        _Holder(node_order=bad)


def test_rollout_input_takes_every_order_and_an_old_input_keeps_zone_oldest():
    assert MachineConfigRolloutInput().node_order == "zone-oldest"
    for order in NODE_ORDERS:
        assert MachineConfigRolloutInput(node_order=order).node_order == order
    with pytest.raises(ValidationError):
        MachineConfigRolloutInput(node_order="sideways")


def test_rollout_plan_records_the_order_and_its_nodes_are_in_it():
    pool = PoolInfo(name="worker", target_config="new", nodes=[
        NodeInfo(name=f"worker-{i}", pool="worker", zone="zone-" + "abc"[i % 3], created=T0 + timedelta(seconds=i),
                 current_config="old", desired_config="old", state="Done", ready=True) for i in range(4)])
    plan = plan_rollout([pool], node_order=NEWEST_FIRST)
    assert plan.node_order == "newest-first"
    assert plan.pools[0].nodes == ["worker-3", "worker-2", "worker-1", "worker-0"]
    default = plan_rollout([pool])
    assert default.node_order == "zone-oldest" and default.pools[0].nodes == ["worker-0", "worker-3", "worker-1", "worker-2"]
    assert plan_rollout([pool], node_order=["worker-2"]).node_order == "explicit"


# --- node upgrade: the selected nodes, the canary count and the batches follow the order ---------

def upgrade_facts(stamped: bool = True) -> list:
    from activities.node_upgrade.models import NodeFacts

    return [NodeFacts(name=f"node0{i}", labels={"region": "infra"}, kubelet_version="v1.9", ready=True,
                      zone=("zone-" + "ab"[i % 2]) if stamped else None,
                      created=(T0 + timedelta(minutes=i)) if stamped else None) for i in range(1, 5)]


@pytest.mark.parametrize(("order", "selected"), [
    ("zone-oldest", ["node02", "node04", "node01", "node03"]),
    ("oldest-first", ["node01", "node02", "node03", "node04"]),
    ("newest-first", ["node04", "node03", "node02", "node01"]),
    (["node03"], ["node03", "node02", "node04", "node01"]),
])
def test_node_upgrade_plan_follows_the_order(order, selected):
    from workflows.node_upgrade.models import BatchPolicy, NodeSelection
    from workflows.node_upgrade.plan import plan_lines, plan_upgrade

    plan = plan_upgrade(upgrade_facts(), NodeSelection(label_selector="region=infra"), BatchPolicy(serial=2, canary=1),
                        "v1.10", order)
    assert plan.selected == selected
    assert plan.canary == selected[:1] and plan.batches == [selected[1:3], selected[3:]]
    assert plan.node_order == order_name(order)
    assert f"order: {order_name(order)} (" in "\n".join(plan_lines(plan))


def test_node_upgrade_facts_read_before_zone_and_age_plan_by_name_as_before():
    from workflows.node_upgrade.models import BatchPolicy, NodeSelection, NodeUpgradeInput
    from workflows.node_upgrade.plan import plan_upgrade

    old = plan_upgrade(upgrade_facts(stamped=False), NodeSelection(label_selector="region=infra"), BatchPolicy(), "v1.10")
    assert old.selected == ["node01", "node02", "node03", "node04"]
    assert NodeUpgradeInput(selection={"label_selector": "x"}, action={"argv": ["a", "{node}"]}).node_order == "zone-oldest"
    with pytest.raises(ValidationError):
        NodeUpgradeInput(selection={"label_selector": "x"}, action={"argv": ["a", "{node}"]}, node_order="upside-down")


def test_node_upgrade_explicit_order_names_only_selected_nodes():
    from workflows.node_upgrade.models import BatchPolicy, NodeSelection
    from workflows.node_upgrade.plan import PlanError as UpgradePlanError
    from workflows.node_upgrade.plan import plan_upgrade

    with pytest.raises(UpgradePlanError, match="master01"):
        plan_upgrade(upgrade_facts(), NodeSelection(label_selector="region=infra"), BatchPolicy(), "v1.10", ["master01"])


# --- runtime migration: None keeps the nodes as listed; an order sorts what the preflight read ---

def test_runtime_migration_order_as_listed_by_default_else_by_the_nodes_read():
    from activities.runtime_migration.models import NodeObject
    from workflows.runtime_migration.plan import migration_order

    read = {"g1": NodeObject(name="g1", exists=True, zone="a", created=T0 + timedelta(seconds=5)),
            "g2": NodeObject(name="g2", exists=True, zone="b", created=T0),
            "g3": NodeObject(name="g3", exists=True, zone="a", created=T0 + timedelta(seconds=9))}
    listed = ["g2", "g3", "g1"]
    assert migration_order(listed, None, read) == ("as-listed", ["g2", "g3", "g1"])
    assert migration_order(listed, "zone-oldest", read) == ("zone-oldest", ["g1", "g3", "g2"])
    assert migration_order(listed, "oldest-first", read) == ("oldest-first", ["g2", "g1", "g3"])
    assert migration_order(listed, "newest-first", read) == ("newest-first", ["g3", "g1", "g2"])
    assert migration_order(listed, ["g3"], read) == ("explicit", ["g3", "g1", "g2"])
    # a node the preflight did not read (it refuses the run anyway) sorts as one without zone or age
    assert migration_order(["g1", "g9"], "newest-first", read) == ("newest-first", ["g1", "g9"])


def test_runtime_migration_input_keeps_old_inputs_as_listed_and_checks_an_explicit_order():
    from workflows.runtime_migration.models import RuntimeMigrationInput

    base = {"nodes": ["g1", "g2"], "host_access": {n: {"backend": "ssh", "host": n} for n in ("g1", "g2")},
            "scaleup_step": {"argv": ["scaleup", "{node}"]}}
    assert RuntimeMigrationInput(**base).node_order is None
    assert RuntimeMigrationInput(**base, node_order="newest-first").node_order == "newest-first"
    with pytest.raises(ValidationError, match="not migrated: g7"):
        RuntimeMigrationInput(**base, node_order=["g2", "g7"])
    with pytest.raises(ValidationError):
        RuntimeMigrationInput(**base, node_order="newest")
