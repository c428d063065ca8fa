"""Inputs and results of the runtime-migration activities (procedures-spec §6, R4).

Plain pydantic v2 models; workflows import them through ``imports_passed_through``. Nothing here
holds a secret: the external commands' credentials (an Ansible inventory, SSH keys) live on the
worker, only their argv travels in history.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class NodeObjectInput(BaseModel):
    """Read Node ``node`` (absent is an answer, not an error)."""

    node: str


class NodeObject(BaseModel):
    """A Node as the migration sees it: ``exists``; ``uid``; ``ready`` (condition Ready=True);
    ``runtime`` (``status.nodeInfo.containerRuntimeVersion``, e.g. ``docker://1.13.1``,
    ``cri-o://1.11.16``); ``kubelet_version`` (``status.nodeInfo.kubeletVersion``); ``labels``;
    ``unschedulable``; ``addresses``; ``raw`` the full object as served (the record kept before
    the delete); ``zone`` (label ``topology.kubernetes.io/zone``) and ``created``
    (``metadata.creationTimestamp``) for the node order (None in results recorded before)."""

    name: str
    exists: bool = False
    uid: str = ""
    ready: bool = False
    runtime: str = ""
    kubelet_version: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    unschedulable: bool = False
    addresses: list[str] = Field(default_factory=list)
    raw: dict[str, Any] | None = None
    zone: str | None = None
    created: datetime | None = None


class ListNodesInput(BaseModel):
    """Every Node's name and labels (peers for the package post-check)."""


class NodeLabels(BaseModel):
    """``nodes``: node name → labels."""

    nodes: dict[str, dict[str, str]] = Field(default_factory=dict)


class ExternalObjectsInput(BaseModel):
    """The namespaces an external step (the node-group playbook) is documented to write to:
    ``openshift-node`` (the node-group ConfigMaps)."""

    namespaces: list[str]


class ExternalObjects(BaseModel):
    """``objects``: target (``Namespace NAME``, ``ConfigMap NS/NAME``, as the simulator's diff
    names them) → the command that deletes it, for each existing namespace of the input and each
    ConfigMap in it."""

    objects: dict[str, str] = Field(default_factory=dict)
