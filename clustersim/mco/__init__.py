"""The OpenShift 4.16+ machine-config world of clustersim (the ``mco:`` scenario section).

- ``clustersim.mco.disruption``: node disruption policies, the pure "actions of a diff" functions
  (:func:`~clustersim.mco.disruption.disruption_actions`, :func:`~clustersim.mco.disruption.drain_required`);
- ``clustersim.mco.mcn``: MachineConfigNode objects and the upgrade monitor's condition rules;
- ``clustersim.mco.model``: the scenario section and the objects it starts with.

The simulated machine-config-daemon (clustersim.agents.mcd) and controller (clustersim.mcc) use
them when the store serves the kinds (``Store.serves``). Sources: openshift/machine-config-operator
and openshift/api ``release-4.21`` (cited per module).
"""

from __future__ import annotations

from clustersim.mco.disruption import (
    DEFAULT_CLUSTER_POLICIES,
    ConfigDiff,
    actions_for_changes,
    config_diff,
    disruption_actions,
    drain_required,
    merge_cluster_policies,
)
from clustersim.mco.mcn import MCN, Condition, apply_conditions
from clustersim.mco.model import MACHINECONFIGURATION, McoSection

__all__ = ["DEFAULT_CLUSTER_POLICIES", "MACHINECONFIGURATION", "MCN", "Condition", "ConfigDiff", "McoSection",
           "actions_for_changes", "apply_conditions", "config_diff", "disruption_actions", "drain_required",
           "merge_cluster_policies"]
