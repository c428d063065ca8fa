"""Asynchronous activity completion, wired by the worker (issue 40: no slot held for a wait).

A wait measured in minutes (a node's reboot) need not hold one of the worker's activity slots:
the activity hands its wait to a shared watcher and returns with
``activity.raise_complete_async()``; the watcher later completes it through the client
(``client.get_async_activity_handle(task_token=...)``, Temporal docs "Asynchronous Activity
Completion"), heartbeats it on the way and reports a cancel the heartbeat answer carries.

The worker owns the client and the event loop, so it wires them (:func:`wire` before it polls,
:meth:`Completer.close` when it stops); activities read them with :func:`wired`. Unwired (a unit
test calling the activity method directly, ``ActivityEnvironment``), the waits run in their
activity as before, holding its slot.

Thread model: the watchers run in their own threads; :class:`Completer` hands every call to
the loop with ``asyncio.run_coroutine_threadsafe`` and never blocks the caller on its answer.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any

from temporalio.client import AsyncActivityCancelledError, AsyncActivityHandle, Client
from temporalio.service import RPCError, RPCStatusCode

from activities.context import log


class Completer:
    """Completes, fails, heartbeats and cancels asynchronously completed activities from any
    thread, on the worker's loop. Each call returns at once; its outcome arrives at ``done``
    (a callable taking the exception, None on success) from the loop's thread."""

    def __init__(self, client: Client, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.loop = loop
        self._lock = threading.Lock()
        self._closers: list[Callable[[Completer, float], Awaitable[Any]]] = []
        self.closed = False

    def on_close(self, close: Callable[[Completer, float], Awaitable[Any]]) -> None:
        """Await ``close(self, grace_seconds)`` at :meth:`close` (a watcher lets the waits it
        holds end within the grace, then fails the rest, so that another worker takes them at
        once instead of after their heartbeat timeout). Registered once per watcher."""
        with self._lock:
            if close not in self._closers:
                self._closers.append(close)

    async def close(self, grace_seconds: float = 0.0) -> None:
        """The worker stops (call it on the worker's loop, beside ``Worker.shutdown``): no wait is
        handed off any more; the waits already handed off may end within ``grace_seconds`` (as
        the SDK's graceful shutdown lets a running activity finish); then every watcher this
        completer fed fails the rest (retryable ``WorkerStopping``)."""
        with self._lock:
            self.closed = True
            closers, self._closers = self._closers, []
        if closers:
            await asyncio.gather(*(close(self, grace_seconds) for close in closers), return_exceptions=True)

    def handle(self, task_token: bytes) -> AsyncActivityHandle:
        return self.client.get_async_activity_handle(task_token=task_token)

    def _submit(self, coro: Any, what: str, done: Callable[[BaseException | None], None] | None) -> None:
        try:
            fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        except RuntimeError:  # the loop is closed: the worker is gone, the server's timeouts retry
            coro.close()
            return

        def finished(f: Future[Any]) -> None:
            if f.cancelled():  # the loop shut down (asyncio.run cancels what is left): the server's timeouts retry
                return
            exc = f.exception()
            if exc is not None and not isinstance(exc, AsyncActivityCancelledError):
                log().warning(f"{what}: {type(exc).__name__}: {exc}")
            if done is not None:
                done(exc)

        fut.add_done_callback(finished)

    def complete(self, task_token: bytes, result: Any, what: str) -> None:
        self._submit(self.handle(task_token).complete(result), f"{what}: complete", None)

    def fail(self, task_token: bytes, error: BaseException, what: str) -> None:
        self._submit(self.handle(task_token).fail(error), f"{what}: fail", None)

    def heartbeat(self, task_token: bytes, details: Any, what: str,
                  cancelled: Callable[[], None], gone: Callable[[], None] | None = None,
                  answered: Callable[[BaseException | None], None] | None = None) -> None:
        """One heartbeat; ``cancelled()`` runs (on the loop's thread) when its answer says the
        activity was cancelled, paused or reset; ``gone()`` when the server no longer knows this
        attempt (gRPC NOT_FOUND: it timed out, e.g. its heartbeat timeout passed, or its workflow
        ended): nothing will accept its completion any more, and a retried attempt, if any, is
        a new task token. ``answered(exc)`` runs on every answer first (None: accepted)."""

        def done(exc: BaseException | None) -> None:
            if answered is not None:
                answered(exc)
            if isinstance(exc, AsyncActivityCancelledError):
                cancelled()
            elif gone is not None and isinstance(exc, RPCError) and exc.status == RPCStatusCode.NOT_FOUND:
                gone()

        self._submit(self.handle(task_token).heartbeat(details), f"{what}: heartbeat", done)

    def report_cancellation(self, task_token: bytes, what: str) -> None:
        self._submit(self.handle(task_token).report_cancellation(), f"{what}: cancellation", None)


_COMPLETER: contextvars.ContextVar[Completer | None] = contextvars.ContextVar("lockkeeper_completer", default=None)


def wire(client: Client, loop: asyncio.AbstractEventLoop) -> Completer:
    """Make a :class:`Completer` the one the current context's activities hand their waits to.
    The worker calls it before it starts polling: the SDK runs each activity in a copy of the
    worker task's context (sdk-python ``worker/_activity.py``), so each in-process worker has
    its own, and a unit test that never wires one runs the waits in their activity."""
    completer = Completer(client, loop)
    _COMPLETER.set(completer)
    return completer


def unwire() -> None:
    """The current context hands off no more waits (the worker, once it stopped)."""
    _COMPLETER.set(None)


def wired() -> Completer | None:
    """The :class:`Completer` of the worker running this activity, else None (waits run in their
    activity)."""
    return _COMPLETER.get()
