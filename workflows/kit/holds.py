"""Holds: an operator keeps a node from starting for a while (issue 40).

``lockkeeper hold ID NODE [--until T | --for D] -m REASON`` sends the ``hold_node`` update of
:class:`workflows.kit.procedure.NodeProcedureWorkflow`; ``lockkeeper release ID NODE`` sends
``release_node``. A held node is not started by the node window
(:class:`workflows.kit.batches.NodeBatches`): the next unheld node of the plan's order starts
instead, and the held one starts once its hold ends (released by hand, or expired), in its
place of the order. A node in flight finishes normally. When only held nodes are left, the
window waits, and ``status`` says ``waiting for hold on NODE until T`` (or ``until released``).

:class:`Holds` is workflow state: the holds in force (``status.holds``, by node) and every
hold, release and expiry (``status.hold_history``, a record each: who, when, why). A hold with an
end has a durable timer (``workflow.sleep``) that ends it by itself ("hold on NODE expired"),
so a worker restart or a replay keeps it. A run that never holds anything adds no command: no
timer, no activity (stored histories replay unchanged); a procedure that continues as new carries
the holds in its handover (:meth:`export` / :meth:`restore`) and the next run starts the timers
again (:meth:`start_timers`, from the window's run).

Pure workflow code: no I/O, no clock but ``workflow.now()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.kit.models import HoldInput, HoldRecord, NodeHold, ProcedureStatus, ReleaseInput

#: What a procedure without holds answers (a procedure with its own node loop, not the kit's window).
NOT_SUPPORTED = "holds are not supported by this procedure yet"


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="seconds")


class Holds:
    """The holds of one procedure run (see the module doc). ``on_change()``: the procedure's
    touch; ``on_event(record)``: called for every new record (notifications)."""

    def __init__(self, on_change: Callable[[], None] = lambda: None) -> None:
        self.active: dict[str, NodeHold] = {}
        self.history: list[HoldRecord] = []
        self.on_change = on_change
        self._timers: dict[str, asyncio.Task[None]] = {}

    def bind(self, status: ProcedureStatus) -> None:
        """Show the holds in ``status`` (the same dict and list, so it is always current)."""
        if status.holds is not self.active:
            status.holds = self.active
            status.hold_history = self.history

    # --- the validators -------------------------------------------------------------------------

    def check_hold(self, input: HoldInput) -> None:
        """The holds' own checks of ``hold_node`` (the node's phase is the window's): raises
        ValueError with the operator's message."""
        if not input.identity.strip():
            raise ValueError("an identity is required to hold a node")
        if not input.reason.strip():
            raise ValueError("a reason is required to hold a node (-m REASON)")
        if input.until is not None and input.for_seconds is not None:
            raise ValueError("give --until or --for, not both")
        now = workflow.now()
        if input.until is not None:
            until = input.until if input.until.tzinfo is not None else input.until.replace(tzinfo=now.tzinfo)
            if until <= now:
                raise ValueError(f"--until {_iso(until)} is in the past (now {_iso(now)})")
        if input.for_seconds is not None and input.for_seconds <= 0:
            raise ValueError(f"--for must be a positive duration (got {input.for_seconds:g} s)")
        held = self.active.get(input.node)
        if held is not None:
            raise ValueError(f"node {input.node} is already held by {held.by} {held.until_text()} ({held.reason}); "
                             "release it first")

    def check_release(self, input: ReleaseInput) -> None:
        """Validator of ``release_node``: raises ValueError for no identity or a node not held."""
        if not input.identity.strip():
            raise ValueError("an identity is required to release a node")
        if input.node not in self.active:
            held = ", ".join(sorted(self.active)) or "none"
            raise ValueError(f"node {input.node} is not held (held nodes: {held})")

    # --- the handlers --------------------------------------------------------------------------------

    def place(self, input: HoldInput) -> NodeHold:
        """Hold ``input.node`` (validated); starts its expiry timer when it has an end."""
        now = workflow.now()
        until = input.until
        if until is not None and until.tzinfo is None:
            until = until.replace(tzinfo=now.tzinfo)
        if input.for_seconds is not None:
            until = now + timedelta(seconds=input.for_seconds)
        hold = NodeHold(node=input.node, by=input.identity, reason=input.reason.strip(), since=now, until=until,
                        connection_identity=input.connection_identity)
        self.active[input.node] = hold
        self.history.append(HoldRecord(node=input.node, action="held", by=input.identity, at=now, reason=hold.reason, until=until))
        workflow.logger.info("node %s held by %s %s: %s", input.node, input.identity, hold.until_text(), hold.reason)
        self._start_timer(hold)
        self.on_change()
        return hold

    def release(self, input: ReleaseInput) -> NodeHold:
        """End the hold on ``input.node`` (validated) by hand."""
        return self.end(input.node, "released", input.identity, input.reason.strip())

    def end(self, node: str, action: str, by: str, reason: str = "") -> NodeHold:
        """End the hold on ``node``: ``released``, ``expired`` or ``ended`` (the node finished)."""
        hold = self.active.pop(node)
        timer = self._timers.pop(node, None)
        if timer is not None and action != "expired":
            timer.cancel()
        self.history.append(HoldRecord(node=node, action=action, by=by, at=workflow.now(), reason=reason))  # type: ignore[arg-type]
        workflow.logger.info("hold on %s %s%s", node, action, f" by {by}" if by else "")
        self.on_change()
        return hold

    def end_if_held(self, node: str, reason: str) -> None:
        """The node finished or was skipped: a hold on it has nothing left to hold."""
        if node in self.active:
            self.end(node, "ended", "", reason)

    # --- timers ----------------------------------------------------------------------------------------

    def _start_timer(self, hold: NodeHold) -> None:
        if hold.until is None or hold.node in self._timers:
            return
        self._timers[hold.node] = asyncio.create_task(self._expire(hold))

    async def _expire(self, hold: NodeHold) -> None:
        assert hold.until is not None
        delay = (hold.until - workflow.now()).total_seconds()
        if delay > 0:
            await workflow.sleep(delay, summary=f"hold on {hold.node} until {_iso(hold.until)}")
        if self.active.get(hold.node) == hold:
            self._timers.pop(hold.node, None)
            self.end(hold.node, "expired", "timer", f"held by {hold.by} until {_iso(hold.until)}")

    def start_timers(self) -> None:
        """Start the expiry timers of holds taken over from the previous run (after
        :meth:`restore`); nothing when no hold has an end (no command)."""
        for hold in list(self.active.values()):
            self._start_timer(hold)

    # --- continue-as-new ------------------------------------------------------------------------------

    def restore(self, active: dict[str, NodeHold], history: list[HoldRecord]) -> None:
        """Take over the previous run's holds (their timers start with :meth:`start_timers`)."""
        self.active.update(active)
        self.history.extend(history)

    # --- the view ----------------------------------------------------------------------------------------

    def waiting_line(self, nodes: list[str]) -> tuple[str, datetime | None, datetime | None]:
        """``(what, since, until)`` of a window that waits only for the holds on ``nodes``."""
        holds = [self.active[n] for n in nodes if n in self.active]
        first = min(holds, key=lambda h: (h.until is None, h.until or h.since))
        what = "; ".join(f"hold on {h.node} {h.until_text()} (by {h.by}: {h.reason})" for h in holds)
        return what, min(h.since for h in holds), first.until
