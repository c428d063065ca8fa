"""Health gates: wait until a check holds, with backoff and a deadline, visible in ``status``.

DESIGN.md "Health gate": after a disruptive step the procedure waits for the system to be healthy
again (node Ready, pods Ready, API back, heal info clean) before it goes on. The check is an
activity call the procedure passes in; between checks a durable timer backs off exponentially.
The wait's state (:class:`HealthStatus`: waiting / ok / timed-out / stopped, polls, the check's
last words, since, deadline) is kept in a board the procedure's status shows (``health`` of
:class:`workflows.kit.models.ProcedureStatus`).

Commands per poll: the check's own (usually one activity), then one timer. A procedure that
moved an older polling loop onto :func:`wait_until` keeps its history when that loop did the same.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.kit.models import HealthStatus


@dataclass(frozen=True)
class Backoff:
    """Delays between checks, seconds: ``initial``, times ``factor`` after each, at most ``maximum``."""

    initial: float = 2.0
    maximum: float = 30.0
    factor: float = 2.0

    def next(self, delay: float) -> float:
        return min(self.maximum, delay * self.factor)


@dataclass(frozen=True)
class Check:
    """One check's answer: ``ok`` and what it saw (``detail``, shown in status)."""

    ok: bool
    detail: str = ""


async def wait_until(
    check: Callable[[], Awaitable[Check]],
    *,
    name: str,
    backoff: Backoff = Backoff(),
    deadline: datetime | None = None,
    stop: Callable[[], bool] = lambda: False,
    board: dict[str, HealthStatus] | None = None,
    on_poll: Callable[[HealthStatus], None] | None = None,
) -> HealthStatus:
    """Run ``check`` until it says ok, ``deadline`` (workflow time) passes, or ``stop()`` holds.

    Order per round: check (ok → return), deadline reached → return timed-out, then sleep the
    backoff delay on a durable timer that ``stop()`` cuts short. ``board[name]`` holds the
    :class:`HealthStatus` throughout (the procedure's ``status`` shows it); ``on_poll`` is called
    after every check (the procedure's ``touch``). Returns the final HealthStatus; it never
    raises for an unhealthy system (the caller decides), only the check's own errors propagate.
    """
    hs = HealthStatus(name=name, since=workflow.now(), deadline=deadline)
    if board is not None:
        board[name] = hs
    delay = backoff.initial
    while True:
        if stop():
            hs.state = "stopped"
            break
        result = await check()
        hs.polls += 1
        hs.last = result.detail
        if result.ok:
            hs.state = "ok"
        elif deadline is not None and workflow.now() >= deadline:
            hs.state = "timed-out"
        if on_poll is not None:
            on_poll(hs)
        if hs.state != "waiting":
            break
        try:
            await workflow.wait_condition(stop, timeout=timedelta(seconds=delay))
        except TimeoutError:
            pass
        delay = backoff.next(delay)
    if on_poll is not None:
        on_poll(hs)
    return hs
