"""R2 end to end: the router's PodDisruptionBudget blocks the drain of the only worker. The
status explains it (pod, budget and counts, the replacement's FailedScheduling message), a
decision gate opens, a worker killed meanwhile comes back to the same gate without new Events,
and the operator's decision resolves it. Facts come from clustersim's store and request record."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError

from tests.support.harness import APPROVER, node_annotations, start_rollout, status, write_requests
from workflows.kit.models import DecideInput, GateState, NodePhase
from workflows.machineconfig.models import RolloutStatus

pytestmark = pytest.mark.e2e

SCALE = 0.02
NODE = "okd-worker-01"
BLOCKING = "openshift-ingress/router-default-796df5847b-9hxzx"
REPLACEMENT = "router-default-796df5847b-h8bm4"
MCO = "machineconfiguration.openshift.io/"
FAST = dict(
    pools=["worker"], drain={"backoff_initial_seconds": 0.5, "backoff_max_seconds": 1, "wait_seconds": 2, "decide_after_seconds": 3},
    daemon={"drain_deadline_seconds": 3600 * SCALE, "uncordon_deadline_seconds": 600 * SCALE},
)


async def until(handle: Any, pred: Any, timeout: float = 40) -> RolloutStatus:
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            last = await status(handle)
            if pred(last):
                return last
        except Exception:  # noqa: BLE001 - no worker right now
            pass
        await asyncio.sleep(0.2)
    raise AssertionError(f"not reached; last status {last and last.model_dump_json(indent=1)}")


def gate_open(s: RolloutStatus) -> bool:
    g = s.nodes.get(NODE) and s.nodes[NODE].decision_gate
    return bool(g) and g.state == GateState.WAITING


def lockkeeper_events(store: Any) -> list[dict[str, Any]]:
    return [
        e for e in store.list("events")
        if (e.get("involvedObject") or {}).get("name") == NODE and (e.get("source") or {}).get("component") == "lockkeeper"
    ]


def latest_failed_scheduling(store: Any) -> str:
    evs = [e for e in store.list("events") if (e.get("involvedObject") or {}).get("name") == REPLACEMENT and e.get("reason") == "FailedScheduling"]
    return max(evs, key=lambda e: int(e["metadata"]["resourceVersion"]))["message"]


def pod_deletes(sim: Any) -> list[Any]:
    return [e for e in write_requests(sim.requests) if e.verb == "delete" and e.resource == "pods"]


async def test_r2_report_worker_kill_same_gate_then_delete_pod(sim_factory, worker_for, temporal_client, task_queue) -> None:
    sim = await sim_factory("r2-pdb-blocked", time_scale=SCALE)
    worker = await worker_for(sim)
    handle = await start_rollout(temporal_client, task_queue, cluster="r2", approvals={"four_eyes": True}, **FAST)

    st = await until(handle, lambda s: s.nodes.get(NODE) and s.nodes[NODE].phase == NodePhase.BLOCKED and any(
        "were unschedulable" in (p.message or "") for p in s.nodes[NODE].drain_report.pending_replacements))
    rep = st.nodes[NODE].drain_report
    (bp,) = rep.blocked_pods
    assert f"{bp.namespace}/{bp.name}" == BLOCKING and "disruption budget" in bp.message
    (pdb,) = bp.pdbs
    assert (pdb.name, pdb.min_available, pdb.current_healthy, pdb.desired_healthy, pdb.disruptions_allowed) == (
        "router-default", 1, 1, 1, 0)
    (pending,) = rep.pending_replacements
    assert pending.name == REPLACEMENT and pending.replaces == BLOCKING
    assert pending.message.startswith(
        "0/4 nodes are available: 1 node(s) were unschedulable, 3 node(s) didn't match Pod's node affinity/selector. preemption:")
    assert pending.message == latest_failed_scheduling(sim.store)

    st = await until(handle, gate_open)
    opened = st.nodes[NODE].decision_gate.opened_at
    events_before = len(lockkeeper_events(sim.store))
    assert {e["reason"] for e in lockkeeper_events(sim.store)} == {"DrainBlocked", "DrainDecisionRequired"}
    # Each Event names the procedure it belongs to (two procedures could act on one node's story).
    assert all(e["message"].endswith(f"(procedure {handle.id})") and e["reportingInstance"] == handle.id
               for e in lockkeeper_events(sim.store)), lockkeeper_events(sim.store)

    # Kill the worker while the gate is open; the new one replays to the same gate, no new Events.
    await worker.kill()
    await asyncio.sleep(1)
    await worker.start()
    st = await until(handle, gate_open)
    await asyncio.sleep(4)  # several drain retries with the new worker
    st = await until(handle, gate_open)
    assert st.nodes[NODE].decision_gate.opened_at == opened
    assert len(lockkeeper_events(sim.store)) == events_before, "a second Event storm after the restart"
    assert sum(1 for r in st.gate_history if r.action == "opened") == 1

    # delete-pod: refused without an identity and from the requester (four-eyes); nothing deleted.
    for who in ("", "e2e-requester"):
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update("decide", DecideInput(node=NODE, decision="delete-pod", identity=who))
    assert not pod_deletes(sim), "no pod deleted without a recorded delete-pod decision"
    decided_at = time.time()
    await handle.execute_update("decide", DecideInput(node=NODE, decision="delete-pod", identity=APPROVER, comment="spare router"))
    result = await asyncio.wait_for(handle.result(), 60)

    assert result.outcome == "completed", result.message
    (rec,) = [r for r in result.gate_history if r.action == "decided"]
    assert (rec.by, rec.decision, rec.comment) == (APPROVER, "delete-pod", "spare router")
    deletes = pod_deletes(sim)
    assert [f"{d.namespace}/{d.name}" for d in deletes] == [BLOCKING]
    assert all(d.time >= decided_at for d in deletes)
    ann = node_annotations(sim.store, NODE)
    assert ann[MCO + "currentConfig"] == ann[MCO + "desiredConfig"] == "rendered-worker-5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b"
    assert not (sim.store.get("nodes", NODE).get("spec") or {}).get("unschedulable")


async def test_r2_skip_leaves_node_clean_and_daemon_not_waiting(sim_factory, worker_for, temporal_client, task_queue) -> None:
    sim = await sim_factory("r2-pdb-blocked", time_scale=SCALE)
    await worker_for(sim)
    handle = await start_rollout(temporal_client, task_queue, cluster="r2-skip", **FAST)
    await until(handle, gate_open)
    await handle.execute_update("decide", DecideInput(node=NODE, decision="skip", identity="ops", comment="next window"))
    result = await asyncio.wait_for(handle.result(), 60)
    assert result.outcome == "completed" and result.nodes[NODE].phase == NodePhase.SKIPPED
    old = "rendered-worker-0d3c9e8f7a6b5c4d3e2f1a0b9c8d7e6f"
    end = time.monotonic() + 20
    while time.monotonic() < end:
        ann = node_annotations(sim.store, NODE)
        if ann.get(MCO + "state") == "Done" and ann.get(MCO + "desiredDrain") == f"uncordon-{old}":
            break
        await asyncio.sleep(0.2)
    assert ann[MCO + "desiredConfig"] == ann[MCO + "currentConfig"] == old
    assert ann[MCO + "state"] == "Done" and ann[MCO + "desiredDrain"] == f"uncordon-{old}"
    assert not (sim.store.get("nodes", NODE).get("spec") or {}).get("unschedulable")
    assert "lockkeeper.io/cordoned-by" not in ann
    assert not pod_deletes(sim)
