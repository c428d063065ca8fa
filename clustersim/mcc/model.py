"""The ``mcc:`` section and the pure rules of the simulated machine-config-controller.

Section (all optional)::

    mcc:
      running: true            # false: the controller is down from the start
      kill_after_nodes: 3      # fault: the controller dies after handing out this many desiredConfigs
      drain_retry_seconds: 5   # simulated seconds between eviction rounds of a blocked drain

Selection follows MCO ``pkg/controller/node/node_controller.go`` (read, not copied): a pool's
capacity is ``maxUnavailable`` (int, or "N%" of the pool rounded down, at least 1) minus the nodes
already unavailable; candidates are nodes whose desiredConfig differs from the pool's target, taken
in zone order then oldest first; a paused pool gets none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from clustersim.agents.logic import (
    ANN_CURRENT_CONFIG,
    ANN_DESIRED_CONFIG,
    ANN_STATE,
    STATE_DONE,
    annotations,
    labels,
    node_ready,
)

ZONE_LABEL = "topology.kubernetes.io/zone"


class MccSection(BaseModel):
    """The ``mcc:`` section (see the module docstring). Times are simulated seconds."""

    model_config = ConfigDict(extra="forbid")

    running: bool = True
    kill_after_nodes: int | None = Field(None, ge=0)
    drain_retry_seconds: float = Field(5.0, gt=0)


def resolve_max_unavailable(value: Any, pool_size: int) -> int:
    """``maxUnavailable`` of a MachineConfigPool -> a node count (intstr: int, or "N%" of
    ``pool_size`` rounded down; at least 1, as the MCO does). Raises ValueError for other text."""
    if value is None:
        return 1
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("%"):
            return max(1, math.floor(pool_size * int(text[:-1]) / 100))
        value = int(text)
    return max(1, int(value))


def node_unavailable(node: Mapping[str, Any]) -> bool:
    """A node the pool's capacity must count as busy: updating (desired != current, or the
    daemon not Done), NotReady, or cordoned."""
    a = annotations(node)
    if a.get(ANN_DESIRED_CONFIG, "") != a.get(ANN_CURRENT_CONFIG, ""):
        return True
    if a.get(ANN_STATE, STATE_DONE) != STATE_DONE:
        return True
    return not node_ready(node) or bool((node.get("spec") or {}).get("unschedulable"))


def pick_candidates(pool: Mapping[str, Any], members: Sequence[Mapping[str, Any]]) -> list[str]:
    """Names of the nodes of ``pool`` that get desiredConfig := the pool's target now (empty for
    a paused pool or one without a target). Order: zone label, then creationTimestamp, then name."""
    spec = pool.get("spec") or {}
    target = (spec.get("configuration") or {}).get("name", "")
    if spec.get("paused") or not target:
        return []
    busy = sum(1 for n in members if node_unavailable(n))
    capacity = resolve_max_unavailable(spec.get("maxUnavailable"), len(members)) - busy
    if capacity <= 0:
        return []
    todo = [n for n in members if annotations(n).get(ANN_DESIRED_CONFIG) != target and not node_unavailable(n)]
    todo.sort(key=lambda n: (labels(n).get(ZONE_LABEL, ""), n["metadata"].get("creationTimestamp", ""), n["metadata"]["name"]))
    return [n["metadata"]["name"] for n in todo[:capacity]]
