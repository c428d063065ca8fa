"""Backup barrier, approval gates and bad input against real etcd members, with an in-process
worker (the etcd activities need no kubeconfig) on the session dev server."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from tests.support.etcd_local import LocalEtcdCluster
from temporalio import activity, workflow
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from typer.testing import CliRunner

from activities.etcd.models import EtcdctlTimeouts, SnapshotInfo, SnapshotSaveInput
from lockkeeper import cli
from workers.registry import build_host_activities
from tests.support.cli_status import person_status
from workflows.etcd.backup import EtcdBackupWorkflow, require_etcd_backup
from workflows.etcd.models import (
    EtcdBackupInput,
    EtcdBackupResult,
    EtcdRestoreInput,
    EtcdRestoreResult,
    RestorePhase,
    RestoreStatus,
    RestoreStrategy,
)
from workflows.etcd.restore import EtcdQuorumRestoreWorkflow
from workflows.kit.lease import LeaseWorkflow
from workflows.kit.models import ApproveInput, GateDecisionResult, RejectInput

FAST = EtcdctlTimeouts(dial_seconds=1, command_seconds=2)


@workflow.defn
class GatedByBackup:
    """A procedure that may only proceed after every member is backed up."""

    @workflow.run
    async def run(self, input: EtcdBackupInput) -> str:
        result = await require_etcd_backup(input)
        return f"proceeding after {len(result.snapshots)} snapshots"


@pytest_asyncio.fixture(loop_scope="session")
async def worker(temporal_client: Any, task_queue: str) -> AsyncIterator[Worker]:
    with ThreadPoolExecutor(4) as pool:
        w = Worker(
            temporal_client, task_queue=task_queue,
            workflows=[EtcdBackupWorkflow, EtcdQuorumRestoreWorkflow, GatedByBackup, LeaseWorkflow],
            activities=build_host_activities(), activity_executor=pool,
            workflow_runner=UnsandboxedWorkflowRunner(),
        )
        async with w:
            yield w


def pids(cluster: LocalEtcdCluster) -> dict[str, int | None]:
    return {m.name: cluster.pid(m.name) for m in cluster.members}


def data_dirs(cluster: LocalEtcdCluster) -> list[str]:
    return sorted(p.name for p in (cluster.root / "data").iterdir())


async def test_backup_barrier_names_the_failed_member(temporal_client: Any, task_queue: str, worker: Worker, etcd_cluster: LocalEtcdCluster,
                                                     dev_server: Any) -> None:
    etcd_cluster.kill("m2")
    inp = EtcdBackupInput(members=etcd_cluster.members, attempts=1, timeouts=FAST)
    wid = f"bk-{uuid.uuid4().hex[:8]}"
    res: EtcdBackupResult = await temporal_client.execute_workflow(
        "EtcdBackupWorkflow", inp, id=wid, task_queue=task_queue, result_type=EtcdBackupResult,
    )
    assert not res.ok
    assert "m2" in await person_status(dev_server.address, wid)  # the failed member, and no repr
    assert list(res.failed) == ["m2"] and "m2" in res.message and "1 of 3" in res.message
    assert sorted(s.member for s in res.snapshots) == ["m1", "m3"]
    assert all(Path(s.path).is_file() and s.total_keys for s in res.snapshots), res.snapshots

    # The same barrier as a gate of another procedure: nothing after it runs.
    with pytest.raises(WorkflowFailureError) as err:
        await temporal_client.execute_workflow(
            GatedByBackup.run, inp, id=f"gated-{uuid.uuid4().hex[:8]}", task_queue=task_queue,
        )
    assert "m2" in str(err.value.cause) and getattr(err.value.cause, "type", None) == "EtcdBackupIncomplete"


async def test_gates_validated_and_reject_stops_before_anything(temporal_client: Any, task_queue: str, worker: Worker, etcd_cluster: LocalEtcdCluster,
                                                                dev_server: Any) -> None:
    before = pids(etcd_cluster)
    inp = EtcdRestoreInput(members=etcd_cluster.members, survivor="m1", timeouts=FAST, approvals={"requested_by": "alice", "four_eyes": True},
                           calls={"heartbeat_seconds": 3})
    handle = await temporal_client.start_workflow(
        "EtcdQuorumRestoreWorkflow", inp, id=f"rs-{uuid.uuid4().hex[:8]}", task_queue=task_queue,
        result_type=EtcdRestoreResult, execution_timeout=timedelta(minutes=2),
    )
    import asyncio

    for _ in range(200):
        st: RestoreStatus = await handle.query("status", result_type=RestoreStatus)
        if st.phase == RestorePhase.WAITING_APPROVAL:
            break
        await asyncio.sleep(0.05)
    assert st.waiting_for and st.waiting_for.startswith("approval of gate stop-members") and st.since is not None
    # status names the command that answers the gate, and shows no repr
    assert f"lockkeeper approve {handle.id} stop-members -m REASON" in await person_status(dev_server.address, handle.id)
    for bad, why in (
        (ApproveInput(gate_id="move-data/m2", identity="bob"), "unknown gate"),
        (ApproveInput(gate_id="stop-members", identity="alice"), "four-eyes"),
        (ApproveInput(gate_id="stop-members", identity=" "), "identity is required"),
    ):
        with pytest.raises(WorkflowUpdateFailedError) as err:
            await handle.execute_update("approve", bad, result_type=GateDecisionResult)
        assert why in str(err.value.cause)
    decision = await handle.execute_update("reject", RejectInput(identity="bob", comment="not now"), result_type=GateDecisionResult)
    assert decision.gate_id == "stop-members"
    res: EtcdRestoreResult = await handle.result()
    assert res.outcome == "rejected" and "rejected by bob" in res.message
    assert [(g.gate_id, g.action, g.by) for g in res.gate_history] == [
        ("stop-members", "opened", "lockkeeper"), ("stop-members", "rejected", "bob")
    ]
    assert pids(etcd_cluster) == before and data_dirs(etcd_cluster) == ["m1", "m2", "m3"]


async def test_missing_backup_on_host_refused_before_stopping(temporal_client: Any, task_queue: str, worker: Worker, etcd_cluster: LocalEtcdCluster) -> None:
    before = pids(etcd_cluster)
    inp = EtcdRestoreInput(members=etcd_cluster.members, strategy=RestoreStrategy.SNAPSHOT_RESTORE, survivor="m2",
                           snapshot=str(etcd_cluster.root / "no-such-snapshot.db"), auto_approve=True, timeouts=FAST)
    res: EtcdRestoreResult = await temporal_client.execute_workflow(
        "EtcdQuorumRestoreWorkflow", inp, id=f"rs-{uuid.uuid4().hex[:8]}", task_queue=task_queue,
        result_type=EtcdRestoreResult,
    )
    # refused through the kit's preflight (issue 39): one line per problem, nothing stopped
    assert res.outcome == "refused" and any("no-such-snapshot.db" in p for p in res.problems), res
    assert [r.precondition.kind for r in res.preconditions if r.state == "failed"] == ["input"]
    assert pids(etcd_cluster) == before and data_dirs(etcd_cluster) == ["m1", "m2", "m3"]


def test_bad_members_files_change_nothing(tmp_path: Path, etcd_cluster: LocalEtcdCluster) -> None:
    before = pids(etcd_cluster)
    good = [m.model_dump(mode="json") for m in etcd_cluster.members]
    dup = [dict(m) for m in good]
    dup[2]["peer_url"] = dup[1]["peer_url"]
    cases = [
        ({"members": good}, ["--strategy", "force-new-cluster", "--survivor", "m9"], "unknown survivor 'm9'"),
        ({"members": dup}, ["--strategy", "force-new-cluster"], "duplicate peer URL"),
        ({"members": good}, ["--strategy", "snapshot-restore"], "needs a backup"),
        ({"members": good}, ["--strategy", "sideways"], "Invalid value for '--strategy'"),
        ({"members": [{**good[0], "control": {"kind": "process"}}]}, ["--strategy", "force-new-cluster"], "members.0.control.process.argv"),
        ({"members": [good[0], {**good[1], "host": {"backend": "debug-pod", "node": "master-1"}, "control": {"kind": "systemd"}},
                      good[2]]},
         ["--strategy", "force-new-cluster"], "members m2 are reached through debug pods"),
    ]
    runner = CliRunner()
    for i, (doc, args, message) in enumerate(cases):
        path = tmp_path / f"members-{i}.yaml"
        path.write_text(yaml.safe_dump(doc))
        res = runner.invoke(cli.app, ["--address", "127.0.0.1:1", "start", "etcd-restore", "--members", str(path), *args])
        assert res.exit_code == 2, (args, res.output)
        assert message in " ".join(res.output.split()), res.output
    assert pids(etcd_cluster) == before and data_dirs(etcd_cluster) == ["m1", "m2", "m3"]


async def test_backup_names_the_host_of_a_lost_snapshot_whose_file_is_not_there_yet(
        temporal_client: Any, task_queue: str, etcd_cluster: LocalEtcdCluster) -> None:
    """A snapshot call lost with its worker (heartbeat timeout) may still be running on its host
    when the backup reads what the failed members left: m2's command here never reports and has
    written nothing yet when the read comes. The outcome still names ``host m2`` (the file and
    its ``.part``, unknown), so a file the command writes after the read is not left unnamed."""
    real = {activity._Definition.must_from_callable(fn).name: fn for fn in build_host_activities()}

    @activity.defn(name="etcd_snapshot_save")
    async def snapshot_save(input: SnapshotSaveInput) -> SnapshotInfo:
        if input.member.name == "m2":  # its worker is gone: no heartbeat, no result
            await asyncio.Event().wait()
        return await real["etcd_snapshot_save"](input)

    acts = [fn for name, fn in real.items() if name != "etcd_snapshot_save"] + [snapshot_save]
    with ThreadPoolExecutor(4) as pool:
        async with Worker(temporal_client, task_queue=task_queue, workflows=[EtcdBackupWorkflow, LeaseWorkflow], activities=acts,
                          activity_executor=pool, workflow_runner=UnsandboxedWorkflowRunner()):
            res: EtcdBackupResult = await temporal_client.execute_workflow(
                "EtcdBackupWorkflow", EtcdBackupInput(members=etcd_cluster.members, attempts=1, timeouts=FAST,
                                                      calls={"heartbeat_seconds": 1}),
                id=f"bk-{uuid.uuid4().hex[:8]}", task_queue=task_queue, result_type=EtcdBackupResult)
    assert list(res.failed) == ["m2"], res.failed
    assert sorted(s.member for s in res.snapshots) == ["m1", "m3"]
    lost = [i for i in res.left_changed if i.target == "host m2"]
    assert len(lost) == 1 and "unknown: its lost snapshot command may still write it" in lost[0].what, res.left_changed
    assert {i.target for i in res.left_changed} == {"host m1", "host m2", "host m3"}, res.left_changed
