"""Campaigns end to end (issue 38): three simulated clusters, one worker per cluster on its own task
queue (``LOCKKEEPER_CLUSTER`` + ``LOCKKEEPER_CLUSTER_QUEUES``, each with only its own cluster's
kubeconfig), a host-only central worker for the campaign, and ``lockkeeper start campaign`` of a
one-node drain with waves ``1,rest``. One cluster fails (its node does not exist): within the
budget the campaign completes and names it; beyond the budget no further cluster starts and the
decision gate opens. A plain start for one cluster runs on that cluster's queue and touches only
that cluster. A cluster whose worker was killed (before its child's first task) waits for it while
the others go on, and completes once the worker is back. A cluster whose worker is killed in the
middle of its child's drain (an eviction held by the simulator) resumes the drain on a new worker
and does each write exactly once, as the same drain does on a cluster whose worker lived."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from clustersim import traps
from clustersim.faults import MUTATING_VERBS
from clustersim.scenario import generate_scenario
from workflows.campaign.models import CampaignResult, CampaignStatus

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

LOCKKEEPER = str(Path(sys.executable).parent / "lockkeeper")
CLUSTERS = ("east", "west", "north")


async def lk(address: str, task_queue: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    import os

    full = {k: v for k, v in os.environ.items() if not k.startswith(("LOCKKEEPER_", "TEMPORAL_", "KUBE"))}
    full.update(env or {})
    proc = await asyncio.create_subprocess_exec(LOCKKEEPER, "--address", address, "--task-queue", task_queue, *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=full)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


PER_CLUSTER = {"LOCKKEEPER_CLUSTER_QUEUES": "true"}


def _scenario() -> Any:
    return generate_scenario(nodes=2, pods=4, pools={"worker": 2}, name="fleet", pod_start_seconds=1, namespaces=1,
                             pods_per_deployment=2)


async def _fleet(dev_server: Any, sim_factory: Any, worker_process_factory: Any, task_queue: str,
                 start_workers: tuple[str, ...] = CLUSTERS) -> tuple[dict[str, Any], dict[str, Any]]:
    """Three simulated clusters, the central (host-only) worker and one worker per cluster named
    in ``start_workers`` (the others are made, not started)."""
    sims = {name: await sim_factory(_scenario(), time_scale=0.05) for name in CLUSTERS}
    central = worker_process_factory(address=dev_server.address, kubeconfig=None, task_queue=task_queue,
                                     env={"LOCKKEEPER_HOST_ONLY": "true"})
    await central.start()
    workers = {}
    for name in CLUSTERS:
        workers[name] = worker_process_factory(address=dev_server.address, kubeconfig=sims[name].kubeconfig_path,
                                               task_queue=task_queue, env={"LOCKKEEPER_CLUSTER": name, **PER_CLUSTER})
        if name in start_workers:
            await workers[name].start()
    return sims, workers


def _files(tmp_path: Path, node: str, failing: str) -> tuple[Path, Path]:
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text("clusters:\n" + "".join(
        f"  - name: {c}\n" + (f"    overrides: {{node: no-such-node}}\n" if c == failing else "") for c in CLUSTERS))
    inp = tmp_path / "drain.yaml"
    inp.write_text(f"node: {node}\nuncordon_after: true\ndrain: {{wait_seconds: 5, backoff_initial_seconds: 1}}\n")
    return clusters, inp


async def _status_until(handle: Any, cond: Any, what: str, timeout: float = 120) -> CampaignStatus:
    end = time.monotonic() + timeout
    st = None
    while time.monotonic() < end:
        st = await handle.query("status", result_type=CampaignStatus)
        if cond(st):
            return st
        await asyncio.sleep(0.5)
    raise AssertionError(f"{what} never happened: {st.waiting_for if st else None} {st.clusters if st else None}")


def _evictions(sim: Any) -> int:
    return sum(1 for e in sim.requests.entries(verb="create", subresource="eviction") if e.code == 201)


async def test_canary_wave_gate_then_the_rest_with_one_failure_within_the_budget(
    dev_server: Any, temporal_client: Client, sim_factory: Any, worker_process_factory: Any, task_queue: str, tmp_path: Path
) -> None:
    sims, workers = await _fleet(dev_server, sim_factory, worker_process_factory, task_queue, start_workers=("east", "west"))
    node = sorted(n["metadata"]["name"] for n in sims["east"].store.list("nodes"))[0]
    clusters, inp = _files(tmp_path, node, failing="north")
    args = ["start", "campaign", "--procedure", "drain", "--clusters", str(clusters), "-f", str(inp), "--waves", "1,rest",
            "--failure-budget", "1", "--approve-each", "wave", "--identity", "alice"]
    # The dry run (issue 39): every check with its result: no worker on north's queue, and each
    # other cluster's own drain dry run (north's is not run: nothing would take it). Exit 2.
    code, out, err = await lk(dev_server.address, task_queue, *args, "--dry-run", env=PER_CLUSTER)
    assert code == 2, out + err
    assert f"FAILED   queue-polled       a worker on {task_queue}-north (cluster north)" in out, out
    assert "ok       input              drain dry run on cluster east" in out and "drain dry run on cluster west" in out, out
    assert "drain dry run on cluster north" not in out and "wave 1: east | wave 2: west, north" in out, out
    assert _evictions(sims["east"]) == 0 and _evictions(sims["west"]) == 0
    # No worker polls north's queue yet: refused, naming the cluster, nothing started.
    code, out, err = await lk(dev_server.address, task_queue, *args, env=PER_CLUSTER)
    assert code == 3, out + err
    assert "north" in err and f"{task_queue}-north" in err, err
    await workers["north"].start()
    code, out, err = await lk(dev_server.address, task_queue, *args, "-o", "json", env=PER_CLUSTER)
    assert code == 0, out + err
    wid = json.loads(out)["workflow_id"]
    handle = temporal_client.get_workflow_handle(wid, result_type=CampaignResult)
    # The canary (east) runs alone; then the wave gate waits with west and north not started.
    st = await _status_until(handle, lambda s: any(g.id == "wave/2" and g.state == "waiting" for g in s.gates), "wave gate")
    by = {c.name: c for c in st.clusters}
    assert by["east"].state == "done" and by["east"].wave == 1, by["east"]
    assert by["west"].state == by["north"].state == "pending" and by["west"].wave == by["north"].wave == 2
    assert _evictions(sims["east"]) > 0 and _evictions(sims["west"]) == 0, "only the canary cluster was touched"
    # Each child ran on its own cluster's queue.
    desc = await temporal_client.get_workflow_handle(by["east"].child_id).describe()
    assert desc.task_queue == f"{task_queue}-east"
    code, out, err = await lk(dev_server.address, task_queue, "status", wid)
    assert code == 0, out + err
    assert "Clusters" in out and "wave/2" in out and "east" in out and "north" in out, out
    code, out, err = await lk(dev_server.address, task_queue, "approve", wid, "wave/2", "--identity", "bob")
    assert code == 0, out + err
    res = await asyncio.wait_for(handle.result(), 180)
    assert res.outcome == "completed", res.message
    assert res.failed == ["north"], res.clusters
    states = {c.name: c.state for c in res.clusters}
    assert states == {"east": "done", "west": "done", "north": "failed"}, states
    assert "north" in res.message and "budget" in res.message
    assert _evictions(sims["west"]) > 0, "the rest wave drained west"
    for name in ("east", "west"):
        n = sims[name].store.get("nodes", node)
        assert not n["spec"].get("unschedulable"), f"{name}: the drain uncordoned its node"
    # The fleet view as JSON: every cluster with its wave, state and times, and the counts.
    code, out, err = await lk(dev_server.address, task_queue, "status", wid, "-o", "json")
    assert code == 0, out + err
    doc = json.loads(out)
    assert "north" in json.dumps(doc) and '"failed"' in json.dumps(doc)
    # list --campaign: the campaign's children, one per cluster, each on its cluster.
    code, out, err = await lk(dev_server.address, task_queue, "list", "--campaign", wid, "-o", "json")
    assert code == 0, out + err
    rows = json.loads(out)
    assert sorted((r["id"], r["cluster"], r["procedure"]) for r in rows) == [(f"{wid}/{c}", c, "drain") for c in sorted(CLUSTERS)]
    # The campaign's own history stays small (issue 38: under 20 events per cluster): the
    # children's starts and ends, and only their milestones (a waiting gate, an error, what stays
    # changed: north's failure), never a signal per step; `status` reads the steps live.
    events = [e async for e in handle.fetch_history_events()]
    reports = sum(1 for e in events if e.HasField("workflow_execution_signaled_event_attributes")
                  and e.workflow_execution_signaled_event_attributes.signal_name == "child_report")
    assert 0 < reports <= 2 * len(CLUSTERS), reports
    assert len(events) < 20 * len(CLUSTERS), (len(events), reports)


async def test_failures_beyond_the_budget_stop_the_fleet_and_open_a_decision(
    dev_server: Any, temporal_client: Client, sim_factory: Any, worker_process_factory: Any, task_queue: str, tmp_path: Path
) -> None:
    sims, _ = await _fleet(dev_server, sim_factory, worker_process_factory, task_queue)
    node = sorted(n["metadata"]["name"] for n in sims["east"].store.list("nodes"))[0]
    clusters, inp = _files(tmp_path, node, failing="east")  # the canary fails
    code, out, err = await lk(dev_server.address, task_queue, "start", "campaign", "--procedure", "drain", "--clusters",
                              str(clusters), "-f", str(inp), "--failure-budget", "0", "--approve-each", "none",
                              "-o", "json", env=PER_CLUSTER)
    assert code == 0, out + err
    wid = json.loads(out)["workflow_id"]
    handle = temporal_client.get_workflow_handle(wid, result_type=CampaignResult)
    st = await _status_until(handle, lambda s: any(g.id == "budget/1" and g.state == "waiting" for g in s.gates), "budget gate")
    assert st.budget_spent and st.failures == 1
    by = {c.name: c.state for c in st.clusters}
    assert by == {"east": "failed", "west": "pending", "north": "pending"}, by
    await asyncio.sleep(2)  # nothing else starts while the decision waits
    st = await handle.query("status", result_type=CampaignStatus)
    assert {c.name: c.state for c in st.clusters}["west"] == "pending"
    assert _evictions(sims["west"]) == 0 and _evictions(sims["north"]) == 0
    code, out, err = await lk(dev_server.address, task_queue, "reject", wid, "budget/1", "-m", "stop the fleet", "--identity", "bob")
    assert code == 0, out + err
    res = await asyncio.wait_for(handle.result(), 120)
    assert res.outcome == "aborted", res.message
    assert {c.name: c.state for c in res.clusters} == {"east": "failed", "west": "not-started", "north": "not-started"}
    # A plain start for one cluster runs on that cluster's queue, by that cluster's worker, on that
    # cluster only: the other workers (each with its own kubeconfig only) never touch it.
    code, out, err = await lk(dev_server.address, task_queue, "start", "drain", "--node", node, "--cluster", "west",
                              "--uncordon-after", "--wait", "-o", "json", env=PER_CLUSTER)
    assert code == 0, out + err
    drain_id = json.loads(out)["workflow_id"]
    assert (await temporal_client.get_workflow_handle(drain_id).describe()).task_queue == f"{task_queue}-west"
    assert _evictions(sims["west"]) > 0 and _evictions(sims["east"]) == 0 and _evictions(sims["north"]) == 0


async def test_a_cluster_whose_worker_is_gone_waits_for_it_while_the_others_go_on(
    dev_server: Any, temporal_client: Client, sim_factory: Any, worker_process_factory: Any, task_queue: str, tmp_path: Path
) -> None:
    sims, workers = await _fleet(dev_server, sim_factory, worker_process_factory, task_queue)
    node = sorted(n["metadata"]["name"] for n in sims["east"].store.list("nodes"))[0]
    clusters, inp = _files(tmp_path, node, failing="none")
    code, out, err = await lk(dev_server.address, task_queue, "start", "campaign", "--procedure", "drain", "--clusters",
                              str(clusters), "-f", str(inp), "-o", "json", env=PER_CLUSTER)
    assert code == 0, out + err
    wid = json.loads(out)["workflow_id"]
    handle = temporal_client.get_workflow_handle(wid, result_type=CampaignResult)
    await _status_until(handle, lambda s: any(g.id == "wave/2" and g.state == "waiting" for g in s.gates), "wave gate")
    await workers["west"].kill()  # west's worker dies (SIGKILL) before the rest wave
    code, out, err = await lk(dev_server.address, task_queue, "approve", wid, "wave/2", "--identity", "bob")
    assert code == 0, out + err
    st = await _status_until(handle, lambda s: {c.name: c.state for c in s.clusters}["north"] == "done", "north done")
    assert {c.name: c.state for c in st.clusters}["west"] == "running", "west's child waits for west's worker"
    assert _evictions(sims["west"]) == 0, "no other worker acted on west"
    await workers["west"].start()  # back: west's child runs where it stopped
    res = await asyncio.wait_for(handle.result(), 180)
    assert res.outcome == "completed", res.message
    assert {c.name: c.state for c in res.clusters} == {"east": "done", "west": "done", "north": "done"}
    assert _evictions(sims["west"]) > 0


def _writes(sim: Any) -> Counter[tuple[str, str, str, str]]:
    """The writes the simulator accepted: (verb, resource, subresource, name) -> how many."""
    return Counter((e.verb, e.resource, e.subresource, e.name) for e in sim.requests.entries()
                   if e.verb in MUTATING_VERBS and 200 <= e.code < 300)


async def test_a_worker_killed_in_the_middle_of_a_drain_resumes_it_and_writes_each_change_once(
    dev_server: Any, temporal_client: Client, sim_factory: Any, worker_process_factory: Any, task_queue: str, tmp_path: Path
) -> None:
    sims, workers = await _fleet(dev_server, sim_factory, worker_process_factory, task_queue)
    node = sorted(n["metadata"]["name"] for n in sims["east"].store.list("nodes"))[0]
    on_node = sorted(p["metadata"]["name"] for p in sims["west"].store.list("pods") if p["spec"].get("nodeName") == node)
    assert on_node, "the drained node runs pods"
    # West's first eviction is held by its apiserver: west's child is in the middle of its drain step.
    trap = await traps.arm(sims["west"].url, traps.api("create", "pods", subresource="eviction"))
    clusters, inp = _files(tmp_path, node, failing="none")
    code, out, err = await lk(dev_server.address, task_queue, "start", "campaign", "--procedure", "drain", "--clusters",
                              str(clusters), "-f", str(inp), "--approve-each", "none", "-o", "json", env=PER_CLUSTER)
    assert code == 0, out + err
    wid = json.loads(out)["workflow_id"]
    handle = temporal_client.get_workflow_handle(wid, result_type=CampaignResult)
    await trap.wait_hit(timeout=120)
    await workers["west"].kill()  # SIGKILL with the eviction in flight
    await trap.release()  # the apiserver had the request: it lands, with nobody left to hear the answer
    st = await _status_until(handle, lambda s: {c.name: c.state for c in s.clusters}["north"] == "done", "north done")
    assert {c.name: c.state for c in st.clusters}["west"] == "running", "west's child waits for west's worker"
    await workers["west"].start()  # a new worker for west: the drain goes on from its step
    res = await asyncio.wait_for(handle.result(), 180)
    assert res.outcome == "completed", res.message
    assert {c.name: c.state for c in res.clusters} == {"east": "done", "west": "done", "north": "done"}
    # Exactly once: each pod of the node evicted once, and west's accepted writes are the very ones
    # of the same drain on east and north, whose workers lived.
    evicted = Counter(e.name for e in sims["west"].requests.entries(verb="create", subresource="eviction") if e.code == 201)
    assert evicted == Counter(on_node), evicted
    assert _writes(sims["west"]) == _writes(sims["east"]) == _writes(sims["north"]), (
        _writes(sims["west"]), _writes(sims["east"]))
    assert not sims["west"].store.get("nodes", node)["spec"].get("unschedulable"), "west's node uncordoned"
