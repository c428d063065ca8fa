"""Lease scopes (DESIGN.md "Lease"): what a procedure holds exclusively, as strings.

``node/<cluster>/<node>``, ``pool/<cluster>/<pool>``, ``cluster/<cluster>`` and the named
subsystems ``gluster/<cluster>``, ``sdn/<cluster>``, ``etcd/<cluster>``. Two scopes overlap when
they are the same string, or when one is ``cluster/<c>`` and the other any scope of <c>. Each
scope maps to one lease workflow ID (:func:`scope_workflow_id`). Pure: no Temporal import.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

#: Scope kinds (DESIGN.md "Lease"): ``node/<cluster>/<node>``, ``pool/<cluster>/<pool>``,
#: ``cluster/<cluster>`` and the named subsystems ``gluster/<cluster>``, ``sdn/<cluster>``,
#: ``etcd/<cluster>``.
SCOPE_KINDS = ("node", "pool", "cluster", "gluster", "sdn", "etcd")
SUBSYSTEM_SCOPES = ("gluster", "sdn", "etcd")


class LeaseScope(BaseModel):
    """A parsed scope string: ``kind``, ``cluster`` and (node, pool) ``name``."""

    kind: Literal["node", "pool", "cluster", "gluster", "sdn", "etcd"]
    cluster: str
    name: str = ""

    @classmethod
    def parse(cls, scope: str) -> LeaseScope:
        """``"node/c1/worker-0"`` → LeaseScope(node, c1, worker-0); raises ValueError for a
        malformed scope (unknown kind, missing cluster, a name on a cluster-wide scope)."""
        parts = scope.split("/")
        kind = parts[0]
        if kind not in SCOPE_KINDS or len(parts) < 2 or not parts[1]:
            raise ValueError(f"bad lease scope {scope!r}: want node|pool/<cluster>/<name> or cluster|gluster|sdn|etcd/<cluster>")
        named = kind in ("node", "pool")
        if (named and (len(parts) != 3 or not parts[2])) or (not named and len(parts) != 2):
            raise ValueError(f"bad lease scope {scope!r}: {kind} scopes are {kind}/<cluster>{'/<name>' if named else ''}")
        return cls(kind=kind, cluster=parts[1], name=parts[2] if named else "")  # type: ignore[arg-type]

    def __str__(self) -> str:
        return f"{self.kind}/{self.cluster}/{self.name}" if self.name else f"{self.kind}/{self.cluster}"

    def describe(self) -> str:
        """Human words: "pool worker on cluster c1", "node n1 on cluster c1", "cluster c1",
        "gluster on cluster c1"."""
        if self.kind == "cluster":
            return f"cluster {self.cluster}"
        return f"{self.kind} {self.name} on cluster {self.cluster}" if self.name else f"{self.kind} on cluster {self.cluster}"


def node_scope(cluster: str, node: str) -> str:
    return f"node/{cluster}/{node}"


def pool_scope(cluster: str, pool: str) -> str:
    return f"pool/{cluster}/{pool}"


def cluster_scope(cluster: str) -> str:
    return f"cluster/{cluster}"


def subsystem_scope(kind: Literal["gluster", "sdn", "etcd"], cluster: str) -> str:
    return f"{kind}/{cluster}"


def scopes_overlap(a: str, b: str) -> bool:
    """Same scope, or a ``cluster/<c>`` scope against any scope of cluster <c>."""
    sa, sb = LeaseScope.parse(a), LeaseScope.parse(b)
    return str(sa) == str(sb) or (sa.cluster == sb.cluster and "cluster" in (sa.kind, sb.kind))


def lease_workflow_id(cluster: str, pool: str) -> str:
    """``lease/{cluster}/{pool}``: the workflow ID that makes a pool's lease exclusive (the
    rollout's ID scheme since the first lease; stored histories depend on it)."""
    return f"lease/{cluster}/{pool}"


def scope_workflow_id(scope: str) -> str:
    """The lease workflow ID of any scope. Pools keep :func:`lease_workflow_id`; the others get
    ``lease/<cluster>/<kind>:<name>`` or ``lease/<cluster>/@<kind>``. ``:`` and ``@`` never occur
    in Kubernetes object names, so no scope can collide with a pool's ID."""
    s = LeaseScope.parse(scope)
    if s.kind == "pool":
        return lease_workflow_id(s.cluster, s.name)
    return f"lease/{s.cluster}/{s.kind}:{s.name}" if s.name else f"lease/{s.cluster}/@{s.kind}"
