"""The asyncio plumbing the simulator's controllers and components share: routing store events,
reconciling on change, keyed timers, stopping tasks, and :class:`Background`, which holds them.

Every loop here follows the rule of the simulated controllers (as a Kubernetes controller's
work queue does, client-go ``util/workqueue``): one bad object is logged and skipped, it never
stops the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Hashable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clustersim.storeevents import Event, Subscription

log = logging.getLogger(__name__)


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel every task (None entries are skipped), then wait for each to end; what a task ends
    with (its cancellation, an error) is dropped, as a stop must not fail."""
    pending = [t for t in tasks if t is not None]
    for t in pending:
        t.cancel()
    for t in pending:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t


async def route_events(sub: Subscription, route: Callable[[Event], None], what: str) -> None:
    """Forever: hand each event of ``sub`` to ``route``. An exception ``route`` raises is logged
    as ``"<what>: routing <type> <resource> failed"`` and the next event is read."""
    while True:
        ev = await sub.get()
        try:
            route(ev)
        except Exception:  # one bad object must not stop the loop
            log.exception("%s: routing %s %s failed", what, ev.type, ev.resource)


async def reconcile_on_change(
    sub: Subscription,
    dirty: asyncio.Event,
    reconcile: Callable[[], None],
    what: str,
    running: Callable[[], bool] = lambda: True,
) -> None:
    """A level-triggered controller loop: every event of ``sub`` sets ``dirty``; while
    ``running()``, each time ``dirty`` is set it is cleared and ``reconcile()`` runs once (after
    one turn of the event loop, so a burst of events makes one pass). An exception
    ``reconcile`` raises is logged as ``"<what>: reconcile failed"``."""
    async def feed() -> None:
        async for _ev in sub:
            dirty.set()

    feeder = asyncio.get_running_loop().create_task(feed(), name=f"{what}-feed")
    try:
        while running():
            await dirty.wait()
            dirty.clear()
            await asyncio.sleep(0)  # let a burst of events accumulate
            try:
                reconcile()
            except Exception:  # one bad object must not stop the controller
                log.exception("%s: reconcile failed", what)
    finally:
        feeder.cancel()


class KeyedTimers:
    """At most one pending call per key: :meth:`after` replaces the key's pending call.
    ``what`` names the owner in the log line of a call that raises (the call is then dropped)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._handles: dict[Hashable, asyncio.TimerHandle] = {}

    def after(self, key: Hashable, real_seconds: float, fn: Callable[[], Any]) -> None:
        """Call ``fn()`` in ``real_seconds`` (real, not simulated: scale with
        :meth:`clustersim.clock.Clock.real`), cancelling the call pending for ``key``. Needs a
        running event loop."""
        self.cancel(key)

        def fire() -> None:
            self._handles.pop(key, None)
            try:
                fn()
            except Exception:
                log.exception("%s: timer %s failed", self.what, key)

        self._handles[key] = asyncio.get_running_loop().call_later(max(0.0, real_seconds), fire)

    def pending(self, key: Hashable) -> bool:
        """Whether a call is pending for ``key``."""
        return key in self._handles

    def cancel(self, key: Hashable) -> None:
        """Cancel the call pending for ``key`` (none is fine)."""
        old = self._handles.pop(key, None)
        if old is not None:
            old.cancel()

    def cancel_all(self) -> None:
        """Cancel every pending call."""
        for h in self._handles.values():
            h.cancel()
        self._handles.clear()


class Background:
    """What a simulated controller runs between its start and its stop: its tasks, its keyed
    timers (``timers``) and its store subscription (``sub``, None while stopped). ``what`` names
    it in log lines."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.tasks: list[asyncio.Task[Any]] = []
        self.timers = KeyedTimers(what)
        self.sub: Subscription | None = None

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        """Run ``coro`` as a task named ``name`` until :meth:`stop` (needs a running loop)."""
        self.tasks.append(asyncio.get_running_loop().create_task(coro, name=name))

    def follow(self, sub: Subscription, route: Callable[[Event], None], name: str) -> None:
        """Keep ``sub`` and hand each of its events to ``route`` (:func:`route_events`) in a task
        named ``name``."""
        self.sub = sub
        self.spawn(route_events(sub, route, self.what), name)

    async def stop(self) -> None:
        """Cancel the tasks and wait for them, cancel the timers, close the subscription
        (idempotent)."""
        await cancel_and_wait(self.tasks)
        self.tasks.clear()
        self.timers.cancel_all()
        if self.sub is not None:
            self.sub.close()
            self.sub = None
