"""Issue 37: the alert gate when Prometheus goes away mid-run. A MachineConfig rollout of two
worker nodes with ``alerts`` on a generated cluster, a real Prometheus (tests/support/promserver.py)
scraping the simulator, a dev server and a worker process; Prometheus is STOPPED while the first
node rolls.

- fail-closed (the default): the second node does not start while Prometheus is down, and
  ``lockkeeper status`` says Prometheus cannot be asked; once it is started again the rollout
  completes;
- fail-open (``--alert-gate-fail-open``): the second node starts without the check, status warns
  that the gate was passed without it, and one ``alerts-skipped`` webhook says so.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from tests.support.promserver import prometheus_factory  # noqa: F401 - a fixture, found by name

from clustersim.scenario import generate_scenario
from tests.support.cli_status import person_status
from tests.support.harness import drive, fast_timings, start_rollout, status
from tests.kit.test_notify import Receiver
from tests.machineconfig.test_rollout_alert_gate_e2e import KNOWN
from workflows.kit.inputs import AlertGatePolicy

pytestmark = pytest.mark.e2e

SCALE = 0.05
#: What the gate says while Prometheus cannot be asked (workflows.kit.alerts, fail-closed).
CANNOT_ASK = "Prometheus could not be asked"


def two_workers() -> Any:
    return generate_scenario(nodes=3, pods=2, pools={"worker": 2, "infra": 1}, name="alert-outage", reboot_seconds=100,
                             write_files_seconds=1, pod_start_seconds=1, namespaces=1, pods_per_deployment=1)


async def first_node_rolls(handle: Any) -> tuple[str, str]:
    """Wait until one worker node has started; returns (started node, the node still pending)."""
    end = time.monotonic() + 60
    while True:
        st = await status(handle)
        started = [n for n, ns in st.nodes.items() if ns.phase != "pending"]
        if started:
            pending = [n for n, ns in st.nodes.items() if ns.phase == "pending"]
            assert len(started) == 1 and len(pending) == 1, st.nodes
            return started[0], pending[0]
        assert time.monotonic() < end, st.nodes
        await asyncio.sleep(0.1)


@pytest.mark.timeout(120)
async def test_fail_closed_no_node_starts_while_prometheus_is_down(
        sim_factory: Any, prometheus_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str,  # noqa: F811
        dev_server: Any) -> None:
    sim = await sim_factory(two_workers(), time_scale=SCALE)
    prom = await prometheus_factory(sim)
    await worker_for(sim)
    handle = await start_rollout(temporal_client, task_queue, pools=["worker"], max_unavailable=1, search_attributes=False,
                                 alerts=AlertGatePolicy(url=prom.url, filter=KNOWN, poll_seconds=1, timeout_seconds=2),
                                 **fast_timings(SCALE))
    _, second = await first_node_rolls(handle)
    await prom.stop()

    board = f"alerts/worker/{second}"
    end = time.monotonic() + 60
    while True:  # the first node finishes; the second waits at the gate, saying why
        st = await status(handle)
        hs = st.health.get(board)
        if hs is not None and hs.state == "waiting" and CANNOT_ASK in hs.last:
            break
        assert time.monotonic() < end, (st.health, st.nodes)
        await asyncio.sleep(0.2)
    assert "fail-closed: waiting" in hs.last, hs.last
    assert any(w.startswith(f"{board}: {CANNOT_ASK}") and "(fail-closed)" in w for w in st.warnings), st.warnings
    assert st.nodes[second].phase == "pending", st.nodes
    shown = await person_status(dev_server.address, handle.id)
    assert CANNOT_ASK in shown and "fail-closed: waiting" in shown, shown

    await asyncio.sleep(6)  # 120 simulated seconds: more than a node's reboot, were it allowed to start
    held = await status(handle)
    assert held.nodes[second].phase == "pending", held.nodes
    assert held.health[board].state == "waiting" and held.health[board].polls > hs.polls, held.health[board]

    await prom.start()  # same port and data: the next check answers
    end = time.monotonic() + 60
    while (now := (await status(handle)).health[board]).state == "waiting":  # the gate clears by itself, before
        assert time.monotonic() < end, now  # drive() below, which answers every open gate (the override's too)
        await asyncio.sleep(0.2)
    result = await drive(handle, timeout=60)
    assert result.outcome == "completed", result.message
    assert all(n.phase == "done" for n in result.nodes.values()), result.nodes
    final = await status(handle)
    assert final.health[board].state == "ok" and CANNOT_ASK not in final.health[board].last, final.health[board]


@pytest.mark.timeout(120)
async def test_fail_open_the_run_goes_on_and_says_the_gate_was_skipped(
        sim_factory: Any, prometheus_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str) -> None:  # noqa: F811
    receiver = Receiver()
    await receiver.start()
    try:
        sim = await sim_factory(two_workers(), time_scale=SCALE)
        prom = await prometheus_factory(sim)
        await worker_for(sim, env={"LOCKKEEPER_NOTIFY_URL": receiver.url})
        handle = await start_rollout(temporal_client, task_queue, pools=["worker"], max_unavailable=1, search_attributes=False,
                                     alerts=AlertGatePolicy(url=prom.url, filter=KNOWN, poll_seconds=1, timeout_seconds=2,
                                                            fail_open=True),
                                     **fast_timings(SCALE))
        first, second = await first_node_rolls(handle)
        await prom.stop()

        result = await drive(handle, timeout=60)
        assert result.outcome == "completed", result.message
        assert all(n.phase == "done" for n in result.nodes.values()), result.nodes
        st = await status(handle)
        skipped = f"alerts/worker/{second}: {CANNOT_ASK}"
        assert any(w.startswith(skipped) and w.endswith("passed without the alert check (fail-open)") for w in st.warnings), st.warnings
        assert st.health[f"alerts/worker/{first}"].last.startswith("no blocking alert"), st.health  # asked before the stop
        end = time.monotonic() + 10
        while not receiver.of("alerts-skipped") and time.monotonic() < end:
            await asyncio.sleep(0.1)
        told = [body for _, body in receiver.of("alerts-skipped")]
        assert len(told) == 1, receiver.events
        assert f"alerts/worker/{second}" in told[0]["text"] and "passed without the alert check (fail-open)" in told[0]["text"], told
        assert receiver.of("alerts-blocking") == [], receiver.events
    finally:
        await receiver.stop()
