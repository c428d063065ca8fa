"""Withdrawn decisions: a decision the CLI gave up on can never act later (issue 18, "Decisions
are confirmed or never happen").

An operator update that no worker answered stays queued on the Temporal server: a worker that
comes back before the update's ``deadline`` would still apply it, after the operator was told
that nothing was decided (Ctrl-C at the CLI, or a lost connection). So the CLI, whenever it stops
waiting without an answer, sends the signal ``withdraw_decision`` with the update's ID (its
``request_id``, also the Temporal update ID). A signal is written to the workflow history at
once, and the server delivers it ahead of the queued update (the update's request is sequenced
after the history events of the task that carries it), so the update's validator finds the
request withdrawn and refuses it. The history keeps the withdrawal: who, when and why.

Deterministic workflow code: the withdrawals live in workflow state (replay rebuilds them from
the signals), validators read them through ``workflow.instance()``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel
from temporalio import workflow

#: The signal's name (stable: the CLI sends it by name to every procedure type).
WITHDRAW_SIGNAL = "withdraw_decision"


class WithdrawInput(BaseModel):
    """The ``withdraw_decision`` signal's input.

    - ``request_id``: the withdrawn update's ID (``OperatorInput.request_id``);
    - ``update``: its name (``approve``, ``decide``, ...), for the record;
    - ``identity``: who withdrew it (the update's sender);
    - ``reason``: why ("interrupted at the CLI", "no worker answered within 30s");
    - ``sent_at``: the sender's clock, UTC.
    """

    request_id: str
    update: str = ""
    identity: str = ""
    reason: str = ""
    sent_at: datetime | None = None


class Withdrawals:
    """The withdrawn requests of one workflow run, by request ID (bounded by what operators send)."""

    def __init__(self) -> None:
        self.by_id: dict[str, WithdrawInput] = {}

    def add(self, w: WithdrawInput) -> None:
        """Record ``w`` (the first withdrawal of a request wins) and log it."""
        if w.request_id not in self.by_id:
            self.by_id[w.request_id] = w
            workflow.logger.info("decision %s (%s) withdrawn by %s: %s", w.request_id, w.update or "?", w.identity or "?",
                                 w.reason or "no reason given")

    def get(self, request_id: Any) -> WithdrawInput | None:
        return self.by_id.get(request_id) if isinstance(request_id, str) else None


def withdrawn(request_id: Any) -> WithdrawInput | None:
    """The withdrawal of ``request_id`` in the current workflow run, or None (no ID, not
    withdrawn, or a workflow class without the kit's ``kit_withdrawals``). Workflow code only."""
    if request_id is None:
        return None
    box = getattr(workflow.instance(), "kit_withdrawals", None)
    return box.get(request_id) if isinstance(box, Withdrawals) else None
