"""EtcdBackupWorkflow: a snapshot of every etcd member, as a barrier (R3: "every etcd host must
have finished its backup before anything else proceeds").

Every member is snapshotted concurrently (``etcd_snapshot_save``: ``etcdctl snapshot save`` then
``etcdutl snapshot status``), each with ``attempts`` tries, through :class:`workflows.kit.barrier.Barrier`.
The result is ``ok`` only when all succeeded; otherwise it names the members that failed. Other
procedures use it as a gate with :func:`require_etcd_backup` (a child workflow that fails the
parent's step when incomplete). Before the first snapshot the kit checks its preconditions
(:func:`workflows.etcd.preconditions.backup_preconditions`: ``etcdctl`` and ``etcdutl`` on every
member's host); a failed one ends the run ``refused`` with one line per problem, and ``dry_run``
ends ``dry-run`` with every check's result. The kit's operator surface applies: ``status`` shows the barrier;
``pause`` before the snapshots start holds them; ``abort`` then ends the run as aborted. An
incomplete backup lists the snapshot files it did write in ``left_changed`` (``host <member>``).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

with workflow.unsafe.imports_passed_through():
    from activities.etcd.models import EtcdMember, SnapshotFiles, SnapshotInfo, SnapshotSaveInput
    from workflows.etcd.models import PROCEDURE_ETCD_BACKUP, EtcdBackupInput, EtcdBackupResult, EtcdBackupStatus
    from workflows.etcd.changes import backup_left_changed
    from workflows.etcd.preconditions import backup_preconditions
    from workflows.kit.barrier import Barrier
    from workflows.kit.control import Aborted
    from workflows.kit.procedure import ProcedureWorkflow

SNAPSHOT_SAVE = "etcd_snapshot_save"
SNAPSHOT_FILES = "etcd_snapshot_files"


def snapshot_path(member: EtcdMember, stamp: str) -> str:
    """``<backup_dir>/snapshot-<member>-<stamp>.db`` on the member's host."""
    return f"{member.effective_backup_dir}/snapshot-{member.name}-{stamp}.db"


@workflow.defn
class EtcdBackupWorkflow(ProcedureWorkflow):
    """Back up every member (input :class:`EtcdBackupInput`, result :class:`EtcdBackupResult`,
    status :class:`EtcdBackupStatus`). Fails with EtcdBackupIncomplete only when
    ``fail_on_incomplete``."""

    @workflow.init
    def __init__(self, input: EtcdBackupInput) -> None:
        self.kit_init(
            procedure=PROCEDURE_ETCD_BACKUP, noun="backup", input=input,
            status=EtcdBackupStatus(members=[m.name for m in input.members]), defer_status_attributes=True,
        )

    @workflow.run
    async def run(self, input: EtcdBackupInput) -> EtcdBackupResult:
        return await self.kit_run(lambda: self._run(input), EtcdBackupResult)

    async def _run(self, input: EtcdBackupInput) -> EtcdBackupResult:
        stamp = workflow.now().strftime("%Y%m%dT%H%M%SZ")
        retry = RetryPolicy(
            initial_interval=timedelta(seconds=1),
            maximum_interval=timedelta(seconds=5),
            maximum_attempts=input.attempts,
            non_retryable_error_types=["InvalidRestoreInput"],
        )

        lost: set[str] = set()  # members whose snapshot call timed out (its worker died, say): it may still be running

        async def snapshot(member: EtcdMember) -> SnapshotInfo:
            try:
                return await _snapshot(member)
            except ActivityError as err:
                if isinstance(err.cause, TemporalTimeoutError):
                    lost.add(member.name)
                raise

        async def _snapshot(member: EtcdMember) -> SnapshotInfo:
            return await workflow.execute_activity(
                SNAPSHOT_SAVE,
                SnapshotSaveInput(
                    member=member, path=snapshot_path(member, stamp), timeouts=input.timeouts,
                    timeout_seconds=input.snapshot_timeout_seconds,
                ),
                result_type=SnapshotInfo,
                # Three host commands (mkdir, snapshot save, snapshot status), each after its
                # backend's start-up (a debug pod's, as `oc debug node/` backups do).
                start_to_close_timeout=timedelta(seconds=input.snapshot_timeout_seconds + 30 + 3 * member.host.startup_seconds()),
                heartbeat_timeout=timedelta(seconds=input.calls.heartbeat_seconds),
                retry_policy=retry,
            )

        barrier = Barrier("backup", input.members, snapshot, key=lambda m: m.name,
                          board=self.kit_status.barriers, on_change=self.touch)
        try:
            await self.control.safe_point()
        except Aborted as ab:
            return self.kit_end(EtcdBackupResult, "aborted", f"aborted before any snapshot: {ab.reason}", ok=False)
        # Before the first snapshot file: the binaries on every host (a failed check refuses the
        # run through the kit, outcome refused, nothing written; a dry run lists every check).
        checked = await self.kit_preflight(backup_preconditions(input.members), refuse=not input.dry_run)
        if input.dry_run:
            return self.kit_end(EtcdBackupResult, "dry-run",
                                f"dry run: would snapshot {len(input.members)} member(s) ({', '.join(m.name for m in input.members)})"
                                + (f"; refused today: {len(checked.failed)} precondition(s) failed" if checked.failed else ""),
                                ok=checked.ok)
        outcome = await barrier.run()
        failed = outcome.failed
        if failed:
            message = f"backup failed on {len(failed)} of {len(input.members)} member(s): {', '.join(failed)}"
            workflow.logger.warning(message)
        else:
            message = "all members backed up"
        # outcome "incomplete" ends the run with status phase failed (kit_outcome_phase). It says
        # which snapshot files it left on the hosts (issue 39): the checked ones, and what a failed
        # member's snapshot still wrote (its command may have run on after its activity failed).
        left = []
        if failed:
            leftovers = {}
            for member in input.members:
                if member.name in failed:
                    path = snapshot_path(member, stamp)
                    leftovers[member.name] = await _read_leftovers(member, path, input)
                    if member.name in lost and not leftovers[member.name]:
                        # Its command may still be running on the host (bounded there by
                        # snapshot_timeout_seconds): what it writes after this read is named too.
                        leftovers[member.name] = [f"{path} or {path}.part (unknown: its lost snapshot command may still write it)"]
            left = backup_left_changed(list(outcome.done.values()), leftovers)
        if left:
            message += "; left changed: " + "; ".join(i.line() for i in left)
            self.kit_status.left_changed = left
        result = self.kit_end(EtcdBackupResult, "incomplete" if failed else "completed", message, ok=not failed,
                              snapshots=list(outcome.done.values()), failed=failed, **({"left_changed": left} if left else {}))
        if failed and input.fail_on_incomplete:
            # The run template fails the workflow with this error; its details carry the result.
            raise ApplicationError(message, result.model_dump(mode="json"), type="EtcdBackupIncomplete", non_retryable=True)
        return result


async def _read_leftovers(member: EtcdMember, path: str, input: EtcdBackupInput) -> list[str]:
    try:
        found: SnapshotFiles = await workflow.execute_activity(
            SNAPSHOT_FILES, SnapshotSaveInput(member=member, path=path, timeouts=input.timeouts), result_type=SnapshotFiles,
            start_to_close_timeout=timedelta(seconds=30 + member.host.startup_seconds()),
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3),
        )
    except ActivityError:
        return [f"{path} (unknown: the host did not answer)"]
    return found.files


async def require_etcd_backup(input: EtcdBackupInput, *, workflow_id: str | None = None) -> EtcdBackupResult:
    """From inside another workflow: run :class:`EtcdBackupWorkflow` as a child and return its
    result when every member is backed up; raise a non-retryable ``ApplicationError`` (type
    EtcdBackupIncomplete, naming the failed members) otherwise, so nothing after the barrier
    runs. ``workflow_id`` default: ``<parent id>/etcd-backup``."""
    wid = workflow_id or f"{workflow.info().workflow_id}/etcd-backup"
    result: EtcdBackupResult = await workflow.execute_child_workflow(
        EtcdBackupWorkflow.run, input.model_copy(update={"fail_on_incomplete": False}), id=wid,
        result_type=EtcdBackupResult, static_summary="etcd backup barrier: a snapshot of every member",
    )
    if not result.ok:
        raise ApplicationError(result.message, type="EtcdBackupIncomplete", non_retryable=True)
    return result
