"""The shared node watch (:mod:`activities.cluster.nodewatch`) and an attempt the server no longer
knows (issue 40), against clustersim over real HTTP.

An attempt that reached its hand-off after its heartbeat timeout is beaten at once; the answer
NOT_FOUND (the server timed it out and retried it) drops it. Dropped before the hub's thread took
it, it used to be taken all the same: a wait nobody completes and nothing ends, counted as
followed for ever (the 420 waits of the 5,000-node run that did not finish) and keeping the hub
from going idle. The retried attempt hands off a wait of its own, which the watch completes.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from activities.cluster.nodewatch import NodeWatchHub
from activities.kube import objects
from tests.gateway.test_nodewatch_relist import ASK, Recorder, until, wait_on, world  # noqa: F401 - world: fixture

pytestmark = pytest.mark.timeout(120)


class ServerForgets(Recorder):
    """A completer whose heartbeats of the tokens in ``forgotten`` answer NOT_FOUND (``gone()`` at
    once, as the loop would call it), and which records every heartbeat by token."""

    def __init__(self, forgotten: set[bytes]) -> None:
        super().__init__()
        self.forgotten = forgotten
        self.beats: list[bytes] = []

    def heartbeat(self, task_token: bytes, _details: Any, _what: str, cancelled: Any = None, gone: Any = None,
                  **_kwargs: Any) -> None:
        self.beats.append(task_token)
        if task_token in self.forgotten and gone is not None:
            gone()


async def test_a_wait_whose_attempt_is_gone_at_hand_off_is_not_followed_and_its_retry_completes(world: Any) -> None:
    sim, gw = world
    node = sorted(objects.meta(n).get("name") for n in sim.store.list("nodes"))[0]
    hub = NodeWatchHub(gw)
    completer = ServerForgets({b"attempt-1"})
    before = await asyncio.to_thread(gw.get_node, node)
    rv = objects.meta(before)["resourceVersion"]
    try:
        # Attempt 1 reaches its hand-off past its first heartbeat's time: beaten at once, gone.
        late = wait_on(node, b"attempt-1", completer, rv=rv, seconds=30)  # type: ignore[arg-type]
        late.next_beat = time.monotonic() - 1.0
        hub.hand_off(late)
        assert completer.beats == [b"attempt-1"] and late.ended
        # The server retried it: attempt 2 hands off a wait of its own on the same node.
        hub.hand_off(wait_on(node, b"attempt-2", completer, rv=rv, seconds=30))  # type: ignore[arg-type]
        await asyncio.to_thread(lambda: until(lambda: not hub._new, 15))
        assert hub.waiting() == 1  # attempt 2 only
        await asyncio.to_thread(gw.patch_node, node, {"metadata": {"annotations": {ASK: "yes"}}})
        await asyncio.to_thread(lambda: until(lambda: b"attempt-2" in completer.results, 15))
        await asyncio.to_thread(lambda: until(lambda: hub.waiting() == 0, 15))
    finally:
        hub._stop.set()
    assert completer.results == {b"attempt-2": "asked"}  # nothing sent to the dead token
    assert hub.waiting() == 0
    assert hub.stats.gone == 1


def test_a_step_runs_on_the_newest_object_the_stream_delivered() -> None:
    """A step that waited in the step queue runs on its node's newest object, not the older one it
    was submitted with (its conditional writes would answer 409 and read again); a pending
    object no newer is dropped, and the newer object's own event is not run again."""
    hub = NodeWatchHub(object())
    completer = Recorder()
    w = wait_on("n1", b"w", completer, rv="10", seconds=30)  # type: ignore[arg-type]

    def node(rv: int) -> dict[str, Any]:
        return {"metadata": {"name": "n1", "resourceVersion": str(rv)}}

    old, new = node(11), node(13)
    w.pending = node(12)
    assert hub._freshest(w, old) is old  # nothing newer seen
    hub._cache["n1"] = new
    assert hub._freshest(w, old) is new
    assert w.pending is None and w.rv == 13
    hub._evaluate(w, new)  # the stream's event of that object: already run, skipped
    assert not w.busy and w.pending is None
    assert hub._freshest(w, node(14)) == node(14)  # an object newer than the cache stays
    hub._pool.shutdown()
    hub._then_pool.shutdown()
