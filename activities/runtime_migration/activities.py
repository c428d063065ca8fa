"""Activities of the container-runtime migration (R4, procedures-spec §6).

- Kubernetes reads and writes the migration needs beyond the generic cluster activities: the
  full Node object (the record taken before the Node is deleted, and the re-registration check:
  new uid, Ready, runtime, labels), every Node's labels (the post-check's peers), what an
  external step created, and the record ConfigMap (the shared write of
  :mod:`activities.cluster.recordmap`). The Node delete guarded by the recorded uid is the
  generic ``delete_node``; the GlusterFS pods are the GlusterFS package's read.

Synchronous (the gateway's client blocks). The external commands (``ansible-playbook`` runs,
inventory hooks) run through the host package's ``run_node_command`` on the local backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from temporalio import activity

from activities.cluster.base import GatewayActivities
from activities.cluster.models import ZONE_LABEL, SaveRecordInput, SaveRecordResult
from activities.cluster.recordmap import save_record_configmap
from activities.kube import objects
from activities.kube.errors import NotFound
from activities.runtime_migration.models import (
    ExternalObjects,
    ExternalObjectsInput,
    ListNodesInput,
    NodeLabels,
    NodeObject,
    NodeObjectInput,
)

#: Activity names, as workflows call them.
READ_NODE_OBJECT = "read_node_object"
LIST_NODE_LABELS = "list_node_labels"
SAVE_NODE_RECORD = "save_node_record"
READ_EXTERNAL_OBJECTS = "read_external_objects"


def node_object(name: str, obj: dict[str, Any] | None) -> NodeObject:
    """A Node JSON object (or None: absent) as :class:`NodeObject` (pure)."""
    if obj is None:
        return NodeObject(name=name)
    status = obj.get("status") or {}
    return NodeObject(
        name=name,
        exists=True,
        uid=objects.meta(obj).get("uid", ""),
        ready=objects.condition(obj, "Ready") == "True",
        runtime=(status.get("nodeInfo") or {}).get("containerRuntimeVersion", ""),
        kubelet_version=(status.get("nodeInfo") or {}).get("kubeletVersion", ""),
        labels=dict(objects.labels(obj)),
        unschedulable=bool((obj.get("spec") or {}).get("unschedulable")),
        addresses=[a.get("address", "") for a in status.get("addresses") or [] if a.get("address")],
        raw=obj,
        zone=objects.labels(obj).get(ZONE_LABEL),
        created=objects.parse_time(objects.meta(obj).get("creationTimestamp")),
    )


class MigrationKubeActivities(GatewayActivities):
    """The Kubernetes activities of the migration (see the module doc)."""

    ACTIVITIES: ClassVar[tuple[str, ...]] = ("read_node_object", "list_node_labels",
                                             "save_node_record", "read_external_objects")

    @activity.defn(name=READ_NODE_OBJECT, no_thread_cancel_exception=True)
    def read_node_object(self, input: NodeObjectInput) -> NodeObject:
        """GET the Node; absent → ``exists`` False (during the migration that is a state, not
        an error). API errors as retryable ``Api*`` types (``planning_errors(policy_decides=True)``:
        the preflight fails fast under the planning retry policy, a node run keeps retrying)."""
        with self.planning_errors(policy_decides=True):
            try:
                return node_object(input.node, self.gateway.get_node(input.node))
            except NotFound:
                return node_object(input.node, None)

    @activity.defn(name=LIST_NODE_LABELS, no_thread_cancel_exception=True)
    def list_node_labels(self, input: ListNodesInput) -> NodeLabels:
        """Every Node's name and labels."""
        return NodeLabels(nodes={objects.meta(n).get("name", ""): dict(objects.labels(n)) for n in self.gateway.list_nodes()})

    @activity.defn(name=READ_EXTERNAL_OBJECTS, no_thread_cancel_exception=True)
    def read_external_objects(self, input: ExternalObjectsInput) -> ExternalObjects:
        """Each namespace of ``input`` that exists and every ConfigMap in it, with the command that
        deletes it (read before and after an external step: what it created is the difference).
        Raises the gateway's errors but NotFound (an absent namespace is left out)."""
        out: dict[str, str] = {}
        for ns in input.namespaces:
            try:
                self.gateway.get("Namespace", ns)
            except NotFound:
                continue
            out[f"Namespace {ns}"] = f"oc delete namespace {ns}"
            for cm in self.gateway.list("ConfigMap", ns):
                name = objects.meta(cm).get("name", "")
                out[f"ConfigMap {ns}/{name}"] = f"oc delete -n {ns} configmap {name}"
        return ExternalObjects(objects=out)

    @activity.defn(name=SAVE_NODE_RECORD, no_thread_cancel_exception=True)
    def save_node_record(self, input: SaveRecordInput) -> SaveRecordResult:
        """The shared record ConfigMap write (:func:`activities.cluster.recordmap.save_record_configmap`)
        under this procedure's activity name."""
        return save_record_configmap(self.gateway, input)


def make_runtime_migration_activities(gateway_factory: Callable[[], Any]) -> list[Callable[..., Any]]:
    """Every activity of the migration, on ``gateway_factory``'s gateway (the GlusterFS reads are
    the GlusterFS package's, the external steps the host package's ``run_node_command``)."""
    return MigrationKubeActivities(gateway_factory).activities()
