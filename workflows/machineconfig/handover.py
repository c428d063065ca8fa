"""Continue-as-new for the MachineConfig rollout: what one run hands to the next.

A rollout of thousands of nodes outgrows one workflow history (Temporal caps it at 51,200
events and 50 MB, and every workflow task replays more of it as it grows). Once the run's
history passes ``continue_as_new_after_events`` the node window holds (starts no node and no
gate), lets the nodes in flight finish, waits for the signal and update handlers, and the run
continues as new with :class:`RolloutCarry`: the plan, every node's status, the window per pool,
attempts and results, the gates (passed ones stay passed, so an approval is never asked or
applied twice), the gate history and warnings, a pause in force, the leases it held, and the operator's holds on
nodes with their history (:mod:`workflows.kit.holds`; their expiry timers start again in the
next run).

Children do not carry over a continue-as-new (the new run does not own them), which is why the
window finishes its nodes first instead of handing over running children. The run releases its
lease children before it continues (they would end with it anyway under the parent close
policy), and the next run takes the leases of its pools and of the nodes still to do again
before it starts anything; a lease of the previous run that is still closing answers with our
own workflow ID and is retried (:func:`retake_leases`). Between the two runs the scopes are free
for an instant: a procedure that takes one then makes the next run fail with LeaseHeld, never
share the scope.

The carry travels as zlib-compressed JSON in base64 (about 10x smaller than the models' JSON:
thousands of near-identical node statuses), inside the rollout's own input (``carried``).
"""

from __future__ import annotations

import base64
import zlib
from datetime import datetime, timedelta

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows.kit.batches import GroupState
    from workflows.kit.lease import Leases
    from workflows.kit.models import FINAL_NODE_PHASES, Gate, GateRecord, HoldRecord, NodeHold, NodeStatus
    from workflows.kit.scopes import scope_workflow_id
    from workflows.machineconfig.models import NodeRolloutResult, RolloutPlan

#: How long the next run retries a lease the previous run still holds while it is being closed.
RETAKE_FOR = timedelta(seconds=120)
RETAKE_EVERY = timedelta(seconds=1)


class RolloutCarry(BaseModel):
    """The rollout's compact state across a continue-as-new (see the module docstring)."""

    plan: RolloutPlan
    nodes: dict[str, NodeStatus] = Field(default_factory=dict)
    groups: dict[str, GroupState] = Field(default_factory=dict)
    attempts: dict[str, int] = Field(default_factory=dict)
    results: dict[str, NodeRolloutResult] = Field(default_factory=dict)
    gates: dict[str, Gate] = Field(default_factory=dict)
    passed: list[str] = Field(default_factory=list)
    gate_history: list[GateRecord] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    paused: bool = False
    paused_reason: str | None = None
    started_at: datetime | None = None
    continued: int = 0
    leases: list[str] = Field(default_factory=list)
    #: The holds in force and the hold history (left out of the packed text when empty).
    holds: dict[str, NodeHold] = Field(default_factory=dict)
    hold_history: list[HoldRecord] = Field(default_factory=list)


def pack(carry: RolloutCarry) -> str:
    """``carry`` as base64 of zlib-compressed JSON (deterministic: same state, same text)."""
    # A run that never held a node packs exactly what it packed before holds existed.
    empty = {k for k in ("holds", "hold_history") if not getattr(carry, k)}
    return base64.b64encode(zlib.compress(carry.model_dump_json(exclude=empty or None).encode(), 6)).decode()


def unpack(text: str) -> RolloutCarry:
    """Inverse of :func:`pack`. Raises ValueError (pydantic ValidationError, zlib.error,
    binascii.Error) for text that is not a packed carry."""
    return RolloutCarry.model_validate_json(zlib.decompress(base64.b64decode(text)))


def lease_scopes_to_retake(carry: RolloutCarry, pool_scopes: list[str], node_scope: dict[str, str]) -> list[str]:
    """The scopes the next run takes again: every pool's (``pool_scopes``), and those of the
    nodes (``node_scope``: node -> scope) not final yet (a node already done, skipped or failed
    for good no longer needs our lease)."""
    nodes = [scope for n, scope in node_scope.items() if n in carry.nodes and carry.nodes[n].phase not in FINAL_NODE_PHASES]
    return [*pool_scopes, *nodes]


async def retake_leases(leases: Leases, holder: str, scopes: list[str], input_scope: dict[str, str]) -> None:
    """Take ``scopes`` again after a continue-as-new (all at once). A refusal naming ``holder``
    itself is the previous run's lease not closed yet: wait :data:`RETAKE_EVERY` and try again,
    up to :data:`RETAKE_FOR`. A refusal naming anyone else fails the run (LeaseHeld): another
    procedure took the scope in the instant between the two runs, and we must not share it."""
    deadline = workflow.now() + RETAKE_FOR
    while True:
        try:
            await leases.acquire(scopes, input_scope=input_scope, probe_cluster=False, concurrent=True)
            return
        except ApplicationError as err:
            details = list(err.details or ())
            ours = err.type == "LeaseHeld" and bool(details) and details[0] in (holder, *(scope_workflow_id(s) for s in scopes))
            if not ours or workflow.now() >= deadline:
                raise
            workflow.logger.info("lease of the previous run not closed yet (%s); retrying", err.message)
            await workflow.sleep(RETAKE_EVERY)
