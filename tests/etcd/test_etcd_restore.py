"""Quorum restore against real etcd members (R3): force-new-cluster, snapshot-restore, and a
worker killed mid-restore. The worker is a subprocess (``python -m workers.worker``) on the
session dev server; members are local etcd processes the workflow stops and starts itself."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.support.etcd_local import LocalEtcdCluster
from tests.support.harness import forget_dead_worker

from activities.etcd.models import EtcdctlTimeouts
from workflows.etcd.models import (
    EtcdBackupInput,
    EtcdBackupResult,
    EtcdRestoreInput,
    EtcdRestoreResult,
    RestoreStatus,
    RestoreStep,
    RestoreStrategy,
)

FAST = EtcdctlTimeouts(dial_seconds=1, command_seconds=2)


def restore_input(cluster: LocalEtcdCluster, **kw: Any) -> EtcdRestoreInput:
    kw.setdefault("auto_approve", True)
    return EtcdRestoreInput(
        members=cluster.members, survivor="m1", timeouts=FAST, calls={"heartbeat_seconds": 3},
        join_timeout_seconds=30, verify_timeout_seconds=30, approvals={"requested_by": "test"}, **kw,
    )


async def backup(client: Any, task_queue: str, cluster: LocalEtcdCluster) -> EtcdBackupResult:
    return await client.execute_workflow(
        "EtcdBackupWorkflow", EtcdBackupInput(members=cluster.members, attempts=1, timeouts=FAST),
        id=f"etcd-backup-{uuid.uuid4().hex[:8]}", task_queue=task_queue, result_type=EtcdBackupResult,
        execution_timeout=timedelta(minutes=2),
    )


def write_keys(cluster: LocalEtcdCluster, n: int = 20) -> None:
    for i in range(n):
        cluster.put(f"/lk/key-{i:02d}", f"value-{i}")


def check_restored(cluster: LocalEtcdCluster, res: EtcdRestoreResult) -> None:
    assert res.outcome == "completed", res.message
    assert res.verification is not None and res.verification.ok, res.verification
    assert cluster.member_names() == ["m1", "m2", "m3"]
    health = cluster.ctl("endpoint", "health")
    assert health.returncode == 0 and health.stdout.count("is healthy") == 3, health.stdout + health.stderr
    for name in ("m2", "m3"):
        moved = res.members[name].moved_to
        assert moved and Path(moved, "member").is_dir(), f"{name}: old data dir not kept aside ({moved})"


async def test_force_new_cluster_restores_all_keys(temporal_client: Any, task_queue: str, etcd_cluster: LocalEtcdCluster, etcd_worker: Any) -> None:
    await etcd_worker.start()
    write_keys(etcd_cluster)
    bk = await backup(temporal_client, task_queue, etcd_cluster)
    assert bk.ok and bk.message == "all members backed up"
    assert sorted(s.member for s in bk.snapshots) == ["m1", "m2", "m3"]
    assert all(Path(s.path).is_file() and s.total_keys for s in bk.snapshots)
    etcd_cluster.put("/lk/after-backup", "newest")
    etcd_cluster.kill("m2")
    etcd_cluster.kill("m3")

    t0 = time.monotonic()
    res: EtcdRestoreResult = await temporal_client.execute_workflow(
        "EtcdQuorumRestoreWorkflow", restore_input(etcd_cluster), id=f"etcd-restore-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue, result_type=EtcdRestoreResult, execution_timeout=timedelta(minutes=3),
    )
    print(f"\nforce-new-cluster restore of 3 members: {time.monotonic() - t0:.1f} s")
    check_restored(etcd_cluster, res)
    for m in etcd_cluster.members:
        kvs = etcd_cluster.keys("/lk/", m.client_url)
        assert len(kvs) == 21 and kvs["/lk/after-backup"] == "newest", (m.name, sorted(kvs))
    assert res.members["m1"].moved_to is None  # the survivor keeps its data


async def test_snapshot_restore_keys_as_of_snapshot(temporal_client: Any, task_queue: str, etcd_cluster: LocalEtcdCluster, etcd_worker: Any) -> None:
    await etcd_worker.start()
    write_keys(etcd_cluster)
    bk = await backup(temporal_client, task_queue, etcd_cluster)
    snap = next(s for s in bk.snapshots if s.member == "m1")
    etcd_cluster.put("/lk/after-backup", "lost")
    etcd_cluster.kill("m2")
    etcd_cluster.kill("m3")

    t0 = time.monotonic()
    res: EtcdRestoreResult = await temporal_client.execute_workflow(
        "EtcdQuorumRestoreWorkflow",
        restore_input(etcd_cluster, strategy=RestoreStrategy.SNAPSHOT_RESTORE, snapshot=snap.path),
        id=f"etcd-restore-{uuid.uuid4().hex[:8]}", task_queue=task_queue, result_type=EtcdRestoreResult,
        execution_timeout=timedelta(minutes=3),
    )
    print(f"\nsnapshot restore of 3 members: {time.monotonic() - t0:.1f} s")
    check_restored(etcd_cluster, res)
    for m in etcd_cluster.members:
        kvs = etcd_cluster.keys("/lk/", m.client_url)
        assert sorted(kvs) == [f"/lk/key-{i:02d}" for i in range(20)], (m.name, sorted(kvs))
    survivor_old = res.members["m1"].moved_to
    assert survivor_old and Path(survivor_old, "member").is_dir()
    approved = [g.gate_id for g in res.gate_history if g.action == "approved"]
    assert approved == ["stop-members", "move-data/m1", "move-data/m2", "move-data/m3"]


async def _wait_step(handle: Any, pred: Any, timeout: float = 60.0) -> RestoreStatus:
    end = time.monotonic() + timeout
    while True:
        st: RestoreStatus = await handle.query("status", result_type=RestoreStatus)
        if pred(st):
            return st
        assert time.monotonic() < end, f"step not reached; at {st.step} {st.member}: {st.log[-3:]}"
        await asyncio.sleep(0.05)


async def test_worker_killed_mid_restore_never_adds_twice(temporal_client: Any, task_queue: str, etcd_cluster: LocalEtcdCluster, etcd_worker: Any) -> None:
    await etcd_worker.start()
    write_keys(etcd_cluster, 5)
    etcd_cluster.kill("m2")
    etcd_cluster.kill("m3")
    handle = await temporal_client.start_workflow(
        "EtcdQuorumRestoreWorkflow", restore_input(etcd_cluster), id=f"etcd-restore-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue, result_type=EtcdRestoreResult, execution_timeout=timedelta(minutes=3),
    )
    # 1: right after force-new-cluster (the survivor runs alone, its peer URL is being fixed).
    st = await _wait_step(handle, lambda s: s.step in (RestoreStep.FIX_PEER_URL, RestoreStep.RESTART_SURVIVOR))
    await etcd_worker.kill()
    await forget_dead_worker(temporal_client, etcd_worker.task_queue)
    await etcd_worker.start()
    # 2: between the two member adds (m2 joined, m3 not added yet).
    st = await _wait_step(handle, lambda s: s.member == "m3" and s.step == RestoreStep.ADD_MEMBER)
    assert st.members["m2"].state == "joined"
    await etcd_worker.kill()
    await forget_dead_worker(temporal_client, etcd_worker.task_queue)
    await etcd_worker.start()

    res: EtcdRestoreResult = await handle.result()
    check_restored(etcd_cluster, res)
    assert etcd_worker.starts == 3
    adds = [line for line in res.log if ": member add as " in line]
    assert len(adds) == 2 and {a.split(":")[-2].split()[-1] for a in adds} == {"m2", "m3"}, res.log
    ids = {res.members[n].id for n in ("m2", "m3")}
    assert len(ids) == 2 and None not in ids
    assert len(etcd_cluster.keys("/lk/", etcd_cluster.member("m3").client_url)) == 5
