"""EtcdQuorumRestoreWorkflow: bring an etcd cluster that lost quorum back to all its members (R3).

Order (R3, and the etcd v3.5 disaster-recovery guide):

1. preflight (read-only): ``etcd_preflight_restore`` (the survivor's data or the snapshot,
   stop/start methods), then every precondition through the kit
   (:func:`workflows.etcd.preconditions.restore_preconditions`: binaries on each host, each
   member's peer and client port free of anything but etcd, the host problems): a failed one
   ends the run ``refused`` before anything is stopped; ``dry_run`` ends ``dry-run`` there,
   listing every check (no lease taken);
2. gate ``stop-members``, then stop every member;
3. survivor: ``force-new-cluster`` — start it on its own data with ``--force-new-cluster``,
   wait healthy, fix its peer URL (``member update``), restart it without the flag; or
   ``snapshot-restore`` — gate ``move-data/<survivor>``, move its data dir aside,
   ``etcdutl snapshot restore`` into a fresh data dir, start it, fix its peer URL;
4. every other member, one at a time: ``member add`` (never twice), gate ``move-data/<name>``,
   move its old data dir aside, start it with the printed ``ETCD_INITIAL_CLUSTER`` and
   ``--initial-cluster-state existing``, wait until it has joined and is healthy;
5. verify: every endpoint healthy, the member list exactly the input, one raft index.

Each member step first reads the member list and health, so a member that has already joined
(a resumed or re-run restore) is left alone. Data is only ever moved aside, with a suffix from
the workflow's start time. The ``status`` query gives the step, the member, what it waits for
and since when; ``approve``/``reject`` decide gates (validated, attributed, in history); a gate's
timeout applies the declared ``gates.timeout_outcome``. ``pause`` holds the restore before its next
step and ``abort`` stops it there (outcome aborted; nothing is undone); an abort also ends a wait
for a member to become healthy at once (the wait is cancelled: it only reads). A restore that
stops short (aborted, rejected, failed) reads the cluster back and lists in ``left_changed``
exactly what differs from what its preflight read (:func:`workflows.etcd.changes.restore_left_changed`:
members running or stopped, member-list entries, data dirs moved aside), each with the command to
go on. The restore holds the lease ``etcd/<cluster>`` while it runs (runs recorded before the kit
take none).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.etcd.models import (
        ClusterStatus,
        ClusterStatusInput,
        EtcdMember,
        MemberActionResult,
        MemberAddInput,
        MemberAddResult,
        MemberInput,
        MemberUpdateInput,
        MoveAsideInput,
        MoveAsideResult,
        PreflightRestoreInput,
        PreflightRestoreResult,
        SnapshotRestoreInput,
        StartMemberInput,
        StartOverrides,
        VerifyInput,
        VerifyResult,
        WaitHealthyInput,
    )
    from workflows.etcd.models import (
        PROCEDURE_ETCD_RESTORE,
        EtcdRestoreInput,
        EtcdRestoreResult,
        MemberRestoreState,
        RestoreStatus,
        RestoreStep,
        RestoreStrategy,
    )
    from workflows.etcd.changes import answering, restore_left_changed
    from workflows.etcd.preconditions import restore_preconditions
    from workflows.kit import calls as acts
    from workflows.kit.control import Aborted
    from workflows.kit.models import ChangedItem, Gate, GateState, failure_message
    from workflows.kit.procedure import ProcedureWorkflow
    from workflows.kit.scopes import subsystem_scope

#: Errors no retry can fix: a person must look.
NON_RETRYABLE = ["InvalidRestoreInput", "DataDirMoveRefused", "MemberRunning", "StashConflict"]
#: workflow.patched ID of the restore's kit changes (lease etcd/<cluster>, LockkeeperStatus).
PATCH_KIT = "etcd-restore-kit"
#: The read-back of a restore that stopped short: this many readings, this many seconds apart,
#: until every member it started answers (a member started just before an abort).
READ_BACK_TRIES = 3
READ_BACK_INTERVAL_SECONDS = 1.0


class _Rejected(Exception):
    def __init__(self, gate: Gate) -> None:
        super().__init__(gate.id)
        self.gate = gate


@workflow.defn
class EtcdQuorumRestoreWorkflow(ProcedureWorkflow):
    """Restore quorum (see module docstring). Input :class:`EtcdRestoreInput`, result
    :class:`EtcdRestoreResult`, status :class:`RestoreStatus`. Ends ``refused`` when a
    precondition fails; fails (non-retryable) with LeaseHeld when another procedure holds
    ``etcd/<cluster>`` (or the whole cluster), or with the type of a non-retryable activity error."""

    @workflow.init
    def __init__(self, input: EtcdRestoreInput) -> None:
        self._in = input
        self._status = RestoreStatus(
            strategy=input.strategy,
            survivor=input.survivor_name,
            members={m.name: MemberRestoreState(name=m.name) for m in input.members},
            started_at=workflow.now(),
            since=workflow.now(),
        )
        self.kit_init(
            procedure=PROCEDURE_ETCD_RESTORE, noun="restore", input=input, status=self._status, pause_on_reject=False,
            reject_note="restore stops", defer_status_attributes=True,
        )
        self._suffix = "lockkeeper-" + workflow.info().start_time.strftime("%Y%m%dT%H%M%SZ")
        self._retry = RetryPolicy(
            initial_interval=timedelta(seconds=1),
            backoff_coefficient=2.0,
            maximum_interval=timedelta(seconds=10),
            non_retryable_error_types=NON_RETRYABLE,
        )
        #: What the preflight read (the "before" of ``left_changed``), the members this run
        #: started, and whether it changed anything yet (a member stop was sent).
        self._before: ClusterStatus | None = None
        self._started: set[str] = set()
        self._touched = False
        self._left: list[ChangedItem] = []

    # --- helpers --------------------------------------------------------------------------------------

    async def _step(self, step: RestoreStep, member: str | None, waiting_for: str, *, safe_point: bool = True) -> None:
        """Enter ``step``: first a safe point (pause holds here, abort raises Aborted)."""
        if safe_point:
            await self.control.safe_point()
        self._status.step, self._status.member, self._status.waiting_for = step, member, waiting_for
        self._status.since = workflow.now()
        self.touch()

    def _log(self, line: str) -> None:
        self._status.log.append(f"{workflow.now():%H:%M:%S} {line}")
        workflow.logger.info("etcd restore: %s", line)

    def _member_state(self, name: str, state: str, **fields: Any) -> None:
        ms = self._status.members[name]
        ms.state = state
        for k, v in fields.items():
            setattr(ms, k, v)

    async def _act(self, name: str, arg: Any, result_type: type, *, seconds: float = 30.0) -> Any:
        return await acts.call_with(name, arg, result_type, retry=self._retry, seconds=seconds,
                                    heartbeat_seconds=self._in.calls.heartbeat_seconds)

    async def _gate(self, gate_id: str, what: str) -> None:
        """Wait for approval of a destructive step (or pass at once with ``auto_approve``);
        raise _Rejected (rejected, or timed out with outcome reject) or Aborted."""
        gate = await self.gates.approval(
            gate_id, what, timeout_seconds=self._in.gates.timeout_seconds,
            timeout_outcome=self._in.gates.timeout_outcome, auto_approve=self._in.auto_approve,
        )
        if gate.id in self.gates.passed:
            return
        if self.control.abort:
            raise Aborted(self.control.abort_reason)
        raise _Rejected(gate)

    async def _start_member(self, member: EtcdMember, overrides: StartOverrides | None = None) -> None:
        """``etcd_start_member`` (with ``overrides``); the member counts as started by this run."""
        self._started.add(member.name)
        await self._act("etcd_start_member", StartMemberInput(member=member, overrides=overrides or StartOverrides()), MemberActionResult)

    def _status_input(self, via: EtcdMember, endpoints: list[str]) -> ClusterStatusInput:
        return ClusterStatusInput(via=via, members=self._in.members, endpoints=endpoints, timeouts=self._in.timeouts)

    async def _wait_healthy(self, member: EtcdMember, via: EtcdMember, *, joined: bool) -> None:
        """Wait until ``member`` is healthy (and joined); an abort meanwhile cancels the wait (it
        only reads) and raises Aborted, so a member that never comes up does not hold the abort."""
        await self._step(RestoreStep.WAIT_JOINED, member.name, f"member {member.name} healthy" + (" and joined" if joined else ""))
        handle = workflow.start_activity(
            "etcd_wait_member_healthy",
            WaitHealthyInput(member=member, via=via, members=self._in.members, joined=joined,
                             timeout_seconds=self._in.join_timeout_seconds, timeouts=self._in.timeouts),
            result_type=ClusterStatus, start_to_close_timeout=timedelta(seconds=self._in.join_timeout_seconds + 30),
            heartbeat_timeout=timedelta(seconds=self._in.calls.heartbeat_seconds), retry_policy=self._retry,
            summary=f"etcd_wait_member_healthy · {member.name}",
        )
        control = self.control
        await workflow.wait_condition(lambda: handle.done() or control.abort)
        if not handle.done():
            handle.cancel()
            raise Aborted(control.abort_reason or "aborted")
        await handle

    # --- main flow --------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: EtcdRestoreInput) -> EtcdRestoreResult:
        return await self.kit_run(lambda: self._body(input), EtcdRestoreResult)

    async def _body(self, input: EtcdRestoreInput) -> EtcdRestoreResult:
        """The lease, then the restore; a rejected gate or an abort ends it with what had been
        done (nothing is undone); a failed step fails it naming the step and member."""
        try:
            if not input.dry_run and workflow.patched(PATCH_KIT):  # a dry run writes nothing and takes no lease
                await self.leases.acquire([subsystem_scope("etcd", input.cluster)])
                self._status.leases = list(self.leases.held)
            return await self._run(input)
        except _Rejected as rej:
            g = rej.gate
            await self._read_back()
            return self._result(
                "rejected",
                f"gate {g.id} {'timed out' if g.state == GateState.TIMED_OUT else f'rejected by {g.decided_by}'}; "
                f"stopped before it (last steps: {self._done()}){self._left_tail()}", left_changed=self._left,
            )
        except Aborted as ab:
            await self._read_back()
            return self._result("aborted", f"aborted before {self._status.step}: {ab.reason} (last steps: {self._done()})"
                                           f"{self._left_tail()}", left_changed=self._left)
        except ActivityError as err:
            await self._read_back()
            if isinstance(err.cause, ApplicationError):
                raise ApplicationError(
                    f"{self._status.step} ({self._status.member or 'all'}): {failure_message(err)}",
                    type=err.cause.type, non_retryable=True,
                ) from err
            raise

    def _done(self) -> str:
        return "; ".join(self._status.log[-3:]) or "nothing changed yet"

    def _left_tail(self) -> str:
        return "; left changed: " + "; ".join(i.line() for i in self._left) if self._left else "; nothing was changed"

    async def _read_back(self) -> None:
        """As the restore stops short: read the cluster back (through the survivor) until every
        member this run started answers ``endpoint status``, at most :data:`READ_BACK_TRIES` readings, and
        set what stays changed against the preflight's reading (:func:`restore_left_changed`;
        also ``status.left_changed``). Nothing is read when nothing was changed yet; an
        unreadable cluster leaves only what the run knows it did (data dirs moved aside)."""
        if not self._touched:
            return
        survivor = next(m for m in self._in.members if m.name == self._in.survivor_name)
        after: ClusterStatus | None = None
        once = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=2)
        for attempt in range(READ_BACK_TRIES):
            try:
                after = await acts.call_with("etcd_cluster_status", self._status_input(survivor, [m.client_url for m in self._in.members]),
                                             ClusterStatus, retry=once, seconds=30)
            except ActivityError:
                after = None
            started = [m for m in self._in.members if m.name in self._started]
            if after is not None and all(answering(after, m) for m in started):
                break
            if attempt + 1 < READ_BACK_TRIES:
                await workflow.sleep(READ_BACK_INTERVAL_SECONDS)
        moved = {n: s.moved_to for n, s in self._status.members.items() if s.moved_to}
        command = f"lockkeeper start etcd-restore --members FILE --strategy {self._in.strategy} --survivor {survivor.name}"
        self._left = restore_left_changed(self._in.members, self._before, after, moved, undo=command)
        if after is None:
            self._log("read-back: the cluster did not answer; left changed lists only the data dirs moved aside")
        self._status.left_changed = list(self._left)
        self.touch()

    def kit_left_changed(self) -> list[ChangedItem]:
        """What this restore leaves changed (set by its read-back as it stops short)."""
        return list(self._left)

    def kit_result_fields(self) -> dict[str, Any]:
        """The restore's own result fields: strategy, survivor, each member's state, the log and
        the duration (seconds)."""
        now = workflow.now()
        return {
            "strategy": self._in.strategy, "survivor": self._in.survivor_name,
            "members": {k: v.model_copy() for k, v in self._status.members.items()}, "log": list(self._status.log),
            "duration_seconds": (now - (self._status.started_at or now)).total_seconds(),
        }

    def _result(self, outcome: str, message: str, verification: VerifyResult | None = None,
                left_changed: list[ChangedItem] | None = None) -> EtcdRestoreResult:
        """The result (:meth:`kit_end`); the run template sets the phase from ``outcome``
        (``unverified`` ends failed), releases the lease and waits for the handlers."""
        more = {"left_changed": left_changed} if left_changed else {}
        return self.kit_end(EtcdRestoreResult, outcome, message, verification=verification, **more)

    async def _run(self, input: EtcdRestoreInput) -> EtcdRestoreResult:
        members = input.members
        survivor = next(m for m in members if m.name == input.survivor_name)
        others = [m for m in members if m.name != survivor.name]

        await self._step(RestoreStep.PREFLIGHT, None, "read-only checks on every host")
        pre: PreflightRestoreResult = await self._act(
            "etcd_preflight_restore",
            PreflightRestoreInput(members=members, survivor=survivor.name, strategy=str(input.strategy), snapshot=input.snapshot),
            PreflightRestoreResult, seconds=60,
        )
        # Every precondition through the kit before the first stop: a failed one ends the run
        # refused (one line per problem, nothing stopped); a dry run lists every check and ends.
        checked = await self.kit_preflight(
            restore_preconditions(members, survivor.name, input.strategy == RestoreStrategy.SNAPSHOT_RESTORE, pre.problems),
            refuse=not input.dry_run)
        if input.dry_run:
            plan = ("start it with --force-new-cluster" if input.strategy == RestoreStrategy.FORCE_NEW_CLUSTER
                    else f"restore {input.snapshot} into its data dir")
            return self._result("dry-run", f"dry run: would stop {len(members)} member(s), {plan} on survivor {survivor.name}, "
                                           f"then re-add {', '.join(m.name for m in others) or 'no other member'}"
                                + (f"; refused today: {len(checked.failed)} precondition(s) failed" if checked.failed else ""))
        self._log(f"preflight ok; member list before: {[m.name for m in pre.status.members or []] if pre.status else '?'}")
        self._before = pre.status

        await self._gate("stop-members", f"stop all {len(members)} etcd members ({', '.join(m.name for m in members)})")
        await self._step(RestoreStep.STOP_MEMBERS, None, "every member stopped")
        self._touched = True
        for m in members:
            r: MemberActionResult = await self._act(
                "etcd_stop_member", MemberInput(member=m, timeout_seconds=input.stop_timeout_seconds),
                MemberActionResult, seconds=input.stop_timeout_seconds,
            )
            self._member_state(m.name, "stopped", detail=r.detail)
        self._log("all members stopped")

        if input.strategy == RestoreStrategy.FORCE_NEW_CLUSTER:
            await self._force_new_cluster(survivor)
        else:
            await self._restore_snapshot(survivor, input.snapshot or "")

        for m in others:
            await self._rejoin(m, survivor)

        await self._step(RestoreStep.VERIFY, None, "all endpoints healthy, exact member list, one raft index")
        verification: VerifyResult = await self._act(
            "etcd_verify_cluster",
            VerifyInput(via=survivor, members=members, timeout_seconds=input.verify_timeout_seconds, timeouts=input.timeouts),
            VerifyResult, seconds=input.verify_timeout_seconds,
        )
        await self._step(RestoreStep.DONE, None, "nothing", safe_point=False)
        if verification.ok:
            self._log(f"verified: {len(members)} members healthy at raft index {verification.raft_index}")
            return self._result("completed", f"quorum restored: {len(members)}/{len(members)} members healthy", verification)
        return self._result("unverified",
                                "restore finished but verification failed: " + "; ".join(verification.problems), verification)

    async def _fix_peer_url(self, survivor: EtcdMember) -> None:
        await self._step(RestoreStep.FIX_PEER_URL, survivor.name, f"member update to {survivor.peer_url}")
        r: MemberActionResult = await self._act(
            "etcd_member_update", MemberUpdateInput(via=survivor, member=survivor, timeouts=self._in.timeouts), MemberActionResult
        )
        self._log(f"{survivor.name}: {r.detail}")

    async def _force_new_cluster(self, survivor: EtcdMember) -> None:
        await self._step(RestoreStep.FORCE_NEW_CLUSTER, survivor.name, f"{survivor.name} started with --force-new-cluster")
        await self._start_member(survivor, StartOverrides(force_new_cluster=True))
        await self._wait_healthy(survivor, survivor, joined=True)
        self._member_state(survivor.name, "restored", detail="new cluster forced from its own data")
        self._log(f"{survivor.name}: new one-member cluster forced from its data")
        await self._fix_peer_url(survivor)
        await self._step(RestoreStep.RESTART_SURVIVOR, survivor.name, f"{survivor.name} restarted without --force-new-cluster")
        await self._act("etcd_stop_member", MemberInput(member=survivor, timeout_seconds=self._in.stop_timeout_seconds),
                        MemberActionResult, seconds=self._in.stop_timeout_seconds)
        await self._start_member(survivor)
        await self._wait_healthy(survivor, survivor, joined=True)
        self._member_state(survivor.name, "joined")
        self._log(f"{survivor.name}: restarted without --force-new-cluster, healthy")

    async def _restore_snapshot(self, survivor: EtcdMember, snapshot: str) -> None:
        await self._gate(f"move-data/{survivor.name}", f"move {survivor.data_dir} aside on {survivor.name} (restored from {snapshot})")
        await self._step(RestoreStep.MOVE_DATA, survivor.name, f"{survivor.data_dir} moved aside")
        moved: MoveAsideResult = await self._act(
            "etcd_move_data_aside", MoveAsideInput(member=survivor, suffix=self._suffix), MoveAsideResult
        )
        self._member_state(survivor.name, "stopped", moved_to=moved.moved_to)
        await self._step(RestoreStep.RESTORE_SNAPSHOT, survivor.name, f"etcdutl snapshot restore {snapshot}")
        await self._act("etcd_snapshot_restore",
                        SnapshotRestoreInput(member=survivor, snapshot=snapshot, attempt_suffix=self._suffix),
                        MemberActionResult, seconds=120)
        self._log(f"{survivor.name}: {snapshot} restored into {survivor.data_dir}")
        await self._step(RestoreStep.START_MEMBER, survivor.name, f"{survivor.name} started on the restored data")
        await self._start_member(survivor)
        await self._wait_healthy(survivor, survivor, joined=True)
        await self._fix_peer_url(survivor)
        self._member_state(survivor.name, "joined", detail=f"restored from {snapshot}")

    async def _rejoin(self, m: EtcdMember, survivor: EtcdMember) -> None:
        await self._step(RestoreStep.ADD_MEMBER, m.name, f"member list and health before adding {m.name}")
        st: ClusterStatus = await self._act(
            "etcd_cluster_status", self._status_input(survivor, [survivor.client_url, m.client_url]), ClusterStatus
        )
        info = st.member_with_peer(m.peer_url)
        if info is not None and info.name == m.name and st.healthy(m.client_url):
            self._member_state(m.name, "joined", id=info.id, detail="already a healthy member")
            self._log(f"{m.name}: already a healthy member ({info.id}); left alone")
            return
        await self._step(RestoreStep.ADD_MEMBER, m.name, f"member add {m.name} (retried while etcd says unhealthy cluster)")
        added: MemberAddResult = await self._act(
            "etcd_member_add",
            MemberAddInput(via=survivor, member=m, unhealthy_retry_seconds=self._in.member_add_retry_seconds,
                           timeouts=self._in.timeouts),
            MemberAddResult, seconds=self._in.member_add_retry_seconds,
        )
        self._member_state(m.name, "added", id=added.id)
        self._log(f"{m.name}: {'already in member list' if added.already_present else 'member add'} as {added.id}")
        if info is None or not info.started:
            await self._gate(f"move-data/{m.name}", f"move {m.data_dir} aside on {m.name} before it rejoins empty")
            await self._step(RestoreStep.MOVE_DATA, m.name, f"{m.data_dir} moved aside")
            moved: MoveAsideResult = await self._act(
                "etcd_move_data_aside", MoveAsideInput(member=m, suffix=self._suffix), MoveAsideResult
            )
            self._member_state(m.name, "added", moved_to=moved.moved_to)
            self._log(f"{m.name}: {moved.detail}")
        await self._step(RestoreStep.START_MEMBER, m.name, f"{m.name} started with --initial-cluster-state existing")
        await self._start_member(m, StartOverrides(initial_cluster=added.initial_cluster, initial_cluster_state="existing"))
        await self._wait_healthy(m, survivor, joined=True)
        self._member_state(m.name, "joined")
        self._log(f"{m.name}: joined and healthy")
