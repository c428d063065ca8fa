"""Per-kind one-line conveniences over the gateway's generic verbs (``get_node``, ``list_pods``,
``evict_pod``, ``create_node_event``...), kept so callers read in the field's terms.

:class:`KindShortcuts` is a mixin of :class:`activities.kube.gateway.KubeGateway`; it relies on
the verbs ``get``, ``list``, ``list_with_rv``, ``create``, ``patch``, ``delete``, ``watch`` and
``evict`` of that class and adds no request of its own. Errors: :mod:`activities.kube.errors`.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any


class KindShortcuts:
    """Node, Pod, PodDisruptionBudget, Event, MachineConfigPool, MachineConfig,
    MachineConfigNode, MachineConfiguration and cluster Network shortcuts (see the module docstring)."""

    get: Any
    list: Any
    list_with_rv: Any
    create: Any
    patch: Any
    delete: Any
    watch: Any
    evict: Any

    def get_node(self, name: str) -> dict[str, Any]:
        """GET /api/v1/nodes/NAME. Raises NotFound."""
        return self.get("Node", name)

    def list_nodes(self, label_selector: str | None = None, field_selector: str | None = None) -> builtins.list[dict[str, Any]]:
        """Nodes matching the selectors (all when None)."""
        return self.list("Node", label_selector=label_selector, field_selector=field_selector)

    def list_nodes_with_rv(
        self, label_selector: str | None = None, field_selector: str | None = None
    ) -> tuple[builtins.list[dict[str, Any]], str | None]:
        """Nodes plus the list's resourceVersion (to start a watch from)."""
        return self.list_with_rv("Node", label_selector=label_selector, field_selector=field_selector)

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Merge-patch a Node (see :meth:`patch`). Returns the Node."""
        return self.patch("Node", name, patch)

    def watch_node(
        self, name: str, *, resource_version: str | None, timeout_seconds: int
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """:meth:`watch` of one Node."""
        return self.watch("Node", name=name, resource_version=resource_version, timeout_seconds=timeout_seconds)

    def list_pods(
        self, namespace: str | None = None, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        """Pods in ``namespace`` (all namespaces when None) matching the selectors."""
        return self.list("Pod", namespace, label_selector=label_selector, field_selector=field_selector)

    def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        """GET one Pod. Raises NotFound."""
        return self.get("Pod", name, namespace)

    def evict_pod(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> None:
        """:meth:`evict`."""
        self.evict(namespace, name, grace_period_seconds=grace_period_seconds)

    def delete_pod(self, namespace: str, name: str, *, grace_period_seconds: int | None = None,
                   uid: str | None = None) -> dict[str, Any]:
        """DELETE one Pod (graceful unless ``grace_period_seconds`` is 0; with ``uid``, only that
        incarnation). Raises NotFound, Conflict (another uid)."""
        return self.delete("Pod", name, namespace, grace_period_seconds=grace_period_seconds, uid=uid)

    def list_pdbs(self, namespace: str) -> builtins.list[dict[str, Any]]:
        """PodDisruptionBudgets (policy/v1) in ``namespace``."""
        return self.list("PodDisruptionBudget", namespace)

    def list_events(self, namespace: str, *, field_selector: str | None = None) -> builtins.list[dict[str, Any]]:
        """core/v1 Events in ``namespace`` (e.g. ``involvedObject.name=POD``)."""
        return self.list("Event", namespace, field_selector=field_selector)

    def create_node_event(
        self,
        *,
        node: str,
        node_uid: str | None,
        reason: str,
        message: str,
        type: str = "Normal",
        component: str = "lockkeeper",
        namespace: str = "default",
        instance: str | None = None,
    ) -> dict[str, Any]:
        """Create a core/v1 Event about a Node (``involvedObject`` kind Node), as kubelet and
        the machine-config-daemon do: namespace ``default``, name ``NODE.<suffix>``;
        ``reportingInstance`` is ``instance`` (e.g. the procedure's workflow ID), else
        ``component``."""
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        involved: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "name": node}
        if node_uid:
            involved["uid"] = node_uid
        body = {
            "metadata": {"generateName": f"{node}.", "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": type,
            "source": {"component": component},
            "reportingComponent": component,
            "reportingInstance": instance or component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        return self.create("Event", body, namespace)

    def list_machineconfigpools(self) -> builtins.list[dict[str, Any]]:
        """machineconfiguration.openshift.io/v1 MachineConfigPools."""
        return self.list("MachineConfigPool")

    def list_machineconfigs(self) -> builtins.list[dict[str, Any]]:
        """machineconfiguration.openshift.io/v1 MachineConfigs (rendered and source)."""
        return self.list("MachineConfig")

    def get_machine_configuration(self, name: str = "cluster") -> dict[str, Any]:
        """``machineconfigurations.operator.openshift.io/cluster`` (OpenShift 4.16+: node
        disruption policies). Raises NotFound (older clusters, plain Kubernetes)."""
        return self.get("MachineConfiguration", name)

    def list_machine_config_nodes(self, name: str | None = None) -> builtins.list[dict[str, Any]]:
        """machineconfiguration.openshift.io/v1 MachineConfigNodes (only ``name``'s with a name:
        an empty list when it has none). Raises NotFound when the API serves no MachineConfigNodes
        (before OpenShift 4.16)."""
        return self.list("MachineConfigNode", field_selector=f"metadata.name={name}" if name else None)

    def list_machines(self) -> builtins.list[dict[str, Any]]:
        """machine.openshift.io/v1beta1 Machines of every namespace. Raises NotFound where the
        Machine API is not served."""
        return self.list("Machine")

    def list_machine_health_checks(self) -> builtins.list[dict[str, Any]]:
        """machine.openshift.io/v1beta1 MachineHealthChecks of every namespace. Raises NotFound
        where the Machine API is not served."""
        return self.list("MachineHealthCheck")

    def get_network_config(self, name: str = "cluster") -> dict[str, Any]:
        """``networks.config.openshift.io/cluster``. Raises NotFound (plain Kubernetes)."""
        return self.get("Network", name)

    def patch_network_config(self, patch: dict[str, Any], name: str = "cluster") -> dict[str, Any]:
        """Merge-patch ``networks.config.openshift.io/cluster``."""
        return self.patch("Network", name, patch)
