"""The shared node watch (:mod:`activities.cluster.nodewatch`) against clustersim over real HTTP.

A broken watch stream (a read timeout) watches on from the last resourceVersion instead of
listing every node again. A wait handed off while the hub re-lists the nodes is evaluated with its node as that LIST showed
it. The watch goes on from the list's resourceVersion, so a change the list already holds (the
daemon's drain request, written just before the LIST) never comes as an event; before the fix the
hub cached only the nodes followed when the LIST returned, and such a wait saw the change only at
the next re-list (issue 40: drain requests answered 60-70 s late at 2,000 nodes)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from activities.cluster.nodewatch import NodeWait, NodeWatchHub
from activities.kube import objects
from activities.kube.errors import Unavailable
from activities.kube.gateway import KubeGateway
from clustersim import ClusterSim

pytestmark = pytest.mark.timeout(120)

ASK = "lockkeeper.io/test-ask"


class Recorder:
    """The completer side the hub talks to: records what it completes (token -> result)."""

    def __init__(self) -> None:
        self.closed = False
        self.results: dict[bytes, Any] = {}
        self.done = threading.Event()

    def on_close(self, _close: Any) -> None:
        pass

    def complete(self, task_token: bytes, result: Any, _what: str) -> None:
        self.results[task_token] = result
        self.done.set()

    def fail(self, task_token: bytes, error: BaseException, _what: str) -> None:
        self.results[task_token] = error
        self.done.set()

    def heartbeat(self, *_args: Any, **_kwargs: Any) -> None:
        pass

    def report_cancellation(self, task_token: bytes, _what: str) -> None:
        self.results[task_token] = "cancelled"


class HandOffDuringList:
    """A gateway whose first LIST of the nodes runs while the daemon asks (an annotation written
    just before it) and a wait for that ask is handed off (just after it, before the hub takes
    it): the race of a busy API server, made certain."""

    def __init__(self, gw: KubeGateway, node: str) -> None:
        self.gw, self.node = gw, node
        self.hub: NodeWatchHub | None = None
        self.late: NodeWait | None = None
        self.lists = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gw, name)

    def list_nodes_with_rv(self) -> tuple[list[dict[str, Any]], str | None]:
        self.lists += 1
        if self.lists == 1:
            assert self.hub is not None and self.late is not None
            self.gw.patch_node(self.node, {"metadata": {"annotations": {ASK: "yes"}}})
            items, rv = self.gw.list_nodes_with_rv()
            self.hub.hand_off(self.late)
            return items, rv
        return self.gw.list_nodes_with_rv()


def wait_on(node: str, token: bytes, completer: Recorder, *, rv: str | None, seconds: float) -> NodeWait:
    return NodeWait(
        node=node, task_token=token, completer=completer, deadline=time.monotonic() + seconds,  # type: ignore[arg-type]
        rv=int(rv) if rv and rv.isdigit() else None, start_rv=rv,
        step=lambda obj, _info: "asked" if objects.annotations(obj).get(ASK) == "yes" else None,
        timed_out=lambda: "timed out", details=lambda: None, what=f"test wait {node}",
    )


@pytest.fixture
async def world() -> AsyncIterator[tuple[ClusterSim, KubeGateway]]:
    async with ClusterSim("r3-okd310-upgrade", time_scale=0.01, start_agents=False) as sim:
        gw = KubeGateway.from_kubeconfig(sim.kubeconfig_path)
        try:
            yield sim, gw
        finally:
            gw.close()


async def test_a_wait_handed_off_during_a_relist_sees_what_the_list_showed(world: Any) -> None:
    sim, gw = world
    first, second = sorted(objects.meta(n).get("name") for n in sim.store.list("nodes"))[:2]
    before = await asyncio.to_thread(gw.get_node, second)
    racing = HandOffDuringList(gw, second)
    hub = NodeWatchHub(racing)
    racing.hub = hub
    completer = Recorder()
    # Asked after ``before`` (the wait's own look), in the LIST the hub starts with.
    racing.late = wait_on(second, b"late", completer, rv=objects.meta(before)["resourceVersion"], seconds=20)
    try:
        # A wait with no resourceVersion of its own: the idle hub starts with a LIST.
        hub.hand_off(wait_on(first, b"starter", completer, rv=None, seconds=5))
        await asyncio.to_thread(lambda: until(lambda: b"late" in completer.results, 15))
    finally:
        hub._stop.set()
    assert racing.lists >= 1
    assert completer.results.get(b"late") == "asked"


class BreakOnce:
    """A gateway whose first WATCH breaks before its first event, as a read timeout does."""

    def __init__(self, gw: KubeGateway) -> None:
        self.gw = gw
        self.lists = self.watches = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gw, name)

    def list_nodes_with_rv(self) -> tuple[list[dict[str, Any]], str | None]:
        self.lists += 1
        return self.gw.list_nodes_with_rv()

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        self.watches += 1
        if self.watches == 1:
            raise Unavailable("watch nodes: Read timed out.")
        return self.gw.watch(*args, **kwargs)


async def test_a_broken_stream_watches_on_without_a_relist(world: Any) -> None:
    sim, gw = world
    node = sorted(objects.meta(n).get("name") for n in sim.store.list("nodes"))[0]
    breaking = BreakOnce(gw)
    hub = NodeWatchHub(breaking)
    completer = Recorder()
    before = await asyncio.to_thread(gw.get_node, node)
    try:
        hub.hand_off(wait_on(node, b"w", completer, rv=objects.meta(before)["resourceVersion"], seconds=20))
        await asyncio.to_thread(lambda: until(lambda: breaking.watches >= 2, 15))
        await asyncio.to_thread(gw.patch_node, node, {"metadata": {"annotations": {ASK: "yes"}}})
        await asyncio.to_thread(lambda: until(lambda: b"w" in completer.results, 15))
    finally:
        hub._stop.set()
    assert completer.results.get(b"w") == "asked"
    assert breaking.lists == 0


def until(pred: Any, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and not pred():
        time.sleep(0.05)
