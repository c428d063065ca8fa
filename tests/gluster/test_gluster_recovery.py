"""R3a end to end: GlusterRecoveryWorkflow on the session's real dev server, a real worker process
(so it can be SIGKILLed) and clustersim ``r3-okd310-upgrade`` (seed 002: the registry volume's
brick on 10.0.0.12 is ``Online N``), plus the ``lockkeeper`` CLI as a child process.

The facts are read from the simulator (its request log, ``GET /_sim/gluster``, its brick
timeline), not from lockkeeper's own report.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle

from clustersim import ClusterSim
from clustersim.faults import MUTATING_VERBS
from workflows.gluster import GlusterRecoveryWorkflow
from workflows.gluster.models import GlusterHealthParams, GlusterRecoveryInput, GlusterRecoveryResult, GlusterRecoveryStatus
from workflows.kit.models import ApproveInput, GateState, RejectInput

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SCALE = 0.05
REG = "glusterfs-registry-volume"
SEED_POD = "glusterfs-storage-r24wg"
LOCKKEEPER = str(Path(sys.executable).parent / "lockkeeper")


def _input(**kw: Any) -> GlusterRecoveryInput:
    kw.setdefault("heal", GlusterHealthParams(interval_seconds=1, max_interval_seconds=2, timeout_seconds=120, stall_after_seconds=60))
    return GlusterRecoveryInput(approvals={"requested_by": "e2e"}, reread_delay_seconds=1, calls={"short_call_seconds": 5},
                                command_timeout_seconds=20, **kw)


async def _start(client: Client, queue: str, inp: GlusterRecoveryInput) -> WorkflowHandle[Any, Any]:
    return await client.start_workflow(GlusterRecoveryWorkflow.run, inp, id=f"gluster-recovery-{uuid.uuid4().hex[:8]}",
                                       task_queue=queue, result_type=GlusterRecoveryResult)


async def _status(handle: WorkflowHandle[Any, Any], pred: Callable[[GlusterRecoveryStatus], bool], timeout: float = 120.0) -> GlusterRecoveryStatus:
    st = None
    for _ in range(int(timeout / 0.25)):
        st = await handle.query("status", result_type=GlusterRecoveryStatus)
        if pred(st):
            return st
        await asyncio.sleep(0.25)
    raise AssertionError(f"status never matched; last step {st.step if st else None}, waiting for {st.waiting_for if st else None}")


def _gate(prefix: str) -> Callable[[GlusterRecoveryStatus], bool]:
    return lambda st: any(g.state == GateState.WAITING and g.id.startswith(prefix) for g in st.gates)


def _writes(sim: ClusterSim) -> list[tuple[str, str, str]]:
    return [(e.verb, e.resource, e.name) for e in sim.requests.entries() if e.verb in MUTATING_VERBS]


def _pod_deletes(sim: ClusterSim) -> list[str]:
    return [name for verb, res, name in _writes(sim) if verb == "delete" and res == "pods"]


def _gluster(sim: ClusterSim) -> Any:
    return sim.components["gluster"]


async def _cli(sim: ClusterSim, dev_server: Any, queue: str, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "LOCKKEEPER_", "KUBE"))}
    env.update(TEMPORAL_ADDRESS=dev_server.address, TEMPORAL_NAMESPACE=dev_server.namespace, LOCKKEEPER_TASK_QUEUE=queue,
               KUBECONFIG=str(sim.kubeconfig_path), LOCKKEEPER_IDENTITY="e2e-cli")
    proc = await asyncio.create_subprocess_exec(LOCKKEEPER, *args, env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=240)
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.fixture
async def r3(sim_factory: Callable[..., Any]) -> ClusterSim:
    return await sim_factory("r3-okd310-upgrade", time_scale=SCALE)


async def test_seed_brick_offline_one_delete_then_healthy(r3: ClusterSim, worker_for, temporal_client, task_queue, dev_server) -> None:
    await worker_for(r3)
    code, out, _ = await _cli(r3, dev_server, task_queue, "diagnose", "gluster", "-o", "json")
    before = json.loads(out)
    assert code == 1 and not before["healthy"]
    assert [h["host"] for h in before["assessment"]["hosts"]] == ["10.0.0.12"]

    handle = await _start(temporal_client, task_queue, _input())
    st = await _status(handle, _gate("delete/10.0.0.12"))
    gate = next(g for g in st.gates if g.id == "delete/10.0.0.12")
    assert SEED_POD in gate.comment and "master03.example.com" in gate.comment and f"{REG}: brick 10.0.0.12:" in gate.comment
    assert _writes(r3) == []  # nothing written before the approval
    await handle.execute_update(GlusterRecoveryWorkflow.approve, ApproveInput(identity="bob"))
    res = await handle.result()
    assert res.outcome == "completed" and res.ok, res.message
    assert _pod_deletes(r3) == [SEED_POD]
    snap = _gluster(r3).snapshot()
    assert all(b["online"] for v in snap["volumes"] for b in v["bricks"])
    assert snap["max_hosts_down_at_once"] <= 1
    reg = next(v for v in res.volumes if v.name == REG)
    assert reg.online and reg.heal_entries_end == 0 and any(SEED_POD in a for a in reg.actions)

    code, out, _ = await _cli(r3, dev_server, task_queue, "diagnose", "gluster", "-o", "json")
    after = json.loads(out)
    assert code == 0 and after["healthy"] and after["assessment"]["hosts"] == []


async def test_two_bricks_of_one_volume_stop_before_any_write(r3: ClusterSim, worker_for, task_queue, dev_server) -> None:
    await worker_for(r3)
    _gluster(r3).enable_symptom("volume_down")
    code, out, err = await _cli(r3, dev_server, task_queue, "start", "gluster-recovery", "--wait", "-o", "json")
    assert code == 1, err
    res = json.loads(out)["result"]
    assert res["outcome"] == "stopped"
    vol = "vol_ec8d838607528268a4e435628ea9f709"
    (fatal,) = [f for f in res["fatal"] if vol in f] or [res["message"]]
    assert "10.0.0.11:" in fatal and "10.0.0.12:" in fatal
    assert _writes(r3) == []  # no write request reached the simulator


async def test_unsafe_restart_asks_a_person_and_deletes_nothing(r3: ClusterSim, worker_for, temporal_client, task_queue) -> None:
    await worker_for(r3)
    # master01's brick of an app volume is down too: restarting master03 would take that volume to 2 down
    _gluster(r3).inject({"kind": "brick_start_failure", "volume": "vol_f92ea1839dc16d7396db358365da7066", "brick": "10.0.0.10",
                         "immediate": True})
    handle = await _start(temporal_client, task_queue, _input())
    st = await _status(handle, _gate("unsafe/"))
    gate = next(g for g in st.gates if g.state == GateState.WAITING)
    assert "would take 2 bricks of volume vol_f92ea1839dc16d7396db358365da7066" in gate.comment
    assert _writes(r3) == []
    await handle.execute_update(GlusterRecoveryWorkflow.reject, RejectInput(identity="bob", comment="will fix by hand"))
    res = await handle.result()
    assert res.outcome == "stopped" and not res.ok and _writes(r3) == []


async def test_sticky_brick_fault_start_force_brings_it_back(r3: ClusterSim, worker_for, temporal_client, task_queue) -> None:
    await worker_for(r3)
    _gluster(r3).inject({"kind": "brick_start_failure", "volume": REG, "brick": "10.0.0.12", "sticky": True, "immediate": True})
    handle = await _start(temporal_client, task_queue, _input(allow_volume_start_force=True, max_restarts_per_host=2))
    await _status(handle, _gate("delete/"))
    await handle.execute_update(GlusterRecoveryWorkflow.approve, ApproveInput(identity="bob"))
    st = await _status(handle, _gate("start-force/10.0.0.12"), timeout=180)
    assert len(_pod_deletes(r3)) == 2 and "gluster volume start VOL force" in st.gates[-1].comment
    assert not next(b for b in _gluster(r3).bricks_on_host("10.0.0.12") if b["volume"] == REG)["online"]
    await handle.execute_update(GlusterRecoveryWorkflow.approve, ApproveInput(identity="bob"))
    res = await handle.result()
    assert res.outcome == "completed" and res.ok, res.message
    assert next(b for b in _gluster(r3).bricks_on_host("10.0.0.12") if b["volume"] == REG)["online"]
    assert any("volume start" in a for a in next(v for v in res.volumes if v.name == REG).actions)


async def test_worker_killed_right_after_the_delete_never_deletes_twice(r3: ClusterSim, worker_for, temporal_client, task_queue) -> None:
    worker = await worker_for(r3)
    handle = await _start(temporal_client, task_queue, _input(approve_pod_delete=False))
    for _ in range(400):
        if _pod_deletes(r3):
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError("the pod was never deleted")
    await worker.kill()  # SIGKILL, right after the DELETE reached the simulator
    await asyncio.sleep(1.0)
    await worker.start()
    res = await handle.result()
    assert res.outcome == "completed" and res.ok, res.message
    assert _pod_deletes(r3) == [SEED_POD]
    assert [d.pod for d in res.hosts[0].deletes] == [SEED_POD]


async def test_transaction_in_progress_on_first_calls_is_retried(r3: ClusterSim, worker_for, dev_server, task_queue) -> None:
    await worker_for(r3)
    _gluster(r3).inject({"kind": "transaction_in_progress", "n": 3})
    code, out, err = await _cli(r3, dev_server, task_queue, "start", "gluster-recovery", "--check-only", "-o", "json")
    res = json.loads(out)["result"]
    assert code == 1 and res["outcome"] == "unhealthy", err  # the seed's brick is still down: a report, not a failure
    assert res["assessment_end"]["hosts"][0]["host"] == "10.0.0.12"
    assert _writes(r3) == [] and _gluster(r3).snapshot()["faults"]["transaction_in_progress"] == 0


async def test_dry_run_lists_the_preconditions_and_an_unknown_excluded_node_is_refused(r3: ClusterSim, worker_for, task_queue,
                                                                                          dev_server) -> None:
    """Issue 39: ``--dry-run`` prints every precondition with its result and the plan (exit 0);
    an ``--exclude-node`` that is no Node fails its check (exit 2, the problem named); a real
    start with it is refused before the lease and any write."""
    await worker_for(r3)
    code, out, err = await _cli(r3, dev_server, task_queue, "start", "gluster-recovery", "--dry-run",
                                "--exclude-node", "master01.example.com")
    assert code == 0, (out, err)
    assert "preconditions (" in out and "0 failed" in out and "names-exist" in out and "gluster CLI in namespace" in out, out
    assert f"GlusterFS pod of brick host 10.0.0.12: pod {SEED_POD}" in out and "would restart" in out, out
    code, out, err = await _cli(r3, dev_server, task_queue, "start", "gluster-recovery", "--dry-run", "--exclude-node", "nosuch-node")
    assert code == 2 and "FAILED" in out and "no Node named nosuch-node" in out, (out, err)
    code, out, err = await _cli(r3, dev_server, task_queue, "start", "gluster-recovery", "--wait", "-o", "json",
                                "--exclude-node", "nosuch-node")
    res = json.loads(out)["result"]
    assert res["outcome"] == "refused" and any("nosuch-node" in p for p in res["problems"]), res
    assert _writes(r3) == []
