"""Table tests of the nodeSelector-migration planning (procedures-spec §5.3): mapping parsing, the
new selector, the capacity check that blocks an object, the re-scan and the pod regressions."""

from __future__ import annotations

import pytest

from activities.cluster.models import ObjectRef
from activities.node_selectors.models import NamespaceSelector, PodState, SelectorNode, Workload
from workflows.node_selectors.plan import (
    MappingError,
    new_selector,
    parse_mapping,
    plan_migration,
    pod_regressions,
    still_referencing,
)

INFRA = {"region=infra": {"node-role.kubernetes.io/infra": "true"}}


def nodes(new_labels: bool = True) -> list[SelectorNode]:
    extra = {"node-role.kubernetes.io/infra": "true"} if new_labels else {}
    return [
        SelectorNode(name="master01", labels={"node-role.kubernetes.io/master": "true"}),
        SelectorNode(name="node01", labels={"region": "infra", "zone": "default", **extra}),
        SelectorNode(name="node02", labels={"region": "infra", "zone": "default", **extra}),
        SelectorNode(name="node03", labels={"region": "primary", "zone": "default"}),
    ]


def dc(name: str, sel: dict[str, str], running: list[str], replicas: int = 1, anti: bool = False, kind: str = "DeploymentConfig") -> Workload:
    return Workload(ref=ObjectRef(kind=kind, name=name, namespace="default"), node_selector=sel, replicas=replicas,
                    required_anti_affinity=anti, running_nodes=running)


@pytest.mark.parametrize(
    ("entries", "mapping"),
    [
        (["region=infra=node-role.kubernetes.io/infra=true"], INFRA),
        (["region=primary:node-role.kubernetes.io/compute=true,tier=app"],
         {"region=primary": {"node-role.kubernetes.io/compute": "true", "tier": "app"}}),
    ],
)
def test_parse_mapping(entries: list[str], mapping: dict[str, dict[str, str]]) -> None:
    assert parse_mapping(entries) == mapping


@pytest.mark.parametrize("bad", ["region=infra", "region", "=x=a=b", "region=infra:"])
def test_bad_mapping(bad: str) -> None:
    with pytest.raises(MappingError):
        parse_mapping([bad])


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ({"region": "infra"}, {"node-role.kubernetes.io/infra": "true"}),
        ({"region": "infra", "zone": "default"}, {"node-role.kubernetes.io/infra": "true"}),
        ({"region": "infra", "disk": "ssd"}, {"disk": "ssd", "node-role.kubernetes.io/infra": "true"}),
        ({"region": "primary"}, {"region": "primary"}),
    ],
)
def test_new_selector(old: dict[str, str], new: dict[str, str]) -> None:
    assert new_selector(old, INFRA, ["zone"]) == new


def test_plan_ok_when_new_labels_cover_the_running_nodes() -> None:
    plan = plan_migration([dc("docker-registry", {"region": "infra"}, ["node01"]), dc("router", {"region": "infra"}, ["node01", "node02"], 2, True)],
                          [], nodes(), INFRA, ["zone"], ["region", "zone"])
    assert [i.blocked for i in plan.items] == [[], []]
    assert plan.label_nodes == ["node01", "node02", "node03"]
    assert plan.node_labels["node03"] == ["region", "zone"]


def test_plan_blocks_a_mapping_no_node_carries_yet() -> None:
    plan = plan_migration([dc("docker-registry", {"region": "infra"}, ["node01"])], [], nodes(new_labels=False), INFRA, ["zone"],
                          ["region", "zone"])
    (item,) = plan.blocked()
    assert item.ref.name == "docker-registry" and "no schedulable node carries node-role.kubernetes.io/infra=true" in item.blocked[0]


def test_plan_blocks_anti_affinity_without_enough_nodes_and_uncovered_running_nodes() -> None:
    ns = nodes()
    ns[2].labels.pop("node-role.kubernetes.io/infra")  # node02 lacks the new label
    plan = plan_migration([dc("router", {"region": "infra"}, ["node01", "node02"], 2, True)], [], ns, INFRA, ["zone"], ["region"])
    reasons = plan.items[0].blocked
    assert any("runs today on node02" in r for r in reasons)
    assert any("anti-affinity needs 2 nodes" in r for r in reasons)


def test_daemonset_must_cover_the_same_nodes() -> None:
    ns = nodes()
    ns[3].labels["node-role.kubernetes.io/infra"] = "true"  # a compute node would gain the DS
    plan = plan_migration([dc("logging", {"region": "infra"}, ["node01", "node02"], kind="DaemonSet")], [], ns, INFRA, [], ["region"])
    assert any("DaemonSet would cover" in r for r in plan.items[0].blocked)


def test_selector_still_on_a_removed_label_is_blocked() -> None:
    plan = plan_migration([dc("app", {"region": "primary"}, ["node03"])], [], nodes(), INFRA, [], ["region"])
    assert any("still uses region" in r for r in plan.items[0].blocked)


def test_namespace_annotation_is_planned() -> None:
    ns_sel = NamespaceSelector(ref=ObjectRef(kind="Namespace", name="infra-apps"), node_selector="region=infra")
    plan = plan_migration([], [ns_sel], nodes(), INFRA, ["zone"], ["region", "zone"])
    assert plan.items[0].new == {"annotation": "node-role.kubernetes.io/infra=true"} and not plan.items[0].blocked


def test_rescan_and_regressions() -> None:
    assert still_referencing([dc("r", {"region": "infra"}, [])], [], ["region"]) == ["DeploymentConfig default/r"]
    assert still_referencing([dc("r", {"node-role.kubernetes.io/infra": "true"}, [])], [], ["region"]) == []
    base = [PodState(key="default/a", phase="Running"), PodState(key="default/old", phase="Running")]
    now = [PodState(key="default/a", phase="Pending", message="x"),
           PodState(key="default/docker-registry-2-abc", phase="Pending",
                    message="0/7 nodes are available: 7 node(s) didn't match node selector.")]
    regs = pod_regressions(base, now)
    assert "default/a was Running, now Pending: x" in regs
    assert any("docker-registry-2-abc Pending" in r for r in regs)
    assert pod_regressions(base, [PodState(key="default/a", phase="Running")]) == []  # old replaced: fine


# --- master-config.yaml projectConfig.defaultNodeSelector ------------------------------------------------

def test_master_config_selector_read_from_the_yaml() -> None:
    from activities.preflight.models import MasterConfigError, default_node_selector

    assert default_node_selector("apiVersion: v1\nprojectConfig:\n  defaultNodeSelector: region=primary\n") == "region=primary"
    assert default_node_selector("apiVersion: v1\nprojectConfig:\n  defaultNodeSelector: ''\n") == ""
    assert default_node_selector("apiVersion: v1\nkind: MasterConfig\n") == ""
    with pytest.raises(MasterConfigError, match="not a YAML mapping"):
        default_node_selector("- a\n- b\n")
    with pytest.raises(MasterConfigError, match="not YAML"):
        default_node_selector("a: [\n")


def test_master_config_on_an_old_label_is_a_blocked_item_naming_the_new_value() -> None:
    from workflows.node_selectors.plan import master_config_items

    mapping = {**INFRA, "region=primary": {"node-role.kubernetes.io/compute": "true"}}
    ns = nodes() + [SelectorNode(name="node09", labels={"node-role.kubernetes.io/compute": "true"})]
    items = master_config_items({"m1": "region=primary", "m2": "node-role.kubernetes.io/compute=true", "m3": ""},
                                "/etc/origin/master/master-config.yaml", mapping, ["zone"], ["region", "zone"], ns)
    assert [i.ref.describe() for i in items] == ["MasterConfig m1"]
    assert items[0].new == {"defaultNodeSelector": "node-role.kubernetes.io/compute=true"}
    assert "set it to 'node-role.kubernetes.io/compute=true' on every master" in items[0].blocked[0]
    assert still_referencing([], [], ["region"], {"m1": "region=primary", "m2": ""}) == [
        "MasterConfig m1 (projectConfig.defaultNodeSelector=region=primary)"]
