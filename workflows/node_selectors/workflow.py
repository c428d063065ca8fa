"""NodeSelectorMigrationWorkflow: move workloads off old node labels, verify, then remove the labels
(R3e, procedures-spec §5.3; seed 002: patch ``dc/docker-registry`` to
``node-role.kubernetes.io/infra: "true"``, check every pod runs, only then ``oc label node X region-
zone-``).

1. scan (workloads, CronJobs, namespaces, and ``master-config.yaml`` on ``input.masters`` through
   :mod:`workflows.node_selectors.masterconfig`), plan (:mod:`workflows.node_selectors.plan`); a
   blocked object ends the run ``refused`` before any write, naming the object and the reason
   (one problem per object; a ``defaultNodeSelector`` on an old label is always blocked: a person edits
   it and restarts the APIs); ``dry_run`` stops after the plan;
2. baseline of every pod; gate ``plan``;
3. per object (with ``alerts``, after the kit's alert gate :mod:`workflows.kit.alerts`:
   ``alerts/selector/<obj>``, and ``alerts/ondelete/<ds>/<node>`` before each OnDelete node): the kit's record (the selector's original), then a JSON patch guarded by ``test``
   ops (:class:`workflows.kit.records.Records`); wait for its rollout (gate ``rollout/<obj>`` on
   failure or timeout: approve waits again, reject reverts that object and stops). A DaemonSet
   with ``updateStrategy: OnDelete`` has no rollout: its pods keep the old template (and the old
   nodeSelector) until deleted. ``ondelete_daemonsets="report"`` (default, the careful choice:
   deleting e.g. GlusterFS pods is a decision of its own) lists them in status
   ``old_template_pods`` and in the label-removal gate; ``"delete"`` opens gate
   ``ondelete/<ds>``, then deletes them one node at a time, each replacement available before
   the next;
4. "all pods run": no regression against the baseline and no Pending pod on a node selector
   (gate ``pods/<n>`` when it does not settle);
5. the re-scan must find nothing still selecting a label to remove (else ``RescanFound``);
6. gate ``remove-labels``, then per node a record and the label removal;
7. the post-check (step 4 again), then the run stays open ``revert_window_seconds`` for
   ``lockkeeper revert ID``.

``revert`` is the kit's update (:meth:`workflows.kit.procedure.ProcedureWorkflow.revert`):
accepted once a record holds a change, during the run (it stops at the next safe point or gate)
and in the revert window; the kit's run template then restores through :meth:`kit_undo`: labels
back first, then selectors, each last-first, each read back; a record somebody changed since is
refused (never overwritten) and named, and ``reverted`` lists only the records read back at their
originals (issue 39). An abort before the end restores the same way.
"""

from __future__ import annotations

from datetime import timedelta

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import ObjectRef
    from activities.preflight.models import LabelUnreferenced, NamedAccess
    from activities.node_selectors.models import (
        READ_POD_STATES,
        READ_ROLLOUT,
        SCAN_NODE_SELECTORS,
        PodStates,
        RolloutInput,
        RolloutState,
        ScanInput,
        ScanResult,
    )
    from workflows.kit import calls as acts
    from workflows.kit.control import Aborted, RevertRequested
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.kit.host import HostSteps
    from workflows.kit.models import Gate, ProcedurePhase, RevertInput
    from workflows.kit.planning import planning_abort_message, planning_read
    from workflows.kit.procedure import ProcedureWorkflow
    from workflows.kit.records import REMOVE, RecordRefused
    from workflows.node_selectors.models import (
        PROCEDURE_NODE_SELECTOR_MIGRATION,
        MigrationItem,
        MigrationPlan,
        NodeSelectorMigrationInput,
        NodeSelectorMigrationResult,
        NodeSelectorMigrationStatus,
    )
    from activities.cluster.models import DeleteBlockingPodsInput, DeleteBlockingPodsResult
    from workflows.node_selectors.masterconfig import read_master_selectors
    from workflows.node_selectors.plan import master_config_items, plan_migration, pod_regressions, still_referencing



def _label_path(key: str) -> str:
    """JSON Pointer of a node label (RFC 6901: ``~`` → ``~0``, ``/`` → ``~1``)."""
    return "/metadata/labels/" + key.replace("~", "~0").replace("/", "~1")


class _Stop(Exception):
    """A person rejected a gate: stop here."""


@workflow.defn
class NodeSelectorMigrationWorkflow(ProcedureWorkflow):
    """Input :class:`NodeSelectorMigrationInput`, result :class:`NodeSelectorMigrationResult`,
    status :class:`NodeSelectorMigrationStatus`; the kit's ``revert`` update (``lockkeeper
    revert``; see the module doc). A blocked plan (capacity check, a defaultNodeSelector on an old label) ends ``refused``
    before any write, one problem per object; fails with ``NothingToDo`` when nothing selects the labels."""

    #: The selectors and labels it patches are the kit's records: the kit's ``revert`` restores them.
    kit_keeps_records = True

    @workflow.init
    def __init__(self, input: NodeSelectorMigrationInput) -> None:
        self._in = input
        self._id = workflow.info().workflow_id
        self._status = NodeSelectorMigrationStatus()
        self.kit_init(
            procedure=PROCEDURE_NODE_SELECTOR_MIGRATION, noun="nodeSelector migration", input=input, status=self._status,
            pause_on_reject=False, reject_note="migration stops", base_phase=ProcedurePhase.PLANNING,
        )
        self._timeouts = self.timeouts  # the input's calls (workflows.kit.inputs.CallTimeouts)
        self._host = HostSteps(self.gates, timeouts=self._timeouts, heartbeat_seconds=self._timeouts.heartbeat.total_seconds())
        self._window_open = False  # the run ended its steps and waits for a revert (revert_window_seconds)
        self._n = 0

    @workflow.query
    def status(self) -> NodeSelectorMigrationStatus:
        """The plan, the step, regressions, re-scan findings, records and gates."""
        return self.procedure_status()  # type: ignore[return-value]

    def check_revert(self, input: RevertInput) -> None:
        """The kit's checks during the run; in the revert window (the run's steps ended, its base
        phase is final) only: not twice, and only while a record still holds a change. Raises
        ValueError (the operator's message)."""
        if not self._window_open:
            super().check_revert(input)
            return
        if self.control.revert:
            raise ValueError(f"a revert was already requested by {self.control.revert_by}")
        if not self.records.changed():
            raise ValueError("nothing has been changed yet: abort the run instead")

    async def kit_undo(self, why: str) -> tuple[list[str], list[str]]:
        """Restore what the records hold: labels first, then selectors, each last-first, each read
        back (:meth:`workflows.kit.records.Records.revert`). ``reverted`` gets each record read
        back at its originals; ``revert_refused`` each one somebody changed since (left as it is)
        or that reads back different, with why. Returns ``(restored, problems)`` as the kit's."""
        self._step("revert")
        changed = self.records.changed()
        labels = [n for n in reversed(changed) if n.startswith("labels/")]
        selectors = [n for n in reversed(changed) if not n.startswith("labels/")]
        restored: list[str] = []
        problems: list[str] = []
        for name in labels + selectors:
            await self._revert_one(name)
            st = self.records.board[name]
            if st.state == "reverted":
                restored.append(f"{st.object}: {st.detail}")
            else:
                problems.append(f"{name}: {st.detail}")
        self._step("reverted")
        return restored, problems

    def _step(self, step: str) -> None:
        self._status.step = step
        self.touch()

    async def _alerts_clear(self, where: str) -> None:
        """With ``alerts``: wait until no alert blocks ``where`` (:mod:`workflows.kit.alerts`),
        then the safe point (raises :class:`_Stop` on an abort meanwhile). Without: nothing, no
        command."""
        if self.alerts is None:
            return
        await self.alerts.wait_clear(where)
        self._stop_if_aborted()

    def _stop_if_aborted(self) -> None:
        """A safe point: an abort stops the migration here (raises :class:`_Stop`), a revert
        request too (raises the kit's :class:`RevertRequested`); what the records hold is then
        restored (module doc)."""
        if self.control.abort:
            raise _Stop(self.control.abort_reason or "aborted")
        if self.control.revert:
            raise RevertRequested(self.control.revert_reason)

    async def _gate(self, gate_id: str, comment: str) -> Gate:
        """The kit's gate step with the input's policy; not passed: stop (an abort or a revert
        stops as such)."""
        answer = await self.gates.step(gate_id, comment, self._in.gates)
        gate = answer.gate
        if not answer.passed:
            self._stop_if_aborted()  # an abort or a revert ended the wait
            raise _Stop(f"gate {gate_id} {gate.state} by {gate.decided_by or 'timeout'}")
        return gate


    @workflow.run
    async def run(self, input: NodeSelectorMigrationInput) -> NodeSelectorMigrationResult:
        self.kit_status_attributes()
        return await self.kit_run(lambda: self._run(input), NodeSelectorMigrationResult)

    def kit_result_fields(self) -> dict[str, Any]:
        s = self._status
        return {"plan": s.plan, "labels_removed": list(s.labels_removed), "reverted": list(s.reverted),
                "revert_refused": list(s.revert_refused), "old_template_pods": dict(s.old_template_pods)}

    def _result(self, outcome: str, message: str) -> NodeSelectorMigrationResult:
        return self.kit_end(NodeSelectorMigrationResult, outcome, message)

    async def _scan(self, *, planning: bool = False) -> ScanResult:
        """The scan; ``planning`` (the first one, before any change) with the planning retry
        policy: an API that cannot be used fails the migration with the ``Api*`` type (issue 18),
        and an abort while it runs raises Aborted (:func:`workflows.kit.planning.planning_read`)."""
        if not planning:
            return await acts.call(SCAN_NODE_SELECTORS, ScanInput(), ScanResult, seconds=60, heartbeat=True, timeouts=self._timeouts)
        # The scan beats while it lists: a dead worker is seen at the heartbeat timeout.
        return await planning_read(self.control, SCAN_NODE_SELECTORS, ScanInput(), ScanResult, what="the scan", seconds=60,
                                   timeouts=self._timeouts, heartbeat=self._timeouts.heartbeat)

    async def _pods(self) -> PodStates:
        return await acts.call(READ_POD_STATES, ScanInput(), PodStates, seconds=60, heartbeat=True, timeouts=self._timeouts)

    async def _master_selectors(self) -> tuple[dict[str, str], list[MigrationItem]]:
        """Each master's ``defaultNodeSelector`` and the blocked items: one per master on an old
        key, one per master whose file could not be read (nothing is known about it)."""
        i = self._in
        if not i.masters:
            return {}, []
        selectors, errors = await read_master_selectors(i, self._host)
        items = [MigrationItem(ref=ObjectRef(kind="MasterConfig", name=m), path=i.master_config_path, old={}, new={},
                               blocked=[f"could not read it: {why}"]) for m, why in sorted(errors.items())]
        return selectors, items

    def _preconditions(self, input: NodeSelectorMigrationInput) -> list[Any]:
        """What the migration needs before its first write (issue 39): each label it removes at
        the end selected by nothing but what its mapping rewrites (workloads, projects and, on
        each ``--master``, master-config.yaml's ``defaultNodeSelector``, which it never
        rewrites); without masters that part is ``not run`` and says why."""
        covered = [*input.mapping, *input.drop_keys]
        masters = [NamedAccess(name=m.name, access=m.access) for m in input.masters]
        why = "removed from the nodes at the end; a selector left on it can no longer schedule"
        return [LabelUnreferenced(label=label, covered=covered, masters=masters, master_config_path=input.master_config_path,
                                  rewrites_master_config=False, why=why) for label in input.remove_labels]

    async def _run(self, input: NodeSelectorMigrationInput) -> NodeSelectorMigrationResult:
        self.kit_status.preflight = "pending"  # `start` waits for the plan's verdict (refused: exit 2)
        self._step("scan")
        try:
            scan = await self._scan(planning=True)
        except Aborted as stop:  # an abort during the scan: nothing was changed
            self.control.base_phase = ProcedurePhase.ABORTED
            self._step("finished")
            await workflow.wait_condition(workflow.all_handlers_finished)
            return self._result("aborted", planning_abort_message(self.control, stop))
        plan = plan_migration(scan.workloads, scan.namespaces, scan.nodes, input.mapping, input.drop_keys, input.remove_labels)
        unscanned = "" if input.masters else (
            f"NOT CHECKED: master-config.yaml projectConfig.defaultNodeSelector (no --master given): if it selects "
            f"{' or '.join(input.remove_labels)}, new projects cannot schedule once the labels are removed (R3); "
            f"give --master NAME (with --ssh-map for the simulator) to check it")
        if unscanned:
            self._status.warnings.append(unscanned)
        master_selectors, unreadable = await self._master_selectors()
        plan.items += unreadable + master_config_items(master_selectors, input.master_config_path, input.mapping,
                                                       input.drop_keys, input.remove_labels, scan.nodes)
        self._status.plan = plan
        self.touch()
        checked = await self.kit_preflight(self._preconditions(input), refuse=False)
        blocked = plan.blocked()
        self.kit_status.preflight = "refused" if blocked or not checked.ok else "passed"
        self.touch()
        if blocked:
            raise ApplicationError("\n".join(f"{i.ref.describe()}: {', '.join(i.blocked)}" for i in blocked), type="PlanBlocked",
                                   non_retryable=True)
        if not input.dry_run:  # a dry run shows the failed checks and ends; the CLI then exits 2
            checked.raise_if_failed()
        if input.dry_run:
            self.control.base_phase = ProcedurePhase.DONE
            self.touch()
            return self._result("dry-run", "\n".join([*plan.lines(), *([unscanned] if unscanned else [])]))
        if not plan.items and not plan.label_nodes:
            raise ApplicationError("nothing selects the old labels and no node carries them", type="NothingToDo", non_retryable=True)
        baseline = await self._pods()
        self.control.base_phase = ProcedurePhase.RUNNING
        try:
            if input.approve_plan:
                self._step("approve-plan")
                await self._gate("plan", "apply this plan: " + " | ".join([*plan.lines(), *([unscanned] if unscanned else [])]))
            for item in plan.items:
                self._stop_if_aborted()
                await self._alerts_clear(f"selector/{item.ref.describe()}")
                await self._apply(item)
            await self._all_pods_run(baseline, "after-patch")
            self._step("rescan")
            again = await self._scan()
            master_again, unreadable_again = await self._master_selectors()
            self._status.rescan = still_referencing(again.workloads, again.namespaces, input.remove_labels, master_again) + [
                f"{i.ref.describe()}: {i.blocked[0]}" for i in unreadable_again]
            if self._status.rescan:
                raise ApplicationError("the re-scan still finds selectors on labels to remove: " + ", ".join(self._status.rescan),
                                       type="RescanFound", non_retryable=True)
            if input.approve_label_removal and plan.label_nodes:
                self._step("approve-label-removal")
                old = "; ".join(f"{ds}: {', '.join(pods)}" for ds, pods in self._status.old_template_pods.items())
                await self._gate("remove-labels", f"remove {', '.join(input.remove_labels)} from {', '.join(plan.label_nodes)}"
                                 + (f". OnDelete DaemonSet pods still on the old nodeSelector until deleted: {old}" if old else "")
                                 + (f". {unscanned}" if unscanned else ""))
            self._stop_if_aborted()
            await self._remove_labels(plan)
            await self._all_pods_run(baseline, "post-check")
        except _Stop as stop:
            if not self.control.abort:
                self.control.request_abort(str(stop), "lockkeeper")
        outcome, message = ("aborted", self.control.abort_reason or "aborted") if self.control.abort else (
            "completed", f"{len(plan.items)} selector(s) moved, labels removed from {len(self._status.labels_removed)} node(s)")
        if self.control.abort:
            # Before any point of no return: put back what the records hold (labels first, then
            # selectors), each read back; the run then ends with nothing to revert.
            restored, problems = await self.kit_undo(self.control.abort_reason or "aborted")
            reason = self.control.abort_reason or "aborted"
            if problems:
                message = f"aborted, NOT fully restored: {reason}; " + "; ".join(problems)
            elif restored:
                message = f"aborted, restored and read back: {reason} ({len(restored)} record(s))"
            else:
                message = f"aborted: {reason}; nothing was changed"
        self.control.base_phase = ProcedurePhase.ABORTED if self.control.abort else ProcedurePhase.DONE
        if self.records.changed() and input.revert_window_seconds > 0:
            wid = workflow.info().workflow_id
            self.kit_step("revert-window", f"the revert window: `lockkeeper revert {wid} -m REASON` restores the labels and "
                                           "selectors from their records (read back)",
                          until=workflow.now() + timedelta(seconds=input.revert_window_seconds))
            self._window_open = True
            try:
                await workflow.wait_condition(lambda: self.control.revert, timeout=timedelta(seconds=input.revert_window_seconds))
            except TimeoutError:
                pass
            self._window_open = False
            if self.control.revert:  # the kit's template restores (kit_undo) and ends ``reverted``
                raise RevertRequested(self.control.revert_reason)
        else:
            self._step("finished")
        return self._result(outcome, message)

    async def _apply(self, item: MigrationItem) -> None:
        name = f"selector/{item.ref.describe()}"
        self._step(f"patch {item.ref.describe()}")
        before: RolloutState | None = None
        if item.ref.kind != "Namespace":
            before = await acts.call(READ_ROLLOUT, RolloutInput(ref=item.ref), RolloutState, timeouts=self._timeouts)
        value: object = item.new["annotation"] if item.ref.kind == "Namespace" else dict(item.new)
        try:
            await self.records.change(name, item.ref, {item.path: value})
        except RecordRefused as err:
            item.state, item.detail = "failed", err.message
            raise ApplicationError(f"{item.ref.describe()} changed under us: {err.message}", type="RecordChanged", non_retryable=True) from err
        item.state = "patched"
        self.touch()
        if before is None:
            item.state = "rolled-out"
            return
        if before.on_delete:
            await self._on_delete(item)
            return
        ref = item.ref
        while True:
            self._step(f"rollout {ref.describe()}")
            deadline = workflow.now() + timedelta(seconds=self._in.rollout_timeout_seconds)
            failed: list[str] = []

            async def check() -> Check:
                st: RolloutState = await acts.call(READ_ROLLOUT, RolloutInput(ref=ref, after_version=before.latest_version,
                                                                               after_generation=before.generation),
                                                   RolloutState, timeouts=self._timeouts)
                if st.failed:
                    failed.append(st.detail)
                return Check(st.done, st.detail)

            hs = await wait_until(check, name=f"rollout/{ref.describe()}", deadline=deadline,
                                  stop=lambda: bool(failed) or self.control.stopping(),
                                  backoff=Backoff(initial=self._in.poll_seconds, maximum=self._in.poll_seconds * 4),
                                  board=self._status.health, on_poll=lambda _: self.touch())
            if hs.state == "ok":
                item.state, item.detail = "rolled-out", hs.last
                self.touch()
                return
            self._stop_if_aborted()
            item.detail = failed[0] if failed else hs.last
            try:
                await self._gate(f"rollout/{ref.describe()}", f"rollout of {ref.describe()} did not complete: {item.detail}. "
                                                               "Approve to wait again, reject to revert this object and stop.")
            except _Stop:
                await self._revert_one(name)
                raise

    async def _rollout(self, ref: ObjectRef) -> RolloutState:
        return await acts.call(READ_ROLLOUT, RolloutInput(ref=ref), RolloutState, timeouts=self._timeouts)

    async def _on_delete(self, item: MigrationItem) -> None:
        """An OnDelete DaemonSet after its patch (module doc, step 3)."""
        ref, key = item.ref, item.ref.describe()
        st = await self._rollout(ref)
        if st.old_pods and self._in.ondelete_daemonsets == "delete":
            self._step(f"approve-ondelete {key}")
            gate = await self._gate(f"ondelete/{key}", f"{key} is OnDelete: delete its pods one node at a time so they get "
                                                       f"the new nodeSelector: {', '.join(st.old_pods)}")
            who = gate.decided_by or "lockkeeper"
            for entry in list(st.old_pods):
                pod, _, node = entry.partition("@")
                await self._alerts_clear(f"ondelete/{key}/{node}")
                self._step(f"ondelete {key}: replace {pod} on {node}")
                res = await acts.call(acts.DELETE_BLOCKING_PODS, DeleteBlockingPodsInput(
                    node=node, pods=[pod], decided_by=who, comment=f"OnDelete DaemonSet {key}: new nodeSelector"),
                    DeleteBlockingPodsResult, timeouts=self._timeouts)
                await self._replaced(item, pod, node, res)
            st = await self._rollout(ref)
        self._status.old_template_pods.pop(key, None)
        if st.old_pods:
            self._status.old_template_pods[key] = list(st.old_pods)
            item.state = "old-pods-left"
            item.detail = (f"OnDelete: {len(st.old_pods)} pod(s) keep the old nodeSelector until deleted "
                           f"({', '.join(st.old_pods)}); they keep running, a replacement gets the new one")
            self._status.warnings.append(f"{key}: {item.detail}")
        else:
            item.state, item.detail = "rolled-out", st.detail
        self.touch()

    async def _replaced(self, item: MigrationItem, pod: str, node: str, res: DeleteBlockingPodsResult) -> None:
        """Wait until ``node`` has no old-template pod of ``item`` and every pod is available;
        gate ``ondelete/<ds>/<node>`` at the rollout deadline (approve waits again)."""
        while True:
            deadline = workflow.now() + timedelta(seconds=self._in.rollout_timeout_seconds)

            async def check() -> Check:
                st = await self._rollout(item.ref)
                old_here = [p for p in st.old_pods if p.endswith(f"@{node}")]
                ok = not old_here and st.available >= st.desired
                return Check(ok, f"{pod} ({', '.join(res.deleted) or 'gone'}): available {st.available}/{st.desired}"
                                 + (f", still old: {', '.join(old_here)}" if old_here else ""))

            hs = await wait_until(check, name=f"ondelete/{item.ref.describe()}/{node}", deadline=deadline,
                                  stop=lambda: self.control.stopping(), backoff=Backoff(initial=self._in.poll_seconds, maximum=self._in.poll_seconds * 4),
                                  board=self._status.health, on_poll=lambda _: self.touch())
            if hs.state == "ok":
                return
            self._stop_if_aborted()
            self._n += 1
            await self._gate(f"ondelete/{item.ref.describe()}/{node}/{self._n}", f"replacement on {node} not available: {hs.last}. "
                                                                       "Approve to wait again, reject to stop.")

    async def _all_pods_run(self, baseline: PodStates, what: str) -> None:
        while True:
            self._step(f"all-pods-run ({what})")
            deadline = workflow.now() + timedelta(seconds=self._in.pods_timeout_seconds)

            async def check() -> Check:
                now = await self._pods()
                self._status.regressions = pod_regressions(baseline.pods, now.pods)
                return Check(not self._status.regressions, "; ".join(self._status.regressions) or "every pod runs")

            hs = await wait_until(check, name=f"pods/{what}", deadline=deadline, stop=lambda: self.control.stopping(),
                                  backoff=Backoff(initial=self._in.poll_seconds, maximum=self._in.poll_seconds * 4),
                                  board=self._status.health, on_poll=lambda _: self.touch())
            if hs.state == "ok":
                return
            self._stop_if_aborted()
            self._n += 1
            await self._gate(f"pods/{self._n}", f"pods not all running ({what}): {hs.last}. Approve to check again, reject to stop.")

    async def _remove_labels(self, plan: MigrationPlan) -> None:
        for node in plan.label_nodes:
            self._stop_if_aborted()
            self._step(f"remove labels on {node}")
            name = f"labels/{node}"
            await self.records.change(name, ObjectRef(kind="Node", name=node),
                                      {_label_path(k): REMOVE for k in plan.node_labels.get(node, plan.remove_labels)})
            self._status.labels_removed.append(node)
            self.touch()

    async def _revert_one(self, name: str) -> None:
        """Restore record ``name`` and read it back: ``reverted`` only when it reads back at its
        originals, ``revert_refused`` (with why) when somebody changed it since or it differs."""
        try:
            await self.records.revert(name)
        except RecordRefused as err:
            self._status.revert_refused.append(f"{name}: {err.message}")
        else:
            st = self.records.board[name]
            if st.state == "reverted":
                self._status.reverted.append(name)
            else:
                self._status.revert_refused.append(f"{name}: {st.detail}")
        self.touch()
