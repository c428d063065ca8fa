"""Helpers every activity uses: heartbeats, cancellation, pauses, logging and failures.

Each helper is a no-op (or plain behaviour) outside an activity, so the same code runs in unit
tests without a Temporal worker. Heartbeats follow the SDK's rules (sdk-python README,
"Heartbeating and Cancellation"): a cancellation reaches an activity only through a heartbeat,
so long activities heartbeat at least every :data:`HEARTBEAT_INTERVAL_SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, CancelledError

#: How often long-running activities heartbeat (seconds). Also the longest a watch request
#: lasts, so a cancellation is noticed within this time even on a silent node.
HEARTBEAT_INTERVAL_SECONDS = 2.0
#: Seconds between heartbeats while a host command runs inside an async activity.
HEARTBEAT_SECONDS = 1.0


def heartbeat(details: Any) -> None:
    """Record a heartbeat with ``details`` (JSON-able) when inside an activity."""
    if activity.in_activity():
        activity.heartbeat(details)


def check_cancelled() -> None:
    """Raise ``CancelledError`` when the running (synchronous) activity was cancelled."""
    if activity.in_activity() and activity.is_cancelled():
        raise CancelledError("activity cancelled")


def pause(seconds: float) -> None:
    """Sleep ``seconds`` in a synchronous activity, ending early (and raising
    ``CancelledError``) when it is cancelled; a plain sleep outside an activity."""
    if activity.in_activity():
        activity.wait_for_cancelled_sync(seconds)
        check_cancelled()
    else:
        time.sleep(seconds)


class Pacer:
    """Heartbeats by the clock from a synchronous loop: :meth:`beat` between two steps sends one
    (and checks for a cancel) once ``every`` seconds have passed since the last, or since the
    pacer was made. A loop of slow API calls then beats however few steps it has made."""

    def __init__(self, every: float = HEARTBEAT_INTERVAL_SECONDS) -> None:
        self.every = every
        self._next = time.monotonic() + every

    def beat(self, details: Callable[[], Any]) -> None:
        """Heartbeat ``details()`` when due, then raise ``CancelledError`` if the activity was
        cancelled; otherwise nothing (``details`` is not called)."""
        if time.monotonic() < self._next:
            return
        heartbeat(details())
        check_cancelled()
        self._next = time.monotonic() + self.every


def log() -> Any:
    """The activity logger (it adds workflow and activity IDs inside an activity and works as
    a plain logger outside one)."""
    return activity.logger


def fail(type_: str, message: str, *, retryable: bool = False) -> ApplicationError:
    """An ``ApplicationError`` of ``type_`` (the failure type a workflow's retry policy and
    error handling see), non-retryable unless ``retryable``. Raise the result."""
    return ApplicationError(message, type=type_, non_retryable=not retryable)


@contextlib.asynccontextmanager
async def heartbeating(details: Any = None, every: float = HEARTBEAT_SECONDS) -> AsyncIterator[None]:
    """Heartbeat every ``every`` seconds while the block runs (no-op outside an activity)."""
    if not activity.in_activity():
        yield
        return

    async def beat() -> None:
        while True:
            activity.heartbeat(details)
            await asyncio.sleep(every)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.contextmanager
def beating(details: Any = None, every: float = HEARTBEAT_INTERVAL_SECONDS) -> Iterator[None]:
    """Heartbeat ``details`` every ``every`` seconds from a helper thread while the block runs in a
    synchronous activity: a blocking call (an exec that waits for its command) then shows a live
    worker to a heartbeat timeout shorter than the call. No-op outside an activity.

    The beats carry the activity's context (a copy of the calling thread's); the SDK's heartbeat
    is thread safe. A cancel still reaches the activity only where it checks for one."""
    if not activity.in_activity():
        yield
        return
    stop = threading.Event()
    context = contextvars.copy_context()

    def beat() -> None:
        while not stop.wait(every):
            context.run(activity.heartbeat, details)

    thread = threading.Thread(target=beat, name="lockkeeper-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
