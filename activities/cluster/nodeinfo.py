"""A Node JSON object as :class:`~activities.cluster.models.NodeInfo` (pure readers)."""

from __future__ import annotations

from typing import Any

from activities.cluster.models import (
    ANN_CORDONED_BY,
    ANN_CURRENT_CONFIG,
    ANN_DESIRED_CONFIG,
    ANN_DESIRED_DRAIN,
    ANN_LAST_APPLIED_DRAIN,
    ANN_REASON,
    ANN_STATE,
    POOL_LABEL_PREFIX,
    ZONE_LABEL,
    NodeInfo,
)
from activities.kube.objects import annotations, condition, labels, meta, parse_time


def pool_of_node_labels(node_labels: dict[str, str]) -> str | None:
    """The pool a node's role labels suggest: a custom role before ``worker`` (as MCO pools
    for custom roles select nodes that are also workers), ``master`` first of all."""
    roles = sorted(k[len(POOL_LABEL_PREFIX) :] for k in node_labels if k.startswith(POOL_LABEL_PREFIX))
    if not roles:
        return None
    if "master" in roles:
        return "master"
    custom = [r for r in roles if r not in ("worker", "control-plane")]
    return custom[0] if custom else roles[0]


def node_info(obj: dict[str, Any], pool: str | None = None) -> NodeInfo:
    """A Node JSON object -> :class:`NodeInfo` (MCO annotations, Ready, unschedulable, ...)."""
    md = meta(obj)
    ann = annotations(obj)
    node_labels = labels(obj)
    return NodeInfo(
        name=md.get("name", ""),
        pool=pool or pool_of_node_labels(node_labels),
        zone=node_labels.get(ZONE_LABEL),
        created=parse_time(md.get("creationTimestamp")),
        current_config=ann.get(ANN_CURRENT_CONFIG),
        desired_config=ann.get(ANN_DESIRED_CONFIG),
        state=ann.get(ANN_STATE),
        reason=ann.get(ANN_REASON),
        desired_drain=ann.get(ANN_DESIRED_DRAIN),
        last_applied_drain=ann.get(ANN_LAST_APPLIED_DRAIN),
        unschedulable=bool((obj.get("spec") or {}).get("unschedulable")),
        ready=condition(obj, "Ready") == "True",
        cordoned_by=ann.get(ANN_CORDONED_BY),
        resource_version=md.get("resourceVersion"),
    )


def node_summary(info: NodeInfo) -> dict[str, Any]:
    """The small JSON summary of a node sent as heartbeat details."""
    return {
        "node": info.name,
        "state": info.state,
        "current_config": info.current_config,
        "desired_config": info.desired_config,
        "desired_drain": info.desired_drain,
        "last_applied_drain": info.last_applied_drain,
        "unschedulable": info.unschedulable,
        "ready": info.ready,
        "resource_version": info.resource_version,
    }
