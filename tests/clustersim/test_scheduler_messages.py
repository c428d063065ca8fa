"""FailedScheduling wording per scheduler_messages style (table tests), and which scenarios use which.

The "v1.11" rows follow kube-scheduler 1.10/1.11 (pkg/scheduler/core FitError.Error(), reasons from
pkg/scheduler/algorithm/predicates/error.go) and the procedures spec's R3 example
"0/7 nodes are available: 7 node(s) didn't match node selector."; the "current" rows are the
>= 1.23 plugin reasons with the preemption PostFilter suffix.
"""

from __future__ import annotations

import pytest

from clustersim.agents import logic
from clustersim.agents.objects import make_node
from clustersim.scenario import load_scenario

T = "2024-01-01T00:00:00Z"
MASTER_TAINT = {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}
INFRA = {"spec": {"nodeSelector": {"region": "infra"}, "containers": [{"name": "c"}]}}
ANTI = {"metadata": {"labels": {"app": "router"}}, "spec": {"containers": [{"name": "c"}], "affinity": {
    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "router"}}, "topologyKey": "kubernetes.io/hostname"}]}}}}
ROUTER = {"metadata": {"name": "router-1", "labels": {"app": "router"}}, "spec": {}}


def _nodes(workers: int, masters: int = 0, cordoned: int = 0) -> list[dict]:
    out = [make_node(f"m{i}", roles=["master"], config="r", created=T, taints=[MASTER_TAINT]) for i in range(masters)]
    out += [make_node(f"w{i}", roles=["compute"], config="r", created=T) for i in range(workers)]
    out += [make_node(f"c{i}", roles=["compute"], config="r", created=T, unschedulable=True) for i in range(cordoned)]
    return out


@pytest.mark.parametrize(
    ("pod", "nodes", "order", "style", "expected"),
    [
        # R3e: the registry still selects region=infra after the label is gone from every node.
        (INFRA, _nodes(7), logic.FILTERS_LEGACY, "v1.11",
         "0/7 nodes are available: 7 node(s) didn't match node selector."),
        (INFRA, _nodes(7), logic.FILTERS_LEGACY, "current",
         "0/7 nodes are available: 7 node(s) didn't match Pod's node affinity/selector. preemption: 0/7 nodes are "
         "available: 7 Preemption is not helpful for scheduling."),
        # 1.11 checked the node selector before taints: masters count as selector misses.
        (INFRA, _nodes(2, masters=3, cordoned=1), logic.FILTERS_LEGACY, "v1.11",
         "0/6 nodes are available: 1 node(s) were unschedulable, 5 node(s) didn't match node selector."),
        ({"spec": {"containers": [{"name": "c"}]}}, _nodes(0, masters=3, cordoned=1), logic.FILTERS_LEGACY, "v1.11",
         "0/4 nodes are available: 1 node(s) were unschedulable, 3 node(s) had taints that the pod didn't tolerate."),
        ({"spec": {"containers": [{"name": "c"}]}}, _nodes(0, masters=3, cordoned=1), logic.FILTERS_LEGACY, "current",
         "0/4 nodes are available: 1 node(s) were unschedulable, 3 node(s) had untolerated taint "
         "{node-role.kubernetes.io/master: }. preemption: 0/4 nodes are available: 4 Preemption is not helpful "
         "for scheduling."),
        # Anti-affinity: 1.11's InterPodAffinityMatches reports two reasons per node.
        (ANTI, _nodes(2), logic.FILTERS_LEGACY, "v1.11",
         "0/2 nodes are available: 2 node(s) didn't match pod affinity/anti-affinity, 2 node(s) didn't match pod "
         "anti-affinity rules."),
        (ANTI, _nodes(2), logic.FILTERS_CURRENT, "current",
         "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. preemption: 0/2 nodes are "
         "available: 2 No preemption victims found for incoming pod."),
        (INFRA, [], logic.FILTERS_LEGACY, "v1.11", "no nodes available to schedule pods"),
    ],
)
def test_fit_error_message_styles(pod, nodes, order, style, expected) -> None:
    node_pods = {n["metadata"]["name"]: [ROUTER] for n in nodes}
    assert logic.schedule(pod, nodes, {}, order, node_pods, style) == (None, expected)


def test_unknown_style_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown scheduler message style"):
        logic.fit_error_message(3, ["node(s) were unschedulable"] * 3, "v1.9")


@pytest.mark.parametrize(
    ("scenario", "filters", "messages"),
    [
        ("r1-sdn-to-ovn", "current", "current"),
        ("r2-pdb-blocked", "legacy", "current"),
        ("r3-okd310-upgrade", "legacy", "v1.11"),
        ("r4-crio-to-docker", "legacy", "v1.11"),
        ("r5-vxlan-port", "legacy", "v1.11"),
    ],
)
def test_openshift_3_scenarios_use_the_1_11_wording(scenario, filters, messages) -> None:
    opts = load_scenario(scenario).options
    assert (opts.scheduler_filters, opts.scheduler_messages) == (filters, messages)
