"""A watch's bookmarks never skip an event: a client resuming from a bookmark's resourceVersion
sees every change committed after the last event it was sent (k8s-api-contract.md, "Watch
semantics"; a bookmark means "you have seen everything up to this resourceVersion").

The changes here are committed while the stream ends, the moment an event can sit in the
stream's queue when the final bookmark is written. Before the fix the bookmark carried the
store's newest resourceVersion and the queued event was never sent: a node watcher resuming
from it waited a whole watch window (60 s in a rollout) for a change that had already happened.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp

from clustersim.sim import ClusterSim


async def _mutate_until(sim: ClusterSim, stop: asyncio.Event, committed: list[int]) -> None:
    i = 0
    while not stop.is_set():
        i += 1
        obj = sim.store.mutate("nodes", "node1", None, lambda n, i=i: n["metadata"]["labels"].update(seq=str(i)))
        committed.append(int(obj["metadata"]["resourceVersion"]))
        await asyncio.sleep(0.002)


async def test_resuming_from_bookmarks_misses_no_event(sim: ClusterSim) -> None:
    async with aiohttp.ClientSession(base_url=sim.url) as http:
        await _watch_three_windows(sim, http)


async def _watch_three_windows(sim: ClusterSim, http: aiohttp.ClientSession) -> None:
    committed: list[int] = []
    seen: list[int] = []
    stop = asyncio.Event()
    rv = str(sim.store.resource_version)
    writer = asyncio.ensure_future(_mutate_until(sim, stop, committed))
    try:
        for _ in range(3):  # three windows, each ended by timeoutSeconds with a final bookmark
            params = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": "1",
                      "fieldSelector": "metadata.name=node1", "resourceVersion": rv}
            async with http.get("/api/v1/nodes", params=params) as resp:
                assert resp.status == 200
                async for line in resp.content:
                    if not line.strip():
                        continue
                    ev = json.loads(line)
                    assert ev["type"] in ("MODIFIED", "BOOKMARK"), ev
                    rv = ev["object"]["metadata"]["resourceVersion"]
                    if ev["type"] == "MODIFIED":
                        seen.append(int(rv))
    finally:
        stop.set()
        await writer
    last = int(rv)
    assert len(committed) > 50, "the writer did not run while the watches did"
    missed = sorted(set(r for r in committed if r <= last) - set(seen))
    assert not missed, f"{len(missed)} changes up to the last bookmark {last} never sent, e.g. {missed[:5]}"
    assert seen == sorted(set(seen)), "events out of order or sent twice"
