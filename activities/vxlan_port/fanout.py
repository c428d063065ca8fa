"""The fast fan-out (procedures-spec §1.5): switch ``vxlan0`` on every node concurrently.

One call runs every target at once (``asyncio.gather``, one exec per node and command); per
node it checks first (``ovs-vsctl get interface vxlan0 options:dst_port``), applies only where
the port differs (``ovs-vsctl set interface vxlan0 options:dst_port=N``) and verifies with the
check. The ``set`` of each node is timed on this process's wall clock (``time.time()``), so the
window (first set start to last set end) is measured on one clock. A retried attempt (worker
crash) gets the earlier attempts' per-node outcomes from the heartbeat details (``previous``)
and keeps their timings, so the reported window spans every attempt.

OVS prints a string map value quoted: ``"4789"`` (origin 3.11 ``ovscontroller.go`` compares the
quotes too; Open vSwitch ``lib/db-ctl-base.c``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from activities.vxlan_port.models import FanoutInput, FanoutResult, NodeSwitch, SwitchTarget, summarise

GET_PORT = ["ovs-vsctl", "get", "interface", "vxlan0", "options:dst_port"]


def set_port_argv(port: int) -> list[str]:
    """``ovs-vsctl set interface vxlan0 options:dst_port=PORT`` (seed 004 step 4)."""
    return ["ovs-vsctl", "set", "interface", "vxlan0", f"options:dst_port={port}"]


def parse_dst_port(stdout: str) -> int | None:
    """The port from ``ovs-vsctl get ... options:dst_port`` output (``"4789"`` with quotes, or
    bare digits); None when the output is anything else (no such key, empty)."""
    text = stdout.strip().strip('"')
    return int(text) if text.isdigit() else None


class Runner(Protocol):
    """Runs one argv for one target: returns (exit code or None on timeout, stdout, stderr);
    raises any exception when the target cannot be reached (reported as that node's error)."""

    async def __call__(self, target: SwitchTarget, argv: list[str], timeout: float) -> tuple[int | None, str, str]: ...


async def _read(run: Runner, target: SwitchTarget, timeout: float) -> tuple[int | None, str]:
    code, out, err = await run(target, GET_PORT, timeout)
    if code != 0:
        return None, f"{' '.join(GET_PORT)}: exit {code}: {(err or out).strip()[-300:]}"
    port = parse_dst_port(out)
    return port, "" if port is not None else f"unexpected output {out.strip()[:100]!r}"


async def fan_out(
    spec: FanoutInput,
    run: Runner,
    *,
    attempt: int = 1,
    previous: dict[str, NodeSwitch] | None = None,
    progress: Callable[[dict[str, NodeSwitch]], None] = lambda done: None,
    clock: Callable[[], float] = time.time,
    lost_since: float | None = None,
) -> FanoutResult:
    """Check, switch where needed, verify, on every target concurrently (see the module doc).

    ``previous``: node → outcome of an earlier attempt (its timings are kept when the node is
    already on the port now); ``lost_since`` (a retry: when the activity was first scheduled):
    a node found on the port with no earlier outcome was switched by the dead attempt, its set
    bounded by [lost_since, now] (``lost_attempt``); ``progress(done)`` is called after every node finishes (the
    activity heartbeats it). A node that does not finish within ``deadline_seconds`` is failed with
    "deadline". Never raises for a node's failure: it is in the result."""
    previous = previous or {}
    done: dict[str, NodeSwitch] = {}
    sem = asyncio.Semaphore(spec.concurrency) if spec.concurrency else None
    timeout = spec.command_timeout_seconds

    async def one(target: SwitchTarget) -> NodeSwitch:
        row = NodeSwitch(node=target.node, attempt=attempt)
        try:
            before, why = await _read(run, target, timeout)
            row.before = before
            if before == spec.port:
                earlier = previous.get(target.node)
                if earlier is not None and earlier.applied:
                    row = earlier.model_copy(update={"before": earlier.before, "after": before, "ok": True})
                elif lost_since is not None and spec.apply:
                    # A retry finds it switched and the dead attempt's timing was lost: bound it.
                    row.after, row.ok, row.applied, row.lost_attempt = before, True, True, True
                    row.t_apply_start, row.t_apply_end = lost_since, clock()
                else:
                    row.after, row.ok = before, True
                return row
            if before is None:
                row.error = why
            if not spec.apply:
                return row
            row.applied = True
            row.t_apply_start = clock()
            code, out, err = await run(target, set_port_argv(spec.port), timeout)
            row.t_apply_end = clock()
            if code != 0:
                row.error = f"ovs-vsctl set: exit {code}: {(err or out).strip()[-300:]}"
            after, why = await _read(run, target, timeout)
            row.after = after
            row.ok = after == spec.port
            if not row.ok and not row.error:
                row.error = why or f"dst_port is {after} after the set"
            if row.ok:
                row.error = ""
        except Exception as exc:  # noqa: BLE001 - one node's trouble is that node's result
            row.error = f"{type(exc).__name__}: {exc}"[:500]
        return row

    async def bounded(target: SwitchTarget) -> NodeSwitch:
        if sem is None:
            row = await one(target)
        else:
            async with sem:
                row = await one(target)
        done[row.node] = row
        progress(done)
        return row

    tasks = {t.node: asyncio.ensure_future(bounded(t)) for t in spec.targets}
    _, pending = await asyncio.wait(tasks.values(), timeout=spec.deadline_seconds)
    for task in pending:
        task.cancel()
    rows: list[NodeSwitch] = []
    for target in spec.targets:
        task = tasks[target.node]
        if task in pending or task.cancelled():
            row = done.get(target.node) or NodeSwitch(node=target.node, attempt=attempt, error=f"deadline {spec.deadline_seconds:.0f}s passed")
        else:
            row = task.result()
        rows.append(row)
    return summarise(spec.port, rows, attempts=attempt)


def thread_runner(call: Callable[[SwitchTarget, list[str], float], tuple[int | None, str, str]],
                  ) -> Callable[[SwitchTarget, list[str], float], Awaitable[tuple[int | None, str, str]]]:
    """Wrap a blocking per-target call (the Kubernetes client's exec) as a :class:`Runner`
    running in the default thread pool."""

    async def run(target: SwitchTarget, argv: list[str], timeout: float) -> tuple[int | None, str, str]:
        return await asyncio.to_thread(call, target, argv, timeout)

    return run


@contextlib.asynccontextmanager
async def exec_pool(workers: int) -> AsyncIterator[ThreadPoolExecutor]:
    """A thread pool for the blocking per-target execs, shut down off the event loop: an exec
    still running past the fan-out's deadline (it ends within its command timeout) is waited for
    before the activity returns, so none lands later, and the worker's other activities and
    heartbeats go on meanwhile (``with ThreadPoolExecutor`` would block the loop in its join)."""
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vxlan-fanout")
    try:
        yield pool
    finally:
        await asyncio.to_thread(pool.shutdown, True)
