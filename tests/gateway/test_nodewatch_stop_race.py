"""The shared node watch (:mod:`activities.cluster.nodewatch`): a wait handed off while the hub is
stopping, against clustersim over real HTTP (issue 40).

A stopping worker's :meth:`Completer.close` fails the waits it handed off and, when nothing else
is left, sets the hub's stop flag; the hub's thread reads it at its next look, after its watch
window. A wait handed off in between (another worker in the process, on the same cluster) found
the thread still running, so the flag stayed set and the thread ended at that look: the wait was
left in the hub's intake, followed by nobody, and its activity timed out. Now the hand-off
clears the flag, and the thread goes on with the new wait.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from activities.cluster.nodewatch import NodeWatchHub
from activities.kube import objects
from activities.kube.gateway import KubeGateway
from tests.gateway.test_nodewatch_gone import ServerForgets
from tests.gateway.test_nodewatch_relist import ASK, Recorder, until, wait_on, world  # noqa: F401 - world: fixture

pytestmark = pytest.mark.timeout(120)


class Closable(Recorder):
    """A completer the hub can close (:meth:`NodeWatchHub._close` fails the waits left through
    ``handle(token).fail``): records those failures as results too."""

    def handle(self, task_token: bytes) -> Any:
        recorder = self

        class Handle:
            async def fail(self, error: BaseException) -> None:
                recorder.results[task_token] = error

        return Handle()


class HeldWatch:
    """The gateway, with its next WATCH request held until ``release`` is set (``entered`` tells
    that the hub's thread is in it): the hub's thread is then certainly inside a watch window."""

    def __init__(self, gw: KubeGateway) -> None:
        self.gw = gw
        self.holding = False
        self.entered, self.release = threading.Event(), threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gw, name)

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        if self.holding:
            self.holding = False
            self.entered.set()
            self.release.wait(30)
        return self.gw.watch(*args, **kwargs)


async def held_hub(world: Any) -> tuple[KubeGateway, HeldWatch, NodeWatchHub, str, str]:
    """(gateway, its held wrapper, a hub on that wrapper, the first node, its resourceVersion)."""
    sim, gw = world
    node = sorted(objects.meta(n).get("name") for n in sim.store.list("nodes"))[0]
    held = HeldWatch(gw)
    rv = objects.meta(await asyncio.to_thread(gw.get_node, node))["resourceVersion"]
    return gw, held, NodeWatchHub(held), node, rv


async def test_a_wait_handed_off_while_the_hub_stops_is_followed(world: Any) -> None:
    gw, held, hub, node, rv = await held_hub(world)
    stopping, other = Closable(), Recorder()
    try:
        hub.hand_off(wait_on(node, b"stopping-worker", stopping, rv=rv, seconds=60))  # type: ignore[arg-type]
        await asyncio.to_thread(lambda: until(lambda: not hub._new, 15))
        held.holding = True
        assert await asyncio.to_thread(held.entered.wait, 15)  # the thread is in a watch window now
        await hub._close(stopping, 0.0)  # type: ignore[arg-type]  # nothing left: the stop flag is set
        assert isinstance(stopping.results.get(b"stopping-worker"), Exception)
        hub.hand_off(wait_on(node, b"other-worker", other, rv=rv, seconds=60))  # type: ignore[arg-type]
        held.release.set()
        # The window ends with no event (one would take the new wait inside it): the thread's next
        # look either takes the wait or, with the flag still set, ends and leaves it.
        await asyncio.to_thread(lambda: until(lambda: hub._thread is None or not hub._new, 15))
        await asyncio.to_thread(gw.patch_node, node, {"metadata": {"annotations": {ASK: "yes"}}})
        await asyncio.to_thread(lambda: until(lambda: b"other-worker" in other.results, 15))
        assert other.results == {b"other-worker": "asked"}  # followed and completed, not left behind
        await asyncio.to_thread(lambda: until(lambda: hub.waiting() == 0, 15))
        assert hub.waiting() == 0
    finally:
        held.release.set()
        hub._stop.set()


async def test_a_wait_not_yet_taken_is_heartbeaten_while_the_watch_is_blocked(world: Any) -> None:
    """The watch thread takes new waits between its windows or on an event; a window blocked on a
    stalled API server kept them from the heartbeat thread, and past their heartbeat timeout the
    server retried attempts that were being followed (issue 40). Beaten in the intake now."""
    _gw, held, hub, node, rv = await held_hub(world)
    completer = ServerForgets(set())
    try:
        hub.hand_off(wait_on(node, b"first", completer, rv=rv, seconds=60))  # type: ignore[arg-type]
        await asyncio.to_thread(lambda: until(lambda: not hub._new, 15))
        held.holding = True
        assert await asyncio.to_thread(held.entered.wait, 15)  # the watch thread is blocked in a WATCH
        late = wait_on(node, b"in-the-intake", completer, rv=rv, seconds=60)  # type: ignore[arg-type]
        hub.hand_off(late)
        late.next_beat = time.monotonic()  # due now (not at hand-off: that beat is not the one tested)
        await asyncio.to_thread(lambda: until(lambda: b"in-the-intake" in completer.beats, 15))
        assert b"in-the-intake" in completer.beats
        assert late in hub._new  # beaten while still waiting to be taken
    finally:
        held.release.set()
        hub._stop.set()
