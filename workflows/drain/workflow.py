"""NodeDrainWorkflow: take one node out for maintenance, durably (node-maintenance-operator style).

Read the node (fails fast on API errors, :func:`workflows.kit.calls.planning_api_failure`) →
with ``alerts``, the kit's alert gate (:mod:`workflows.kit.alerts`: no cordon while Prometheus
names a blocking alert; the board entry ``alerts/node/<node>``) →
cordon (recording ``lockkeeper.io/cordoned-by`` = this workflow's ID) → drain with the blocked
report and the decision gate of :mod:`workflows.kit.drain` → optionally the reboot command →
with ``uncordon_after``, wait until the node is Ready and uncordon it (only if we cordoned). A
``skip`` or ``abort`` decision, or the ``abort`` update, uncordons the node if we cordoned it and
ends with outcome ``aborted``.

The reboot command (an argv list, never a shell string) runs through the kit's reboot
(:func:`workflows.kit.host.reboot`, host step ``reboot-command``, not safe to repeat): at most
once on the node (debug pod by default, or SSH / local), confirmed by a new bootID. A command
that ran and failed fails the procedure (RebootCommandFailed) and leaves the node cordoned for a
person to look at. An unknown outcome (lost worker, the command's own timeout) opens gate
``host/reboot-command``: approve runs it again, reject or the gate's timeout fails as before. The
wait for the new bootID (and Ready) is the kit's health wait ``node-ready``; an abort ends it.

Kit operator surface: ``status`` (:class:`DrainStatus`), ``approve``/``reject`` (the host gate),
``pause`` (holds before the reboot command and before uncordon), ``resume``, ``abort``,
``decide``; ``skip_node``/``retry_node`` are refused (one node). The drain holds the lease
``node/<cluster>/<node>``.

Preconditions (:mod:`workflows.kit.preflight`, issue 39): with a reboot command, its program must
exist on the node's host (``command -v`` through the executor it will run on) before the cordon;
a miss ends the run ``refused`` with nothing written (before, the drain cordoned and evicted, then
failed on the command with the node left cordoned). ``dry_run`` takes no lease and writes nothing:
it checks that the node exists and the reboot command's program, and ends ``dry-run`` with every
check's result.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import (
        CordonInput,
        CordonResult,
        DrainReport,
        NodeInfo,
        ReadNodeInput,
        UncordonInput,
        UncordonResult,
    )
    from activities.host.models import CommandResult
    from activities.preflight.models import HostExecutable, NamesExist, Precondition
    from workflows.drain.models import (
        PROCEDURE_DRAIN,
        DrainStatus,
        NodeDrainInput,
        NodeDrainResult,
    )
    from workflows.kit import calls as acts
    from workflows.kit.control import Aborted
    from workflows.kit.drain import DrainGateState, DrainLoop, check_decision, drain_until_done
    from workflows.kit.host import HOST_HEARTBEAT_SECONDS, HostSteps, RebootFailed, reboot
    from workflows.kit.models import (
        ChangedItem,
        DecideInput,
        DecideResult,
        DrainDecisionSignal,
        NodeControlInput,
        NodePhase,
        NodeResult,
        NodeStatus,
        ProcedurePhase,
        ProcedureStatus,
    )
    from workflows.kit.planning import planning_abort_message, planning_read
    from workflows.kit.preflight import PreflightOutcome
    from workflows.kit.procedure import NodeProcedureWorkflow
    from workflows.kit.scopes import node_scope



def _killed_by_reboot(result: CommandResult) -> bool:
    """The command was killed by a signal (exit 128+N) before its timeout: what a reboot does to
    it (a session that ends with no exit status is judged by the boot in the kit already)."""
    return not result.timed_out and (result.exit_code or 0) >= 128


@workflow.defn
class NodeDrainWorkflow(NodeProcedureWorkflow):
    """Input :class:`NodeDrainInput`, result :class:`NodeDrainResult`, status
    :class:`DrainStatus` (see the module doc)."""

    @workflow.init
    def __init__(self, input: NodeDrainInput) -> None:
        self._in = input
        self._id = workflow.info().workflow_id
        self._gate = DrainGateState(input.node, input.drain.decide_after_seconds, input.drain.decision_timeout_seconds,
                                    input.drain.decision_timeout_outcome)
        self._node = NodeStatus(name=input.node, pool="-", phase=NodePhase.RUNNING, step="cordon", since=workflow.now())
        self._status = DrainStatus(reboot_command=input.reboot_command, uncordon_after=input.uncordon_after)
        self._rebooted: str | None = None
        self._uncordon_done = False
        self.kit_init(
            procedure=PROCEDURE_DRAIN, noun="drain", input=input, status=self._status, pause_on_reject=False,
            reject_note="the reboot command is not run again", defer_status_attributes=True,
            preflight=bool(input.reboot_command) or input.dry_run,
        )

    # --- status and the node hooks ----------------------------------------------------------------

    def procedure_status(self) -> ProcedureStatus:
        st = super().procedure_status()
        assert isinstance(st, DrainStatus)
        ns = self._node.model_copy(deep=True)
        ns.blocked_since = self._gate.blocked_since if ns.phase == NodePhase.BLOCKED else None
        ns.decision_gate = self._gate.gate.model_copy() if self._gate.gate else None
        st.node = ns
        st.gate_history = sorted([*st.gate_history, *self._gate.records], key=lambda r: r.at)
        if ns.decision_gate is not None:
            st.gates.append(ns.decision_gate)
        gate = self._gate.open_gate
        if gate is not None:
            st.waiting_for = (f"a decision on the blocked drain of node {ns.name}: "
                              f"lockkeeper decide {self._id} {ns.name} wait|skip|delete-pod|abort")
            st.since, st.deadline = gate.opened_at, gate.timeout_at
        elif not st.waiting_for or not (self.control.paused or self.gates.waiting()):
            st.waiting_for = f"node {ns.name}: {ns.step}" + (f" ({ns.waiting_for})" if ns.waiting_for else "")
            st.since, st.deadline = ns.since, ns.deadline
        return st

    def check_skip_node(self, input: NodeControlInput) -> None:
        raise ValueError(f"a drain has one node ({self._in.node}): answer its blocked drain with decide ... skip, or abort")

    def check_retry_node(self, input: NodeControlInput) -> None:
        raise ValueError(f"a drain has one node ({self._in.node}): start a new drain to try again")

    def check_decide(self, input: DecideInput) -> None:
        if input.node != self._in.node:
            raise ValueError(f"unknown node {input.node!r}; this procedure drains {self._in.node}")
        if self._gate.pending is not None:
            raise ValueError(f"node {input.node} has no drain decision waiting (one is being applied)")
        rules = self._in.approvals
        check_decision(input, self._gate.open_gate, requested_by=rules.requested_by, four_eyes=rules.four_eyes,
                       allowed_approvers=rules.allowed_approvers)

    async def on_decide(self, input: DecideInput) -> DecideResult:
        self._gate.receive(DrainDecisionSignal(decision=input.decision, identity=input.identity, comment=input.comment, at=workflow.now()))
        return DecideResult(gate_id=self._gate.gate.id if self._gate.gate else "", decision=input.decision,
                            message=f"{input.decision} decided for node {input.node} by {input.identity}")

    # --- steps ------------------------------------------------------------------------------------

    def _set(self, phase: NodePhase, step: str, waiting_for: str | None = None, **kw) -> None:
        n = self._node
        if (n.phase, n.step) != (phase, step):
            n.since = workflow.now()
        n.phase, n.step, n.waiting_for = phase, step, waiting_for
        for k, v in kw.items():
            setattr(n, k, v)
        self.touch()

    def _fail(self, step: str, reason: str, kind: str) -> ApplicationError:
        self._set(NodePhase.FAILED, step, reason=reason)  # the run template ends the procedure failed
        return ApplicationError(reason, type=kind, non_retryable=True)

    async def _safe_point(self) -> None:
        await self.control.safe_point()

    async def _run_reboot_command(self, input: NodeDrainInput, timeouts: acts.Timeouts) -> None:
        """Run ``reboot_command`` once through the kit's reboot (:func:`workflows.kit.host.reboot`,
        boot ID read from the API); with ``uncordon_after`` wait for the node to be back.

        The reboot is judged by the node's boot: its bootID is read first, and the node counts
        as back only with another bootID (then Ready, with ``uncordon_after``). A Node stays
        Ready for the node monitor's grace period after its kubelet stops, so Ready alone would
        uncordon a node that has not gone down yet. A session that ends without an exit status,
        or a command killed by a signal (:func:`_killed_by_reboot`), is what a reboot does to
        the command that asked for it: judged by the boot too, not failed. Without
        ``uncordon_after`` a command that exits 0 is not watched (the node stays cordoned for
        maintenance). An unknown outcome opens gate ``host/reboot-command``.

        Raises a non-retryable ApplicationError (``RebootCommandFailed`` / ``NodeNotRebooted`` /
        ``NodeNotReady``) that fails the procedure with the node still cordoned."""
        access = input.command_access()
        argv = list(input.reboot_command or [])
        self._set(NodePhase.RUNNING, "reboot-command", "the node's bootID before the reboot command")
        steps = HostSteps(self.gates, board=self._status.host_steps, on_change=self.touch, timeouts=timeouts,
                          heartbeat_seconds=input.calls.host_heartbeat_seconds or HOST_HEARTBEAT_SECONDS, gate_timeout_seconds=input.gates.timeout_seconds)

        def sent(result: CommandResult | None) -> None:
            self._status.command = result

        def waiting(what: str, deadline: datetime) -> None:
            self._set(NodePhase.RUNNING, "wait-ready", what + " after the reboot command", deadline=deadline)

        try:
            done = await reboot(steps, input.node, access, argv, via="api", timeout_seconds=input.ready_timeout_seconds,
                                step_name="reboot-command", command_timeout_seconds=input.reboot_timeout_seconds,
                                unknown_opens_gate=True, killed_by_reboot=_killed_by_reboot, until_ready=input.uncordon_after,
                                watch=input.uncordon_after, wait_name="node-ready", on_timeout="fail", on_send=sent,
                                board=self._status.health, on_wait=waiting)
        except RebootFailed as err:
            before = steps.boots.get(input.node)
            if err.kind == "not-rebooted":
                raise self._fail("wait-ready", f"node did not reboot within {input.ready_timeout_seconds:.0f}s of the reboot command "
                                 f"(bootID still {before}); left cordoned", "NodeNotRebooted") from err
            if err.kind == "not-ready":
                raise self._fail("wait-ready", f"node not Ready {input.ready_timeout_seconds:.0f}s after the reboot command; left cordoned",
                                 "NodeNotReady") from err
            raise self._fail("reboot-command", f"reboot command failed: {err.reason}; node left cordoned", "RebootCommandFailed") from err
        if done.after is not None:
            self._rebooted = f"rebooted (bootID {done.before} -> {done.after})"

    async def _preflight(self, input: NodeDrainInput, timeouts: acts.Timeouts) -> None:
        """Read the node before anything is written, with the planning retry policy: an API
        that cannot be used (refused, DNS, 401, 403; 5xx after a bounded number of attempts)
        fails the drain at once with the ``Api*`` failure type and the API's message, and a
        missing node with ``NodeNotFound`` (the run template releases the lease). An abort while
        the read runs or waits for its next attempt raises Aborted
        (:func:`workflows.kit.planning.planning_read`)."""
        await planning_read(self.control, acts.READ_NODE, ReadNodeInput(node=input.node), NodeInfo, what=f"the drain of {input.node}",
                            timeouts=timeouts)

    def _end(self, outcome: str, phase: NodePhase, message: str, **fields: Any) -> NodeDrainResult:
        """The drain's result (:meth:`kit_end`): the node row final (``phase``, step
        ``finished``), then ``outcome`` and ``message``; the run template sets the procedure
        phase, releases the lease and waits for the handlers."""
        self._set(phase, "finished", reason=message)
        return self.kit_end(NodeDrainResult, outcome, message, **fields)

    def kit_result_fields(self) -> dict[str, Any]:
        """The drain's own result fields: the node, its reboot command's result, the node's
        final row (once it has one) and the gate history with the drain decisions merged in."""
        n, now = self._node, workflow.now()
        started = self._status.started_at or now
        fields: dict[str, Any] = {
            "node": self._in.node, "command": self._status.command,
            "gate_history": sorted([*self._status.gate_history, *self._gate.records], key=lambda r: r.at),
        }
        if n.phase in (NodePhase.DONE, NodePhase.SKIPPED, NodePhase.ABORTED, NodePhase.FAILED) and n.step == "finished":
            fields["node_result"] = NodeResult(name=n.name, pool="-", phase=n.phase, attempts=1,
                                               duration_seconds=(now - started).total_seconds(), reason=n.reason)
        return fields

    def _preconditions(self, input: NodeDrainInput) -> list[Precondition]:
        """What the drain needs (issue 39): the node (checked as a precondition in a dry run; a
        real run reads it first and fails with ``NodeNotFound``) and the reboot command's
        program on the node's host, through the executor the command will use."""
        pre: list[Precondition] = []
        if input.dry_run:
            pre.append(NamesExist(names=[input.node], why="--node: the node to drain"))
        if input.reboot_command:
            access = input.command_access()
            pre.append(HostExecutable(program=input.reboot_command[0], node=input.node, access=access,
                                      why=f"--reboot-command runs it there after the drain ({access.describe()})"))
        return pre

    def _checked_end(self, input: NodeDrainInput, outcome: PreflightOutcome) -> NodeDrainResult:
        """End a dry run (``dry-run``, every check's result) or a refused run (``refused``, one
        problem per line): nothing was written, the lease (if any) is released."""
        if input.dry_run:
            word = "dry-run"
            message = (f"dry run: would cordon and drain {input.node}"
                       + (f", then run {' '.join(input.reboot_command or [])}" if input.reboot_command else "")
                       + (f"; refused today: {len(outcome.failed)} precondition(s) failed" if outcome.failed else ""))
        else:
            word, message = "refused", "refused before any change: " + "; ".join(outcome.problems)
        phase = NodePhase.ABORTED if outcome.failed else NodePhase.PENDING
        self._set(phase, "finished", reason=message)
        return self.kit_end(NodeDrainResult, word, message, problems=outcome.problems, node_result=None)

    @workflow.run
    async def run(self, input: NodeDrainInput) -> NodeDrainResult:
        self.kit_identity_attributes()
        return await self.kit_run(lambda: self._run(input), NodeDrainResult)

    def kit_outcome_phase(self, outcome: str) -> str:
        return ProcedurePhase.ABORTED if outcome == "refused" else super().kit_outcome_phase(outcome)

    def kit_left_changed(self) -> list[ChangedItem]:
        """What a failed drain leaves changed: the node, when this run cordoned it and has not
        uncordoned it (a reboot command that failed, a node that did not come back)."""
        items = super().kit_left_changed()
        if self._node.cordoned_by_us and not self._uncordon_done:
            node = self._in.node
            items.append(ChangedItem(target=f"Node {node}", what="cordoned by this run (spec.unschedulable)",
                                     undo=f"kubectl uncordon {node}"))
        return items

    async def _run(self, input: NodeDrainInput) -> NodeDrainResult:
        if input.dry_run:  # no lease: a dry run may look while another run drains the node
            return self._checked_end(input, await self.kit_preflight(self._preconditions(input), refuse=False))
        await self.leases.acquire([node_scope(input.cluster, input.node)])
        self._status.leases = list(self.leases.held)
        self.touch()
        timeouts = self.timeouts  # the input's calls (workflows.kit.inputs.CallTimeouts)
        try:  # read the node first: the planning retry policy fails fast on API errors
            await self._preflight(input, timeouts)
            pre = self._preconditions(input)
            if pre:  # the reboot command's program, before the cordon
                self._set(NodePhase.RUNNING, "preflight", "the reboot command's program on the node")
                checked = await self.kit_preflight(pre, refuse=False)
                if not checked.ok:
                    return self._checked_end(input, checked)
                self._set(NodePhase.RUNNING, "cordon")
            if self.alerts is not None:
                # Prometheus before the first write: no cordon while a blocking alert fires (or,
                # failing closed, while Prometheus cannot be asked). No gate: no command here.
                self._set(NodePhase.RUNNING, "alerts", "no blocking alert (Prometheus)")
                await self.alerts.wait_clear(f"node/{input.node}")
                await self._safe_point()
                self._set(NodePhase.RUNNING, "cordon")
        except Aborted as stop:  # nothing was written (no cordon)
            return self._end("aborted", NodePhase.ABORTED, planning_abort_message(self.control, stop))
        cordon: CordonResult = await acts.call(acts.CORDON_NODE, CordonInput(node=input.node, owner=self._id), CordonResult, timeouts=timeouts)
        self._node.cordoned_by_us = cordon.cordoned_by_us

        async def before_pass() -> None:
            if self._node.phase != NodePhase.BLOCKED:
                self._set(NodePhase.RUNNING, "drain", "evicted pods to be gone")

        async def blocked(report: DrainReport, reason: str) -> None:
            gate = self._gate.open_gate
            self._set(NodePhase.BLOCKED, "drain", f"a decision on gate {gate.id}" if gate else "the blocking pods to become evictable",
                      reason=reason, drain_report=report)

        async def changed() -> None:
            await blocked(self._node.drain_report or DrainReport(), self._node.reason or "")

        outcome = await drain_until_done(
            DrainLoop(node=input.node, wait_seconds=input.drain.wait_seconds, backoff_initial=input.drain.backoff_initial_seconds,
                      backoff_max=input.drain.backoff_max_seconds, timeouts=timeouts, before_pass=before_pass,
                      blocked=blocked, changed=changed, stopped=lambda: self.control.abort),
            self._gate,
        )
        drained = outcome == "drained"
        uncordoned, held_by = False, None
        try:
            if drained and input.reboot_command:
                await self._safe_point()
                await self._run_reboot_command(input, timeouts)
            if drained and input.uncordon_after:
                await self._safe_point()
        except Aborted:
            drained, outcome = False, "stopped"
        if not drained or input.uncordon_after:
            self._set(NodePhase.RUNNING, "uncordon")
            unc: UncordonResult = await acts.call(acts.UNCORDON_NODE, UncordonInput(node=input.node, owner=self._id), UncordonResult, timeouts=timeouts)
            self._uncordon_done = True  # uncordoned, or cordoned now by somebody else (held_by)
            uncordoned, held_by = unc.uncordoned, unc.left_cordoned_reason
        if drained:
            message = f"node {input.node} drained" + (f", {self._rebooted}" if self._rebooted else "") + (
                " and uncordoned" if uncordoned else "; left cordoned for maintenance")
            return self._end("completed", NodePhase.DONE, message, drained=True, uncordoned=uncordoned)
        by = self.control.abort_by or (self._gate.gate.decided_by if self._gate.gate else "unknown")
        left = "the node is schedulable again" if uncordoned else f"the node stays cordoned: {held_by or 'not by this run'}"
        return self._end("aborted", NodePhase.SKIPPED if outcome == "skip" else NodePhase.ABORTED,
                         f"{outcome if outcome != 'stopped' else 'abort'} by {by}; {left}", uncordoned=uncordoned)
