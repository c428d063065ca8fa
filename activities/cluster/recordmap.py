"""The record ConfigMap write every procedure with records shares (procedures-spec §1.6).

A procedure that changes what Temporal alone would remember (a node it deletes and re-installs,
a host file it rewrites) mirrors its records to ConfigMap ``<namespace>/lockkeeper-record-<workflow
id>`` (the name: :func:`workflows.kit.records.record_configmap_name`), so the cluster can be
recovered without Temporal. The procedures register it under their own activity names
(``save_node_record``, ``save_vxlan_record``: names stored in their histories); the write is
this one function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from activities.cluster.models import SaveRecordInput, SaveRecordResult
from activities.context import log
from activities.kube import objects
from activities.kube.errors import Conflict, NotFound

if TYPE_CHECKING:
    from activities.kube.gateway import KubeGateway


def save_record_configmap(gateway: KubeGateway, input: SaveRecordInput) -> SaveRecordResult:
    """Create the record ConfigMap, or merge ``input.data`` into it (idempotent: a retry writes
    the same keys again; a create that loses the race to a retry of the same call merges).
    Raises the gateway's errors (e.g. Forbidden, a missing namespace)."""
    try:
        gateway.get("ConfigMap", input.name, input.namespace)
    except NotFound:
        body = {"metadata": {"name": input.name, "labels": dict(input.labels)}, "data": dict(input.data)}
        try:
            out = gateway.create("ConfigMap", body, input.namespace)
            log().info(f"record ConfigMap {input.namespace}/{input.name} created ({', '.join(sorted(input.data))})")
            return SaveRecordResult(created=True, resource_version=str(objects.meta(out).get("resourceVersion", "")))
        except Conflict:
            pass  # a retry of this call created it in between: merge below
    out = gateway.patch("ConfigMap", input.name, {"data": dict(input.data)}, input.namespace)
    return SaveRecordResult(resource_version=str(objects.meta(out).get("resourceVersion", "")))
