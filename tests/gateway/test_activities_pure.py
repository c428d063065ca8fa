"""Unit tests of the activities' pure parts and of the gateway's error mapping (no network)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from activities.kube.errors import (
    AlreadyExists,
    Conflict,
    NotFound,
    ServerError,
    TooManyRequests,
    Unavailable,
    error_for_status,
)
from activities.kube.gateway import KubeGateway
from activities.kube.kubeconfig import mask_secrets
from activities.kube.errors import KubeconfigError
from activities.cluster.drain import classify_pod_for_drain, pdb_report
from activities.cluster.nodeinfo import node_info, pool_of_node_labels
from activities.cluster.workloads import pods_ready
from activities.kube.objects import (
    label_selector_string,
    latest_failed_scheduling_message,
    matching_pdbs,
    replacement_candidates,
    selector_matches,
)
from activities.machineconfig.activities import config_pool, newest_rendered_config, wait_condition_holds
from activities.cluster.models import ANN_CURRENT_CONFIG, ANN_DESIRED_DRAIN, ANN_STATE
from activities.machineconfig.models import WaitForNodeInput


def pod(
    name: str,
    *,
    ns: str = "app",
    owner: tuple[str, str, str] | None = ("ReplicaSet", "web-1", "uid-rs"),
    phase: str = "Running",
    annotations: dict[str, str] | None = None,
    volumes: list[dict] | None = None,
    terminating: bool = False,
    labels: dict[str, str] | None = None,
    node: str = "worker-1",
    ready: bool = True,
) -> dict:
    meta: dict = {"name": name, "namespace": ns, "uid": f"uid-{name}", "labels": labels or {}}
    if owner:
        kind, oname, uid = owner
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind, "name": oname, "uid": uid, "controller": True}]
    if annotations:
        meta["annotations"] = annotations
    if terminating:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "c"}], "volumes": volumes or []},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


# --- drain filtering (kubectl pkg/drain/filters.go) ------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "options", "action"),
    [
        ({}, {}, "evict"),
        ({"owner": ("DaemonSet", "ovnkube-node", "uid-ds")}, {}, "skip"),
        ({"owner": ("DaemonSet", "ovnkube-node", "uid-ds")}, {"ignore_daemonsets": False}, "refuse"),
        ({"owner": None, "annotations": {"kubernetes.io/config.mirror": "abc"}}, {}, "skip"),
        ({"owner": None, "annotations": {"kubernetes.io/config.mirror": "abc"}}, {"force": False}, "skip"),
        ({"volumes": [{"name": "scratch", "emptyDir": {}}]}, {}, "evict"),
        ({"volumes": [{"name": "scratch", "emptyDir": {}}]}, {"delete_emptydir_data": False}, "refuse"),
        ({"volumes": [{"name": "cfg", "configMap": {"name": "x"}}]}, {"delete_emptydir_data": False}, "evict"),
        ({"phase": "Succeeded", "volumes": [{"name": "s", "emptyDir": {}}]}, {"delete_emptydir_data": False}, "evict"),
        ({"phase": "Failed", "owner": None}, {"force": False}, "evict"),
        ({"terminating": True}, {}, "wait"),
        ({"owner": None}, {}, "evict"),
        ({"owner": None}, {"force": False}, "refuse"),
    ],
)
def test_classify_pod_for_drain(kwargs: dict, options: dict, action: str) -> None:
    disposition = classify_pod_for_drain(pod("p", **kwargs), **options)
    assert disposition.action == action
    if action == "refuse":
        assert disposition.reason.startswith("cannot delete")


def test_refusal_reasons_name_the_option() -> None:
    assert "--delete-emptydir-data" in classify_pod_for_drain(
        pod("p", volumes=[{"name": "s", "emptyDir": {}}]), delete_emptydir_data=False
    ).reason
    assert "--ignore-daemonsets" in classify_pod_for_drain(
        pod("p", owner=("DaemonSet", "d", "u")), ignore_daemonsets=False
    ).reason


# --- selectors and PDB report ----------------------------------------------------------------


def test_label_selector_string() -> None:
    assert label_selector_string(None) is None
    assert label_selector_string({}) == ""
    sel = {
        "matchLabels": {"node-role.kubernetes.io/worker": ""},
        "matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a", "b"]},
            {"key": "x", "operator": "NotIn", "values": ["1"]},
            {"key": "e", "operator": "Exists"},
            {"key": "d", "operator": "DoesNotExist"},
        ],
    }
    assert label_selector_string(sel) == "node-role.kubernetes.io/worker=,zone in (a,b),x notin (1),e,!d"
    with pytest.raises(ValueError, match="Weird"):
        label_selector_string({"matchExpressions": [{"key": "k", "operator": "Weird"}]})


def test_selector_matches() -> None:
    sel = {"matchLabels": {"app": "router"}, "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]}
    assert selector_matches(sel, {"app": "router"})
    assert selector_matches(sel, {"app": "router", "tier": "y"})
    assert not selector_matches(sel, {"app": "router", "tier": "x"})
    assert not selector_matches(sel, {"app": "db"})
    assert selector_matches({}, {"anything": "1"})
    assert not selector_matches(None, {"app": "router"})


def test_pdb_report_and_matching() -> None:
    pdb = {
        "metadata": {"name": "router-default", "namespace": "openshift-ingress"},
        "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "router"}}},
        "status": {"currentHealthy": 1, "desiredHealthy": 1, "disruptionsAllowed": 0, "expectedPods": 2},
    }
    other_ns = json.loads(json.dumps(pdb))
    other_ns["metadata"]["namespace"] = "elsewhere"
    router = pod("router-1", ns="openshift-ingress", labels={"app": "router"})
    assert matching_pdbs(router, [pdb, other_ns]) == [pdb]
    assert matching_pdbs(pod("db", ns="openshift-ingress", labels={"app": "db"}), [pdb]) == []
    report = pdb_report(pdb)
    assert (report.name, report.min_available, report.max_unavailable) == ("router-default", "50%", None)
    assert (report.current_healthy, report.desired_healthy, report.disruptions_allowed, report.expected_pods) == (1, 1, 0, 2)


# --- FailedScheduling lookup and replacements --------------------------------------------------


def test_latest_failed_scheduling_message_picks_newest() -> None:
    events = [
        {"reason": "FailedScheduling", "message": "old", "lastTimestamp": "2025-01-01T00:00:00Z", "involvedObject": {"name": "p"}},
        {"reason": "Scheduled", "message": "not this", "lastTimestamp": "2025-01-03T00:00:00Z", "involvedObject": {"name": "p"}},
        {
            "reason": "FailedScheduling",
            "message": "new",
            "eventTime": "2025-01-02T00:00:00.000000Z",
            "lastTimestamp": None,
            "involvedObject": {"name": "p"},
        },
        {"reason": "FailedScheduling", "message": "other pod", "lastTimestamp": "2025-01-04T00:00:00Z", "involvedObject": {"name": "q"}},
    ]
    assert latest_failed_scheduling_message(events, "p") == "new"
    assert latest_failed_scheduling_message(events) == "other pod"
    assert latest_failed_scheduling_message([e for e in events if e["reason"] == "Scheduled"], "p") is None
    only_created = [
        {"reason": "FailedScheduling", "message": "a", "metadata": {"creationTimestamp": "2025-01-01T00:00:00Z"}},
        {"reason": "FailedScheduling", "message": "b", "metadata": {"creationTimestamp": "2025-01-01T00:00:05Z"}},
    ]
    assert latest_failed_scheduling_message(only_created) == "b"


def test_replacement_candidates_same_controller_only() -> None:
    blocked = pod("router-a", ns="openshift-ingress", owner=("ReplicaSet", "router-default-796df5847b", "rs1"))
    same = pod("router-b", ns="openshift-ingress", owner=("ReplicaSet", "router-default-796df5847b", "rs1"), phase="Pending")
    other_rs = pod("x", ns="openshift-ingress", owner=("ReplicaSet", "other", "rs2"), phase="Pending")
    running = pod("router-c", ns="openshift-ingress", owner=("ReplicaSet", "router-default-796df5847b", "rs1"))
    other_ns = pod("router-d", ns="app", owner=("ReplicaSet", "router-default-796df5847b", "rs1"), phase="Pending")
    assert replacement_candidates(blocked, [same, other_rs, running, other_ns, blocked]) == [same]
    assert replacement_candidates(pod("bare", owner=None), [same]) == []


# --- nodes, pools, waits ------------------------------------------------------------------------


def test_node_info_reads_annotations_readiness_and_cordon() -> None:
    obj = {
        "metadata": {
            "name": "worker-1",
            "resourceVersion": "42",
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "labels": {"node-role.kubernetes.io/worker": "", "topology.kubernetes.io/zone": "z1"},
            "annotations": {
                ANN_CURRENT_CONFIG: "rendered-worker-a",
                ANN_STATE: "Degraded",
                "lockkeeper.io/cordoned-by": "wf-1",
            },
        },
        "spec": {"unschedulable": True},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    info = node_info(obj)
    assert info.pool == "worker" and info.zone == "z1" and info.current_config == "rendered-worker-a"
    assert info.unschedulable and info.ready and info.cordoned_by == "wf-1" and info.degraded
    assert info.created == datetime(2024, 5, 1, 10, tzinfo=UTC)
    assert info.resource_version == "42"


def test_pool_of_node_labels() -> None:
    role = "node-role.kubernetes.io/"
    assert pool_of_node_labels({role + "master": "", role + "worker": ""}) == "master"
    assert pool_of_node_labels({role + "infra": "", role + "worker": ""}) == "infra"
    assert pool_of_node_labels({role + "worker": ""}) == "worker"
    assert pool_of_node_labels({}) is None


def test_config_pool_prefers_owner_then_longest_prefix() -> None:
    pools = ["worker", "worker-gpu", "infra"]
    assert config_pool({"metadata": {"name": "rendered-worker-gpu-abc"}}, pools) == "worker-gpu"
    assert config_pool({"metadata": {"name": "rendered-worker-abc"}}, pools) == "worker"
    owned = {"metadata": {"name": "rendered-worker-abc", "ownerReferences": [{"kind": "MachineConfigPool", "name": "infra"}]}}
    assert config_pool(owned, pools) == "infra"
    assert config_pool({"metadata": {"name": "99-custom"}}, pools) is None


def test_newest_rendered_config_by_creation_timestamp() -> None:
    mcs = [
        {"metadata": {"name": "rendered-app-412d", "creationTimestamp": "2024-01-01T00:00:00Z"}},
        {"metadata": {"name": "rendered-app-c214", "creationTimestamp": "2024-03-01T00:00:00Z"}},
        {"metadata": {"name": "rendered-app-0000", "creationTimestamp": "2024-02-01T00:00:00Z"}},
        {"metadata": {"name": "rendered-infra-ffff", "creationTimestamp": "2025-01-01T00:00:00Z"}},
        {"metadata": {"name": "00-app", "creationTimestamp": "2026-01-01T00:00:00Z"}},
    ]
    newest = newest_rendered_config("app", mcs, ["app", "infra"])
    assert newest is not None and newest["metadata"]["name"] == "rendered-app-c214"
    assert newest_rendered_config("master", mcs, ["app", "infra", "master"]) is None


def test_wait_condition_holds() -> None:
    drain = WaitForNodeInput(node="n", value="drain-r2", any_of=[(ANN_DESIRED_DRAIN, "uncordon-r2")])
    assert wait_condition_holds(drain, {ANN_DESIRED_DRAIN: "drain-r2"})
    assert wait_condition_holds(drain, {ANN_DESIRED_DRAIN: "uncordon-r2"})
    assert not wait_condition_holds(drain, {ANN_DESIRED_DRAIN: "uncordon-r1"})
    done = WaitForNodeInput(node="n", kind="config_done", value="r2")
    assert wait_condition_holds(done, {ANN_CURRENT_CONFIG: "r2", ANN_STATE: "Done"})
    assert not wait_condition_holds(done, {ANN_CURRENT_CONFIG: "r2", ANN_STATE: "Working"})


def test_pods_ready_per_node() -> None:
    nodes = [
        {"metadata": {"name": n}, "status": {"conditions": [{"type": "Ready", "status": s}]}}
        for n, s in [("a", "True"), ("b", "True"), ("c", "False")]
    ]
    pods = [
        pod("ovn-a", node="a"),
        pod("ovn-b", node="b", ready=False),
        pod("job", node="a", phase="Succeeded", ready=False),
    ]
    result = pods_ready(pods, nodes)
    assert not result.ready and result.total == 2
    assert result.not_ready == ["app/ovn-b"] and result.nodes_missing == ["b"]
    assert pods_ready(pods[:1], None).ready


# --- errors and gateway construction ------------------------------------------------------------


def test_error_for_status_keeps_the_status_body() -> None:
    body = json.dumps(
        {
            "kind": "Status",
            "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests",
            "code": 429,
            "details": {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget db-pdb needs 1 healthy pods and has 1 currently"}]},
        }
    )
    err = error_for_status(429, body=body)
    assert isinstance(err, TooManyRequests) and err.transient
    assert err.message == "Cannot evict pod as it would violate the pod's disruption budget."
    assert err.disruption_budget_messages == ["The disruption budget db-pdb needs 1 healthy pods and has 1 currently"]
    assert isinstance(error_for_status(404, body='{"reason":"NotFound","message":"nodes \\"x\\" not found"}'), NotFound)
    assert type(error_for_status(409, body='{"reason":"Conflict","message":"m"}')) is Conflict
    assert isinstance(error_for_status(409, body='{"reason":"AlreadyExists","message":"m"}'), AlreadyExists)
    assert isinstance(error_for_status(503, body="upstream down"), Unavailable)
    plain = error_for_status(500, body="oops", what="get nodes x")
    assert isinstance(plain, ServerError) and plain.message == "oops (get nodes x)"
    assert error_for_status(429, body="{}", retry_after="10").retry_after == 10.0


def test_mask_secrets() -> None:
    text = "Authorization: Bearer eyJhbGciOi.abc-def token: s3cr3t password=hunter2"
    masked = mask_secrets(text)
    for secret in ("eyJhbGciOi", "s3cr3t", "hunter2"):
        assert secret not in masked


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (None, "does not exist"),
        ("a: b: c\n", "not valid YAML"),
        ("- a\n- b\n", "not a YAML mapping"),
        ("apiVersion: v1\nkind: Config\ncontexts: []\n", "no current-context"),
        (
            "apiVersion: v1\nclusters: [{name: c, cluster: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
            "current-context: x\nusers: [{name: u, user: {token: SECRET}}]\n",
            "has no server",
        ),
    ],
)
def test_malformed_kubeconfig_is_a_clear_error(tmp_path: Path, content: str | None, match: str) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    with pytest.raises(KubeconfigError, match=match) as info:
        KubeGateway.from_kubeconfig(path)
    assert "SECRET" not in str(info.value)


def test_kubeconfig_unknown_context_names_the_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "contexts: [{name: sim, context: {cluster: c, user: u}}]\ncurrent-context: sim\n"
        "users: [{name: u, user: {token: SECRET}}]\n"
    )
    with pytest.raises(KubeconfigError, match="no context 'prod' .contexts: sim"):
        KubeGateway.from_kubeconfig(path, context="prod")
    gateway = KubeGateway.from_kubeconfig(path)
    try:
        assert "SECRET" not in repr(gateway) and "127.0.0.1:1" in repr(gateway)
    finally:
        gateway.close()


def test_unreachable_server_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: sim, context: {cluster: c, user: u}}]\ncurrent-context: sim\nusers: [{name: u, user: {}}]\n"
    )
    gateway = KubeGateway.from_kubeconfig(path, request_timeout=(1.0, 1.0))
    try:
        with pytest.raises(Unavailable):
            gateway.get_node("x")
    finally:
        gateway.close()
