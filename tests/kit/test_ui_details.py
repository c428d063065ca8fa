"""The Temporal UI's live view: a rollout waiting at a gate shows, in its current details (read
back through the built-in ``__temporal_workflow_metadata`` query, as the UI does), the gate, the
exact approve command and the node table; after the approval they show the next step."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.service import RPCError

from tests.support.harness import fast_timings, start_rollout, status

pytestmark = pytest.mark.e2e

SCALE = 0.05
FAST = fast_timings(SCALE)


async def details(handle: Any) -> str:
    """The workflow's current details, as the Temporal UI reads them."""
    meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return meta.current_details


async def wait_details(handle: Any, ok: Any, timeout: float = 120.0) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = await details(handle)
        if ok(text):
            return text
        await asyncio.sleep(0.2)
    raise AssertionError(f"details never matched; last:\n{text}")


async def test_details_name_the_gate_and_command_then_the_next_step(
    sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str
) -> None:
    sim = await sim_factory("r1-ovn-interrupted", time_scale=SCALE)
    await worker_for(sim)
    handle = await start_rollout(temporal_client, task_queue, pools=["infra"], approval="pool", cluster="ui", **FAST)
    try:
        deadline = time.monotonic() + 120
        while True:
            st = await status(handle)
            waiting = [g for g in st.gates if g.state == "waiting"]
            if waiting:
                break
            assert time.monotonic() < deadline, st
            await asyncio.sleep(0.2)
        gate = waiting[0]

        text = await wait_details(handle, lambda t: gate.id in t)
        assert f"`lockkeeper approve {handle.id} {gate.id} -m REASON`" in text
        assert "phase **waiting-approval**" in text
        assert f"Waiting for approval of gate {gate.id} since " in text
        assert "**Nodes** pending: 2" in text  # both infra nodes counted, none in flight yet

        await handle.execute_update("approve", {"gate_id": gate.id, "identity": "ui-approver"})
        # The next step: the gate is gone and a running node's row points at its node run (the
        # parent is not sent the steps), whose own details name the step it is at.
        def stepping(t: str) -> bool:
            rows = [line.split("|") for line in t.splitlines() if "| running |" in line]
            return gate.id not in t and any("see node run `" in r[5] for r in rows)

        text = await wait_details(handle, stepping)
        assert "phase **running**" in text and "Open gates" not in text
        run_id = text.split("see node run `", 1)[1].split("`", 1)[0]
        assert run_id.startswith(f"{handle.id}/node/")
        try:
            run_text = await wait_details(temporal_client.get_workflow_handle(run_id), lambda t: "step **" in t, timeout=30)
            assert run_text.startswith("**node ") and "(attempt 1)" in run_text
        except RPCError:
            pass  # the node run already finished: its details went with it

        # The node run's timeline reads as the procedure: activity summaries name step and node.
        summaries: list[str] = []
        for _ in range(50):  # visibility (the child listing) is eventually consistent
            async for child in temporal_client.list_workflows(f"ParentWorkflowId = '{handle.id}'"):
                history = await temporal_client.get_workflow_handle(child.id, run_id=child.run_id).fetch_history()
                for ev in history.events:
                    # Short calls are local activities: their markers carry the same summaries.
                    step = ev.HasField("activity_task_scheduled_event_attributes") or (
                        ev.HasField("marker_recorded_event_attributes")
                        and ev.marker_recorded_event_attributes.marker_name == "core_local_activity"
                    )
                    if step and ev.user_metadata.HasField("summary"):
                        summaries.append(json.loads(ev.user_metadata.summary.data))
            if any(s.startswith("drain_when_asked · node ") for s in summaries):
                break
            await asyncio.sleep(0.2)
        # The drain request, cordon and first pass are one activity (drain_when_asked).
        assert any(s.startswith("drain_when_asked · node ") for s in summaries), summaries
        # ... and the parent's timeline names each node run it started.
        parent = await handle.fetch_history()
        children = [json.loads(ev.user_metadata.summary.data) for ev in parent.events
                    if ev.HasField("start_child_workflow_execution_initiated_event_attributes")
                    and ev.user_metadata.HasField("summary")]
        assert any(c.startswith("node ") and "MachineConfig handshake" in c for c in children), children
    finally:
        try:
            await handle.terminate("test over")
        except RPCError:
            pass  # it already finished


def test_render_blocked_drain_report_and_decide_command() -> None:
    from datetime import UTC, datetime

    from activities.cluster.models import BlockedPod, DrainReport, PDBReport
    from workflows.kit.details import render
    from workflows.kit.models import Gate, GateKind, HealthStatus, NodePhase, NodeStatus
    from workflows.machineconfig.models import RolloutStatus

    t0 = datetime(2026, 11, 23, 8, 39, tzinfo=UTC)
    report = DrainReport(blocked_pods=[BlockedPod(
        namespace="default", name="router-1", message="Cannot evict pod as it would violate the pod's disruption budget.",
        pdbs=[PDBReport(namespace="default", name="router", current_healthy=1, desired_healthy=1)],
    )])
    gate = Gate(id="drain/n1", kind=GateKind.DRAIN, node="n1", opened_at=t0,
                choices=["wait", "skip", "delete-pod", "abort"])
    st = RolloutStatus(workflow_id="wf-1", procedure="machineconfig-rollout", cluster="prod", nodes={
        "n1": NodeStatus(name="n1", pool="app", phase=NodePhase.BLOCKED, step="drain", drain_report=report, blocked_since=t0),
        "n2": NodeStatus(name="n2", pool="app"),
    })
    st.health["x"] = HealthStatus(name="x", polls=7, last="3 of 4 Ready")
    text = render(st, phase="waiting-approval", gates=[gate], paused_reason=None, noun="rollout")
    assert "Waiting for decision on the blocked drain of n1 since 2026-11-23 08:39:00 UTC" in text
    assert "`lockkeeper decide wf-1 n1 wait|skip|delete-pod|abort -m REASON`" in text
    assert "| n1 | app | blocked | drain |" in text and "blocked: 1, pending: 1" in text
    assert "**Drain of n1 blocked** since 2026-11-23 08:39:00 UTC" in text
    assert "pod `default/router-1`" in text and "PDB default/router: 1 healthy, needs 1" in text
    # A poll moves nothing: the health check's reading and count are not in the text.
    st.health["x"].polls, st.health["x"].last = 8, "4 of 4 Ready"
    assert render(st, phase="waiting-approval", gates=[gate], paused_reason=None, noun="rollout") == text


def test_render_ignores_node_rows_of_another_shape() -> None:
    from pydantic import BaseModel

    from workflows.kit.details import render
    from workflows.kit.models import ProcedureStatus

    class OwnRow(BaseModel):  # a procedure's own node row, not the kit's NodeStatus
        host: str

    st = ProcedureStatus(workflow_id="wf-2", procedure="p", cluster="c")
    st.nodes = {"a": OwnRow(host="h")}  # type: ignore[attr-defined]
    text = render(st, phase="running", gates=[], paused_reason=None, noun="migration")
    assert "phase **running**" in text and "Nodes" not in text
