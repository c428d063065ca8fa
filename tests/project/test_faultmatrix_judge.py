"""The fault-matrix judge (tests/support/faultmatrix.py): what passes and what it says when it does not."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from clustersim.snapshots.models import Diff, FieldChange, ObjectChange, PodCount, PodGroupChange, SnapshotInfo, StateChange
from tests.support.faultmatrix import Case, CaseResult, Mismatch, NotJudged, documented_away, judge
from workflows.kit.models import ChangedItem

INFO = SnapshotInfo(id="s1", taken_at="2024-01-01T00:00:00Z", resource_version=1, objects=1)
DS = ObjectChange(key="DaemonSet/openshift-sdn/sdn", resource="daemonsets.apps", kind="DaemonSet", namespace="openshift-sdn",
                  name="sdn", change="changed",
                  fields=[FieldChange(pointer="/spec/template/spec/containers/0/image", category="spec", op="replace",
                                      old="stock", new="custom")])
RECORD = ObjectChange(key="ConfigMap/openshift-config/lockkeeper-record-x", resource="configmaps", kind="ConfigMap",
                      namespace="openshift-config", name="lockkeeper-record-x", change="added")
CORDON = ObjectChange(key="Node/node01", resource="nodes", kind="Node", name="node01", change="changed",
                      fields=[FieldChange(pointer="/spec/unschedulable", category="spec", op="add", new=True)])
RULE = StateChange(key="host/node01/iptables/runtime", component="host", name="node01", what="iptables", item="runtime",
                   change="changed", old=[], new=["-A OS_FIREWALL_ALLOW -p udp --dport 4889 -j ACCEPT"])
IMAGE = StateChange(key="host/node01/image/registry.example.com/custom", component="host", name="node01", what="image",
                    item="registry.example.com/custom", change="added", new="registry.example.com/custom")
PORT = StateChange(key="sdn/node01/dst_port", component="sdn", name="node01", what="dst_port", change="changed", old=4789, new=4889)
PODS = PodGroupChange(key="pods/openshift-sdn/DaemonSet/sdn", namespace="openshift-sdn", owner_kind="DaemonSet", owner_name="sdn",
                      before=PodCount(pods=2, ready=2), after=PodCount(pods=2, ready=1))


def case(outcome: str, objects: Sequence[ObjectChange] = (), left: Sequence[str] = (), *, state: Sequence[StateChange] = (),
         pods: Sequence[PodGroupChange] = (), reached: bool = True) -> CaseResult:
    return CaseResult(step="daemonset", case=Case.ABORT, workflow_id="wf-1", reached=reached, outcome=outcome,
                      result={"outcome": outcome, "message": f"{outcome} for the test"},
                      left_changed=[ChangedItem(target=t, what="changed") for t in left],
                      diff=Diff(before=INFO, after=INFO, options={}, objects=list(objects), state=list(state), pods=list(pods)))


def test_completed_restored_and_an_exact_left_changed_pass() -> None:
    judge(case("completed", [DS]))
    judge(case("aborted"))
    judge(case("aborted", [DS, CORDON], ["Node node01", "DaemonSet openshift-sdn/sdn"]))
    # A host's rule and its OVS port are both the host; the DaemonSet's pods are the DaemonSet.
    judge(case("aborted", [DS], ["DaemonSet openshift-sdn/sdn", "host node01"], state=[RULE, PORT], pods=[PODS]))
    judge(case("failed", [DS, RECORD], ["DaemonSet openshift-sdn/sdn"], state=[IMAGE]),
          documented=["ConfigMap/*/lockkeeper-record-*", "host/*/image/registry.example.com/custom"])


def test_documented_patterns_hide_whole_entries_or_single_fields() -> None:
    d = case("aborted", [DS, RECORD, CORDON], state=[RULE, IMAGE]).diff
    assert d is not None
    left = documented_away(d, ["ConfigMap/openshift-config/lockkeeper-record-*", "Node/node01#/spec/unschedulable", "host/*/image"])
    assert [o.key for o in left.objects] == ["DaemonSet/openshift-sdn/sdn"] and [s.key for s in left.state] == [RULE.key]
    assert documented_away(d, []) is d


def test_a_left_changed_that_misses_or_invents_something_fails_listing_both_sides() -> None:
    with pytest.raises(Mismatch) as err:
        judge(case("aborted", [DS], []))
    text = str(err.value)
    assert "daemonset/abort (wf-1): ended 'aborted' (aborted for the test)" in text
    assert ('DaemonSet openshift-sdn/sdn: changed DaemonSet/openshift-sdn/sdn /spec/template/spec/containers/0/image [spec] '
            '"stock" -> "custom"') in text
    assert "only in the diff: ['DaemonSet openshift-sdn/sdn']" in text
    with pytest.raises(Mismatch) as err:
        judge(case("aborted", [], ["Node node01"]))
    assert "only in left_changed: ['Node node01']" in str(err.value) and "(nothing)" in str(err.value)
    with pytest.raises(Mismatch) as err:  # the rule left on the host, not named
        judge(case("aborted", [DS], ["DaemonSet openshift-sdn/sdn"], state=[RULE]))
    assert "only in the diff: ['host node01']" in str(err.value)


def test_a_case_that_never_reached_its_step_or_never_ended_is_not_judged() -> None:
    with pytest.raises(NotJudged):
        judge(case("completed", reached=False))
    with pytest.raises(NotJudged):
        judge(case("timeout"))
