"""Node (re-)registration as a kubelet performs it, as a ``Store`` mixin.

A kubelet that starts on a host whose Node object is gone creates a new Node: same name, a new
``metadata.uid`` and ``creationTimestamp`` (k8s ``pkg/kubelet/kubelet_node_status.go``,
``registerWithAPIServer``). When a Node of that name still exists the kubelet keeps it (it only
reconciles a few labels), so registration returns the existing object unchanged. Other
components (hosts rejoining, the scale-up playbook stand-in) call ``sim.store.register_node``.
"""

from __future__ import annotations

import copy
from typing import Any

# Identity and bookkeeping fields a new registration never inherits from a template object.
_FRESH_META = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
               "generation", "managedFields", "ownerReferences", "finalizers")


class NodeRegistrationMixin:
    """Adds ``register_node`` to ``Store`` (uses its ``try_get`` and ``create``)."""

    try_get: Any
    create: Any

    def register_node(self, node: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Register ``node`` (a Node object, e.g. a copy of the deleted one, or a fresh one).

        Returns ``(stored node copy, created)``: ``created`` is False when a Node of that name
        already existed (returned unchanged). A created Node gets a new uid and creationTimestamp;
        uid/resourceVersion/deletion fields of ``node`` are ignored. Raises ApiError 422 without
        ``metadata.name``.
        """
        name = (node.get("metadata") or {}).get("name", "")
        existing = self.try_get("nodes", name) if name else None
        if existing is not None:
            return existing, False
        fresh = copy.deepcopy(node)
        meta = fresh.setdefault("metadata", {})
        for key in _FRESH_META:
            meta.pop(key, None)
        return self.create("nodes", fresh), True
