"""The campaign's fault matrix, judged cluster by cluster by each simulator's own view
(tests/support/faultmatrix.py, issue 39).

A campaign writes nothing itself: its mutating steps are its children's. Two simulated clusters,
each a ``worker`` pool of two nodes with its own worker on its own task queue, and a campaign of a
MachineConfig rollout (maxUnavailable 1) in waves ``1,rest``: ``canary`` first, then ``later``.
Mutating steps, in the order the campaign reaches them (the first write of a cluster's child to
a node, its ``desiredConfig``):

- ``canary/first-node``: the canary's rollout's first PATCH of worker-0000;
- ``later/first-node``: the later wave's rollout's first PATCH of worker-0000, the canary done;
- ``later/second-node``: its first PATCH of worker-0001, worker-0000 already updated.

At each: (a) the campaign is aborted while the request is held, (b) the request is refused once,
(c) the cluster's own worker is SIGKILLed while the request is held, a new one started, the
request let go, then the campaign aborted. Every cluster is judged on its own: its child completed,
or its simulator's diff against its start snapshot is empty (restored), or the campaign's outcome
(``left_changed``, each item prefixed with its cluster) names exactly what that simulator saw
change.

A done canary in a stopped campaign is named too: a completed rollout that reports to a parent
lists in its result's ``changed`` the nodes now on the new config (workflows/machineconfig/
workflow.py), and the campaign names them with the cluster; the stricter judge checks it.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from clustersim import snapshots, traps
from clustersim.snapshots.models import Diff
from tests.support.harness import fast_timings, worker_pool_scenario
from tests.support.faultmatrix import (
    Case,
    CaseResult,
    Step,
    World,
    _act,
    _final_trap,
    _settled_diff,
    _until,
    _wait_end,
    abort,
    assert_covers,
    judge,
    mark_writes,
    matrix_params,
    trap_hit,
    writes_since,
)
from workers.settings import cluster_task_queue
from workflows.campaign.models import CampaignInput, CampaignResult, cluster_of
from workflows.kit.models import ChangedItem
from workflows.machineconfig.models import MachineConfigRolloutInput

pytestmark = pytest.mark.e2e

SCALE = 0.05
WAVES = ("canary", "later")
#: step -> (the wave's cluster whose child takes it, the node of its first write)
STEPS = {
    "canary/first-node": ("canary", "worker-0000"),
    "later/first-node": ("later", "worker-0000"),
    "later/second-node": ("later", "worker-0001"),
}


async def run_campaign_case(client: Any, sims: dict[str, Any], workers: dict[str, Any], names: dict[str, str],
                            start: Any, step: str, case: Case, *, reach_timeout: float = 150.0,
                            end_timeout: float = 180.0) -> tuple[CaseResult, dict[str, Diff]]:
    """:func:`tests.support.faultmatrix.run_case` across a fleet: a snapshot of every cluster, the trap on
    the step's cluster, the kill on that cluster's worker; returns the campaign's case result and
    each cluster's settled diff (by wave name)."""
    wave, node = STEPS[step]
    target = sims[wave]
    cr = CaseResult(step=step, case=case)
    for s in sims.values():
        await snapshots.settle(s.url, timeout=60)
    sids = {w: await snapshots.take(s.url, f"{step}/{case}/{w}") for w, s in sims.items()}
    spec = traps.api("patch", "nodes", name=node).model_copy(
        update={"action": "fail" if case == Case.FAIL else "hold", "times": 1, "label": f"{step}/{case}"})
    trap = await traps.arm(target.url, spec)
    handle = await start()
    cr.workflow_id = handle.id
    cr.note(f"snapshots {sids}; trap {trap.id} ({spec.action}) on {names[wave]}'s PATCH of {node}")
    result_task = asyncio.ensure_future(handle.result())
    world = World(sim=target, client=client, worker=workers[wave])
    try:
        hit = trap_hit(trap, spec, result_task, handle, client, cr, f"fault matrix {step}/{case}")

        await _until(hit, reach_timeout)
        cr.reached = trap.state.hits > 0
        if not cr.reached:
            cr.note("the trap was never hit")
            await trap.delete()
            if not result_task.done():
                await abort(handle, f"fault matrix: {step} never reached")
        else:
            await _act(world, handle, trap, case, cr, result_task, 60.0, step)
        await _wait_end(world, handle, result_task, cr, end_timeout, True)
        cr.trap = await _final_trap(trap)
        diffs = {w: await _settled_diff(s, sids[w], [], 20.0) for w, s in sims.items()}
    finally:
        if not result_task.done():
            result_task.cancel()
        for w, s in sims.items():
            for t in await traps.list_traps(s.url):
                await traps.Trap(s.url, t).delete()
            await snapshots.delete(s.url, sids[w])
    return cr, diffs


def judge_fleet(cr: CaseResult, diffs: dict[str, Diff], names: dict[str, str], *, done_counts: bool = True) -> None:
    """Each cluster judged on its own (:func:`tests.support.faultmatrix.judge`): completed (its child
    done; ``done_counts`` False: only in a completed campaign), restored, or named exactly by
    the campaign's ``left_changed`` items of that cluster."""
    runs = {c["name"]: c for c in (cr.result or {}).get("clusters") or []}
    listed: dict[str, list[ChangedItem]] = {}
    for raw in (cr.result or {}).get("left_changed") or []:
        cluster, item = cluster_of(ChangedItem.model_validate(raw))
        listed.setdefault(cluster, []).append(item)
    for wave, diff in diffs.items():
        name = names[wave]
        run = runs.get(name) or {}
        done = run.get("state") == "done" and (done_counts or cr.outcome == "completed")  # see the module doc
        per = CaseResult(step=f"{cr.step} [{wave} cluster {name}: {run.get('state')}]", case=cr.case,
                         workflow_id=run.get("child_id") or cr.workflow_id, reached=cr.reached,
                         outcome="completed" if done else (cr.outcome if cr.outcome in ("timeout", "failed") else
                                                           f"{cr.outcome}, cluster {run.get('state')}"),
                         result=cr.result, failure=cr.failure, left_changed=listed.get(name, []), diff=diff, log=cr.log)
        judge(per)


@pytest.mark.timeout(420)
@pytest.mark.parametrize(("step", "case"), matrix_params(STEPS))
async def test_campaign_fault_matrix(step: str, case: Case, dev_server: Any, sim_factory: Any, worker_process_factory: Any,
                                     temporal_client: Any, task_queue: str) -> None:
    await _campaign_case(step, case, dev_server, sim_factory, worker_process_factory, temporal_client, task_queue)


@pytest.mark.timeout(420)
async def test_a_campaign_stopped_after_its_canary_names_the_canarys_changes(
        dev_server: Any, sim_factory: Any, worker_process_factory: Any, temporal_client: Any, task_queue: str) -> None:
    """The stricter judge: a stopped campaign names what its done clusters changed too."""
    await _campaign_case("later/first-node", Case.ABORT, dev_server, sim_factory, worker_process_factory, temporal_client,
                         task_queue, done_counts=False)


#: Kinds of write that fall inside a step of each cluster (kind -> (the wave's step, why)).
WITHIN: dict[str, tuple[str, str]] = {
    "create pods/eviction": ("first-node", "each child rollout's drain of the node it just patched "
                                           "(test_rollout_fault_matrix.py: evict)"),
}


@pytest.mark.timeout(420)
async def test_campaign_matrix_covers_every_write(dev_server: Any, sim_factory: Any, worker_process_factory: Any,
                                                  temporal_client: Any, task_queue: str) -> None:
    """Every kind of write a happy campaign sends to either cluster is a step above (tests/support/faultmatrix.py)."""
    sims, workers, names, begin = await _fleet(dev_server, sim_factory, worker_process_factory, temporal_client, task_queue)
    marks = {w: mark_writes(s) for w, s in sims.items()}
    world = World(sim=sims["canary"], client=temporal_client, worker=workers["canary"])
    cr = CaseResult(step="happy", case=Case.ABORT, reached=True)
    handle = await begin()
    result_task = asyncio.ensure_future(handle.result())
    await _wait_end(world, handle, result_task, cr, 300, True)
    assert cr.outcome == "completed", cr
    for w, s in sims.items():
        traps_of = {name: Step(name, traps.api("patch", "nodes", name=node)) for name, (wave, node) in STEPS.items() if wave == w}
        assert_covers(traps_of, writes_since(s, marks[w]), {k: (f"{w}/{step}", why) for k, (step, why) in WITHIN.items()})


async def _fleet(dev_server: Any, sim_factory: Any, worker_process_factory: Any, temporal_client: Any,
                 task_queue: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, str], Any]:
    """The two clusters (by wave), their workers and names, and the campaign's start."""
    tag = uuid.uuid4().hex[:6]
    names = {w: f"{w}-{tag}" for w in WAVES}
    sims = {w: await sim_factory(worker_pool_scenario(2, f"campaign-fm-{w}"), time_scale=SCALE) for w in WAVES}
    central = worker_process_factory(address=dev_server.address, kubeconfig=None, task_queue=task_queue,
                                     env={"LOCKKEEPER_HOST_ONLY": "true"})
    await central.start()
    workers = {}
    for w in WAVES:
        workers[w] = worker_process_factory(address=dev_server.address, kubeconfig=sims[w].kubeconfig_path, task_queue=task_queue,
                                            env={"LOCKKEEPER_CLUSTER": names[w], "LOCKKEEPER_CLUSTER_QUEUES": "true"})
        await workers[w].start()
    shared = MachineConfigRolloutInput(pools=["worker"], max_unavailable=1, approvals={"requested_by": "fault-matrix"},
                                       **fast_timings(SCALE)).model_dump(mode="json", exclude={"cluster"})

    async def begin() -> Any:
        inp = CampaignInput(
            procedure="machineconfig-rollout", workflow_type="MachineConfigRolloutWorkflow", reports=True, nested_approvals=True,
            procedure_has_dry_run=True, input=shared, waves="1,rest", approve_each="none", soak_seconds=0, soak_checks=None,
            approvals={"requested_by": "fault-matrix"},
            clusters=[{"name": names[w], "task_queue": cluster_task_queue(task_queue, names[w])} for w in WAVES])
        return await temporal_client.start_workflow("CampaignWorkflow", inp, id=f"campaign-fm-{tag}", task_queue=task_queue,
                                                    result_type=CampaignResult)

    return sims, workers, names, begin


async def _campaign_case(step: str, case: Case, dev_server: Any, sim_factory: Any, worker_process_factory: Any,
                         temporal_client: Any, task_queue: str, *, done_counts: bool = True) -> None:
    sims, workers, names, begin = await _fleet(dev_server, sim_factory, worker_process_factory, temporal_client, task_queue)
    cr, diffs = await run_campaign_case(temporal_client, sims, workers, names, begin, step, case)
    print("\n".join([f"{step}/{case}: {cr.outcome} {(cr.result or {}).get('message') or cr.failure or ''}", *cr.log]))
    judge_fleet(cr, diffs, names, done_counts=done_counts)
