"""Webhook notifications against a real local HTTP receiver (aiohttp): ``gate-opened`` arrives
within 2 s of the gate opening, with the approve command and a Slack-compatible ``text``;
``gate-decided`` and ``completed`` follow. A receiver that is down delays nothing: the rollout
goes on from the approval at once, closes within seconds of its last node, and the failed
notification shows in ``status``."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web

from lockkeeper.devserver import free_port
from tests.support.harness import fast_timings, start_rollout, status

pytestmark = pytest.mark.e2e

SCALE = 0.05
FAST = fast_timings(SCALE)


class Receiver:
    """A webhook receiver on loopback; ``events``: (arrival time UTC, JSON body)."""

    def __init__(self) -> None:
        self.events: list[tuple[datetime, dict[str, Any]]] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/hooks/secret-token"
        self._runner: web.AppRunner | None = None

    async def _hook(self, request: web.Request) -> web.Response:
        self.events.append((datetime.now(UTC), await request.json()))
        return web.json_response({"ok": True})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/hooks/secret-token", self._hook)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def of(self, event: str) -> list[tuple[datetime, dict[str, Any]]]:
        return [(t, b) for t, b in self.events if b["event"] == event]


async def wait_gate(handle: Any, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        st = await status(handle)
        waiting = [g for g in st.gates if g.state == "waiting"]
        if waiting:
            return waiting[0]
        assert time.monotonic() < deadline, st
        await asyncio.sleep(0.1)


async def test_gate_opened_within_2s_then_decided_and_completed(
    sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str
) -> None:
    receiver = Receiver()
    await receiver.start()
    try:
        sim = await sim_factory("r1-ovn-interrupted", time_scale=SCALE)
        await worker_for(sim, env={"LOCKKEEPER_NOTIFY_URL": f"{receiver.url}, {receiver.url}?second"})
        handle = await start_rollout(temporal_client, task_queue, pools=["infra"], approval="pool",
                                     cluster="notify", **FAST)
        gate = await wait_gate(handle)
        deadline = time.monotonic() + 10
        while len(receiver.of("gate-opened")) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        opened = receiver.of("gate-opened")
        assert len(opened) == 2, receiver.events  # both webhooks
        at, body = opened[0]
        assert (at - gate.opened_at).total_seconds() <= 2.0, (at, gate.opened_at)
        assert body["gate"] == gate.id and body["workflow_id"] == handle.id
        assert body["command"] == f"lockkeeper approve {handle.id} {gate.id} -m REASON"
        assert gate.id in body["text"] and body["command"] in body["text"]  # Slack-style line

        await handle.execute_update("approve", {"gate_id": gate.id, "identity": "notify-approver"})
        result = await asyncio.wait_for(handle.result(), 300)
        assert result.outcome == "completed"
        decided = receiver.of("gate-decided")
        assert decided and decided[0][1]["by"] == "notify-approver" and decided[0][1]["outcome"] == "approved"
        completed = receiver.of("completed")
        assert len(completed) == 2 and "completed" in completed[0][1]["text"]

        # The same story from the workflow history (`lockkeeper history ID -o json`).
        from lockkeeper.cli.history import audit_rows

        rows = await audit_rows(temporal_client, handle.id)
        kinds = [r["kind"] for r in rows]
        assert kinds[0] == "started" and "completed" in kinds
        assert any(r["kind"] == "update" and r["what"] == "approve" and r["by"] == "notify-approver"
                   and f"gate_id={gate.id}" in r["detail"] for r in rows), rows
        assert any(r["kind"] == "gate" and r["what"] == f"{gate.id} opened" for r in rows), [r for r in rows if r["kind"] != "node"]
        assert any(r["kind"] == "gate" and r["what"] == f"{gate.id} approved" and r["by"] == "notify-approver" for r in rows)
        node_rows = [r for r in rows if r["kind"] == "node"]
        assert len(node_rows) == 2 and all("outcome=done" in r["detail"] for r in node_rows), node_rows
    finally:
        await receiver.stop()


async def test_receiver_down_delays_nothing_and_status_shows_the_failure(
    sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str
) -> None:
    down = f"http://127.0.0.1:{free_port()}/nobody"  # nothing listens
    sim = await sim_factory("r1-ovn-interrupted", time_scale=SCALE)
    await worker_for(sim, env={"LOCKKEEPER_NOTIFY_URL": down})
    handle = await start_rollout(temporal_client, task_queue, pools=["infra"], approval="pool",
                                 cluster="notify-down", **FAST)
    gate = await wait_gate(handle)
    # The gate-opened notification gives up after its retries; status says so.
    deadline = time.monotonic() + 60
    while True:
        st = await status(handle)
        if any("gate-opened not delivered" in w for w in st.warnings):
            break
        assert time.monotonic() < deadline, st.warnings
        await asyncio.sleep(0.2)

    approved_at = datetime.now(UTC)
    await handle.execute_update("approve", {"gate_id": gate.id, "identity": "notify-approver"})
    result = await asyncio.wait_for(handle.result(), 300)
    assert result.outcome == "completed"
    desc = await handle.describe()
    history = await handle.fetch_history()
    first_child = next(e.event_time.ToDatetime(UTC) for e in history.events
                       if e.HasField("start_child_workflow_execution_initiated_event_attributes"))
    # The approval moved the rollout on at once, and the close waited seconds, not the retries.
    assert (first_child - approved_at).total_seconds() < 3.0
    last_child = max(e.event_time.ToDatetime(UTC) for e in history.events
                     if e.HasField("child_workflow_execution_completed_event_attributes"))
    assert desc.close_time is not None and (desc.close_time - last_child).total_seconds() < 8.0
