"""ClusterUpgradeWorkflow: the whole OKD 3.9 → 3.10 upgrade of field report R3 as child procedures
in R3's order: GlusterFS check and recovery → etcd backup → control plane → the masters' node
upgrade → infra nodes (canary) → compute nodes → nodeSelector migration (:data:`workflows.cluster_upgrade.models.PHASES`).

Each phase is the procedure itself, started as a child with ID ``<this>/<phase>/<attempt>``:
its gates (canary, API, plan, ...) are approved on the child's ID (``lockkeeper approve <child>``),
and ``lockkeeper status <child>`` shows its own status; this workflow's status names the phase and
the child. A phase that fails (or ends other than completed) opens gate ``phase/<name>/<n>``: fix
the cause, then approve to retry the phase (a new child; the node procedures skip nodes already at
the target, the control plane re-checks its masters), or reject to abort. A finished phase is never
run again. With ``alerts``, the kit's alert gate (:mod:`workflows.kit.alerts`) stands before each
phase that takes nodes down (``alerts/phase/<name>``; not before the GlusterFS recovery, which
repairs, nor the etcd backup, which reads), and the node phases gate each node with it too.
``dry_run`` runs every phase's own dry run as a child (each reads and checks its own
preconditions, writes nothing): the phase's plan (node batches, the selector plan, the masters)
and every precondition it checked with its result (``ok`` / ``FAILED`` / ``not run``), as that
procedure's own ``--dry-run`` prints them (issue 39). A failed precondition is a problem of the
dry run (the CLI exits 2), except one an earlier phase of the plan makes true (a node phase's
kubelet version skew while the plan upgrades the control plane first: shown, marked so). A plan
with a control-plane phase first checks the update of the cluster's version (one minor version
at most, never back) and its etcd backup (issue 41): a failed check refuses the run before the
first phase; a dry run shows these checks as the control-plane phase's own.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from workflows.cluster_upgrade.models import (
        ALERT_GATED_PHASES,
        PHASES,
        PROCEDURE_CLUSTER_UPGRADE,
        ClusterUpgradeInput,
        ClusterUpgradePlan,
        ClusterUpgradeResult,
        ClusterUpgradeStatus,
        PhaseStatus,
    )
    from activities.preflight.models import Precondition, PreconditionResult, PreconditionState, UpdateStep
    from workflows.control_plane.workflow import ControlPlaneUpgradeWorkflow, etcd_backup_check
    from workflows.etcd.backup import EtcdBackupWorkflow
    from workflows.gluster.workflow import GlusterRecoveryWorkflow
    from workflows.kit.models import ApprovalRules, ChangedItem, ControlInput, failure_message
    from workflows.kit.procedure import ProcedureWorkflow
    from workflows.node_selectors.workflow import NodeSelectorMigrationWorkflow
    from workflows.node_upgrade.plan import plan_lines
    from workflows.kit.report import PARENT_ABORT_SIGNAL, ChildReport
    from workflows.node_upgrade.workflow import NodeUpgradeWorkflow

#: phase → the child's workflow class.
CHILDREN: dict[str, Any] = {
    "gluster": GlusterRecoveryWorkflow,
    "etcd-backup": EtcdBackupWorkflow,
    "control-plane": ControlPlaneUpgradeWorkflow,
    "master-nodes": NodeUpgradeWorkflow,
    "infra-nodes": NodeUpgradeWorkflow,
    "compute-nodes": NodeUpgradeWorkflow,
    "node-selectors": NodeSelectorMigrationWorkflow,
}


def _succeeded(result: Any) -> tuple[bool, str]:
    """A child's result: ok when its outcome is completed (the etcd backup: ``ok``; GlusterFS:
    ``ok``), with its message."""
    outcome = getattr(result, "outcome", None)
    ok = getattr(result, "ok", None)
    message = getattr(result, "message", "") or ""
    if ok is not None and not ok:
        return False, message or f"outcome {outcome}"
    return outcome in ("completed", None), message or f"outcome {outcome}"


@workflow.defn
class ClusterUpgradeWorkflow(ProcedureWorkflow):
    """Input :class:`ClusterUpgradeInput`, result :class:`ClusterUpgradeResult`, status
    :class:`ClusterUpgradeStatus` (see the module doc)."""

    @workflow.init
    def __init__(self, input: ClusterUpgradeInput) -> None:
        self._in = input
        self._id = workflow.info().workflow_id
        #: A dry run's problems: each phase's failed preconditions (:meth:`_dry_run`).
        self._dry_problems: list[str] = []
        self._status = ClusterUpgradeStatus(phases=[
            PhaseStatus(name=p, child_type=CHILDREN[p].__name__, state="pending" if input.plan.phase_input(p) is not None else "skipped")
            for p in PHASES])
        self.kit_init(
            procedure=PROCEDURE_CLUSTER_UPGRADE, noun="cluster upgrade", input=input, status=self._status,
            pause_on_reject=False, reject_note="cluster upgrade stops", preflight=input.plan.control_plane is not None,
        )

    @workflow.query
    def status(self) -> ClusterUpgradeStatus:
        """The phases, the current one and its child procedure."""
        return self.procedure_status()  # type: ignore[return-value]

    def on_child_report(self, report: ChildReport) -> None:
        """A phase's child reports its own status (only the current child of a phase counts; the
        kit's inbox kept the newest)."""
        for ph in self._status.phases:
            if ph.child_id == report.workflow_id:
                ph.child_status = report

    def procedure_status(self) -> ClusterUpgradeStatus:
        """The kit's status; while nothing of its own waits, what the current child waits for."""
        s = super().procedure_status()
        assert isinstance(s, ClusterUpgradeStatus)
        cur = next((p for p in s.phases if p.name == s.current_phase), None)
        if s.waiting_for is None and cur is not None and cur.child_status is not None:
            c = cur.child_status
            gates = f" (gates {', '.join(g.id for g in c.gates)} on {c.workflow_id})" if c.gates else ""
            s.waiting_for = f"phase {cur.name}: {c.waiting_for or c.phase}{gates}"
            s.since, s.deadline = c.since, c.deadline
        return s

    def _child_input(self, phase: str) -> Any:
        inp = self._in.plan.phase_input(phase)
        assert inp is not None
        update: dict[str, Any] = {}
        requester = self._in.approvals.requested_by
        if isinstance(getattr(inp, "approvals", None), ApprovalRules):  # a ProcedureInput: the nested rules
            update["approvals"] = inp.approvals.model_copy(update={"requested_by": requester})  # type: ignore[attr-defined]
        elif hasattr(inp, "requested_by"):
            update["requested_by"] = requester
        if hasattr(inp, "cluster"):
            update["cluster"] = self._in.cluster  # every phase works on the upgrade's cluster
        if hasattr(inp, "search_attributes"):
            update["search_attributes"] = False  # the child's ID carries the parent's; keep one set of attributes
        if hasattr(inp, "dry_run"):
            update["dry_run"] = self._in.dry_run
        if hasattr(inp, "report_to"):
            update["report_to"] = self._id
        if self._in.alerts is not None and phase in ALERT_GATED_PHASES and getattr(inp, "alerts", "") is None:
            # the phase gates its own nodes with the run's gate; not the GlusterFS recovery (it
            # repairs what a brick-down alert reports) nor the etcd backup (it reads)
            update["alerts"] = self._in.alerts
        return inp.model_copy(update=update)

    @workflow.run
    async def run(self, input: ClusterUpgradeInput) -> ClusterUpgradeResult:
        return await self.kit_run(lambda: self._run(input), ClusterUpgradeResult)

    def kit_result_fields(self) -> dict[str, Any]:
        return {"phases": [p.model_copy() for p in self._status.phases]}

    def kit_left_changed(self) -> list[ChangedItem]:
        """What stays changed: the kit's own (nothing: the upgrade writes through its phases
        only), then what each phase's children changed and left so, in phase order (a finished
        phase stays finished: an abort does not undo it), each item once."""
        items = super().kit_left_changed()
        seen = {(i.target, i.what) for i in items}
        for ph in self._status.phases:
            for i in ph.changed:
                if (i.target, i.what) not in seen:
                    seen.add((i.target, i.what))
                    items.append(i)
        return items

    def _note_changed(self, ph: PhaseStatus, items: list[ChangedItem]) -> None:
        known = {(i.target, i.what) for i in ph.changed}
        ph.changed.extend(i for i in items if (i.target, i.what) not in known)

    def _preconditions(self, input: ClusterUpgradePlan) -> list[Precondition]:
        """With a control-plane phase, an update of the cluster's version (issue 41), checked
        before the first phase writes anything: one minor version at most from the cluster's
        version (:class:`activities.preflight.models.UpdateStep`), and an etcd backup newer than
        the run's start (the etcd-backup phase's, or the control plane's own barrier) or the
        reason given for none (:func:`workflows.control_plane.workflow.etcd_backup_check`)."""
        cp = input.control_plane
        if cp is None:
            return []
        backup = etcd_backup_check(cp)
        if input.etcd_backup is not None:  # the plan's validator told the control plane the phase takes it
            members = ", ".join(m.name for m in input.etcd_backup.members)
            backup.detail = f"taken by this run's etcd-backup phase before the control plane (snapshot of {members})"
        return [UpdateStep(target_version=cp.update_target(), why="an update of the cluster's version goes one minor version at a time"),
                backup]

    async def _run(self, input: ClusterUpgradeInput) -> ClusterUpgradeResult:
        """The preflight of a run with a control-plane phase (:meth:`_preconditions`: refused
        before the first phase, nothing written; a dry run shows the checks in the control-plane
        phase), then the phases in order (module doc); ends ``completed``, ``dry-run`` or, after
        an abort (or a phase not retried), ``aborted`` with the abort's reason."""
        problems: list[str] = []
        if (pre := self._preconditions(input.plan)) and not input.dry_run:
            # A dry run checks these as the control-plane phase's own (its dry run, below).
            checked = await self.kit_preflight(pre)
            problems = checked.problems
        for ph in self._status.phases:
            if ph.state == "skipped" or self.control.abort:
                continue
            self._status.current_phase = ph.name
            if input.dry_run:
                await self._dry_run(ph)
                continue
            if self.alerts is not None and ph.name in ALERT_GATED_PHASES:
                # Prometheus between the phases (no gate: no command): the next phase starts only
                # when no alert blocks; an abort meanwhile ends the run here.
                answer = await self.alerts.wait_clear(f"phase/{ph.name}")
                if answer.outcome == "stopped" or self.control.abort:
                    continue
            await self._phase(ph)
        self._status.current_phase = None
        if input.dry_run:
            problems = list(self._dry_problems)
            if self.kit_status.preflight != "none":
                self.kit_status.preflight = "refused" if problems else "passed"
        outcome = "dry-run" if input.dry_run else ("aborted" if self.control.abort else "completed")
        lines = [f"{p.name}: {p.state}" + (f" ({p.child_id})" if p.child_id else "") for p in self._status.phases]
        if outcome != "aborted":
            return self.kit_end(ClusterUpgradeResult, outcome, "; ".join(lines), problems=problems)
        left = self.kit_left_changed()
        tail = f"; left changed: {'; '.join(i.line() for i in left)}" if left else "; nothing was changed"
        return self.kit_end(ClusterUpgradeResult, outcome, f"aborted: {self.control.abort_reason}{tail}", left_changed=left,
                            next_commands=self.kit_next_commands(left))

    async def _run_child(self, ph: PhaseStatus) -> Any:
        ph.attempts += 1
        ph.child_id = f"{self._id}/{ph.name}/{ph.attempts}"
        ph.state, ph.outcome, ph.message = "running", None, None
        self.touch()
        try:
            child = await workflow.start_child_workflow(
                CHILDREN[ph.name].run, self._child_input(ph.name), id=ph.child_id,
                parent_close_policy=workflow.ParentClosePolicy.TERMINATE,
                static_summary=f"phase {ph.name} (attempt {ph.attempts})",
            )
            await workflow.wait_condition(lambda: child.done() or self.control.abort)
            if not child.done():
                # Aborted while the phase runs: the phase aborts too (restoring or saying what
                # stays changed) and this run ends once it has.
                await child.signal(PARENT_ABORT_SIGNAL, ControlInput(identity=self.control.abort_by or "lockkeeper",
                                                                     reason=f"cluster upgrade aborted: {self.control.abort_reason}"))
            return await child
        finally:
            # An ended child's gates wait for nobody: only running children's show in status.
            self.inbox.latest.pop(ph.child_id, None)

    async def _phase(self, ph: PhaseStatus) -> None:
        while not self.control.abort:
            try:
                result = await self._run_child(ph)
                ok, message = _succeeded(result)
                ph.outcome = getattr(result, "outcome", None)
                self._note_changed(ph, list(getattr(result, "changed", None) or getattr(result, "left_changed", None) or []))
            except ChildWorkflowError as err:
                ok, message = False, failure_message(err)
                ph.outcome = "failed"
                if ph.child_status is not None and ph.child_status.workflow_id == ph.child_id:
                    self._note_changed(ph, list(ph.child_status.left_changed))
            ph.message = message
            if ok:
                ph.state = "done"
                self.touch()
                return
            if self.control.abort:  # the phase ended on our abort: no retry gate
                ph.state = "aborted"
                self.touch()
                return
            ph.state = "waiting-retry"
            gate_id = f"phase/{ph.name}/{ph.attempts}"
            comment = f"phase {ph.name} did not complete ({ph.child_id}): {message}. Fix it, then approve to retry the phase, reject to abort."
            answer = await self.gates.step(gate_id, comment, self.gate_policy)
            gate = answer.gate
            if not answer.passed:
                ph.state = "aborted"
                if not self.control.abort:
                    self.control.request_abort(f"phase {ph.name} not retried: gate {gate_id} {gate.state}", gate.decided_by or "timeout")
                self.touch()
                return

    def _made_true_earlier(self, phase: str) -> set[str]:
        """The precondition kinds of ``phase`` that an earlier phase of the plan makes true, so
        a dry run (checking today's cluster) shows them failed without counting them: a node
        phase's kubelet version skew when the plan upgrades the control plane first."""
        if phase in ("master-nodes", "infra-nodes", "compute-nodes") and self._in.plan.control_plane is not None:
            return {"version-skew"}
        return set()

    def _checked_lines(self, ph: PhaseStatus, checked: list[PreconditionResult]) -> list[str]:
        """The phase's preconditions as its own dry run prints them; its failed ones (not made
        true by an earlier phase) go to the dry run's problems as ``phase NAME: PROBLEM``."""
        if not checked:
            return ["preconditions: none declared by this procedure"]
        later = self._made_true_earlier(ph.name)
        failed = [r for r in checked if r.state == PreconditionState.FAILED]
        counted = [r for r in failed if r.precondition.kind not in later]
        lines = [f"preconditions ({len(checked)} checked, {len(failed)} failed):"]
        for r in checked:
            note = ("  [expected today: an earlier phase of this plan upgrades the control plane]"
                    if r in failed and r not in counted else "")
            lines.append(f"  {r.line()}{note}")
        self._dry_problems += [f"phase {ph.name}: {r.problem()}" for r in counted]
        if counted:
            ph.state = "failed"
        return lines

    async def _dry_run(self, ph: PhaseStatus) -> None:
        """Every phase's own dry run as a child (module doc): its plan lines (the node phases'
        batches, the selector plan; the others from the plan file and the child's answer), then
        every precondition it checked with its result. A child that would fail today (it
        failed or was refused) marks the phase failed and says why."""
        inp = self._in.plan.phase_input(ph.name)
        if ph.name == "control-plane":
            head = [f"masters one at a time: {' -> '.join(m.name for m in inp.masters)}",  # type: ignore[union-attr]
                    f"action {inp.action.kind}; restart {', '.join(inp.action.restart) or 'none'}"]  # type: ignore[union-attr]
        elif ph.name == "etcd-backup":
            head = [f"snapshot every member: {', '.join(m.name for m in inp.members)}"]  # type: ignore[union-attr]
        elif ph.name == "gluster":
            head = [f"GlusterFS {inp.mode} in namespace {inp.namespace}"]  # type: ignore[union-attr]
        else:
            head = []
        try:
            result = await self._run_child(ph)
        except ChildWorkflowError as err:
            ph.state, ph.dry_run_lines = "failed", [*head, f"would fail today: {failure_message(err)}"]
            self.touch()
            return
        plan = getattr(result, "plan", None)
        ph.state = "done"
        if getattr(result, "outcome", None) == "refused":  # refused before any write: it would fail today
            ph.state, lines = "failed", [f"would fail today: {result.message}"]
        elif ph.name == "node-selectors":
            lines = plan.lines() if plan is not None else [result.message]
        elif ph.name in ("master-nodes", "infra-nodes", "compute-nodes"):
            lines = plan_lines(plan) if plan is not None else [result.message]
        else:
            lines = []
        ph.dry_run_lines = [*head, *lines, *self._checked_lines(ph, list(getattr(result, "preconditions", None) or []))]
        self.touch()
