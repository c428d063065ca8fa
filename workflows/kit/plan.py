"""Pure planning functions every node procedure shares: decide, never do.

Deterministic and side-effect free, so a workflow calls them directly and unit tests table-test
them (tests/machineconfig/test_planning.py). The rules follow the machine-config-controller
(``pkg/controller/node/node_controller.go``: ``getAllCandidateMachines``,
``getUnavailableMachines``, ``getMaxUnavailable``) and apimachinery
``intstr.GetScaledValueFromIntOrPercent``. Procedure-specific planning (which nodes need the
change at all) lives in the procedure's own ``plan`` module and calls these.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol, TypeVar

from pydantic import BaseModel

from activities.cluster.models import NodeInfo
from workflows.kit.inputs import MaxUnavailable
from workflows.kit.inputs import resolve_max_unavailable as _resolve
from workflows.kit.models import GateKind

_EPOCH = datetime.min.replace(tzinfo=UTC)

#: The default node order: zone label, then creationTimestamp (oldest first), then name.
ZONE_OLDEST = "zone-oldest"
#: creationTimestamp (oldest first), then name; the zone is not looked at.
OLDEST_FIRST = "oldest-first"
#: creationTimestamp (newest first), then name; the zone is not looked at.
NEWEST_FIRST = "newest-first"
#: The named node orders (an explicit order is a list of node names instead).
NODE_ORDERS = (ZONE_OLDEST, OLDEST_FIRST, NEWEST_FIRST)
#: How the CLI names an explicit list (``--order explicit --node-order FILE``).
EXPLICIT = "explicit"



class ApprovalPolicy(StrEnum):
    """Where a node procedure waits for a person.

    ``none``: never (except steps a procedure always gates, such as R1's delete-all-pods);
    ``pool``: one gate before each pool; ``node``: a gate before each node;
    ``canary``: a gate after the first node of each pool completed, before the rest.
    """

    NONE = "none"
    POOL = "pool"
    NODE = "node"
    CANARY = "canary"


class PlannedGate(BaseModel):
    """A gate the plan will open: ``id`` (e.g. "pool/worker"), kind, and where.

    ``before_node``: the gate opens before this node starts (pool/node gates);
    ``after_node``: it opens after this node is done (canary gates).
    """

    id: str
    kind: GateKind
    pool: str | None = None
    before_node: str | None = None
    after_node: str | None = None


class PlanError(ValueError):
    """The procedure's input cannot be planned (bad maxUnavailable, unknown node in node_order,
    unknown approval policy)."""


def resolve_max_unavailable(value: MaxUnavailable, pool_size: int) -> int:
    """Nodes at a time for ``pool_size`` nodes, as :func:`workflows.kit.inputs.resolve_max_unavailable`
    (the one parser the CLI and the input models use: an int >= 1 or ``"N%"``, a percent rounded
    down and at least 1, as the MCO's ``getMaxUnavailable``); raises :class:`PlanError` with its
    message for a value it refuses."""
    try:
        return _resolve(value, pool_size)
    except ValueError as e:
        raise PlanError(str(e)) from None


class OrderedNode(Protocol):
    """What ordering reads of a node: its name, zone label and creationTimestamp (both may be
    missing). :class:`activities.cluster.models.NodeInfo` is one."""

    @property
    def name(self) -> str: ...

    @property
    def zone(self) -> str | None: ...

    @property
    def created(self) -> datetime | None: ...


N = TypeVar("N", bound=OrderedNode)


def node_sort_key(node: OrderedNode) -> tuple[str, datetime, str]:
    """Zone label, then creationTimestamp (oldest first), then name: MCO's candidate order
    (``getAllCandidateMachines`` sorts the candidates by zone, then by age). A node without a zone
    sorts first, one without a creationTimestamp as the oldest."""
    return (node.zone or "", node.created or _EPOCH, node.name)


def age_sort_key(node: OrderedNode) -> tuple[datetime, str]:
    """creationTimestamp (a missing one as the oldest), then name; the zone is not looked at."""
    return (node.created or _EPOCH, node.name)


def order_nodes(nodes: Iterable[N], node_order: str | Sequence[str] = ZONE_OLDEST) -> list[N]:
    """Sort ``nodes`` for a procedure, deterministically (a repeated pass picks the same nodes).

    - ``"zone-oldest"`` (the default): by :func:`node_sort_key`, the machine-config-controller's
      order (``pkg/controller/node/node_controller.go`` ``getAllCandidateMachines``: zone, then
      creationTimestamp oldest first; ties by name here so the order is total).
    - ``"oldest-first"``: creationTimestamp oldest first, then name (:func:`age_sort_key`).
    - ``"newest-first"``: creationTimestamp newest first, then name (ascending, also among nodes
      created in the same second). Motivation: openshift/machine-config-operator #6407
      (``machineconfiguration.openshift.io/update-order: NewestFirst``, RFE-9696): with a
      MachineSet's ``deletePolicy: Oldest`` the autoscaler deletes the oldest nodes, so the
      update should go to the newest ones first. Unlike that MCO change, which keeps the zone
      order and reverses the age only within a zone, this order ignores the zone, as
      oldest-first does.
    - A list of names: those nodes first in that order, the rest after them zone-oldest; names
      not among ``nodes`` are ignored here (use :func:`check_node_order` to refuse them).

    A node without a creationTimestamp counts as the oldest (first in oldest-first, last in
    newest-first). Raises :class:`PlanError` for any other string.
    """
    ordered = sorted(nodes, key=node_sort_key)
    if isinstance(node_order, str):
        if node_order == ZONE_OLDEST:
            return ordered
        if node_order == OLDEST_FIRST:
            return sorted(ordered, key=age_sort_key)
        if node_order == NEWEST_FIRST:
            # names ascending first; the stable sort on the timestamp (reverse keeps stability)
            # then leaves nodes created at the same instant in name order.
            by_name = sorted(ordered, key=lambda n: n.name)
            return sorted(by_name, key=lambda n: n.created or _EPOCH, reverse=True)
        raise PlanError(f"unknown node_order {node_order!r}: expected one of {', '.join(NODE_ORDERS)} or a list of node names")
    rank = {name: i for i, name in enumerate(node_order)}
    listed = sorted((n for n in ordered if n.name in rank), key=lambda n: rank[n.name])
    return listed + [n for n in ordered if n.name not in rank]


def order_name(node_order: str | Sequence[str]) -> str:
    """The order's name for a plan: ``zone-oldest``, ``oldest-first``, ``newest-first`` or
    ``explicit`` (a list of names)."""
    return node_order if isinstance(node_order, str) else EXPLICIT


#: What each order's name means, for plans.
ORDER_MEANING = {
    ZONE_OLDEST: "zone label, then creationTimestamp oldest first, then name",
    OLDEST_FIRST: "creationTimestamp oldest first, then name",
    NEWEST_FIRST: "creationTimestamp newest first, then name",
    EXPLICIT: "the listed nodes first in that order, the rest zone-oldest",
}


def describe_order(node_order: str | Sequence[str]) -> str:
    """One line for a plan: the order's name and what it means, e.g. ``newest-first
    (creationTimestamp newest first, then name)``; an explicit list names its nodes."""
    if isinstance(node_order, str):
        return f"{node_order} ({ORDER_MEANING.get(node_order, 'unknown')})"
    return f"{EXPLICIT} ({', '.join(node_order)} first, then zone-oldest)"


def check_node_order(node_order: str | Sequence[str], known: Iterable[str], where: str = "the pools") -> None:
    """Raise :class:`PlanError` when an explicit ``node_order`` names a node not in ``known``."""
    if isinstance(node_order, str):
        return
    names = set(known)
    unknown = [n for n in node_order if n not in names]
    if unknown:
        raise PlanError(f"node_order names nodes that are in none of {where}: {', '.join(unknown)}")


def is_unavailable(node: NodeInfo) -> bool:
    """True when the node already counts against maxUnavailable (MCO ``isNodeUnavailable``-like):
    not Ready, Degraded/Unreconcilable, or cordoned by somebody else (unschedulable without our
    ``lockkeeper.io/cordoned-by`` record). Such a node is never free capacity."""
    return (not node.ready) or node.degraded or (node.unschedulable and not node.cordoned_by)


def plan_gates(pool: str, nodes: Sequence[str], policy: ApprovalPolicy) -> list[PlannedGate]:
    """Gates of one group of nodes (a pool) for ``policy`` (see :class:`ApprovalPolicy`).

    pool: ``pool/<pool>`` before the first node; node: ``node/<node>`` before each node;
    canary: ``canary/<pool>`` after the first node, only when other nodes follow; none: no gate.
    A group with nothing to do gets no gate. Raises :class:`PlanError` for an unknown policy.
    """
    if not nodes or policy == ApprovalPolicy.NONE:
        return []
    if policy == ApprovalPolicy.POOL:
        return [PlannedGate(id=f"pool/{pool}", kind=GateKind.POOL, pool=pool, before_node=nodes[0])]
    if policy == ApprovalPolicy.NODE:
        return [PlannedGate(id=f"node/{n}", kind=GateKind.NODE, pool=pool, before_node=n) for n in nodes]
    if policy == ApprovalPolicy.CANARY:
        if len(nodes) < 2:
            return []
        return [PlannedGate(id=f"canary/{pool}", kind=GateKind.CANARY, pool=pool, after_node=nodes[0])]
    raise PlanError(f"unknown approval policy {policy!r}")


def batches(nodes: Sequence[str], size: int) -> list[list[str]]:
    """Split ``nodes`` into consecutive groups of ``size`` (at least 1) for display."""
    size = max(size, 1)
    return [list(nodes[i : i + size]) for i in range(0, len(nodes), size)]
