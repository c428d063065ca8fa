"""The ``mco:`` scenario section: an OpenShift 4.16+ machine-config world (MachineConfigNodes,
``MachineConfiguration/cluster`` with node disruption policies).

Section (all optional; the section's presence is what turns it on)::

    mco:
      version: "4.21"                  # the MCO/openshift-api release the behaviour follows (informational)
      release: "4.21.3"                # release-image-version annotation of the rendered configs
      machine_config_nodes: true       # serve machineconfignodes; the daemon writes their status
      machine_configuration: true      # serve machineconfigurations; the daemon follows the disruption policies
      node_disruption_policy:          # MachineConfiguration/cluster spec.nodeDisruptionPolicy
        files: [{path: /etc/my.conf, actions: [{type: Restart, restart: {serviceName: my.service}}]}]
        units: [{name: my.service, actions: [{type: DaemonReload}]}]
        sshkey: {actions: [{type: None}]}
      irreconcilable_changes:          # node -> MachineConfigNode status.irreconcilableChanges
        qsu-worker-03: [{fieldPath: spec.config.storage.disks, diff: "..."}]

Without the section (every scenario written before it) nothing of this is served and the daemon
drains and reboots for every change, as before. :func:`build_mco_objects` builds the objects as
the operator and the daemons would have left them on a settled cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from clustersim.mco.disruption import ACTION_TYPES, SPECIAL, merge_cluster_policies
from clustersim.mco.mcn import MCN, new_machine_config_node, primary_pool, steady_status

MACHINECONFIGURATION = "machineconfigurations.operator.openshift.io"
#: ``ctrlcommon.MCOOperatorKnobsObjectName``.
MACHINECONFIGURATION_NAME = "cluster"


class IrreconcilableChange(BaseModel):
    """One ``IrreconcilableChangeDiff``: ``fieldPath`` (starts with ``spec.``, at most 70
    characters) and ``diff`` (1..4096 characters)."""

    model_config = ConfigDict(extra="forbid")

    fieldPath: str = Field(min_length=1, max_length=70, pattern=r"^spec\.[\da-zA-Z.\[\]]*$")  # noqa: N815 (API name)
    diff: str = Field(min_length=1, max_length=4096)


class McoSection(BaseModel):
    """The ``mco:`` section (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    version: str = "4.21"
    release: str = "4.21.3"
    machine_config_nodes: bool = True
    machine_configuration: bool = True
    node_disruption_policy: dict[str, Any] = Field(default_factory=dict)
    irreconcilable_changes: dict[str, list[IrreconcilableChange]] = Field(default_factory=dict)

    @field_validator("node_disruption_policy")
    @classmethod
    def _policy(cls, v: dict[str, Any]) -> dict[str, Any]:
        extra = set(v) - {"files", "units", "sshkey"}
        if extra:
            raise ValueError(f"node_disruption_policy: unknown keys {sorted(extra)}")
        actions = [a for f in v.get("files") or [] for a in f.get("actions") or []]
        actions += [a for u in v.get("units") or [] for a in u.get("actions") or []]
        actions += list((v.get("sshkey") or {}).get("actions") or [])
        for a in actions:
            if a.get("type") not in ACTION_TYPES or a.get("type") == SPECIAL:
                raise ValueError(f"node_disruption_policy: action type {a.get('type')!r} is not one of "
                                 "None, Drain, Reload, Restart, DaemonReload, Reboot")
        return v

    def served(self) -> list[str]:
        """The optional resource keys this section serves."""
        out = []
        if self.machine_config_nodes:
            out.append(MCN)
        if self.machine_configuration:
            out.append(MACHINECONFIGURATION)
        return out


def machine_configuration(spec_policy: dict[str, Any], created: str) -> dict[str, Any]:
    """``MachineConfiguration/cluster`` as the operator leaves it after a sync
    (``syncMachineConfiguration``): spec ``managementState: Managed`` plus ``spec_policy`` as
    ``nodeDisruptionPolicy``; status ``observedGeneration`` 1 and the merged ``clusterPolicies``."""
    return {
        "apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
        "metadata": {"name": MACHINECONFIGURATION_NAME, "creationTimestamp": created, "generation": 1},
        "spec": {"managementState": "Managed", "logLevel": "Normal", "operatorLogLevel": "Normal",
                 "nodeDisruptionPolicy": dict(spec_policy)},
        "status": {"observedGeneration": 1, "conditions": [],
                   "nodeDisruptionPolicyStatus": {"clusterPolicies": merge_cluster_policies(spec_policy)}},
    }


def build_mco_objects(section: McoSection, nodes: Sequence[dict[str, Any]], pools: Sequence[dict[str, Any]],
                      created: str, now: str) -> list[tuple[str, dict[str, Any]]]:
    """The section's objects: ``MachineConfiguration/cluster`` and one settled MachineConfigNode per
    node (created ``created``, conditions at ``now``). Raises ValueError for an
    ``irreconcilable_changes`` entry naming no node."""
    out: list[tuple[str, dict[str, Any]]] = []
    names = {n["metadata"]["name"] for n in nodes}
    unknown = sorted(set(section.irreconcilable_changes) - names)
    if unknown:
        raise ValueError(f"mco.irreconcilable_changes: unknown nodes {unknown}")
    if section.machine_configuration:
        out.append((MACHINECONFIGURATION, machine_configuration(section.node_disruption_policy, created)))
    if section.machine_config_nodes:
        for node in nodes:
            mcn = new_machine_config_node(node, primary_pool(node, pools), created)
            mcn["status"] = steady_status(mcn, node, now)
            changes = section.irreconcilable_changes.get(node["metadata"]["name"])
            if changes:
                mcn["status"]["irreconcilableChanges"] = [c.model_dump() for c in changes]
            out.append((MCN, mcn))
    return out
