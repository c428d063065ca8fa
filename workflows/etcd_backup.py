"""EtcdBackupWorkflow: a snapshot of every etcd member, as a barrier (R3: "every etcd host must
have finished its backup before anything else proceeds").

Every member is snapshotted concurrently (``etcd_snapshot_save``: ``etcdctl snapshot save`` then
``etcdutl snapshot status``), each with ``attempts`` tries. The result is ``ok`` only when all
succeeded; otherwise it names the members that failed. Other procedures use it as a gate with
:func:`require_etcd_backup` (a child workflow that fails the parent's step when incomplete).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.etcd_models import EtcdMember, SnapshotInfo, SnapshotSaveInput
    from workflows.etcd_models import EtcdBackupInput, EtcdBackupResult


def _message(err: BaseException) -> str:
    msg = str(err)
    cur: BaseException | None = err
    while cur is not None:
        msg = getattr(cur, "message", None) or str(cur) or msg
        cur = cur.__cause__
    return msg


def snapshot_path(member: EtcdMember, stamp: str) -> str:
    """``<backup_dir>/snapshot-<member>-<stamp>.db`` on the member's host."""
    return f"{member.effective_backup_dir}/snapshot-{member.name}-{stamp}.db"


@workflow.defn
class EtcdBackupWorkflow:
    """Back up every member (input :class:`EtcdBackupInput`, result :class:`EtcdBackupResult`).
    Fails with EtcdBackupIncomplete only when ``fail_on_incomplete``."""

    @workflow.run
    async def run(self, input: EtcdBackupInput) -> EtcdBackupResult:
        started = workflow.now()
        stamp = started.strftime("%Y%m%dT%H%M%SZ")
        retry = RetryPolicy(
            initial_interval=timedelta(seconds=1),
            maximum_interval=timedelta(seconds=5),
            maximum_attempts=input.attempts,
            non_retryable_error_types=["InvalidRestoreInput"],
        )

        async def one(member: EtcdMember) -> SnapshotInfo | str:
            try:
                return await workflow.execute_activity(
                    "etcd_snapshot_save",
                    SnapshotSaveInput(
                        member=member, path=snapshot_path(member, stamp), timeouts=input.timeouts,
                        timeout_seconds=input.snapshot_timeout_seconds,
                    ),
                    result_type=SnapshotInfo,
                    start_to_close_timeout=timedelta(seconds=input.snapshot_timeout_seconds + 30),
                    heartbeat_timeout=timedelta(seconds=input.heartbeat_timeout_seconds),
                    retry_policy=retry,
                )
            except ActivityError as err:
                return _message(err)

        outcomes = await asyncio.gather(*(one(m) for m in input.members))
        snapshots = [o for o in outcomes if isinstance(o, SnapshotInfo)]
        failed = {m.name: o for m, o in zip(input.members, outcomes, strict=True) if isinstance(o, str)}
        if failed:
            message = f"backup failed on {len(failed)} of {len(input.members)} member(s): {', '.join(failed)}"
            workflow.logger.warning(message)
        else:
            message = "all members backed up"
        result = EtcdBackupResult(
            ok=not failed, message=message, snapshots=snapshots, failed=failed,
            started_at=started, finished_at=workflow.now(),
        )
        if failed and input.fail_on_incomplete:
            raise ApplicationError(message, result.model_dump(mode="json"), type="EtcdBackupIncomplete", non_retryable=True)
        return result


async def require_etcd_backup(input: EtcdBackupInput, *, workflow_id: str | None = None) -> EtcdBackupResult:
    """From inside another workflow: run :class:`EtcdBackupWorkflow` as a child and return its
    result when every member is backed up; raise a non-retryable ``ApplicationError`` (type
    EtcdBackupIncomplete, naming the failed members) otherwise, so nothing after the barrier
    runs. ``workflow_id`` default: ``<parent id>/etcd-backup``."""
    wid = workflow_id or f"{workflow.info().workflow_id}/etcd-backup"
    result: EtcdBackupResult = await workflow.execute_child_workflow(
        EtcdBackupWorkflow.run, input.model_copy(update={"fail_on_incomplete": False}), id=wid,
        result_type=EtcdBackupResult,
    )
    if not result.ok:
        raise ApplicationError(result.message, type="EtcdBackupIncomplete", non_retryable=True)
    return result
