"""Leases by scope across two procedure types (two probe workflow types of kit_probes.py on the
time-skipping server): the same scope, and ``cluster/<c>`` against a node scope of <c>, are
refused with the holder's workflow ID; other clusters and disjoint scopes are not."""

from __future__ import annotations

import uuid

import pytest
from tests.support.kit_fakes import KitFake, kit_worker, poll, start_probe
from tests.support.kit_probes import AlphaLeaseProbeWorkflow, BetaLeaseProbeWorkflow, ProbeInput
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from workflows.kit.scopes import LeaseScope, scope_workflow_id, scopes_overlap


def test_scope_strings_and_overlap():
    assert str(LeaseScope.parse("node/c1/worker-0")) == "node/c1/worker-0"
    assert scopes_overlap("cluster/c1", "node/c1/worker-0") and scopes_overlap("sdn/c1", "sdn/c1")
    assert not scopes_overlap("node/c1/worker-0", "node/c1/worker-1") and not scopes_overlap("cluster/c1", "node/c2/x")
    # Pools keep the rollout's lease IDs; other kinds cannot collide with a pool's name.
    assert scope_workflow_id("pool/c1/worker") == "lease/c1/worker"
    assert scope_workflow_id("node/c1/worker") == "lease/c1/node:worker"
    assert scope_workflow_id("etcd/c1") == "lease/c1/@etcd"
    for bad in ("node/c1", "cluster/c1/x", "disk/c1", "pool//x"):
        with pytest.raises(ValueError, match="bad lease scope"):
            LeaseScope.parse(bad)


async def refusal(handle) -> ApplicationError:
    with pytest.raises(WorkflowFailureError) as info:
        await handle.result()
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "LeaseHeld"
    return cause


def holding(s) -> bool:
    return bool(s["leases"])


async def test_same_node_scope_refused_across_procedure_types(time_skipping_env, wf_task_queue):
    env, c = time_skipping_env, f"c-{uuid.uuid4().hex[:6]}"
    # No time skipping: a holder waiting for nothing would otherwise be skipped to its timeout.
    async with kit_worker(env, KitFake(), wf_task_queue):
        with env.auto_time_skipping_disabled():
            alpha = await start_probe(env, wf_task_queue, AlphaLeaseProbeWorkflow, ProbeInput(scopes=[f"node/{c}/worker-0"], hold_seconds=None))
            await poll(alpha, holding)
            beta = await start_probe(env, wf_task_queue, BetaLeaseProbeWorkflow, ProbeInput(scopes=[f"pool/{c}/worker", f"node/{c}/worker-0"]))
            cause = await refusal(beta)
            assert cause.message == f"node worker-0 on cluster {c} is held by procedure {alpha.id}"
            assert list(cause.details) == [alpha.id]
            # A disjoint node of the same cluster is free.
            other = await start_probe(env, wf_task_queue, BetaLeaseProbeWorkflow, ProbeInput(scopes=[f"node/{c}/worker-1"]))
            assert (await other.result()).outcome == "completed"
            await alpha.terminate("test cleanup")


async def test_cluster_scope_refused_against_a_node_of_that_cluster(time_skipping_env, wf_task_queue):
    env, c = time_skipping_env, f"c-{uuid.uuid4().hex[:6]}"
    # No time skipping: a holder waiting for nothing would otherwise be skipped to its timeout.
    async with kit_worker(env, KitFake(), wf_task_queue):
        with env.auto_time_skipping_disabled():
            beta = await start_probe(env, wf_task_queue, BetaLeaseProbeWorkflow, ProbeInput(scopes=[f"node/{c}/worker-0"], hold_seconds=None))
            await poll(beta, holding)
            # The cluster-wide procedure names the nodes it covers: taking node worker-0 is refused.
            alpha = await start_probe(env, wf_task_queue, AlphaLeaseProbeWorkflow,
                                      ProbeInput(scopes=[f"cluster/{c}"], covers=[f"node/{c}/worker-0", f"node/{c}/worker-1"]))
            cause = await refusal(alpha)
            assert cause.message == f"node worker-0 on cluster {c} is held by procedure {beta.id}"


async def test_node_scope_refused_while_the_cluster_is_held(time_skipping_env, wf_task_queue):
    env, c = time_skipping_env, f"c-{uuid.uuid4().hex[:6]}"
    # No time skipping: a holder waiting for nothing would otherwise be skipped to its timeout.
    async with kit_worker(env, KitFake(), wf_task_queue):
        with env.auto_time_skipping_disabled():
            alpha = await start_probe(env, wf_task_queue, AlphaLeaseProbeWorkflow, ProbeInput(scopes=[f"cluster/{c}"], hold_seconds=None))
            st = await poll(alpha, holding)
            assert st["leases"] == [f"cluster/{c}", f"gluster/{c}", f"sdn/{c}", f"etcd/{c}"]
            # A node the cluster-wide procedure did not name: the probe of the cluster lease refuses it.
            beta = await start_probe(env, wf_task_queue, BetaLeaseProbeWorkflow, ProbeInput(scopes=[f"node/{c}/worker-7"]))
            cause = await refusal(beta)
            assert cause.message == f"cluster {c} is held by procedure {alpha.id}"
            # A subsystem it holds: refused by the lease itself.
            sdn = await start_probe(env, wf_task_queue, BetaLeaseProbeWorkflow, ProbeInput(scopes=[f"sdn/{c}"]))
            assert (await refusal(sdn)).message == f"sdn on cluster {c} is held by procedure {alpha.id}"
            # Another cluster is not affected.
            free = await start_probe(env, wf_task_queue, BetaLeaseProbeWorkflow, ProbeInput(scopes=[f"node/{c}-b/worker-7"]))
            assert (await free.result()).outcome == "completed"


def _signals_per_task(history) -> list[int]:
    """The ``contend`` signals a run sent, counted per workflow task that sent them."""
    per_task: list[int] = []
    for ev in history.events:
        if ev.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            per_task.append(0)
        elif ev.event_type == EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
            per_task[-1] += 1
    return [n for n in per_task if n]


async def test_probe_in_chunks_names_the_holder_and_stops_there(time_skipping_env, wf_task_queue):
    """``Leases.probe(chunk=3)`` over ten node scopes: at most three ``contend`` signals per
    workflow task; the chunk holding a held scope refuses naming its holder, and no later chunk
    is sent. Over free scopes every chunk goes out and the probe passes."""
    env, c = time_skipping_env, f"c-{uuid.uuid4().hex[:6]}"
    scopes = [f"node/{c}/worker-{i}" for i in range(10)]
    async with kit_worker(env, KitFake(), wf_task_queue):
        with env.auto_time_skipping_disabled():
            alpha = await start_probe(env, wf_task_queue, AlphaLeaseProbeWorkflow, ProbeInput(scopes=[scopes[7]], hold_seconds=None))
            await poll(alpha, holding)
            beta = await start_probe(env, wf_task_queue, BetaLeaseProbeWorkflow, ProbeInput(scopes=scopes, probe_chunk=3))
            cause = await refusal(beta)
            assert cause.message == f"node worker-7 on cluster {c} is held by procedure {alpha.id}"
            sent = _signals_per_task(await beta.fetch_history())
            # Chunks 0-2, 3-5, 6-8 (the held worker-7, then its refusal's own contend); not 9.
            assert sent[:3] == [3, 3, 3] and sum(sent) == 10, sent
            free = [f"node/{c}/free-{i}" for i in range(10)]
            gamma = await start_probe(env, wf_task_queue, BetaLeaseProbeWorkflow, ProbeInput(scopes=free, probe_chunk=3))
            assert (await gamma.result()).outcome == "completed"
            assert _signals_per_task(await gamma.fetch_history()) == [3, 3, 3, 1]
            await alpha.terminate("test cleanup")


def _closes(history) -> list[str]:
    """The run's child closes and its own close, in history order (event type names)."""
    keep = {EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED, EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED}
    return [EventType.Name(e.event_type).removeprefix("EVENT_TYPE_") for e in history.events if e.event_type in keep]


async def test_release_waits_until_the_leases_have_closed(time_skipping_env, wf_task_queue):
    """Patch kit-lease-release-waits-closed: a procedure ends only after its released leases have
    completed, so no lease is left for the parent close policy to terminate."""
    env, c = time_skipping_env, f"c-{uuid.uuid4().hex[:6]}"
    scopes = [f"node/{c}/worker-0", f"node/{c}/worker-1"]
    async with kit_worker(env, KitFake(), wf_task_queue):
        probe = await start_probe(env, wf_task_queue, AlphaLeaseProbeWorkflow, ProbeInput(scopes=scopes, hold_seconds=0))
        assert (await probe.result()).outcome == "completed"
        history = await probe.fetch_history()
        for scope in scopes:
            lease = await env.client.get_workflow_handle(scope_workflow_id(scope)).describe()
            assert lease.status.name == "COMPLETED", (scope, lease.status)
    assert _closes(history) == ["CHILD_WORKFLOW_EXECUTION_COMPLETED"] * 2 + ["WORKFLOW_EXECUTION_COMPLETED"], _closes(history)


async def test_release_stops_waiting_for_a_lease_nobody_runs(time_skipping_env, wf_task_queue):
    """A lease that never closes (it ignores its release) holds the procedure's end for
    LEASE_CLOSE_TIMEOUT at most: a durable timer, then the procedure ends anyway."""
    from tests.support.kit_probes import StuckLeaseWorkflow
    from temporalio.worker import Worker

    from workflows.kit.lease import LEASE_CLOSE_TIMEOUT

    env, c = time_skipping_env, f"c-{uuid.uuid4().hex[:6]}"
    async with Worker(env.client, task_queue=wf_task_queue, workflows=[AlphaLeaseProbeWorkflow, StuckLeaseWorkflow],
                      activities=KitFake().activities()):
        probe = await start_probe(env, wf_task_queue, AlphaLeaseProbeWorkflow, ProbeInput(scopes=[f"node/{c}/worker-0"], hold_seconds=0))
        assert (await probe.result()).outcome == "completed"
        history = await probe.fetch_history()
    timers = [e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta() for e in history.events
              if e.HasField("timer_started_event_attributes")]
    assert LEASE_CLOSE_TIMEOUT in timers, timers
    assert _closes(history)[-1] == "WORKFLOW_EXECUTION_COMPLETED"
