"""Issue 39 for the etcd procedures: their preconditions are declared as data and checked by the
kit before the first write, against real etcd members on 127.0.0.1 (an in-process worker with the
host activities, the session dev server).

- a restore whose member port is taken by something other than etcd is refused before any member
  is stopped (outcome ``refused``, one line per problem), and so is a backup whose ``etcdctl``
  does not exist on the host (no snapshot written);
- ``lockkeeper start etcd-restore|etcd-backup --dry-run`` prints every check with its result:
  exit 0 when a real start would go, 2 (naming the problem) when it would be refused, and it
  stops no member and writes no snapshot.
"""

from __future__ import annotations

import asyncio
import socket
import time
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import pytest_asyncio
import yaml
from tests.support.etcd_local import LocalEtcdCluster
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.etcd.models import EtcdctlTimeouts
from workers.registry import build_host_activities
from workflows.etcd.backup import EtcdBackupWorkflow
from workflows.etcd.models import EtcdBackupInput, EtcdBackupResult, EtcdRestoreInput, EtcdRestoreResult
from workflows.etcd.restore import EtcdQuorumRestoreWorkflow
from workflows.kit.lease import LeaseWorkflow

pytestmark = pytest.mark.timeout(240)

FAST = EtcdctlTimeouts(dial_seconds=1, command_seconds=2)
LOCKKEEPER = str(Path(sys.executable).parent / "lockkeeper")


@pytest_asyncio.fixture(loop_scope="session")
async def worker(temporal_client: Any, task_queue: str) -> AsyncIterator[Worker]:
    with ThreadPoolExecutor(4) as pool:
        w = Worker(temporal_client, task_queue=task_queue,
                   workflows=[EtcdBackupWorkflow, EtcdQuorumRestoreWorkflow, LeaseWorkflow],
                   activities=build_host_activities(), activity_executor=pool, workflow_runner=UnsandboxedWorkflowRunner())
        async with w:
            yield w


@pytest.fixture
def squatter(etcd_cluster: LocalEtcdCluster) -> Iterator[tuple[str, int]]:
    """m2 killed and its peer port taken by this (python) process: what etcd would hit when the
    restore starts m2 again."""
    etcd_cluster.kill("m2")
    port = urlsplit(etcd_cluster.member("m2").peer_url).port
    assert port is not None
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    for attempt in range(100):  # the killed member's listener goes with its process, a moment later
        try:
            s.bind(("127.0.0.1", port))
            break
        except OSError:
            if attempt == 99:
                s.close()
                raise
            time.sleep(0.1)
    s.listen(1)
    try:
        yield "m2", port
    finally:
        s.close()


def pids(cluster: LocalEtcdCluster) -> dict[str, int | None]:
    return {m.name: cluster.pid(m.name) for m in cluster.members}


def snapshots(cluster: LocalEtcdCluster) -> list[Path]:
    folder = cluster.root / "backup"
    return sorted(folder.iterdir()) if folder.is_dir() else []


async def lk(address: str, task_queue: str, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(LOCKKEEPER, "--address", address, "--task-queue", task_queue, *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


def members_file(tmp_path: Path, cluster: LocalEtcdCluster, **change: Any) -> Path:
    docs = [m.model_dump(mode="json") for m in cluster.members]
    for d in docs:
        d.update(change)
    path = tmp_path / f"members-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump({"members": docs}))
    return path


async def test_restore_refused_before_any_stop_when_a_member_port_is_taken(
        temporal_client: Any, task_queue: str, worker: Worker, etcd_cluster: LocalEtcdCluster, squatter: tuple[str, int]) -> None:
    name, port = squatter
    before = pids(etcd_cluster)
    inp = EtcdRestoreInput(members=etcd_cluster.members, survivor="m1", timeouts=FAST, auto_approve=True, approvals={"requested_by": "test"})
    res: EtcdRestoreResult = await temporal_client.execute_workflow(
        EtcdQuorumRestoreWorkflow.run, inp, id=f"rs-{uuid.uuid4().hex[:8]}", task_queue=task_queue, result_type=EtcdRestoreResult)
    assert res.outcome == "refused", res.message
    assert res.problems and any(f"port {port}/tcp on {name}" in p and "python" in p for p in res.problems), res.problems
    # the other ports are held by etcd itself (stopped first), so only the taken one is a problem
    assert len(res.problems) == 1, res.problems
    kinds = {r.precondition.kind for r in res.preconditions}
    assert {"host-executable", "port-free", "input"} <= kinds
    assert not res.gate_history and not res.log  # no gate opened, nothing stopped
    assert pids(etcd_cluster) == before


async def test_backup_refused_before_any_snapshot_when_etcdctl_is_missing(
        temporal_client: Any, task_queue: str, worker: Worker, etcd_cluster: LocalEtcdCluster) -> None:
    members = [m.model_copy(update={"etcdctl": "/nonexistent/etcdctl"}) if m.name == "m3" else m for m in etcd_cluster.members]
    res: EtcdBackupResult = await temporal_client.execute_workflow(
        EtcdBackupWorkflow.run, EtcdBackupInput(members=members, attempts=1, timeouts=FAST),
        id=f"bk-{uuid.uuid4().hex[:8]}", task_queue=task_queue, result_type=EtcdBackupResult)
    assert res.outcome == "refused" and not res.ok, res.message
    assert res.problems == [p for p in res.problems if "/nonexistent/etcdctl on m3" in p] and len(res.problems) == 1, res.problems
    assert not res.snapshots and snapshots(etcd_cluster) == []


async def test_dry_runs_list_every_check_and_change_nothing(
        dev_server: Any, task_queue: str, worker: Worker, etcd_cluster: LocalEtcdCluster, tmp_path: Path) -> None:
    before = pids(etcd_cluster)
    good = members_file(tmp_path, etcd_cluster)
    code, out, err = await lk(dev_server.address, task_queue, "start", "etcd-restore", "--members", str(good),
                              "--strategy", "force-new-cluster", "--survivor", "m1", "--dry-run")
    assert code == 0, (out, err)
    assert "preconditions (" in out and "0 failed" in out, out
    for expected in ("etcdctl on m1", "port-free", "on m3", "held by etcd itself", "dry run: would stop 3 member(s)"):
        assert expected in out, (expected, out)

    code, out, err = await lk(dev_server.address, task_queue, "start", "etcd-backup", "--members", str(good), "--dry-run")
    assert code == 0, (out, err)
    assert "etcdutl on m2" in out and "0 failed" in out, out

    bad = members_file(tmp_path, etcd_cluster, etcdutl="/nonexistent/etcdutl")
    code, out, err = await lk(dev_server.address, task_queue, "start", "etcd-backup", "--members", str(bad), "--dry-run")
    assert code == 2, (out, err)
    assert "FAILED" in out and "/nonexistent/etcdutl on m1" in out and "would be refused" in err, (out, err)
    assert pids(etcd_cluster) == before and snapshots(etcd_cluster) == []
