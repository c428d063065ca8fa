"""The ``cno:`` section and the pure rules of the simulated cluster-network-operator.

Section (all optional)::

    cno:
      early_switch: false      # fault: apply a network-type switch while pools are still updating
      ovn_files: [/etc/NetworkManager/conf.d/ovn-kubernetes.conf, /etc/ovn-kubernetes/ovnkube-node.conf]
      ovn_image: quay.io/...@sha256:ovn-kubernetes

Rendering: while the wanted plugin (``spec.migration.networkType`` of ``network.operator/cluster``,
else ``spec.networkType`` of ``network.config/cluster``) is OVNKubernetes, every pool's rendered
config includes the MachineConfig ``99-<role>-ovn`` (role ``master`` for the master pool,
``worker`` for the others, as custom pools inherit the worker MachineConfigs); otherwise it does
not. A rendered config is named after a hash of its sources, so going back to the old sources
gives back the old rendered config (the MCO's naming by content does the same).

The switch: by default the model applies a ``spec.networkType`` change only when every pool is
Updated=True/Updating=False or paused (the documented procedures pause the pools before the
switch; the safe side otherwise, so the healthy path is not a race); the fault
``early_switch`` applies it at once, as the 4.14 operator in R1 did. A change without the matching
``spec.migration.networkType`` is refused (operator condition Degraded), as the real operator
refuses an unprepared type change.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from clustersim.agents.objects import short_hash

OVN = "OVNKubernetes"
SDN = "OpenShiftSDN"
DEFAULT_OVN_FILES = ["/etc/NetworkManager/conf.d/ovn-kubernetes.conf", "/etc/ovn-kubernetes/ovnkube-node.conf"]


class CnoSection(BaseModel):
    """The ``cno:`` section (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    early_switch: bool = False
    ovn_files: list[str] = Field(default_factory=lambda: list(DEFAULT_OVN_FILES))
    ovn_image: str = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:ovn-kubernetes"


def ovn_machineconfig(pool: str) -> str:
    """Name of the MachineConfig carrying the OVN host files for ``pool``."""
    return f"99-{'master' if pool == 'master' else 'worker'}-ovn"


def wanted_sources(pool: str, sources: Iterable[str], want_ovn: bool) -> list[str]:
    """The pool's rendered-config sources with (``want_ovn``) or without the OVN MachineConfig,
    order kept, the OVN one last."""
    ovn = ovn_machineconfig(pool)
    rest = [s for s in sources if s != ovn]
    return rest + [ovn] if want_ovn else rest


def rendered_name(pool: str, sources: Iterable[str]) -> str:
    """``rendered-<pool>-<32 hex>`` from the pool and its (sorted) sources."""
    return f"rendered-{pool}-{short_hash(pool, *sorted(sources), length=32)}"
