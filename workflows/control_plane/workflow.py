"""ControlPlaneUpgradeWorkflow: the control plane master by master, strictly one at a time
(R3d masters, procedures-spec §4.1; openshift-ansible 3.10 ``upgrade_control_plane.yml``).

Preflight (once, read-only except the backup): the declared preconditions (the masters, the
update of the cluster's version one minor version at most and never back, the etcd backup or
why none, the programs on the worker and the masters), then the etcd backup barrier (the etcd
procedure as a child; required unless the input says why not; its backup must be newer than the
run's start) → the GlusterFS health gate → every master's own
``/healthz/ready`` → etcd healthy (``etcd_cluster_status`` with etcdctl on the first member's host
against ``etcd_members`` or the backup's; :func:`workflows.control_plane.models.etcd_health_problems`
without members only when ``etcd_health_skip_reason`` says why).
An abort during the GlusterFS gate or the etcd read ends the run ``aborted`` at once, no master
touched (:mod:`workflows.kit.planning`). Then per master, in the given order:

1. a gate before the first master (or each, ``approve_each``);
2. the master action (:mod:`workflows.control_plane.steps`): manifests recorded then written, or
   the external command, then ``master-restart api`` / ``controllers``; each at most once (an
   unknown outcome opens gate ``host/<step>``);
3. **this master's** ``/healthz/ready`` until ``ok``; after ``api_ready_timeout_seconds`` gate
   ``api/<master>/<n>`` shows the ``master-logs api api --tail=N`` tail: approve = wait again
   (after a fix), ``decide ID GATE restart`` = ``master-restart api`` again, reject = abort;
4. its mirror pods Ready (on ``expected_image`` when given), gated the same way;
5. the GlusterFS gate when the master hosts bricks;

and the next master never starts while one is not back. The masters go through the kit's node
window (:class:`workflows.kit.batches.NodeBatches`, group ``master``, maxUnavailable 1, in the
given order), each as an in-process step of this workflow (:func:`workflows.kit.batches.local_run`),
so they share every node procedure's board (``status.nodes``), pause/abort, ``skip-node`` /
``retry-node`` (a master not started yet is skipped, one in progress is not; one that failed runs
its steps again, as a re-run of openshift-ansible's play for it would: a manifest that already
holds the new content is not written again, ``master-restart`` runs again), holds
(``lockkeeper hold ID MASTER``: the masters after a held one wait, the order stays the
operator's) and maintenance windows (``windows``). A master whose
step fails (an activity that failed for good) pauses the upgrade naming it instead of failing the
run; a person's abort or a refused gate (``StepAborted``) aborts it as before.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.etcd.models import ClusterStatus, ClusterStatusInput
    from activities.preflight.models import HostExecutable, InputCheck, NamesExist, Precondition, UpdateStep, WorkerExecutable
    from workflows.control_plane.models import (
        PROCEDURE_CONTROL_PLANE_UPGRADE,
        ControlPlaneResult,
        ControlPlaneStatus,
        ControlPlaneUpgradeInput,
        MasterRow,
        MasterSpec,
        etcd_health_problems,
    )
    from workflows.control_plane.steps import MasterSteps, StepAborted
    from workflows.etcd.backup import require_etcd_backup
    from workflows.shared.glusterfs.health import GlusterHealth
    from workflows.kit import calls as acts
    from workflows.kit.batches import Group, LocalStop, NodeBatches, local_run
    from workflows.kit.board import NodeBoard
    from workflows.kit.control import Aborted
    from workflows.kit.host import HOST_HEARTBEAT_SECONDS, HostSteps
    from workflows.kit.models import ChangedItem, Gate, GateKind, NodeControlInput, ProcedurePhase, failure_message
    from workflows.kit.noderun import NodeRunResult
    from workflows.kit.plan import PlannedGate
    from workflows.kit.planning import abortable, planning_abort_message
    from workflows.kit.procedure import FAILURES, NodeProcedureWorkflow
    from workflows.kit.scopes import node_scope

ETCD_CLUSTER_STATUS = "etcd_cluster_status"
#: The node window's group of the masters (also the alert gate's prefix: ``alerts/master/NAME``).
MASTERS_GROUP = "master"


def etcd_backup_check(input: ControlPlaneUpgradeInput) -> InputCheck:
    """The etcd-backup precondition as the plan and the dry run show it (issue 41: no update of
    the cluster's version without an etcd backup newer than the run's start): with the barrier, a
    backup of every member taken by this run before the first master (newer than the run's start
    by construction, and checked so when the barrier reports); without it, skipped and why
    (``etcd_backup_skip_reason``; the input refuses neither-nor)."""
    if input.etcd_backup is not None:
        members = ", ".join(m.name for m in input.etcd_backup.members)
        return InputCheck(about="etcd backup", ok=True, why="no update of the cluster's version without a backup newer than the run",
                          detail=f"taken by this run before the first master (snapshot of {members})")
    return InputCheck(about="etcd backup", ok=True, why="no update of the cluster's version without a backup newer than the run",
                      detail=f"skipped: {input.etcd_backup_skip_reason}")


@workflow.defn
class ControlPlaneUpgradeWorkflow(NodeProcedureWorkflow):
    """Input :class:`ControlPlaneUpgradeInput`, result :class:`ControlPlaneResult`, status
    :class:`ControlPlaneStatus`. Fails (non-retryable ApplicationError) before any master is
    touched when a preflight check fails (``PreflightFailed``), the etcd backup is incomplete
    (``EtcdBackupIncomplete``) or another procedure holds a master (``LeaseHeld``)."""

    @workflow.init
    def __init__(self, input: ControlPlaneUpgradeInput) -> None:
        self._in = input
        self._id = workflow.info().workflow_id
        self._status = ControlPlaneStatus(masters=[MasterRow(name=m.name) for m in input.masters])
        self.kit_init(
            procedure=PROCEDURE_CONTROL_PLANE_UPGRADE, noun="control-plane upgrade", input=input, status=self._status,
            pause_on_reject=False, reject_note="control-plane upgrade stops", base_phase=ProcedurePhase.PLANNING, preflight=True,
        )
        self._timeouts = self.timeouts  # the input's calls (workflows.kit.inputs.CallTimeouts)
        self.host = HostSteps(self.gates, board=self._status.host_steps, on_change=self.touch, timeouts=self._timeouts,
                              heartbeat_seconds=input.calls.host_heartbeat_seconds or HOST_HEARTBEAT_SECONDS,
                              gate_timeout_seconds=input.gates.timeout_seconds)
        self.gluster = GlusterHealth.of_procedure(self, namespace=input.gluster_namespace, timeout_s=input.gluster_timeout_seconds,
                                                  short_call_s=input.calls.short_call_seconds * 3)
        self.steps = MasterSteps(input, self.gates, self.control, self.host, self._status, self.touch)
        self.board = NodeBoard(procedure=PROCEDURE_CONTROL_PLANE_UPGRADE, cluster=input.cluster, nodes=self._status.nodes,
                               gate_history=self._status.gate_history, warnings=self._status.warnings, on_change=self.touch,
                               noun="control-plane upgrade")
        self.batches = NodeBatches(board=self.board, control=self.control, gates=self.gates, start_child=self._start_master,
                                   gate_timeout_seconds=input.gates.timeout_seconds, gate_timeout_outcome=input.gates.timeout_outcome,
                                   alerts=self.alerts, gate_text=lambda g: f"upgrade master {g.before_node} next",
                                   on_gate_refused=self._gate_refused)
        # The masters go in the operator's order: a held master keeps the ones after it waiting.
        self.batches.holds_keep_order = True
        self.kit_windows(input.windows)  # no master starts outside a maintenance window

    @workflow.query
    def status(self) -> ControlPlaneStatus:
        """Preflight, the masters' rows, gates and what the upgrade waits for."""
        return self.procedure_status()  # type: ignore[return-value]

    def _row(self, name: str) -> MasterRow:
        return next(r for r in self._status.masters if r.name == name)

    def _spec(self, name: str) -> MasterSpec:
        return next(m for m in self._in.masters if m.name == name)

    @workflow.run
    async def run(self, input: ControlPlaneUpgradeInput) -> ControlPlaneResult:
        self.kit_status_attributes()
        return await self.kit_run(lambda: self._run(input), ControlPlaneResult)

    def kit_left_changed(self) -> list[ChangedItem]:
        return super().kit_left_changed() + self._left_changed()

    def kit_result_fields(self) -> dict[str, Any]:
        return {"masters": [r.model_copy() for r in self._status.masters], "checks": dict(self._status.checks)}

    def _left_changed(self) -> list[ChangedItem]:
        """What stays changed (issue 39): each master whose host this run began to change,
        ``host NAME`` as the simulator's diff names it, with what was written (each manifest's
        sha256 before and after) and whether it is done. No undo: lockkeeper has no downgrade
        (each manifest's content before is in the row's ``records``)."""
        items = []
        for row in self._status.masters:
            if not row.host_changed:
                continue
            files = "; ".join(f"{r.path} sha256 {(r.sha256_before or 'absent')[:12]} -> {(r.sha256_after or '?')[:12]}"
                              for r in row.records) or "the master action"
            state = "upgraded" if row.state == "done" else f"left {row.state} at {row.step or 'its first step'}"
            items.append(ChangedItem(target=f"host {row.name}", what=f"{state}: {files}; API and controllers restarted by "
                                     "this run where it got that far (content before: status masters[].records)"))
        return items

    def _result(self, outcome: str, message: str, problems: list[str] | None = None) -> ControlPlaneResult:
        left = self.kit_left_changed() if outcome not in ("completed", "dry-run") else []
        if left:
            self._status.left_changed = left
            message += "; left changed: " + "; ".join(i.line() for i in left)
        return self.kit_end(ControlPlaneResult, outcome, message, left_changed=left, problems=problems or [],
                            next_commands=self.kit_next_commands(left))

    def _preconditions(self, input: ControlPlaneUpgradeInput) -> list[Precondition]:
        """What the upgrade needs before the first master (issue 39): the masters the operator
        named are Nodes; the update goes one minor version at most from the cluster's version
        (issue 41); an etcd backup taken by this run, or the reason given for none; the external
        action's program on the worker; ``master-restart`` (and ``master-logs``, read at an API gate) on each master's host through its access, which
        also proves that access works."""
        pre: list[Precondition] = [NamesExist(names=[m.name for m in input.masters], role="master", why="--master"),
                                   UpdateStep(target_version=input.update_target(),
                                              why="an update of the cluster's version goes one minor version at a time"),
                                   etcd_backup_check(input)]
        if input.action.kind == "external":
            pre.append(WorkerExecutable(program=input.action.argv[0], why="the master action runs it on the worker for each master"))
        for m in input.masters:
            if input.action.restart:
                pre.append(HostExecutable(program="master-restart", node=m.name, access=m.access,
                                          why=f"restarts {', '.join(input.action.restart)} after the master action"))
            pre.append(HostExecutable(program="master-logs", node=m.name, access=m.access,
                                      why="its API's log tail is shown at an API gate"))
        return pre

    async def _run(self, input: ControlPlaneUpgradeInput) -> ControlPlaneResult:
        checked = await self.kit_preflight(self._preconditions(input), refuse=False)
        if input.dry_run:
            self.control.base_phase = ProcedurePhase.DONE
            self.touch()
            order = " -> ".join(m.name for m in input.masters)
            return self._result("dry-run", f"masters one at a time: {order}; action {input.action.kind}, "
                                           f"restart {', '.join(input.action.restart) or 'none'}; own APIs: "
                                           + ", ".join(f"{m.name} {m.api_url}" for m in input.masters)
                                           + (f"; refused today: {len(checked.failed)} precondition(s) failed"
                                              if checked.failed else ""), problems=checked.problems)
        checked.raise_if_failed()  # refused (kit_run): nothing written, no lease taken
        await self.leases.acquire([node_scope(input.cluster, m.name) for m in input.masters], probe_cluster=True)
        try:
            await self._preflight(input)
        except Aborted as stop:  # an abort during the read-only checks (workflows.kit.planning): no master touched
            await self.leases.release()
            self.control.base_phase = ProcedurePhase.ABORTED
            self.touch()
            await workflow.wait_condition(workflow.all_handlers_finished)
            return self._result("aborted", planning_abort_message(self.control, stop))
        self.control.base_phase = ProcedurePhase.RUNNING
        self.touch()
        names = [m.name for m in input.masters]
        gated = names if input.approve_each else names[:1] if input.approve_first else []
        self.batches.add_group(MASTERS_GROUP, max_unavailable=1, nodes=names, gates=[
            PlannedGate(id=f"{MASTERS_GROUP}/{n}", kind=GateKind.NODE, before_node=n) for n in gated])
        # One master at a time, gates before it, the alert gate (alerts/master/NAME), holds,
        # windows, pause, skip/retry: the kit's window (module doc).
        await self.batches.run_group(MASTERS_GROUP)
        self._status.current_master = None
        await self.leases.release()
        if self.control.abort:
            self.control.base_phase = ProcedurePhase.ABORTED
            self.touch()
            await workflow.wait_condition(workflow.all_handlers_finished)
            return self._result("aborted", self.control.abort_reason or "aborted")
        left = [r.name for r in self._status.masters if r.state != "done"]
        if left:  # o-a's gate play: "The following masters did not finish updating"
            raise ApplicationError(f"Upgrade cannot continue. The following masters did not finish updating: {', '.join(left)}",
                                   type="MastersNotUpdated", non_retryable=True)
        self.control.base_phase = ProcedurePhase.DONE
        self.touch()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._result("completed", f"{len(input.masters)} master(s) upgraded one at a time")

    def check_skip_node(self, input: NodeControlInput) -> None:
        """The kit's checks, and a master in progress is not skipped: its API may be down, and
        the next master never starts while one is not back (abort, or reject its gate, stops it)."""
        super().check_skip_node(input)
        if input.node in self.batches.children:  # type: ignore[union-attr]
            raise ValueError(f"master {input.node} is being upgraded: it cannot be skipped half-way (the next master never "
                             "starts while one is not back); abort, or reject its gate, stops the upgrade")

    def _gate_refused(self, gate: Gate) -> None:
        """A gate before a master rejected (or timed out with outcome reject): the upgrade aborts."""
        self.control.request_abort(f"gate {gate.id} {gate.state}", gate.decided_by or "timeout")

    async def _start_master(self, name: str, group: Group, attempt: int) -> workflow.ChildWorkflowHandle:
        """The window's ``start_child``: master ``name``'s steps (:meth:`_master`) in this workflow.
        A ``StepAborted`` (a person's abort or reject, a command that failed) aborts the upgrade
        and ends the master ``aborted``; another failure ends it ``failed`` (the window pauses)."""
        master, row = self._spec(name), self._row(name)

        async def step(stop: LocalStop) -> NodeRunResult:
            self._status.current_master = name
            try:
                await self._master(self.steps, master, row)
            except StepAborted as err:
                row.state, row.detail = "aborted", str(err)
                self.control.request_abort(str(err), "lockkeeper")
                return NodeRunResult(node=name, outcome="aborted", attempt=attempt, reason=str(err), finished_at=workflow.now())
            except FAILURES as err:
                row.state, row.detail = "failed", failure_message(err)
                raise
            finally:
                self._status.current_master = None
            return NodeRunResult(node=name, outcome="done", attempt=attempt, finished_at=workflow.now())

        return await local_run(name, attempt, step)

    async def _preflight(self, input: ControlPlaneUpgradeInput) -> None:
        pf = self._status.checks
        if input.etcd_backup is not None:
            pf["etcd-backup"] = "running"
            self.touch()
            backup = await require_etcd_backup(input.etcd_backup.model_copy(update={"search_attributes": False}))
            started = self._status.started_at
            if backup.started_at is None or (started is not None and backup.started_at < started):
                # By construction the barrier runs inside this run; a backup older than the run's
                # start is no backup of the cluster the masters are about to change (issue 41).
                pf["etcd-backup"] = f"refused: backup started {backup.started_at}, before this run ({started})"
                raise ApplicationError(f"etcd backup not newer than the run's start ({started}): {backup.message}",
                                       type="PreflightFailed", non_retryable=True)
            pf["etcd-backup"] = f"ok: {backup.message}, taken by this run at {backup.started_at.isoformat()}"
        else:
            pf["etcd-backup"] = f"skipped: {input.etcd_backup_skip_reason}"
            self._status.warnings.append(f"etcd backup barrier skipped: {input.etcd_backup_skip_reason}")
        if input.gluster_check:
            pf["gluster"] = "waiting"
            self.touch()
            res = await self.gluster.gate("preflight")
            if res.outcome == "stopped" and self.control.abort:
                pf["gluster"] = "aborted"
                raise Aborted(self.control.abort_reason)
            if res.outcome != "healthy":
                pf["gluster"] = f"{res.outcome}: {res.detail}"
                raise ApplicationError(f"GlusterFS not healthy before the control plane: {res.detail}", type="PreflightFailed",
                                       non_retryable=True)
            pf["gluster"] = "healthy"
        down = []
        for m in input.masters:
            probe = await self.steps.probe(m)
            pf[f"api/{m.name}"] = "ok" if probe.ready else (probe.error or f"HTTP {probe.status}: {probe.body}")
            if not probe.ready:
                down.append(m.name)
        if down:
            raise ApplicationError(f"master API not ready on {', '.join(down)}: no master is taken down while another is",
                                   type="PreflightFailed", non_retryable=True)
        await self._etcd_health(input)
        self.touch()

    async def _etcd_health(self, input: ControlPlaneUpgradeInput) -> None:
        pf = self._status.checks
        members = input.health_members()
        problem = input.etcd_health_problem()
        if problem:
            pf["etcd-health"] = f"refused: {problem}"
            raise ApplicationError(problem, type="PreflightFailed", non_retryable=True)
        if not members:
            pf["etcd-health"] = f"not checked: {input.etcd_health_skip_reason or 'no etcd members given'}"
            self._status.warnings.append(f"etcd health not checked: {input.etcd_health_skip_reason or 'no etcd members in the input'}")
            return
        st: ClusterStatus = await abortable(self.control, acts.call(
            ETCD_CLUSTER_STATUS, ClusterStatusInput(via=members[0], members=members), ClusterStatus, seconds=60, heartbeat=True,
            timeouts=self._timeouts))
        # The full verdict: member list with quorum, every member started, one leader.
        bad = etcd_health_problems(members, st)
        if bad or not st.endpoints:
            pf["etcd-health"] = f"unhealthy: {', '.join(bad) or 'no endpoint answered'}"
            raise ApplicationError(f"etcd not healthy: {', '.join(bad) or 'no endpoint answered'}", type="PreflightFailed",
                                   non_retryable=True)
        leader = next((e.leader for e in st.endpoints if e.healthy and e.leader), None)
        pf["etcd-health"] = f"ok: {len(st.endpoints)} endpoint(s) healthy" + (f", leader {leader}" if leader else "")

    async def _master(self, steps: MasterSteps, master: MasterSpec, row: MasterRow) -> None:
        row.state, row.since = "running", workflow.now()
        self.touch()
        await steps.action(master, row)
        await steps.api_back(master, row)
        await steps.pods_ready(master, row)
        if master.gluster_host and self._in.gluster_check:
            steps.set(row, "gluster", "GlusterFS healthy again")
            res = await self.gluster.gate(f"after-{master.name}")
            if res.outcome != "healthy":
                raise StepAborted(f"GlusterFS not healthy after {master.name}: {res.detail}")
        row.state, row.step, row.detail, row.since = "done", "finished", None, workflow.now()
        self.touch()

