"""Table tests of the node-upgrade planning (procedures-spec §1.2): label selection with masters
excluded by name and label, Ansible's serial arithmetic, the canary and the stop rule."""

from __future__ import annotations

import pytest

from activities.node_upgrade.models import NodeFacts
from workflows.node_upgrade.models import BatchPolicy, NodeSelection
from workflows.node_upgrade.plan import (
    NO_MATCH,
    PlanError,
    batch_failed_too_much,
    parse_selector,
    plan_lines,
    plan_upgrade,
    select_nodes,
    selector_matches,
    serial_batches,
    serial_size,
)

OLD, NEW = "v1.9.1+a0ce1bc657", "v1.10.0+b81c8f8"


def r3_nodes(done: tuple[str, ...] = (), unlabelled_masters: bool = False) -> list[NodeFacts]:
    """The r3-okd310-upgrade cluster: 3 masters, 2 infra, 2 compute."""
    master = {} if unlabelled_masters else {"node-role.kubernetes.io/master": "true"}
    spec = [
        ("master01.example.com", {**master, "glusterfs": "storage-host", "region": "infra"}),
        ("master02.example.com", {**master, "glusterfs": "storage-host"}),
        ("master03.example.com", {**master, "glusterfs": "storage-host"}),
        ("node01.example.com", {"region": "infra", "zone": "default"}),
        ("node02.example.com", {"region": "infra", "zone": "default"}),
        ("node03.example.com", {"region": "primary", "zone": "default", "node-role.kubernetes.io/compute": "true"}),
        ("node04.example.com", {"region": "primary", "zone": "default", "node-role.kubernetes.io/compute": "true"}),
    ]
    return [
        NodeFacts(name=n, labels={**lb, "kubernetes.io/hostname": n}, kubelet_version=NEW if n in done else OLD, ready=True)
        for n, lb in spec
    ]


@pytest.mark.parametrize(
    ("total", "serial", "size"),
    [
        (2, "50%", 1),
        (3, "50%", 1),
        (7, "20%", 1),
        (10, "25%", 2),
        (4, "50%", 2),
        (1, "10%", 1),
        (5, "100%", 5),
        (5, 2, 2),
        (5, "2", 2),
        (3, "33.4%", 1),
    ],
)
def test_serial_size_is_ansible_pct_to_int(total: int, serial: int | str, size: int) -> None:
    assert serial_size(serial, total) == size


@pytest.mark.parametrize(
    ("nodes", "serial", "batches"),
    [
        (["a", "b"], "50%", [["a"], ["b"]]),
        (["a", "b", "c"], "50%", [["a"], ["b"], ["c"]]),
        (list("abcdefg"), "20%", [[x] for x in "abcdefg"]),
        (list("abcde"), 2, [["a", "b"], ["c", "d"], ["e"]]),
        (list("abcd"), "50%", [["a", "b"], ["c", "d"]]),
        ([], "50%", []),
    ],
)
def test_serial_batches(nodes: list[str], serial: int | str, batches: list[list[str]]) -> None:
    assert serial_batches(nodes, serial) == batches


@pytest.mark.parametrize("bad", ["x", "-1", "%", "1.5", True, -2, 0, "0%"])
def test_bad_serial_is_refused(bad: object) -> None:
    with pytest.raises(PlanError, match="invalid serial"):
        serial_size(bad, 3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("selector", "labels", "match"),
    [
        ("region=infra", {"region": "infra"}, True),
        ("region==infra", {"region": "infra"}, True),
        ("region=infra", {"region": "primary"}, False),
        ("region!=infra", {}, True),
        ("region!=infra", {"region": "infra"}, False),
        ("region", {"region": "x"}, True),
        ("!region", {"region": "x"}, False),
        ("region in (infra, primary)", {"region": "primary"}, True),
        ("region notin (infra,primary)", {"region": "primary"}, False),
        ("region=infra,zone=default", {"region": "infra", "zone": "default"}, True),
        ("region=infra,zone=default", {"region": "infra"}, False),
        ("kubernetes.io/hostname=node03.example.com", {"kubernetes.io/hostname": "node03.example.com"}, True),
    ],
)
def test_selector(selector: str, labels: dict[str, str], match: bool) -> None:
    assert selector_matches(selector, labels) is match


@pytest.mark.parametrize("bad", ["", " , ", "=infra", "re gion=x"])
def test_bad_selector(bad: str) -> None:
    with pytest.raises(PlanError):
        parse_selector(bad)


def test_masters_excluded_by_label_and_by_name() -> None:
    # master01 carries region=infra in this table; by label it is excluded.
    sel, excl = select_nodes(r3_nodes(), NodeSelection(label_selector="region=infra"))
    assert sel == ["node01.example.com", "node02.example.com"]
    assert excl == {"master01.example.com": "master (by label node-role.kubernetes.io/master=true)"}
    # On 3.9 masters may lack the label: the explicit master list still excludes them.
    sel, excl = select_nodes(
        r3_nodes(unlabelled_masters=True),
        NodeSelection(label_selector="region=infra", masters=["master01.example.com"]),
    )
    assert sel == ["node01.example.com", "node02.example.com"]
    assert excl == {"master01.example.com": "master (by name)"}
    # ... and without it an unlabelled master would be picked: that is why the list exists.
    sel, _ = select_nodes(r3_nodes(unlabelled_masters=True), NodeSelection(label_selector="region=infra"))
    assert "master01.example.com" in sel


def test_no_match_uses_openshift_ansible_words() -> None:
    with pytest.raises(PlanError, match=NO_MATCH):
        select_nodes(r3_nodes(), NodeSelection(label_selector="region=nowhere"))
    with pytest.raises(PlanError, match=NO_MATCH):
        select_nodes(r3_nodes(), NodeSelection(label_selector="glusterfs=storage-host"))  # only masters
    with pytest.raises(PlanError, match="unknown node"):
        select_nodes(r3_nodes(), NodeSelection(nodes=["ghost"]))


def test_infra_two_nodes_at_50_percent_are_one_and_one() -> None:
    plan = plan_upgrade(r3_nodes(), NodeSelection(label_selector="region=infra"), BatchPolicy(serial="50%"), NEW)
    assert plan.canary == [] and plan.batches == [["node01.example.com"], ["node02.example.com"]]
    assert plan.batch_size == 1 and plan.size_over_selected == 1 and not plan.canary_gate


def test_three_nodes_at_50_percent() -> None:
    sel = NodeSelection(label_selector="region")
    nodes = [n for n in r3_nodes() if n.name != "node04.example.com"]
    plan = plan_upgrade(nodes, sel, BatchPolicy(serial="50%"), NEW)
    assert plan.batches == [["node01.example.com"], ["node02.example.com"], ["node03.example.com"]]


def test_canary_first_then_gate_then_serial_over_the_rest() -> None:
    nodes = r3_nodes()
    sel = NodeSelection(label_selector="node-role.kubernetes.io/compute=true", nodes=["node01.example.com"])
    plan = plan_upgrade(nodes, sel, BatchPolicy(serial="50%", canary=["node03.example.com"]), NEW)
    assert plan.canary == ["node03.example.com"] and plan.canary_gate
    # serial is computed over the 2 still to do after the canary: 50% of 2 = 1
    assert plan.batches == [["node01.example.com"], ["node04.example.com"]]
    assert plan.all_batches()[0] == ("canary", ["node03.example.com"])
    assert [n for n, _ in plan.all_batches()] == ["canary", "batch-1", "batch-2"]
    # a count takes the first k still to do
    plan = plan_upgrade(nodes, NodeSelection(label_selector="region=infra"), BatchPolicy(serial="50%", canary=1), NEW)
    assert plan.canary == ["node01.example.com"] and plan.batches == [["node02.example.com"]] and plan.canary_gate


def test_rerun_after_canary_skips_done_and_does_not_repeat_the_canary() -> None:
    nodes = r3_nodes(done=("node03.example.com",))
    sel = NodeSelection(label_selector="region=primary")
    plan = plan_upgrade(nodes, sel, BatchPolicy(serial="50%", canary=["node03.example.com"]), NEW)
    assert plan.done == ["node03.example.com"] and plan.canary == [] and not plan.canary_gate
    assert plan.batches == [["node04.example.com"]]
    # a done node that is not Ready is not done
    nodes[5].ready = False
    plan = plan_upgrade(nodes, sel, BatchPolicy(serial="50%", canary=["node03.example.com"]), NEW)
    assert plan.canary == ["node03.example.com"]
    # everything done: nothing to do, not an error
    plan = plan_upgrade(r3_nodes(done=("node03.example.com", "node04.example.com")), sel, BatchPolicy(), NEW)
    assert plan.all_batches() == []


def test_canary_must_be_selected() -> None:
    with pytest.raises(PlanError, match="canary"):
        plan_upgrade(r3_nodes(), NodeSelection(label_selector="region=infra"), BatchPolicy(canary=["node03.example.com"]), NEW)


def test_no_gate_when_canary_is_everything() -> None:
    plan = plan_upgrade(r3_nodes(), NodeSelection(nodes=["node03.example.com"]), BatchPolicy(canary=1), NEW)
    assert plan.canary == ["node03.example.com"] and plan.batches == [] and not plan.canary_gate


@pytest.mark.parametrize(
    ("failed", "size", "pct", "stop"),
    [(0, 1, 0, False), (1, 1, 0, True), (1, 2, 50, False), (2, 3, 50, True), (1, 4, 25, False), (0, 0, 0, False)],
)
def test_max_fail_percentage(failed: int, size: int, pct: float, stop: bool) -> None:
    assert batch_failed_too_much(failed, size, pct) is stop


def test_plan_lines_show_both_numbers_and_batches() -> None:
    plan = plan_upgrade(r3_nodes(), NodeSelection(label_selector="region=infra"), BatchPolicy(serial="50%", canary=1), NEW)
    text = "\n".join(plan_lines(plan))
    assert "canary: [node01.example.com] then approval gate" in text
    assert "batches: [node02.example.com]" in text
    assert "batch size 1 over 1 still to do (1 over all 2 selected)" in text
    assert "excluded master01.example.com" in text
