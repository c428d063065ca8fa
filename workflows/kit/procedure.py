"""The operator surface every procedure exposes the same way (DESIGN.md "Procedure").

:class:`ProcedureWorkflow` carries the handlers the CLI relies on for every procedure type:
query ``status``; updates ``approve``, ``reject``, ``pause``, ``resume``, ``abort`` with their
validators (a refused update never reaches history; every operator update is first checked
against its deadline, identities and withdrawal, :func:`workflows.kit.control.check_in_time`); signals
``withdraw_decision`` (:mod:`workflows.kit.decisions`) and ``lease_denied`` (a lease's answer,
see :mod:`workflows.kit.lease`). :class:`NodeProcedureWorkflow` adds ``skip_node``,
``retry_node``, ``decide`` and the ``node_progress`` signal, delegating to hooks the procedure
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
  ``on_retry_node``, ``check_decide`` / ``on_decide``, ``on_node_progress``.
"""

from __future__ import annotations

from enum import Enum

from temporalio import workflow
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows.kit import metrics as lk_metrics
    from workflows.kit.control import Control, check_in_time
    from workflows.kit.decisions import WITHDRAW_SIGNAL, WithdrawInput, Withdrawals
    from workflows.kit.details import DetailsPublisher
    from workflows.kit.gates import Gates
    from workflows.kit.lease import Leases
    from workflows.kit.notify import ProcedureNotifier, wrap_run
    from workflows.kit.models import (
        SA_CLUSTER,
        SA_POOLS,
        SA_PROCEDURE,
        SA_STATUS,
        ApprovalRules,
        ApproveInput,
        ControlInput,
        ControlResult,
        DecideInput,
        DecideResult,
        GateDecisionResult,
        GateState,
        LeaseInfo,
        NodeControlInput,
        NodeProgress,
        ProcedurePhase,
        ProcedureStatus,
        RejectInput,
    )

SA_KEY_CLUSTER = SearchAttributeKey.for_keyword(SA_CLUSTER)
SA_KEY_PROCEDURE = SearchAttributeKey.for_keyword(SA_PROCEDURE)
SA_KEY_STATUS = SearchAttributeKey.for_keyword(SA_STATUS)
SA_KEY_POOLS = SearchAttributeKey.for_keyword_list(SA_POOLS)

#: workflow.patched ID under which the etcd procedures and the drain upsert LockkeeperStatus
#: (their histories recorded before the kit have no such upsert).
PATCH_STATUS_SEARCH_ATTRIBUTE = "kit-status-search-attribute"


class ProcedureWorkflow:
    """Base of every procedure workflow (see the module doc). Not a workflow by itself."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        wrap_run(cls)  # the run's last webhook notification (workflows.kit.notify)

    # --- set-up ----------------------------------------------------------------------------------

    def kit_init(
        self,
        *,
        procedure: str,
        noun: str,
        cluster: str,
        rules: ApprovalRules,
        status: ProcedureStatus,
        search_attributes: bool,
        pause_on_reject: bool = True,
        reject_note: str | None = None,
        base_phase: str = ProcedurePhase.RUNNING,
        defer_status_attributes: bool = False,
    ) -> None:
        """Create the components; call from the procedure's ``@workflow.init``.

        ``procedure``: the spec name (search attribute and lease holder); ``noun``: the word in
        messages ("rollout", "restore", "drain"); ``status``: the procedure's status model
        instance (the kit keeps ``gate_history``, ``phase``, ``paused_reason``,
        ``abort_requested`` and ``updated_at`` in it); ``search_attributes``: upsert
        LockkeeperStatus on phase changes; ``defer_status_attributes``: not before ``run``
        calls :meth:`kit_status_attributes` (procedures whose stored histories have no such
        upserts decide it under a ``workflow.patched`` ID); ``pause_on_reject`` and
        ``reject_note`` ("rollout paused", "restore stops"): what a rejection does and says.
        """
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
        status.procedure = procedure
        status.workflow_id = workflow.info().workflow_id
        status.cluster = cluster
        status.started_at = status.started_at or workflow.now()

    def kit_status_attributes(self, patch_id: str | None = PATCH_STATUS_SEARCH_ATTRIBUTE) -> None:
        """Decide once, at the start of ``run``, whether LockkeeperStatus upserts happen: only
        with ``search_attributes`` and, when ``patch_id`` is given, only in runs that have the
        patch (histories recorded before it have no upserts). ``workflow.patched`` answers the
        same for the same ID all run long, so a procedure may pass the ID it also uses itself."""
        self._kit_sa = self._kit_sa_wanted and (patch_id is None or workflow.patched(patch_id))

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
            st, phase=str(phase), gates=self.gates.gates.values(), paused_reason=self.control.paused_reason, noun=self.kit_noun
        )
        # Webhooks (workflows.kit.notify): new gate records, degraded/blocked nodes, a pause.
        self.kit_notifier.observe(str(phase), self.gates.gates)

    def procedure_status(self) -> ProcedureStatus:
        """Hook: what ``status`` returns. Default: a copy of the status model with the phase,
        the gates, and ``waiting_for``/``since``/``deadline`` from a waiting gate or the pause."""
        s = self.kit_status.model_copy(deep=True)
        phase = self.phase()
        s.phase = type(s.phase)(phase) if isinstance(s.phase, Enum) else phase
        s.gates = [g.model_copy() for g in self.gates.gates.values()]
        s.paused_reason = self.control.paused_reason
        s.abort_requested = self.control.abort
        waiting = [g for g in s.gates if g.state == GateState.WAITING]
        if waiting:
            g = waiting[0]
            s.waiting_for, s.since, s.deadline = f"approval of gate {g.id}" + (f": {g.comment}" if g.comment else ""), g.opened_at, g.timeout_at
        elif self.control.paused:
            s.waiting_for, s.since, s.deadline = f"resume (paused: {self.control.paused_reason})", s.updated_at, None
        else:
            health = [h for h in s.health.values() if h.state == "waiting"]
            if health:
                h = health[-1]
                s.waiting_for = f"health check {h.name}" + (f" ({h.last})" if h.last else "")
                s.since, s.deadline = h.since, h.deadline
        return s

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

    # --- updates: gates ----------------------------------------------------------------------------------

    @workflow.update
    def approve(self, input: ApproveInput) -> GateDecisionResult:
        """Approve a waiting gate (``gate_id`` None = the only waiting gate)."""
        gate = self.gates.find_waiting(input.gate_id)
        self.gates.decide(gate, GateState.APPROVED, input.identity, input.comment, input.connection_identity)
        return GateDecisionResult(gate_id=gate.id, state=gate.state, message=f"gate {gate.id} approved by {input.identity}")

    @approve.validator
    def _validate_approve(self, input: ApproveInput) -> None:
        self.gates.check_decision(input, approving=True)

    @workflow.update
    def reject(self, input: RejectInput) -> GateDecisionResult:
        """Reject a waiting gate; what follows is the procedure's rule (``reject_note``)."""
        gate = self.gates.find_waiting(input.gate_id)
        self.gates.decide(gate, GateState.REJECTED, input.identity, input.comment, input.connection_identity)
        return GateDecisionResult(
            gate_id=gate.id, state=gate.state, message=f"gate {gate.id} rejected by {input.identity}; {self.kit_reject_note}"
        )

    @reject.validator
    def _validate_reject(self, input: RejectInput) -> None:
        self.gates.check_decision(input, approving=False)

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
    """A procedure over nodes: adds ``skip_node``, ``retry_node``, ``decide`` and the
    ``node_progress`` signal, each delegating to a hook. The validators' hooks raise ValueError
    (the update's rejection message); the defaults refuse, naming the procedure."""

    # --- hooks --------------------------------------------------------------------------------------------

    def check_skip_node(self, input: NodeControlInput) -> None:
        raise ValueError(f"this {self.kit_noun} cannot skip nodes")

    def on_skip_node(self, input: NodeControlInput) -> ControlResult:
        # Unreachable while the matching check_* refuses in the validator; a procedure that
        # allows it overrides both. Fails the update, not the workflow task.
        raise ApplicationError(f"this {self.kit_noun} cannot skip nodes", non_retryable=True)

    def check_retry_node(self, input: NodeControlInput) -> None:
        raise ValueError(f"this {self.kit_noun} cannot retry nodes")

    def on_retry_node(self, input: NodeControlInput) -> ControlResult:
        # Unreachable while the matching check_* refuses in the validator; a procedure that
        # allows it overrides both. Fails the update, not the workflow task.
        raise ApplicationError(f"this {self.kit_noun} cannot retry nodes", non_retryable=True)

    def check_decide(self, input: DecideInput) -> None:
        raise ValueError(f"this {self.kit_noun} has no drain decisions")

    async def on_decide(self, input: DecideInput) -> DecideResult:
        # Unreachable while the matching check_* refuses in the validator; a procedure that
        # allows it overrides both. Fails the update, not the workflow task.
        raise ApplicationError(f"this {self.kit_noun} has no drain decisions", non_retryable=True)

    def on_node_progress(self, progress: NodeProgress) -> None:
        """A node run's step change (ignored by default)."""

    # --- handlers -----------------------------------------------------------------------------------------

    @workflow.signal
    def node_progress(self, progress: NodeProgress) -> None:
        """A node run's step change (see :meth:`on_node_progress`)."""
        self.on_node_progress(progress)

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
    async def decide(self, input: DecideInput) -> DecideResult:
        """Answer a blocked drain's decision gate: wait, skip, delete-pod or abort."""
        return await self.on_decide(input)

    @decide.validator
    def _validate_decide(self, input: DecideInput) -> None:
        check_in_time(input, "decide")
        self.check_decide(input)
