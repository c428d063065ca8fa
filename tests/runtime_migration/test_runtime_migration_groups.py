"""The post-check's node groups, the outcome summary and the record ConfigMap's data (pure)."""

from __future__ import annotations

import json

from workflows.kit.records import record_configmap_name
from workflows.runtime_migration import plan
from workflows.runtime_migration.models import NodeRecordView, PackageFinding
from workflows.runtime_migration.postcheck import summary

INFRA = {"node-role.kubernetes.io/infra": "true", "glusterfs": "storage-host"}
COMPUTE = {"node-role.kubernetes.io/compute": "true"}


def test_node_group_is_the_roles() -> None:
    assert plan.node_group(INFRA) == "infra"
    assert plan.node_group({**INFRA, "node-role.kubernetes.io/compute": "true"}) == "compute,infra"
    assert plan.node_group({"runtime": "cri-o"}) == ""


def test_versions_are_compared_within_the_node_group_only() -> None:
    groups = {"g1": "infra", "i1": "infra", "c1": "compute", "c2": "compute"}
    base = {"g1": {"atomic-openshift-node": "3.11.161", "glusterfs-fuse": "3.12"}}
    now = {
        "g1": {"atomic-openshift-node": "3.11.170", "glusterfs-fuse": "3.12"},
        "i1": {"atomic-openshift-node": "3.11.161", "glusterfs-fuse": "3.12"},
        # compute nodes: on the newer build, and without glusterfs-fuse but with a compute-only package
        "c1": {"atomic-openshift-node": "3.11.170", "gitea-tools": "1"},
        "c2": {"atomic-openshift-node": "3.11.170", "gitea-tools": "1"},
    }
    versions = {"g1": {"kubelet": "v1.11.0+new", "runtime": "docker://1.13.1"},
                "i1": {"kubelet": "v1.11.0+old", "runtime": "docker://1.13.0"},
                "c1": {"kubelet": "v1.11.0+new", "runtime": "docker://1.13.1"},
                "c2": {"kubelet": "v1.11.0+new", "runtime": "cri-o://1.11"}}
    found = plan.package_findings(base, now, ["g1"], ["i1", "c1", "c2"], groups=groups, node_versions=versions)
    assert sorted((f.kind, f.package, f.group) for f in found) == [
        ("version", "atomic-openshift-node", "infra"), ("version", "kubelet", "infra"), ("version", "runtime", "infra")]
    assert all("of group infra" in f.message for f in found)
    # Against every peer (no groups) the drift hides (161 vs 170 disagree) and the compute-only
    # package is reported missing on the infra node: the two errors grouping avoids.
    flat = plan.package_findings(base, now, ["g1"], ["i1", "c1", "c2"])
    assert [(f.kind, f.package) for f in flat] == [("missing", "gitea-tools")]


def test_runtime_is_compared_with_the_same_runtime_only_and_a_lone_group_uses_its_migrated_nodes() -> None:
    groups = {"g1": "infra", "g2": "infra", "c1": "compute"}
    now = {"g1": {"docker": "1.13.1"}, "g2": {"docker": "1.13.0"}, "c1": {"docker": "1.13.1"}}
    versions = {"g1": {"kubelet": "v1", "runtime": "docker://1.13.1"}, "g2": {"kubelet": "v1", "runtime": "cri-o://1.11"},
                "c1": {"kubelet": "v2", "runtime": "docker://1.13.1"}}
    # g1 and g2 were both migrated; the infra group has no other peer, so they are compared with each other.
    found = plan.package_findings({}, now, ["g1", "g2"], ["c1"], groups=groups, node_versions=versions)
    assert sorted((f.node, f.package) for f in found) == [("g1", "docker"), ("g2", "docker")]


def test_summary_tells_what_is_installed_and_what_is_still_missing() -> None:
    f = [PackageFinding(kind="missing", node="g1", package="atomic-openshift-excluder", message="m", resolved="installed after gate x"),
         PackageFinding(kind="missing", node="g2", package="atomic-openshift-excluder", message="m", resolved="install failed: exit 1"),
         PackageFinding(kind="missing", node="g2", package="glusterfs-fuse", message="m"),
         PackageFinding(kind="version", node="g1", package="kubelet", message="m")]
    assert summary(f) == ("atomic-openshift-excluder was missing on g1 and is installed again; atomic-openshift-excluder missing on g2; "
                          "glusterfs-fuse missing on g2; version differences within the node group: kubelet on g1")
    assert summary([]) == ""


def test_record_configmap_name_and_data() -> None:
    assert record_configmap_name("runtime-migration-2026/Nov_23") == "lockkeeper-record-runtime-migration-2026-nov-23"
    rec = NodeRecordView(uid="u1", labels={"runtime": "cri-o"}, bootstrap_config="node-config-infra-crio", boot_id="b1",
                         packages={"docker": "1.13.1"}, addresses=["10.0.0.5"],
                         node_object={"metadata": {"name": "g1", "managedFields": [{"x": 1}]}, "spec": {}})
    data = plan.record_data("g1", rec, "recorded")
    body = json.loads(data["g1.json"])
    assert (body["uid"], body["bootstrap_config"], body["packages"], body["addresses"]) == ("u1", "node-config-infra-crio", {"docker": "1.13.1"}, ["10.0.0.5"])
    assert body["node_object"] == {"metadata": {"name": "g1"}, "spec": {}} and data["g1.state"] == "recorded"


def test_panels_show_what_was_resolved_and_where_the_records_are() -> None:
    from rich.console import Console

    from lockkeeper.cli.start.runtime_migration import PROCEDURE
    from lockkeeper.panels import result_panel, status_panel
    from workflows.runtime_migration.models import NodeMigrationResult, NodeMigrationStatus, RuntimeMigrationResult, RuntimeMigrationStatus

    row = NodeMigrationStatus(node="g1", phase="done", step="finished", record_configmap="openshift-config/lockkeeper-record-rm-1")
    finding = PackageFinding(kind="missing", node="g1", package="atomic-openshift-excluder", message="package x missing now",
                             resolved="installed after gate post-check/install (approved by bob)")
    console = Console(width=200, record=True)
    console.print(status_panel(PROCEDURE, RuntimeMigrationStatus(nodes={"g1": row}, findings=[finding])))
    console.print(result_panel(PROCEDURE, RuntimeMigrationResult(nodes=[NodeMigrationResult(node="g1", outcome="done", status=row)])))
    text = console.export_text()
    assert "installed after gate post-check/install (approved by bob)" in text
    assert text.count("ConfigMap openshift-config/lockkeeper-record-rm-1") == 2


def test_record_namespace_must_be_a_namespace_name() -> None:
    import pytest
    from pydantic import ValidationError

    from activities.host.models import HostAccess
    from workflows.runtime_migration.models import ExternalStep, RuntimeMigrationInput

    fields = {"nodes": ["g1"], "host_access": {"g1": HostAccess(backend="ssh", host="10.0.0.5")},
              "scaleup_step": ExternalStep(argv=["ansible-playbook"])}
    assert RuntimeMigrationInput(**fields).record_namespace == "openshift-config"
    with pytest.raises(ValidationError, match="not a namespace name"):
        RuntimeMigrationInput(**fields, record_namespace="Openshift Config")
