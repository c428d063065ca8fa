"""The operator surface every procedure exposes the same way (DESIGN.md "Procedure").

:class:`ProcedureWorkflow` carries the handlers the CLI relies on for every procedure type:
query ``status``; updates ``approve``, ``reject``, ``pause``, ``resume``, ``abort`` with their
validators (a refused update never reaches history; every operator update is first checked
against its deadline, identities and withdrawal, :func:`workflows.kit.control.check_in_time`); signals
``withdraw_decision`` (:mod:`workflows.kit.decisions`) and ``lease_denied`` (a lease's answer,
see :mod:`workflows.kit.lease`). :class:`NodeProcedureWorkflow` adds ``skip_node``,
``retry_node``, ``hold_node``, ``release_node`` (:mod:`workflows.kit.holds`), ``decide`` and the
``node_progress`` signal, delegating to hooks the procedure
implements. Handler names, messages and validator rules are the MachineConfig rollout's.

A procedure subclasses one of them, decorates itself with ``@workflow.defn`` (its class name is
its workflow type) and calls :meth:`ProcedureWorkflow.kit_init` from its ``@workflow.init``.
Everything else (gates, control, leases, health waits, barriers, records, host steps) is a
component the procedure uses: ``self.control``, ``self.gates``, ``self.leases``.

Hooks a procedure may override (plain methods, never the handlers themselves: the SDK finds
handlers by their decorators, and an undecorated override would hide one):

- ``procedure_status()`` → the status model instance the ``status`` query returns;
- ``on_abort(identity)`` → pass an abort on (e.g. to node runs);
- node procedures: ``check_skip_node`` / ``on_skip_node``, ``check_retry_node`` /
  ``on_retry_node``, ``check_hold_node`` / ``on_hold_node``, ``check_release_node`` /
  ``on_release_node``, ``check_decide`` / ``on_decide``, ``on_node_progress``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from workflows.kit import metrics as lk_metrics
    from workflows.kit import calls as acts
    from workflows.kit.alerts import AlertGate
    from workflows.kit.batches import NodeBatches
    from workflows.kit.board import NodeBoard
    from workflows.kit.control import Aborted, Control, RevertRequested, check_in_time
    from workflows.kit.decisions import WITHDRAW_SIGNAL, WithdrawInput, Withdrawals
    from workflows.kit.details import DetailsPublisher
    from workflows.kit.gates import GateUpdates, Gates, GateNotPassed
    from workflows.kit.holds import NOT_SUPPORTED as HOLDS_NOT_SUPPORTED
    from workflows.kit.host import sweep_debug_pods
    from workflows.kit.inputs import AlertGatePolicy, GatePolicy, ProcedureInput
    from workflows.kit.lease import Leases
    from workflows.kit.notify import ProcedureNotifier, wrap_run
    from workflows.kit.preflight import Preflight, PreflightOutcome
    from workflows.kit.records import Records
    from workflows.kit.windows import parse_windows
    from workflows.kit.report import (CHILD_REPORT_SIGNAL, PARENT_ABORT_SIGNAL, PARENT_PAUSE_SIGNAL, PARENT_RESUME_SIGNAL, ChildReport,
                                      ReportInbox, Reporter, summary)
    from workflows.kit.models import (
        SA_CLUSTER,
        SA_POOLS,
        SA_PROCEDURE,
        SA_STATUS,
        ApprovalRules,
        ChangedItem,
        ControlInput,
        ControlResult,
        DecideInput,
        DecideResult,
        GateState,
        HoldInput,
        LeaseInfo,
        NodeControlInput,
        NodeProgress,
        ProcedurePhase,
        ProcedureResult,
        ProcedureStatus,
        ReleaseInput,
        RevertAnswer,
        RevertInput,
        failure_message,
    )

SA_KEY_CLUSTER = SearchAttributeKey.for_keyword(SA_CLUSTER)
SA_KEY_PROCEDURE = SearchAttributeKey.for_keyword(SA_PROCEDURE)
SA_KEY_STATUS = SearchAttributeKey.for_keyword(SA_STATUS)
SA_KEY_POOLS = SearchAttributeKey.for_keyword_list(SA_POOLS)



R = TypeVar("R", bound=ProcedureResult)

#: ApplicationError types that mean "refused before any write": the run ends with outcome
#: ``refused`` and its problems, one line each (the CLI exits 2), never as a failed workflow.
REFUSAL_TYPES = frozenset({"PreconditionFailed", "InvalidPlan", "InvalidInput", "PlanBlocked"})
#: What a refusal's headline adds for its type (``refused before any change (WHY): ...``).
REFUSAL_WHY = {"PlanBlocked": "the plan is blocked"}

#: What :meth:`ProcedureWorkflow.kit_run` ends as a failed run: an ApplicationError the body
#: raised, or an activity or child workflow that failed and the body did not handle.
FAILURES = (ApplicationError, ActivityError, ChildWorkflowError)

#: Base phase of each outcome a run ends with.
OUTCOME_PHASE = {
    "completed": ProcedurePhase.DONE, "dry-run": ProcedurePhase.DONE, "checked": ProcedurePhase.DONE,
    "reverted": ProcedurePhase.DONE, "aborted": ProcedurePhase.ABORTED, "rejected": ProcedurePhase.REJECTED,
}


class ProcedureStopped(Exception):
    """Raised by a procedure's body that stops by a rule of its own (a GlusterFS volume down, a
    guard that does not hold, a lease held after a first write): not an abort, not a failure.
    :meth:`ProcedureWorkflow.kit_run` ends the run with ``outcome`` (``stopped``, ``refused``),
    ``reason`` as the message and what stays changed (:meth:`ProcedureWorkflow.kit_left_changed`)
    appended and in ``left_changed``, the commands to go on, and ``fields`` on the result (e.g. the
    holder of a lease); :meth:`ProcedureWorkflow.kit_rule_stopped` builds that ending."""

    def __init__(self, reason: str, *, outcome: str = "stopped", **fields: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.outcome = outcome
        self.fields = fields


def refusal_lines(err: ApplicationError) -> list[str]:
    """A refusal's problems: the non-empty lines of its message."""
    return [ln for ln in (err.message or str(err)).splitlines() if ln.strip()]


class ProcedureWorkflow(GateUpdates):
    """Base of every procedure workflow (see the module doc). Not a workflow by itself."""

    #: The procedure records what it changes before it writes (:mod:`workflows.kit.records`), so
    #: the kit's ``revert`` can restore it; False: ``revert`` is refused saying so.
    kit_keeps_records: bool = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        wrap_run(cls)  # the run's last webhook notification (workflows.kit.notify)

    # --- set-up ----------------------------------------------------------------------------------

    def kit_init(
        self,
        *,
        procedure: str,
        noun: str,
        status: ProcedureStatus,
        input: ProcedureInput | None = None,
        cluster: str | None = None,
        rules: ApprovalRules | None = None,
        search_attributes: bool | None = None,
        pause_on_reject: bool = True,
        reject_note: str | None = None,
        base_phase: str = ProcedurePhase.RUNNING,
        defer_status_attributes: bool = False,
        preflight: bool = False,
        alerts: AlertGatePolicy | None = None,
    ) -> None:
        """Create the components; call from the procedure's ``@workflow.init``.

        ``procedure``: the spec name (search attribute and lease holder); ``noun``: the word in
        messages ("rollout", "restore", "drain"); ``status``: the procedure's status model
        instance (the kit keeps ``gate_history``, ``phase``, ``paused_reason``,
        ``abort_requested`` and ``updated_at`` in it); ``search_attributes``: upsert
        LockkeeperStatus on phase changes; ``defer_status_attributes``: not before ``run``
        calls :meth:`kit_status_attributes` (or :meth:`kit_run` starts); ``pause_on_reject`` and
        ``reject_note`` ("rollout paused", "restore stops"): what a rejection does and says;
        ``alerts``: the alert gate's policy of a procedure whose input is not a
        :class:`ProcedureInput` (otherwise ``input.alerts``).
        """
        if input is not None:
            cluster = input.cluster if cluster is None else cluster
            rules = input.approvals if rules is None else rules
            search_attributes = input.search_attributes if search_attributes is None else search_attributes
        assert cluster is not None and rules is not None and search_attributes is not None, "kit_init needs input or the three"
        #: Every gate's policy (:meth:`Gates.step`): the input's, or none.
        self.gate_policy: GatePolicy = input.gates if input is not None else GatePolicy()
        #: Activity timeouts of this run (:mod:`workflows.kit.calls`).
        self.timeouts = acts.Timeouts(input.calls.short_call_seconds, input.calls.heartbeat_seconds) if input is not None else acts.DEFAULT_TIMEOUTS
        self.kit_procedure = procedure
        self.kit_noun = noun
        self.kit_cluster = cluster
        self.kit_status = status
        self.kit_reject_note = reject_note or f"{noun} paused"
        self._kit_sa_wanted = search_attributes
        self._kit_sa = search_attributes and not defer_status_attributes
        self._kit_sa_status: str | None = None
        self.control = Control(on_change=self.touch, on_abort=self.on_abort, base_phase=base_phase, noun=noun)
        self.gates = Gates(self.control, rules, status.gate_history, noun=noun, pause_on_reject=pause_on_reject)
        self.leases = Leases(workflow.info().workflow_id, procedure)
        self._kit_details = DetailsPublisher()
        self.kit_withdrawals = getattr(self, "kit_withdrawals", None) or Withdrawals()
        self.kit_notifier = ProcedureNotifier(status, noun)
        #: The records of what this run changed (:mod:`workflows.kit.records`).
        self.records = Records(board=status.records, on_change=self.touch, timeouts=self.timeouts)
        #: The latest report of each child (:mod:`workflows.kit.report`).
        self.inbox = ReportInbox()
        #: The Prometheus alert gate before each node, batch and phase (None: the input has none).
        self.alerts: AlertGate | None = None
        policy = input.alerts if input is not None else alerts
        if policy is not None:
            self.alerts = AlertGate(policy, self.gates, self.control, board=status.health, on_change=self.touch,
                                    timeouts=self.timeouts, warnings=status.warnings,
                                    on_step=lambda step, doing: self.kit_step(step, doing))
        #: Reports to the parent procedure, if this one was started as a phase of another.
        self.kit_reporter = Reporter(input.report_to if input is not None else None,
                                     progress=input.report_progress if input is not None else True)
        if preflight:
            status.preflight = "pending"
        status.procedure = procedure
        status.workflow_id = workflow.info().workflow_id
        status.cluster = cluster
        status.started_at = status.started_at or workflow.now()

    def kit_status_attributes(self) -> None:
        """Start the LockkeeperStatus upserts (with ``search_attributes``) now, for a procedure
        that deferred them (``defer_status_attributes``) until its run began; :meth:`kit_run`
        does it for every procedure on the template."""
        self._kit_sa = self._kit_sa_wanted

    def kit_identity_attributes_enabled(self) -> bool:
        """Whether :meth:`kit_identity_attributes` upserts (``search_attributes`` of the input)."""
        return self._kit_sa_wanted

    def kit_identity_attributes(self, *, pools: list[str] | None = None, procedure_value: str | None = None) -> None:
        """Upsert LockkeeperCluster and LockkeeperProcedure (and LockkeeperPools) now. The
        starter sets them at start already; procedures whose stored histories have this upsert
        keep doing it (``procedure_value``: the value they upserted, when it differs from the
        spec name)."""
        if not self._kit_sa_wanted:
            return
        pairs = [SA_KEY_CLUSTER.value_set(self.kit_cluster), SA_KEY_PROCEDURE.value_set(procedure_value or self.kit_procedure)]
        if pools is not None:
            pairs.append(SA_KEY_POOLS.value_set(pools))
        workflow.upsert_search_attributes(pairs)

    # --- the preflight -------------------------------------------------------------------------------

    async def kit_preflight(self, preconditions: list[Any], *, task_queue: str | None = None, refuse: bool = True) -> PreflightOutcome:
        """Check every precondition the procedure declared (:mod:`workflows.kit.preflight`) before
        its first write: the results land in ``status.preconditions``, ``status.preflight``
        becomes ``passed`` or ``refused``. Refused (a check failed): raises the
        ``PreconditionFailed`` ApplicationError, which :meth:`kit_run` turns into the outcome
        ``refused`` with one line per problem (the CLI exits 2); a dry run passes ``refuse=False``
        and shows every check's result instead. Returns the outcome (its ``lines()`` for the dry
        run and the plan gate)."""
        outcome = await Preflight(board=self.kit_status.preconditions, on_change=self.touch, timeouts=self.timeouts,
                                  task_queue=task_queue, control=self.control).check(preconditions)
        self.kit_status.preflight = "passed" if outcome.ok else "refused"
        self.touch()
        if refuse:
            outcome.raise_if_failed()
        return outcome

    # --- the run template -----------------------------------------------------------------------------

    async def kit_run(self, body: Callable[[], Awaitable[R]], result_type: type[R]) -> R:
        """The one way a procedure's ``@workflow.run`` runs its body (DESIGN.md, "the safety
        contract"). Every procedure's run method is ``return await self.kit_run(lambda:
        self._run(input), XResult)``; ``body`` returns the result (built with :meth:`kit_end`)
        or raises, and this template ends the run the same way for every procedure:

        - :class:`Aborted` (an abort reached a safe point) and :class:`RevertRequested`: before
          the point of no return, restore what the records hold (:meth:`kit_undo`, each object
          read back) and end ``aborted`` / ``reverted`` with what was restored; past it (an
          abort), end ``aborted`` with what stays changed (:meth:`kit_left_changed`) and the
          commands to go on from there;
        - a refusal (an ApplicationError whose type is in :data:`REFUSAL_TYPES`, e.g. a failed
          precondition): end ``refused`` with one line per problem; nothing was written;
        - :class:`GateNotPassed` (a required gate rejected or timed out): as an abort;
        - :class:`ProcedureStopped` (the procedure's own rule stopped it): its outcome, with what
          stays changed (:meth:`kit_rule_stopped`);
        - any other ApplicationError, or a failed activity or child workflow (ActivityError,
          ChildWorkflowError, see :data:`FAILURES`): status phase ``failed``, its ``error`` (the
          innermost failure's message, :func:`failure_message`) and ``left_changed`` set, the
          parent told, then the workflow fails with the error (when something stays changed, an
          ApplicationError of the cause's type whose message names it).

        A body whose outcomes go beyond the kit's (``stopped``, ``unhealthy``, ``incomplete``)
        returns them from :meth:`kit_end` and maps each to its phase in
        :meth:`kit_outcome_phase`.

        In every case the leases are released, the parent gets the last report, and the run
        returns only once every update handler finished. Returns what ``body`` returned or
        the ending built here (a ``result_type`` with the kit's fields)."""
        self._kit_sa = self._kit_sa_wanted
        self.touch()
        try:
            try:
                result = await body()
            except (Aborted, GateNotPassed, RevertRequested) as stop:
                await self.kit_settle()
                result = await self.kit_stopped(stop, result_type)
            except ProcedureStopped as rule:
                await self.kit_settle()
                result = await self.kit_rule_stopped(rule, result_type)
            except FAILURES as err:
                await self.kit_settle()
                if not isinstance(err, ApplicationError) or err.type not in REFUSAL_TYPES:
                    raise
                result = self.kit_refused(err, result_type)
        except FAILURES as err:
            self.control.base_phase = ProcedurePhase.FAILED
            pods = await self.kit_sweep_debug_pods()
            left = self.kit_left_changed() + pods
            message = err.message if isinstance(err, ApplicationError) and err.message else failure_message(err)
            self.kit_status.error = message
            self.kit_status.left_changed = left
            self.touch()
            await self.kit_release()
            await self.kit_reporter.settle()
            if left:
                app = err if isinstance(err, ApplicationError) else err.cause if isinstance(err.cause, ApplicationError) else None
                raise ApplicationError(f"{message}; left changed: " + "; ".join(i.line() for i in left),
                                       *(app.details if app is not None else ()), type=app.type if app is not None else None,
                                       non_retryable=app.non_retryable if app is not None else True) from err
            raise
        pods = await self.kit_sweep_debug_pods()
        if pods:
            left = [*(getattr(result, "left_changed", None) or []), *pods]
            self.kit_status.left_changed = left
            result = result.model_copy(update={"left_changed": left, "next_commands": self.kit_next_commands(left),
                                               "message": f"{result.message}; left changed: " + "; ".join(i.line() for i in pods)})
        self.control.base_phase = self.kit_outcome_phase(result.outcome)
        self.touch()
        await self.kit_release()
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self.kit_reporter.settle()
        return result

    async def kit_sweep_debug_pods(self) -> list[ChangedItem]:
        """At every ending of :meth:`kit_run`: delete what this run's debug-pod commands left
        (a worker killed mid-command leaves its pod; :func:`workflows.kit.host.sweep_debug_pods`)
        and read back. The pods deleted are in ``status.warnings`` (one line); a sweep that could
        not run too. Returns the pods still there, each a :class:`ChangedItem` with its
        ``oc delete pod`` command, for ``left_changed``. Nothing for a run without debug pods."""
        sweep = await sweep_debug_pods(self.timeouts)
        if sweep.deleted:
            self.kit_status.warnings.append(f"deleted {len(sweep.deleted)} debug pod(s) this run's commands left: "
                                            + ", ".join(sweep.deleted))
        self.kit_status.warnings += sweep.problems
        if sweep.deleted or sweep.problems:
            self.touch()
        return list(sweep.left)

    async def kit_release(self) -> None:
        """Hook: release this run's leases as it ends (:meth:`kit_run`, every ending). Default
        :meth:`Leases.release`, one signal after another; a procedure holding several scopes
        may release them concurrently (one workflow task) and say so in its status."""
        await self.leases.release()

    def kit_outcome_phase(self, outcome: str) -> str:
        """Hook: the base phase a run that ended with ``outcome`` keeps (its ``status`` phase and
        LockkeeperStatus). Default :data:`OUTCOME_PHASE`, ``failed`` for an outcome it lacks; a
        procedure with outcomes of its own (e.g. ``stopped``) maps them here."""
        return OUTCOME_PHASE.get(outcome, ProcedurePhase.FAILED)

    async def kit_stopped(self, stop: Exception, result_type: type[R]) -> R:
        """End after an abort, a refused gate or a revert request (see :meth:`kit_run`)."""
        c = self.control
        reverting = isinstance(stop, RevertRequested)
        reason = getattr(stop, "reason", None) or str(stop)
        by = c.revert_by if reverting else c.abort_by
        if by and by not in reason:
            reason = f"{reason} (by {by})"
        if not reverting and not c.abort:  # a required gate did not pass: the run stops as if aborted
            c.abort, c.abort_reason = True, reason
        if reverting or (c.point_of_no_return is None and self.records.changed()):
            restored, problems = await self.kit_undo(reason)
            left = self.kit_left_changed()
            outcome = "reverted" if reverting else "aborted"
            what = ", restored" + (" and read back" if restored else "") if not problems and not left else ", NOT fully restored"
            message = f"{outcome}{what}: {reason}" + ("; " + "; ".join(problems) if problems else "")
            return self.kit_end(result_type, outcome, message, restored=restored, left_changed=left,
                                next_commands=self.kit_next_commands(left))
        left = self.kit_left_changed()
        tail = f"; left changed: {'; '.join(i.line() for i in left)}" if left else "; nothing was changed"
        if c.point_of_no_return is not None:
            tail = f" (past the point of no return: {c.point_of_no_return})" + tail
        return self.kit_end(result_type, "aborted", f"aborted: {reason}{tail}", left_changed=left,
                            next_commands=self.kit_next_commands(left))

    async def kit_rule_stopped(self, stop: ProcedureStopped, result_type: type[R]) -> R:
        """The ending of a :class:`ProcedureStopped`: ``stop.outcome``, its reason with what
        stays changed appended (``; left changed: ...``, also in ``status.left_changed`` and the
        result's ``left_changed``), the commands to go on, and ``stop.fields``. A procedure that
        marks its own state first (hosts not done) overrides this and calls it."""
        left = self.kit_left_changed()
        self.kit_status.left_changed = left
        message = stop.reason + ("; left changed: " + "; ".join(i.line() for i in left) if left else "")
        return self.kit_end(result_type, stop.outcome, message, left_changed=left, next_commands=self.kit_next_commands(left),
                            **stop.fields)

    def kit_refused(self, err: ApplicationError, result_type: type[R], why: str = "") -> R:
        """The ending of a refusal before any write (``err`` of a :data:`REFUSAL_TYPES` type,
        e.g. a failed precondition): outcome ``refused``, one problem per line of its message
        (``why`` is added to the headline, e.g. "the plan is blocked")."""
        lines = refusal_lines(err)
        why = why or REFUSAL_WHY.get(err.type or "", "")
        head = "refused before any change" + (f" ({why})" if why else "")
        if self.kit_status.preflight != "none":
            self.kit_status.preflight = "refused"  # `start` waits past pending, then exits 2
        return self.kit_end(result_type, "refused", f"{head}: " + "; ".join(lines), problems=lines)

    async def kit_undo(self, why: str) -> tuple[list[str], list[str]]:
        """Hook: restore what this run changed, last change first (an abort before the point of
        no return, or a revert). Default: every record written back and read back
        (:meth:`workflows.kit.records.Records.revert_all`). Returns ``(restored, problems)``:
        one line per thing restored and verified, one per thing that could not be. A procedure
        that changes more than records (a firewall rule, a cordon) adds its own undo steps and
        calls this."""
        return await self.records.revert_all()

    def kit_left_changed(self) -> list[ChangedItem]:
        """Hook: what stays changed now (records not reverted; a node procedure adds the nodes
        it left cordoned). Procedures with more (files on hosts, a network type) add theirs."""
        return self.records.left_changed(undo=self.kit_full_revert_command())

    def kit_full_revert_command(self) -> str | None:
        """The command that reverses this run's whole change after it ended, or None."""
        return f"lockkeeper revert {workflow.info().workflow_id} --full" if self.records.changed() else None

    def kit_next_commands(self, left: list[ChangedItem]) -> list[str]:
        """The exact commands to go on from an ending that left ``left`` changed."""
        return list(dict.fromkeys(i.undo for i in left if i.undo))

    async def kit_settle(self) -> None:
        """Hook: let work in flight finish before the run ends (a node window's children)."""

    def kit_result_fields(self) -> dict[str, Any]:
        """Hook: the procedure's own fields of every result :meth:`kit_end` builds (its plan,
        its nodes), so an ending the template builds carries them too."""
        return {}

    def kit_end(self, result_type: type[R], outcome: str, message: str, **fields: Any) -> R:
        """A result of ``result_type``: the procedure's own fields (:meth:`kit_result_fields`,
        then ``fields``) and the kit's: procedure, workflow ID, outcome, message, gate history,
        start and end times, the records still holding changes, and ``changed`` (what the run
        changed and left so: ``left_changed`` when given, else, for a run that reports to a
        parent, :meth:`kit_left_changed`; nothing for a refusal or a dry run)."""
        st = self.kit_status
        data = {
            "procedure": self.kit_procedure, "workflow_id": workflow.info().workflow_id, "outcome": outcome, "message": message,
            "gate_history": list(st.gate_history), "started_at": st.started_at, "finished_at": workflow.now(),
            "open_records": self.records.entries(),
        }
        if st.hold_history:  # only when the run held a node: results of runs without holds stay as they were
            data["hold_history"] = list(st.hold_history)
        if st.preconditions:
            data["preconditions"] = [r.model_copy() for r in st.preconditions]
        data.update(self.kit_result_fields())
        data.update(fields)
        if "changed" not in data:
            # A completed run lists what it did only for a parent that sums it (a cluster
            # upgrade's phase): a 2,000-node rollout's own result stays small.
            summed = outcome not in ("refused", "dry-run") and getattr(getattr(self, "kit_reporter", None), "parent_id", None) is not None
            data["changed"] = list(data["left_changed"]) if data.get("left_changed") else (
                self.kit_left_changed() if summed else [])
        return result_type(**data)

    # --- state ---------------------------------------------------------------------------------------

    def phase(self) -> str:
        """The phase now (base phase, paused, waiting-approval), see :meth:`Control.phase`."""
        return self.control.phase(gates_waiting=bool(self.gates.waiting()))

    def touch(self) -> None:
        """After every change: ``updated_at``, the phase in status, LockkeeperStatus when the
        phase changed (an event only on changes), the gates-waiting gauge, the UI's current
        details when their text changed, webhook notifications of what is new."""
        st = self.kit_status
        st.updated_at = workflow.now()
        phase = self.phase()
        current = st.phase
        st.phase = type(current)(phase) if isinstance(current, Enum) else phase  # keep the model's enum type
        st.paused_reason = self.control.paused_reason
        st.abort_requested = self.control.abort
        if self._kit_sa and self._kit_sa_status != phase:
            self._kit_sa_status = phase
            workflow.upsert_search_attributes([SA_KEY_STATUS.value_set(str(phase))])
        lk_metrics.record_gates_waiting(procedure=self.kit_procedure, cluster=self.kit_cluster, waiting=len(self.gates.waiting()))
        # The Temporal UI's live view (workflows.kit.details): memory only, never in history.
        self._kit_details.publish(
            st, phase=str(phase), gates=self.gates.gates.values(), paused_reason=self.control.paused_reason, noun=self.kit_noun,
            hold_wait=self.kit_hold_wait(),
        )
        # Webhooks (workflows.kit.notify): new gate records, degraded/blocked nodes, a pause.
        self.kit_notifier.observe(str(phase), self.gates.gates)
        alerts = getattr(self, "alerts", None)
        if alerts is not None:
            # One notification when an episode begins and one when it ends (not on every change),
            # and one when the gate first passes without the check (fail-open) since Prometheus
            # last answered.
            events = [ev for ev in alerts.take_events() if ev.kind in ("blocked", "cleared", "overridden")
                      or (ev.kind == "fail-open" and ev.streak == 1)]
            if events and self.kit_notifier.enabled():
                for ev in events:
                    kind = {"blocked": "alerts-blocking", "fail-open": "alerts-skipped"}.get(ev.kind, "alerts-cleared")
                    self.kit_notifier.send(kind, f"{st.procedure} `{st.workflow_id}` on {st.cluster}: {ev.text}",
                                           gate=ev.gate_id, by=ev.by)
        reporter = getattr(self, "kit_reporter", None)  # built last in kit_init: touches before it report nothing
        if reporter is not None and reporter.parent_id is not None:
            reporter.send(self.kit_report())

    def kit_report(self) -> ChildReport:
        """Hook: what this procedure reports to its parent (:mod:`workflows.kit.report`);
        default its status' summary."""
        return summary(self.procedure_status())

    def procedure_status(self) -> ProcedureStatus:
        """Hook: what ``status`` returns. Default: a copy of the status model with the phase,
        the gates, and ``waiting_for``/``since``/``deadline`` from a waiting gate or the pause."""
        s = self.kit_status.model_copy(deep=True)
        phase = self.phase()
        s.phase = type(s.phase)(phase) if isinstance(s.phase, Enum) else phase
        s.gates = [g.model_copy() for g in self.gates.gates.values()] + [g.model_copy() for g in self.inbox.gates()]
        s.paused_reason = self.control.paused_reason
        s.abort_requested = self.control.abort
        if self.control.point_of_no_return is not None:
            s.point_of_no_return = self.control.point_of_no_return
        s.revert_requested_by = self.control.revert_by if self.control.revert else None
        waiting = [g for g in s.gates if g.state == GateState.WAITING]
        if waiting:
            g = waiting[0]
            owner = f" on {g.workflow_id}" if g.workflow_id else ""
            s.waiting_for, s.since, s.deadline = (f"approval of gate {g.id}{owner}" + (f": {g.comment}" if g.comment else ""),
                                                  g.opened_at, g.timeout_at)
        elif self.control.paused:
            s.waiting_for, s.since, s.deadline = f"resume (paused: {self.control.paused_reason})", s.updated_at, None
        elif (held := self.kit_hold_wait()) is not None:
            s.waiting_for, s.since, s.deadline = held
        else:
            health = [h for h in s.health.values() if h.state == "waiting"]
            if health:
                h = health[-1]
                s.waiting_for = f"health check {h.name}" + (f" ({h.last})" if h.last else "")
                s.since, s.deadline = h.since, h.deadline
        if not s.waiting_for and getattr(s, "step_doing", None):
            s.waiting_for, s.since, s.deadline = f"{s.step}: {s.step_doing}", s.step_since, s.step_until
        return s

    def kit_hold_wait(self) -> tuple[str, datetime | None, datetime | None] | None:
        """Hook: ``(what, since, until)`` when the procedure waits for nothing but holds on
        nodes (node procedures: :meth:`NodeBatches.hold_wait`); None otherwise."""
        return None

    def kit_step(self, step: str, doing: str, *, until: datetime | None = None) -> None:
        """Say what the procedure does now (``step`` its name, ``doing`` in words, ``until`` its
        deadline if it has one): ``status`` shows it as what the procedure waits for when no
        gate, pause or health check says more."""
        st = self.kit_status
        if st.step != step or st.step_doing != doing:
            st.step_since = workflow.now()
        st.step, st.step_doing, st.step_until = step, doing, until
        self.touch()

    def on_abort(self, identity: str) -> None:
        """Hook: called when an abort is requested (before ``touch``)."""

    # --- query and signal -------------------------------------------------------------------------------

    @workflow.query
    def status(self) -> ProcedureStatus:
        """The procedure's status model (see :meth:`procedure_status`)."""
        return self.procedure_status()

    @workflow.signal(name=WITHDRAW_SIGNAL)
    def withdraw_decision(self, w: WithdrawInput) -> None:
        """The CLI gave up on the update ``w.request_id``: its validator refuses it if it
        arrives later (:mod:`workflows.kit.decisions`)."""
        if not isinstance(getattr(self, "kit_withdrawals", None), Withdrawals):
            self.kit_withdrawals = Withdrawals()
        self.kit_withdrawals.add(w)

    @workflow.signal
    def lease_denied(self, info: LeaseInfo) -> None:
        """A lease's answer to our ``contend``: who holds it."""
        self.leases.denied(info)

    @workflow.signal(name=PARENT_ABORT_SIGNAL)
    def parent_abort(self, input: ControlInput) -> None:
        """The procedure that started this one as a phase was aborted: abort this run too, as
        the ``abort`` update would (it ends restored or says what stays changed). Ignored once
        the run finished or is already aborting."""
        if self.control.finished() or self.control.abort:
            return
        self.control.request_abort(input.reason or f"the parent procedure was aborted by {input.identity}", input.identity)

    @workflow.signal(name=PARENT_PAUSE_SIGNAL)
    def parent_pause(self, input: ControlInput) -> None:
        """The procedure that started this one (a campaign) was paused: pause this run too, as
        the ``pause`` update would (no new step; work in flight finishes). Ignored once the run
        finished, aborts or is paused already."""
        if self.control.finished() or self.control.abort or self.control.paused:
            return
        self.control.pause(input.reason or f"the parent procedure was paused by {input.identity}", by=input.identity)

    @workflow.signal(name=PARENT_RESUME_SIGNAL)
    def parent_resume(self, input: ControlInput) -> None:
        """The parent was resumed: resume this run if it is paused (by the parent or anyone:
        the campaign's resume is the operator's word for the whole fleet)."""
        if self.control.finished() or self.control.abort or not self.control.paused:
            return
        self.control.resume(input.identity)

    @workflow.signal(name=CHILD_REPORT_SIGNAL)
    def child_report(self, report: ChildReport) -> None:
        """A child's report (:mod:`workflows.kit.report`): a node run's progress goes to
        :meth:`on_node_progress`, any other child's summary to :meth:`on_child_report`."""
        if report.node is not None:
            self.on_node_progress(report.node)
            return
        if self.inbox.receive(report):
            self.on_child_report(report)
            self.touch()

    def on_node_progress(self, progress: NodeProgress) -> None:
        """Hook: a node run's step change (ignored by default)."""

    def on_child_report(self, report: ChildReport) -> None:
        """Hook: a child procedure's new report (kept in :attr:`inbox` already)."""

    # --- updates: approve and reject are GateUpdates'; choices and revert ---------------------------------------------------------------------

    def _choice_gate(self, input: DecideInput) -> Any:
        gid = input.gate_id or input.node
        gate = self.gates.gates.get(gid)
        return gate if gate is not None and gate.choices else None

    @workflow.update
    async def decide(self, input: DecideInput) -> DecideResult:
        """Make a choice: on a gate that declares choices (``decide ID GATE CHOICE``), or on a
        node's blocked drain (``decide ID NODE wait|skip|delete-pod|abort``, node procedures)."""
        if self._choice_gate(input) is not None:
            return self.gates.decide_update(input)
        return await self.on_decide(input)

    @decide.validator
    def _validate_decide(self, input: DecideInput) -> None:
        gate = self._choice_gate(input)
        if gate is not None:
            self.gates.check_choice(input, input.decision)
            return
        check_in_time(input, "decide")
        self.check_decide(input)

    def check_decide(self, input: DecideInput) -> None:
        """Hook: validate a decision on something other than a gate with choices (a node
        procedure's blocked drain). Raises ValueError."""
        known = [g.id for g in self.gates.waiting() if g.choices]
        raise ValueError(f"nothing named {input.gate_id or input.node!r} waits for a choice"
                         + (f" (gates with choices: {', '.join(known)})" if known else ""))

    async def on_decide(self, input: DecideInput) -> DecideResult:
        # Unreachable while check_decide refuses in the validator.
        raise ApplicationError(f"this {self.kit_noun} has no such decision", non_retryable=True)

    @workflow.update
    def revert(self, input: RevertInput) -> RevertAnswer:
        """Restore what this run changed: every wait stops, the records are written back in
        reverse order and read back (:meth:`kit_restore`), and the run ends ``reverted``."""
        self.control.request_revert(input.reason or input.comment or f"revert requested by {input.identity}", input.identity)
        return RevertAnswer(mode="in-run", message=f"revert requested by {input.identity}: {self.kit_revert_means()}")

    def kit_revert_means(self) -> str:
        """Hook: what a revert requested now does, in the operator's answer (default: the
        records restored at the next safe point)."""
        return f"{self.kit_noun} stops at its next safe point and restores what its records hold, read back"

    @revert.validator
    def _validate_revert(self, input: RevertInput) -> None:
        check_in_time(input, "revert")
        if not input.identity.strip():
            raise ValueError("an identity is required to revert")
        self.check_revert(input)

    def check_revert(self, input: RevertInput) -> None:
        """Hook: whether a revert inside the run is possible now. The default: not once the run
        is finished or aborting, not twice, not with nothing changed yet (abort instead), and
        past the point of no return only as a full revert, which this run cannot do (a
        procedure that can overrides). Raises ValueError (the operator's message)."""
        c = self.control
        if c.finished():
            raise ValueError(f"{self.kit_noun} already {c.base_phase}")
        if c.revert:
            raise ValueError(f"a revert was already requested by {c.revert_by}")
        if c.abort:
            raise ValueError("abort already requested: the run ends with what it restored or left changed")
        if c.point_of_no_return is not None:
            raise ValueError(f"past the point of no return ({c.point_of_no_return}): abort the run, then "
                             f"`lockkeeper revert {workflow.info().workflow_id} --full` reverses the whole change")
        if not self.kit_keeps_records:
            raise ValueError(f"this {self.kit_noun} keeps no records to revert from: abort it instead (what it already "
                             f"changed stays as it is)")
        if not self.records.changed():
            raise ValueError("nothing has been changed yet: abort the run instead")

    # --- updates: control --------------------------------------------------------------------------------

    @workflow.update
    def pause(self, input: ControlInput) -> ControlResult:
        """Start no new step, node or gate; work in flight finishes."""
        self.control.pause(input.reason or input.comment or f"paused by {input.identity}", by=input.identity)
        return ControlResult(message=f"{self.kit_noun} paused by {input.identity}", status=self.procedure_status())

    @pause.validator
    def _validate_pause(self, input: ControlInput) -> None:
        check_in_time(input, "pause")
        self.control.check_pause()

    @workflow.update
    def resume(self, input: ControlInput) -> ControlResult:
        """Continue after a pause (a rejected or timed-out gate is opened again where the
        procedure pauses on rejection)."""
        self.control.resume(input.identity)
        return ControlResult(message=f"{self.kit_noun} resumed by {input.identity}", status=self.procedure_status())

    @resume.validator
    def _validate_resume(self, input: ControlInput) -> None:
        check_in_time(input, "resume")
        self.control.check_resume()

    @workflow.update
    def abort(self, input: ControlInput) -> ControlResult:
        """Start nothing more; work in flight stops at its next safe point."""
        self.control.request_abort(input.reason or input.comment or f"aborted by {input.identity}", input.identity)
        return ControlResult(message=f"abort requested by {input.identity}", status=self.procedure_status())

    @abort.validator
    def _validate_abort(self, input: ControlInput) -> None:
        check_in_time(input, "abort")
        self.control.check_abort()


class NodeProcedureWorkflow(ProcedureWorkflow):
    """A procedure over nodes: adds ``skip_node`` and ``retry_node`` and the blocked-drain side
    of ``decide``, each delegating to a hook. A procedure that keeps its nodes in the kit's
    window (``self.batches``, :class:`workflows.kit.batches.NodeBatches`) and board
    (``self.board``, :class:`workflows.kit.board.NodeBoard`) gets every hook from them: abort
    reaches the children, node runs' reports go to the board, skip/retry are queued window
    requests, a blocked drain's decision is forwarded to its node run, the run settles its
    children before it ends, and the nodes it left cordoned are named in what stays changed.
    The validators' hooks raise ValueError (the update's rejection message)."""

    batches: NodeBatches | None = None
    board: NodeBoard | None = None

    # --- hooks --------------------------------------------------------------------------------------------

    def _window(self) -> NodeBatches:
        if self.batches is None:
            raise ValueError(f"this {self.kit_noun} has no node window")
        return self.batches

    def procedure_status(self) -> ProcedureStatus:
        """The kit's status (a waiting gate, the pause, a window or hold, a health check, the
        step), then the window's nodes in flight, and, when nothing above says what the
        procedure waits for, the blocked drain waiting for a decision or the in-flight node
        closest to its deadline (:meth:`NodeBoard.deciding`, :meth:`NodeBoard.in_flight_summary`)."""
        s = super().procedure_status()
        if self.batches is None or self.board is None:
            return s
        if hasattr(s, "in_flight"):
            s.in_flight = self.batches.in_flight()
        if not s.waiting_for and (found := self.kit_node_waiting(s)) is not None:
            s.waiting_for, s.since, s.deadline = found
        return s

    def kit_node_waiting(self, s: ProcedureStatus) -> tuple[str, datetime | None, datetime | None] | None:
        """Hook: ``(what, since, until)`` the node window waits for when nothing else does.
        Default: the blocked drain waiting for a decision, else the in-flight node closest to
        its deadline; None when no node is in flight."""
        assert self.batches is not None and self.board is not None
        return self.board.deciding(s.workflow_id) or self.board.in_flight_summary(self.batches.in_flight(), s.updated_at)

    def on_abort(self, identity: str) -> None:
        if self.batches is not None:
            self.batches.abort_children(identity)

    def on_node_progress(self, progress: NodeProgress) -> None:
        if self.board is not None:
            self.board.on_progress(progress)

    def check_skip_node(self, input: NodeControlInput) -> None:
        self._window().check_request(input, "skip", finished=self.control.finished())

    def on_skip_node(self, input: NodeControlInput) -> ControlResult:
        return ControlResult(message=self._window().request("skip", input))

    def check_retry_node(self, input: NodeControlInput) -> None:
        self._window().check_request(input, "retry", finished=self.control.finished())

    def on_retry_node(self, input: NodeControlInput) -> ControlResult:
        return ControlResult(message=self._window().request("retry", input))

    def check_hold_node(self, input: HoldInput) -> None:
        if self.batches is None:
            raise ValueError(HOLDS_NOT_SUPPORTED)
        self.batches.check_hold(input, finished=self.control.finished())

    def on_hold_node(self, input: HoldInput) -> ControlResult:
        window = self._window()
        window.holds.bind(self.kit_status)
        hold = window.holds.place(input)
        note = " (in flight: it finishes normally)" if input.node in window.children else ""
        return ControlResult(message=f"node {input.node} held by {hold.by} {hold.until_text()}: {hold.reason}{note}")

    def check_release_node(self, input: ReleaseInput) -> None:
        if self.batches is None:
            raise ValueError(HOLDS_NOT_SUPPORTED)
        if input.node not in self.batches.nodes:
            raise self.batches.board.unknown_node(input.node)
        self.batches.holds.check_release(input)

    def on_release_node(self, input: ReleaseInput) -> ControlResult:
        window = self._window()
        window.holds.bind(self.kit_status)
        window.holds.release(input)
        return ControlResult(message=f"node {input.node} released by {input.identity}"
                                     + (f": {input.reason.strip()}" if input.reason.strip() else ""))

    def kit_hold_wait(self) -> tuple[str, datetime | None, datetime | None] | None:
        if self.batches is None:
            return None
        return self.batches.window_wait() or self.batches.hold_wait()

    def kit_windows(self, specs: list[str]) -> None:
        """Start nodes only inside the maintenance windows ``specs`` (:mod:`workflows.kit.windows`;
        validated by the input model): the window waits on a durable timer for the next opening,
        ``status`` and the UI's details say so and a ``window-wait`` notification goes out once
        per closed window. No specs: nothing changes (no timer, no command)."""
        if not specs or self.batches is None:
            return
        self.batches.windows = parse_windows(specs)
        self.batches.on_window_wait = self._kit_window_notify

    def _kit_window_notify(self, text: str) -> None:
        if self.kit_notifier.enabled():
            st = self.kit_status
            self.kit_notifier.send("window-wait", f"{st.procedure} `{st.workflow_id}` on {st.cluster}: {text}")

    def check_decide(self, input: DecideInput) -> None:
        if self.board is None or input.node not in self.board.nodes:
            super().check_decide(input)
            return
        finished = str(self.control.base_phase) if self.control.finished() else None
        self.board.check_decide(input, self.gates.rules, finished=finished, in_flight=input.node in self._window().children)

    async def on_decide(self, input: DecideInput) -> DecideResult:
        assert self.board is not None
        return await self.board.decide(input, self._window().children.get(input.node), self.control)

    async def kit_settle(self) -> None:
        if self.batches is not None:
            await self.batches.settle()

    def kit_left_changed(self) -> list[ChangedItem]:
        items = super().kit_left_changed()
        if self.board is not None:
            items += [ChangedItem(target=f"Node {n.name}", what="cordoned by this run (spec.unschedulable)",
                                  undo=f"kubectl uncordon {n.name}")
                      for n in self.board.nodes.values() if n.cordoned_by_us]
        return items

    # --- handlers -----------------------------------------------------------------------------------------

    @workflow.update
    def skip_node(self, input: NodeControlInput) -> ControlResult:
        """Skip a node (the procedure's rule: pending → skipped; in flight → rolled back at its
        next safe point)."""
        return self.on_skip_node(input)

    @skip_node.validator
    def _validate_skip_node(self, input: NodeControlInput) -> None:
        check_in_time(input, "skip_node")
        self.check_skip_node(input)

    @workflow.update
    def retry_node(self, input: NodeControlInput) -> ControlResult:
        """Run a degraded/failed/aborted node again."""
        return self.on_retry_node(input)

    @retry_node.validator
    def _validate_retry_node(self, input: NodeControlInput) -> None:
        check_in_time(input, "retry_node")
        self.check_retry_node(input)

    @workflow.update
    def hold_node(self, input: HoldInput) -> ControlResult:
        """Hold a node: the window does not start it until the hold is released or expires
        (:mod:`workflows.kit.holds`); a node in flight finishes normally."""
        return self.on_hold_node(input)

    @hold_node.validator
    def _validate_hold_node(self, input: HoldInput) -> None:
        check_in_time(input, "hold_node")
        self.check_hold_node(input)

    @workflow.update
    def release_node(self, input: ReleaseInput) -> ControlResult:
        """End a hold on a node by hand: it starts in its place of the order."""
        return self.on_release_node(input)

    @release_node.validator
    def _validate_release_node(self, input: ReleaseInput) -> None:
        check_in_time(input, "release_node")
        self.check_release_node(input)

