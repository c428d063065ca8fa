"""clustersim/loops.py, the asyncio plumbing the simulated controllers share, on a real Store:
event routing that survives a bad object, reconcile-on-change, keyed timers, Background's stop."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from clustersim.clock import Clock
from clustersim.loops import Background, KeyedTimers, cancel_and_wait, reconcile_on_change
from clustersim.store import Store
from clustersim.storeevents import Event


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}, "data": {}}


async def until(cond: Any, seconds: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def test_routing_logs_a_bad_event_and_goes_on_and_stop_ends_everything(caplog: pytest.LogCaptureFixture) -> None:
    store = Store(Clock())
    seen: list[str] = []
    fired: list[str] = []

    def route(ev: Event) -> None:
        name = ev.object["metadata"]["name"]
        if name == "bad":
            raise ValueError("one bad object")
        seen.append(name)

    bg = Background("probe")
    bg.follow(store.subscribe(["configmaps"]), route, "probe-dispatch")
    bg.timers.after("k", 60.0, lambda: fired.append("late"))
    with caplog.at_level(logging.ERROR, logger="clustersim.loops"):
        for name in ("a", "bad", "b"):
            store.create("configmaps", configmap(name))
        await until(lambda: seen == ["a", "b"])
    assert "probe: routing ADDED configmaps failed" in caplog.text
    task = bg.tasks[0]
    await bg.stop()
    assert task.cancelled() and bg.tasks == [] and bg.sub is None and not bg.timers.pending("k")
    await bg.stop()  # idempotent
    assert fired == []


async def test_reconcile_on_change_makes_one_pass_per_burst_and_survives_a_failing_pass() -> None:
    store = Store(Clock())
    dirty = asyncio.Event()
    passes: list[int] = []

    def reconcile() -> None:
        passes.append(len(store.list("configmaps", "default")))
        if len(passes) == 1:
            raise RuntimeError("first pass fails")

    sub = store.subscribe(["configmaps"])
    task = asyncio.get_running_loop().create_task(reconcile_on_change(sub, dirty, reconcile, "probe"))
    for name in ("a", "b", "c"):
        store.create("configmaps", configmap(name))
    await until(lambda: len(passes) >= 1)
    store.create("configmaps", configmap("d"))
    await until(lambda: passes[-1] == 4)
    assert len(passes) <= 3, passes  # a burst is one pass, not one per event
    sub.close()
    await cancel_and_wait([task, None])
    assert task.done()


async def test_keyed_timers_keep_one_call_per_key() -> None:
    timers = KeyedTimers("probe")
    calls: list[str] = []
    timers.after("a", 0.05, lambda: calls.append("a1"))
    timers.after("a", 0.01, lambda: calls.append("a2"))  # replaces a1
    timers.after("b", 0.01, lambda: calls.append("b"))
    timers.after("c", 0.01, lambda: calls.append("c"))
    timers.cancel("c")
    timers.after("boom", 0.0, lambda: 1 / 0)  # logged, dropped
    await asyncio.sleep(0.1)
    assert sorted(calls) == ["a2", "b"]
    assert not any(timers.pending(k) for k in ("a", "b", "c", "boom"))
    timers.after("d", 0.01, lambda: calls.append("d"))
    timers.cancel_all()
    await asyncio.sleep(0.03)
    assert "d" not in calls
