"""Issue 36, worker deployment versioning on the dev server (:mod:`workers.versioning`).

- A rollout started on build 1 waits at its pool gate; a worker of build 2, whose
  ``MachineConfigRolloutWorkflow`` is changed (tests/support/versioned_build.py: a timer first, a
  marked result), joins and is promoted with ``lockkeeper deployment promote``. The rollout then
  finishes on build 1: its description, its node run's and its lease's say build 1 and pinned,
  every workflow task in its history was completed by build 1, its result carries no build-2 mark,
  and ``lockkeeper status`` still answers (pending-activity view included) through build 1. A
  rollout started after the promotion runs on build 2 (its description and its mark say so).
  ``lockkeeper deployment status`` shows both builds, the runs pinned to build 1 while it drains
  and none once they closed.
- On a deployment that never had a current version the first worker makes its build current, so
  ``lockkeeper start`` just works; a worker with ``--promote never`` is not promoted, ``lockkeeper
  start`` is refused with the build to promote, and after ``lockkeeper deployment promote`` it runs.
- A server without worker deployments refuses a versioned worker with exit 3 and the setting that
  turns versioning off; with ``LOCKKEEPER_VERSIONING=false`` the worker runs unversioned there.

Every wait polls with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import VersioningBehavior

from clustersim.scenario import generate_scenario
from lockkeeper.procs import WorkerProcessError
from tests.support.harness import drive, fast_timings, start_rollout, status
from tests.support.versioned_build import MARK
from workflows.kit.models import GateState
from workflows.kit.plan import ApprovalPolicy
from workflows.kit.scopes import pool_scope, scope_workflow_id

pytestmark = pytest.mark.e2e

SCALE = 0.05
LOCKKEEPER = str(Path(sys.executable).parent / "lockkeeper")
REPO = str(Path(__file__).resolve().parents[2])


def _scenario() -> Any:
    """Two pools of one node each: one rollout per build, on pools of their own."""
    return generate_scenario(nodes=2, pods=2, pools={"worker": 1, "infra": 1}, name="versions", reboot_seconds=20,
                             write_files_seconds=1, pod_start_seconds=1, namespaces=1, pods_per_deployment=1)


async def lk(address: str, *args: str, task_queue: str | None = None, timeout: float = 120) -> tuple[int, str, str]:
    """The ``lockkeeper`` console script with a clean environment: (exit code, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "LOCKKEEPER_", "KUBE"))}
    queue = ["--task-queue", task_queue] if task_queue else []
    proc = await asyncio.create_subprocess_exec(
        LOCKKEEPER, "--address", address, *queue, *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode or 0, out.decode(), err.decode()


async def until(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 60.0, interval: float = 0.3) -> Any:
    """Poll ``check()`` until it returns something truthy; AssertionError naming ``what`` (and the
    last value) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"{what}: not after {timeout:.0f}s (last: {last!r})")


def version_of(desc: Any) -> tuple[str, str, int]:
    """(deployment, build ID, behaviour) a workflow description says it runs on."""
    vi = desc.raw_description.workflow_execution_info.versioning_info
    return vi.deployment_version.deployment_name, vi.deployment_version.build_id, vi.behavior


async def task_builds(client: Any, workflow_id: str) -> set[str]:
    """The build IDs that completed the workflow tasks of ``workflow_id`` (its history)."""
    builds = set()
    async for ev in client.get_workflow_handle(workflow_id).fetch_history_events():
        if ev.HasField("workflow_task_completed_event_attributes"):
            builds.add(ev.workflow_task_completed_event_attributes.deployment_version.build_id)
    return builds


async def activity_workers(client: Any, workflow_id: str) -> set[str]:
    """The worker identities (up to the host) that started the activity tasks of ``workflow_id``."""
    who = set()
    async for ev in client.get_workflow_handle(workflow_id).fetch_history_events():
        if ev.HasField("activity_task_started_event_attributes"):
            who.add(ev.activity_task_started_event_attributes.identity.split("@")[0] + "@")
    return who


async def deployment_doc(address: str, name: str) -> dict[str, Any]:
    code, out, err = await lk(address, "deployment", "status", "--deployment", name, "-o", "json")
    assert code == 0, err
    return json.loads(out)


def build_row(doc: dict[str, Any], build: str) -> dict[str, Any]:
    return next(v for v in doc["versions"] if v["build_id"] == build)


@pytest.mark.timeout(420)
async def test_a_running_rollout_finishes_on_its_build_while_new_ones_start_on_the_promoted_one(
    sim_factory: Any, worker_process_factory: Any, dev_server: Any, temporal_client: Any, task_queue: str
) -> None:
    sim = await sim_factory(_scenario(), time_scale=SCALE)
    deployment = f"lk-e2e-{uuid.uuid4().hex[:8]}"
    b1, b2 = f"{deployment}-b1", f"{deployment}-b2"
    cluster = f"versions-{uuid.uuid4().hex[:6]}"
    pinned = VersioningBehavior.VERSIONING_BEHAVIOR_PINNED

    def worker(build: str, **kw: Any) -> Any:
        env = {"LOCKKEEPER_DEPLOYMENT_NAME": deployment, "LOCKKEEPER_BUILD_ID": build, **kw.pop("env", {})}
        return worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path,
                                      task_queue=task_queue, env=env, **kw)

    # Build 1 is the first worker of a fresh deployment: it makes itself current.
    w1 = worker(b1)
    await w1.start()
    doc = await deployment_doc(dev_server.address, deployment)
    assert doc["current"] == b1 and [v["build_id"] for v in doc["versions"]] == [b1], doc

    # A rollout on build 1 stops at its pool gate.
    a = await start_rollout(temporal_client, task_queue, cluster=cluster, pools=["worker"],
                            approval=ApprovalPolicy.POOL, **fast_timings(SCALE))

    async def gate_waiting() -> bool:
        try:
            st = await status(a)
        except Exception:  # noqa: BLE001 - not picked up yet
            return False
        return any(g.state == GateState.WAITING for g in st.gates)

    await until(gate_waiting, "rollout A waiting at its pool gate")

    # Build 2, changed workflow code, joins without being promoted; then the operator promotes it.
    python_path = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH", "")) if p)
    w2 = worker(b2, module="tests.support.versioned_build", env={"LOCKKEEPER_PROMOTE": "never", "PYTHONPATH": python_path})
    await w2.start()
    doc = await deployment_doc(dev_server.address, deployment)
    assert doc["current"] == b1 and build_row(doc, b2)["status"] == "inactive" and build_row(doc, b2)["workers"], doc
    code, _, err = await lk(dev_server.address, "deployment", "promote", b2, "--deployment", deployment,
                            "--identity", "e2e-operator")
    assert code == 0 and f"build {b2} is now the current version" in err and f"before: {b1}" in err, err

    # Build 2 is current; rollout A (and its pool lease) are still open on build 1, pinned.
    async def drained_view() -> dict[str, Any] | None:
        d = await deployment_doc(dev_server.address, deployment)
        row = build_row(d, b1)
        return d if d["current"] == b2 and row["status"] == "draining" and (row["pinned"] or 0) >= 1 else None

    doc = await until(drained_view, "deployment status: build 2 current, rollout A and its lease pinned to build 1")
    assert build_row(doc, b1)["running"] >= 1 and build_row(doc, b1)["workers"], doc

    # `lockkeeper status` of A still answers (through build 1's worker), pending steps included.
    code, out, err = await lk(dev_server.address, "status", a.id, "-o", "json", task_queue=task_queue)
    st = json.loads(out)
    assert code == 0 and st["state"] == "running" and isinstance(st["pending_activities"], list), out + err
    assert st["versioning"] == {"deployment": deployment, "build_id": b1, "behavior": "pinned"}, st["versioning"]
    assert [g["state"] for g in st["status"]["gates"]] == ["waiting"], st["status"]["gates"]

    # Approve: A goes on, and ends, on build 1.
    result_a = await drive(a, timeout=180)
    assert result_a.outcome == "completed" and result_a.summary.done == 1, result_a.message
    assert not result_a.message.startswith(MARK), result_a.message
    assert version_of(await a.describe()) == (deployment, b1, pinned)
    node_run = f"{a.id}/node/worker-0000/1"
    lease = scope_workflow_id(pool_scope(cluster, "worker"))
    for child in (node_run, lease):
        assert version_of(await temporal_client.get_workflow_handle(child).describe()) == (deployment, b1, pinned), child
        assert await task_builds(temporal_client, child) == {b1}, child
    assert await task_builds(temporal_client, a.id) == {b1}
    # The node run's activities (all scheduled after the promotion) ran on build 1's worker too.
    assert await activity_workers(temporal_client, node_run) == {f"lockkeeper-worker-{w1.pid}@"}

    # A rollout started now runs on build 2, with build 2's code.
    b = await start_rollout(temporal_client, task_queue, cluster=cluster, pools=["infra"], **fast_timings(SCALE))
    result_b = await drive(b, timeout=180)
    assert result_b.outcome == "completed" and result_b.message.startswith(MARK), result_b.message
    assert version_of(await b.describe()) == (deployment, b2, pinned)
    assert await task_builds(temporal_client, b.id) == {b2}
    assert version_of(await temporal_client.get_workflow_handle(f"{b.id}/node/infra-0000/1").describe())[1] == b2

    # Nothing is left on build 1: its workers may go.
    async def nothing_on_b1() -> bool:
        row = build_row(await deployment_doc(dev_server.address, deployment), b1)
        return row["running"] == 0 and row["pinned"] == 0

    await until(nothing_on_b1, "no run left on build 1")


async def test_the_first_worker_of_a_deployment_is_promoted_and_a_later_one_waits_for_the_operator(
    sim_factory: Any, worker_process_factory: Any, dev_server: Any, temporal_client: Any
) -> None:
    sim = await sim_factory(_scenario(), time_scale=SCALE)
    cluster = f"first-{uuid.uuid4().hex[:6]}"

    async def worker(promote: str) -> tuple[Any, str, str, str]:
        deployment = f"lk-first-{uuid.uuid4().hex[:8]}"
        build, queue = f"{deployment}-b", f"lk-first-{uuid.uuid4().hex[:8]}"
        proc = worker_process_factory(
            address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=queue,
            env={"LOCKKEEPER_DEPLOYMENT_NAME": deployment, "LOCKKEEPER_BUILD_ID": build, "LOCKKEEPER_PROMOTE": promote},
        )
        await proc.start()
        return proc, deployment, build, queue

    async def drain(queue: str, node: str) -> tuple[int, str, str]:
        return await lk(dev_server.address, "start", "drain", "--node", node, "--cluster", cluster, "--uncordon-after",
                        "--wait", "-o", "json", task_queue=queue)

    # auto, fresh deployment: the worker's build is current once it says it started.
    _, deployment, build, queue = await worker("auto")
    doc = await deployment_doc(dev_server.address, deployment)
    assert doc["current"] == build and build_row(doc, build)["status"] == "current", doc
    code, out, err = await drain(queue, "worker-0000")
    assert code == 0, out + err
    wid = json.loads(out)["workflow_id"]
    desc = await temporal_client.get_workflow_handle(wid).describe()
    assert version_of(desc) == (deployment, build, VersioningBehavior.VERSIONING_BEHAVIOR_PINNED)

    # never: polls, but nothing would take a new run; `start` says which build to promote.
    _, deployment, build, queue = await worker("never")
    doc = await deployment_doc(dev_server.address, deployment)
    assert doc["current"] is None and build_row(doc, build)["status"] == "inactive", doc
    code, out, err = await drain(queue, "infra-0000")
    assert code == 3 and "no current version" in err and f"lockkeeper deployment promote {build}" in err, err
    assert "Nothing was started" in err and "--queue" in err, err
    code, _, err = await lk(dev_server.address, "deployment", "promote", "no-such-build", "--deployment", deployment)
    assert code == 3 and "not a version of deployment" in err and build in err, err
    code, _, err = await lk(dev_server.address, "deployment", "promote", build, "--deployment", deployment)
    assert code == 0 and "now the current version" in err and "before: none" in err, err
    code, out, err = await drain(queue, "infra-0000")
    assert code == 0, out + err
    desc = await temporal_client.get_workflow_handle(json.loads(out)["workflow_id"]).describe()
    assert version_of(desc)[:2] == (deployment, build)


async def test_a_server_without_worker_deployments_refuses_a_versioned_worker(
    dev_server_factory: Any, sim_factory: Any, worker_process_factory: Any, tmp_path: Path
) -> None:
    server = await dev_server_factory(dynamic_config={"system.enableDeploymentVersions": "false"})
    sim = await sim_factory(_scenario(), time_scale=SCALE)
    queue = f"lk-noversions-{uuid.uuid4().hex[:6]}"
    refused = worker_process_factory(address=server.address, kubeconfig=sim.kubeconfig_path, task_queue=queue)
    with pytest.raises(WorkerProcessError) as info:
        await refused.start()
    assert "exited with code 3" in str(info.value) and "LOCKKEEPER_VERSIONING=false" in str(info.value), info.value
    assert "Worker Deployment Versions are disabled" in str(info.value), info.value

    unversioned = worker_process_factory(address=server.address, kubeconfig=sim.kubeconfig_path, task_queue=queue,
                                         env={"LOCKKEEPER_VERSIONING": "false"})
    await unversioned.start()
    code, out, err = await lk(server.address, "start", "drain", "--node", "worker-0000", "--cluster", "noversions",
                              "--uncordon-after", "--wait", "-o", "json", task_queue=queue)
    assert code == 0, out + err
    code, out, err = await lk(server.address, "status", json.loads(out)["workflow_id"], "-o", "json")
    assert code == 0 and json.loads(out)["versioning"] is None, out + err


async def test_a_task_queue_the_server_never_registers_stops_the_worker_with_the_limit_named(
    dev_server_factory: Any,
) -> None:
    """Past ``matching.maxTaskQueuesInDeploymentVersion`` the server takes a worker's polls and
    never registers its queue, so it would never get a task: the worker stops instead, naming
    the limit. (One queue per version here; the first worker's queue is registered.)"""
    from temporalio.worker import Worker

    from workers.client import connect
    from workers.settings import Settings
    from workers.versioning import VersioningRefused, deployment_config, settle
    from workflows.kit.lease import LeaseWorkflow

    server = await dev_server_factory(dynamic_config={"matching.maxTaskQueuesInDeploymentVersion": "1"})
    first, second = (Settings(temporal_address=server.address, task_queue=q, build_id="limit") for q in ("lk-a", "lk-b"))
    client = await connect(first)
    workers: list[Any] = []

    def start(s: Settings) -> asyncio.Task[None]:
        workers.append(Worker(client, task_queue=s.task_queue, workflows=[LeaseWorkflow],
                              deployment_config=deployment_config(s)))
        return asyncio.create_task(workers[-1].run())

    try:
        settled = await settle(client, first, identity="e2e", runs_workflows=True, running=start(first))
        assert settled.current == "limit" and settled.promoted
        with pytest.raises(VersioningRefused, match="'lk-b'.*maxTaskQueuesInDeploymentVersion"):
            await settle(client, second, identity="e2e", runs_workflows=True, running=start(second), register_timeout=5)
    finally:
        for w in workers:
            await w.shutdown()


async def test_continue_as_new_stays_on_the_build_of_the_run_before(dev_server: Any, temporal_client: Any) -> None:
    """What the MachineConfig rollout relies on when it continues as new with its window in its
    input (workers.versioning, module doc): a pinned run that continues as new after another build
    was promoted starts its next run on its own build, with the worker's default behaviour and no
    option on the continue-as-new (as the rollout's ``workflow.continue_as_new`` has none)."""
    from temporalio.worker import Worker

    from workers.settings import Settings
    from workers.versioning import deployment_config, promote, settle

    deployment, queue = f"lk-can-{uuid.uuid4().hex[:8]}", f"lk-can-{uuid.uuid4().hex[:8]}"
    workers: list[Any] = []

    async def start(build: str) -> None:
        s = Settings(temporal_address=dev_server.address, task_queue=queue, deployment_name=deployment, build_id=build)
        workers.append(Worker(temporal_client, task_queue=queue, workflows=[Loop], deployment_config=deployment_config(s)))
        run = asyncio.create_task(workers[-1].run())
        await settle(temporal_client, s, identity="e2e", runs_workflows=True, running=run)

    try:
        await start("1")
        handle = await temporal_client.start_workflow("VersionedLoop", 0, id=f"loop-{uuid.uuid4().hex[:6]}", task_queue=queue)
        await until(lambda: _has_build(handle, "1"), "the first run on build 1")
        await start("2")
        assert await promote(temporal_client, deployment, "2", identity="e2e") == "1"
        await handle.signal("next")
        latest = temporal_client.get_workflow_handle(handle.id)

        async def continued() -> bool:
            return (await latest.describe()).run_id != handle.result_run_id

        await until(continued, "the continued run")
        await latest.signal("next")
        assert await latest.result() == "done"
        assert version_of(await latest.describe()) == (deployment, "1", VersioningBehavior.VERSIONING_BEHAVIOR_PINNED)
        assert await task_builds(temporal_client, handle.id) == {"1"}  # the latest run's history
        fresh = await temporal_client.start_workflow("VersionedLoop", 1, id=f"loop-{uuid.uuid4().hex[:6]}", task_queue=queue)
        await fresh.signal("next")
        assert await fresh.result() == "done" and version_of(await fresh.describe())[1] == "2"
    finally:
        for w in workers:
            await w.shutdown()


@workflow.defn(name="VersionedLoop", sandboxed=False)
class Loop:
    """Waits for ``next``; its first run continues as new (no versioning option), the second returns."""

    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def next(self) -> None:
        self.go = True

    @workflow.run
    async def run(self, turn: int) -> str:
        await workflow.wait_condition(lambda: self.go)
        if turn == 0:
            workflow.continue_as_new(1)
        return "done"


async def _has_build(handle: Any, build: str) -> bool:
    return version_of(await handle.describe())[1] == build
