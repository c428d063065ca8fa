"""lockkeeper's side effects: the Kubernetes gateway and the activities built on it.

Workflows import only :mod:`activities.models` (plain pydantic models), so this package
imports nothing heavy up front: ``KubeGateway``, ``ClusterActivities`` and
``make_activities`` load ``kubernetes`` on first access.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ClusterActivities", "KubeGateway", "make_activities"]


def __getattr__(name: str) -> Any:
    if name == "KubeGateway":
        from activities.k8s import KubeGateway

        return KubeGateway
    if name in ("ClusterActivities", "make_activities"):
        from activities import machineconfig

        return getattr(machineconfig, name)
    raise AttributeError(f"module 'activities' has no attribute {name!r}")
