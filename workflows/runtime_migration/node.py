"""One node's migration from CRI-O to Docker: the child workflow ``RuntimeMigrationNodeWorkflow``
(procedures-spec §6.3, steps 1-22, in that order).

Every step checks the host before it acts (the command's outcome says whether it is already
done), records its last command (argv, exit code, output tail) in the node's row, and reports the
row to the parent (signal ``migration_progress``). The reboot and the external commands run at
most once (:mod:`workflows.runtime_migration.runner`). Gates are this workflow's own; the parent
mirrors them so ``lockkeeper approve/reject <parent>`` reach them (signal ``gate_decision``).

A step that cannot go on stops the node (:class:`StepStopped`): the node is left as it is and the
row says so (``node_deleted`` when the Node object is gone and not registered again), never
forgotten. Order matters: the resolv.conf copy comes before dnsmasq goes and before /etc/origin
is wiped (DNS would break after the reboot otherwise, seed 003).
"""

from __future__ import annotations

import asyncio

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.runtime_migration.models import (
        DeleteRecordedNodeInput,
        DeleteRecordedNodeResult,
        NodeObject,
        NodeObjectInput,
        SaveRecordInput,
        SaveRecordResult,
    )
    from workflows.kit import calls as acts
    from workflows.kit.control import Control
    from workflows.kit.drain import DrainGateState
    from workflows.kit.gates import Gates
    from workflows.kit.health import Check
    from workflows.kit.models import DrainDecision, GateRecord, GateState, HealthStatus, NodeControlInput
    from workflows.kit.noderun import NodeRun, NodeRunWorkflow, Stopped
    from workflows.runtime_migration import plan
    from workflows.runtime_migration.gluster import read_assessment
    from workflows.runtime_migration.models import (
        PROCEDURE_RUNTIME_MIGRATION,
        GateDecision,
        NodeMigrationInput,
        NodeMigrationResult,
        NodeMigrationStatus,
        NodeRecordView,
    )
    from workflows.runtime_migration.rejoin import RejoinSteps
    from workflows.runtime_migration.runner import NodeSteps, StepStopped

READ_NODE_OBJECT = "read_node_object"
DELETE_RECORDED_NODE = "delete_recorded_node"
SAVE_NODE_RECORD = "save_node_record"
#: The steps before anything irreversible happens on the host: a skip is honoured only there.
BEFORE_DESTRUCTIVE = ("start", "safety", "approve-migration", "drain", "record")


@workflow.defn
class RuntimeMigrationNodeWorkflow(NodeRunWorkflow, RejoinSteps):
    """Input :class:`NodeMigrationInput`, result :class:`NodeMigrationResult` (see the module doc)."""

    @workflow.init
    def __init__(self, input: NodeMigrationInput) -> None:
        run = input.run
        self.inp = input
        self.node = input.node
        self.st = NodeMigrationStatus(node=input.node, phase="running", since=workflow.now())
        prev = input.previous
        if prev is not None:  # retry-node: carry what the previous attempt knew
            self.st.done_steps, self.st.node_deleted, self.st.removed = list(prev.done_steps), prev.node_deleted, list(prev.removed)
            self.st.new_boot_id, self.st.record_configmap, self.st.attempt = prev.new_boot_id, prev.record_configmap, prev.attempt + 1
            self.st.step = prev.step
        #: skip-node: who asked (honoured only before the destructive steps), and whether they began.
        self.skip_by: NodeControlInput | None = None
        self.destructive = any(step not in BEFORE_DESTRUCTIVE for step in self.st.done_steps)
        self.history: list[GateRecord] = []
        self.control = Control(on_change=self._push, noun="node migration")
        self.gates = Gates(self.control, run.approvals, self.history, noun="node migration", pause_on_reject=False, on_change=self._push)
        self.health: dict[str, HealthStatus] = {}
        t = run.timing
        self.node_run = NodeRun(
            node=input.node, attempt=1, parent_id=input.parent_id, owner=input.parent_id, warn_fraction=0.8,
            timeouts=acts.Timeouts(t.activity, 10.0), drain=DrainGateState(input.node, t.decide_after, run.gates.timeout_seconds, DrainDecision.WAIT),
            deadline_consequence="the migration of {node} stays at the drain",
        )
        self.steps = NodeSteps(input.node, run.host_access[input.node], t, self.st, self.gates, self._push, run.gates.timeout_seconds)
        self.record = prev.record.model_copy(deep=True) if prev is not None and prev.record is not None else NodeRecordView()
        self._signals: list[asyncio.Future[None]] = []
        self._sent = 0  # rows sent to the parent (NodeMigrationStatus.seq)

    # --- parent link ------------------------------------------------------------------------------

    def _push(self) -> None:
        """Send the row (with the gates and a record without the full Node) to the parent."""
        self._sent += 1
        st = self.st.model_copy(deep=True, update={"seq": self._sent})
        st.gates = sorted((g.model_copy() for g in self.gates.gates.values()), key=lambda g: g.state != GateState.WAITING)
        st.record = self.record.model_copy(update={"node_object": None})
        parent = workflow.get_external_workflow_handle(self.inp.parent_id)
        self._signals.append(asyncio.ensure_future(self._send(parent, st)))

    async def _send(self, parent: workflow.ExternalWorkflowHandle, st: NodeMigrationStatus) -> None:
        try:
            await parent.signal("migration_progress", st)
        except Exception as err:  # noqa: BLE001 - progress is advisory; the node's own state is the truth
            workflow.logger.warning("progress to %s failed: %s", self.inp.parent_id, err)

    @workflow.signal
    def gate_decision(self, d: GateDecision) -> None:
        """A decision the parent validated (approve/reject/resolve_unknown) on one of our gates."""
        gate = self.gates.gates.get(d.gate_id)
        if gate is None or gate.state != GateState.WAITING:
            workflow.logger.info("decision on %s ignored: no such gate waiting", d.gate_id)
            return
        if d.state == GateState.DECIDED and d.choice in gate.choices:
            self.gates.choose(gate, d.choice, d.identity, d.comment)
        else:
            self.gates.decide(gate, d.state, d.identity, d.comment)

    @workflow.signal
    def abort_migration(self, identity: str) -> None:
        """Stop at the next safe point (a waiting gate is cancelled)."""
        self.control.request_abort(f"aborted by {identity}", identity)
        self.node_run.request_stop("abort", identity)

    @workflow.signal
    def skip_migration(self, req: NodeControlInput) -> None:
        """skip-node: honoured while no destructive step has begun (the node is uncordoned if we
        cordoned it and ends ``skipped``); later it is ignored and the row says so (the parent's
        validator refuses it then, this covers a row that was stale)."""
        if self.destructive:
            self.st.findings.append(f"skip requested by {req.identity} ignored: the destructive steps had begun at {self.st.step}")
            self._push()
            return
        self.skip_by = req
        self.control.request_abort(f"skipped by {req.identity}", req.identity)
        self.node_run.request_stop("skip", req.identity)

    @workflow.query
    def row(self) -> NodeMigrationStatus:
        """The node's row as it is now."""
        return self.st

    # --- steps -------------------------------------------------------------------------------------

    async def _safe(self) -> None:
        if self.control.abort:
            raise StepStopped(self.st.step or "start", self.control.abort_reason or "aborted", aborted=True)

    async def _node_object(self) -> NodeObject:
        return await acts.call(READ_NODE_OBJECT, NodeObjectInput(node=self.node), NodeObject, timeouts=self.node_run.timeouts)

    async def _safety(self) -> None:
        """Step 1: taking this node down leaves every replica set with at most one brick down."""
        run = self.inp.run

        async def check() -> Check:
            a = await read_assessment(run.gluster, exclude_node=self.node, heal=False)
            reasons = plan.node_down_safety(a, self.node)
            if not any(b.node == self.node for v in a.volumes for b in v.bricks):
                reasons.append(f"no GlusterFS brick maps to node {self.node}")
            self.st.findings = reasons
            return Check(not reasons, "; ".join(reasons) or "safe")

        await self.steps.wait_ok("safety", "every replica set keeps all but at most one brick", check, run.timing.bricks_timeout, self.health)
        self.st.findings = []

    async def _record(self) -> None:
        """Step 4: the full Node, the bootstrap config, boot_id and packages."""
        s = self.steps
        s.set("record", "the Node object, bootstrap config, boot_id and packages")
        if not self.record.uid:
            obj = await self._node_object()
            if not obj.exists:
                raise StepStopped("record", f"node {self.node} has no Node object to record")
            self.record.uid, self.record.labels, self.record.runtime, self.record.node_object = obj.uid, obj.labels, obj.runtime, obj.raw
            self.record.addresses = obj.addresses
        grep = await s.cmd("record", plan.BOOTSTRAP_GREP)
        self.record.bootstrap_config = plan.bootstrap_group(grep.stdout)
        bid = await s.cmd("record", plan.BOOT_ID)
        self.record.boot_id = bid.stdout.strip()
        pk = await s.cmd("record", plan.RPM_QA)
        self.record.packages = plan.parse_rpm_qa(pk.stdout)
        if not self.record.boot_id or not self.record.packages:
            raise StepStopped("record", f"could not read boot_id/packages: {bid.summary()} / {pk.summary()}")

    async def _units_off(self, step: str, units: list[str]) -> None:
        """Steps 5 and 7: stop and disable ``units``, checked first and verified after."""
        s = self.steps

        async def left() -> list[str]:
            act = await s.cmd(step, ["systemctl", "is-active", *units])
            ena = await s.cmd(step, ["systemctl", "is-enabled", *units])
            return plan.units_down(act.stdout, ena.stdout, units)

        s.set(step, f"stop and disable {', '.join(units)}")
        if not await left():
            s.done(step)
            return
        for u in units:
            r = await s.cmd(step, ["systemctl", "stop", u])
            if r.exit_code not in (0, 5):  # 5: unit not loaded (missing units are fine)
                raise StepStopped(step, f"systemctl stop {u}: {r.summary()}")
            r = await s.cmd(step, ["systemctl", "disable", u])
            if r.exit_code not in (0, 1) or (r.exit_code == 1 and "No such file" not in r.stderr):
                raise StepStopped(step, f"systemctl disable {u}: {r.summary()}")
        rest = await left()
        if rest:
            raise StepStopped(step, f"still active or enabled after stop/disable: {', '.join(rest)}")
        s.done(step)

    async def _resolv_conf(self) -> None:
        """Step 6: keep DNS once dnsmasq goes: the upstream resolv.conf over /etc/resolv.conf.
        Stops when the upstream file is gone and resolv.conf still points at dnsmasq."""
        s = self.steps
        s.set("resolv-conf", f"cp -f {plan.UPSTREAM_RESOLV} /etc/resolv.conf")

        async def problem() -> str | None:
            cur = await s.cmd("resolv-conf", ["cat", "/etc/resolv.conf"])
            return plan.resolv_conf_problem(cur.stdout, self.record.addresses)

        why = await problem()
        if why is None:
            s.done("resolv-conf")
            return
        up = await s.cmd("resolv-conf", ["test", "-e", plan.UPSTREAM_RESOLV])
        if up.exit_code != 0:
            raise StepStopped("resolv-conf", f"{why}, and {plan.UPSTREAM_RESOLV} is gone: removing dnsmasq now would break DNS; "
                                             "restore /etc/resolv.conf with the upstream nameservers by hand")
        r = await s.cmd("resolv-conf", ["cp", "-f", plan.UPSTREAM_RESOLV, "/etc/resolv.conf"])
        if not r.ok:
            raise StepStopped("resolv-conf", f"cp failed: {r.summary()}")
        why = await problem()
        if why is not None:
            raise StepStopped("resolv-conf", f"after the copy: {why}")
        s.done("resolv-conf")

    async def _remove_packages(self) -> None:
        """Step 8: ``yum -y remove``; check: ``rpm -q`` says not installed for every one."""
        s, pkgs = self.steps, self.inp.run.packages_to_remove
        s.set("remove-packages", f"yum -y remove {' '.join(pkgs)}")
        left = plan.packages_installed((await s.cmd("remove-packages", ["rpm", "-q", *pkgs])).stdout, pkgs)
        if left:
            asked = left
            r = await s.cmd("remove-packages", ["yum", "-y", "remove", *left], timeout=max(600.0, self.inp.run.timing.host_command_timeout))
            left = plan.packages_installed((await s.cmd("remove-packages", ["rpm", "-q", *pkgs])).stdout, pkgs)
            self.st.removed = [p for p in pkgs if p in set(self.st.removed) | (set(asked) - set(left))]
            if left:
                raise StepStopped("remove-packages", f"still installed: {', '.join(left)} ({r.summary()})")
        s.done("remove-packages")

    async def _wipe(self) -> None:
        """Step 9: rm -rf of the paths and the directories' contents, without a shell glob."""
        s, run = self.steps, self.inp.run
        s.set("wipe", "remove " + ", ".join(run.wipe_paths + [d + "/ (contents)" for d in run.wipe_dir_contents]))

        async def wiped() -> bool:
            for p in run.wipe_paths:
                if (await s.cmd("wipe", ["test", "-e", p])).exit_code == 0:
                    return False
            for d in run.wipe_dir_contents:
                r = await s.cmd("wipe", ["find", d, "-mindepth", "1", "-maxdepth", "1"])
                if r.ok and r.stdout.strip():
                    return False
            return True

        if not await wiped():
            for argv in plan.wipe_commands(run.wipe_paths, run.wipe_dir_contents):
                r = await s.cmd("wipe", argv)
                if not r.ok:
                    raise StepStopped("wipe", r.summary())
            if not await wiped():
                raise StepStopped("wipe", "paths still present after the wipe")
        s.done("wipe")

    async def _post_reboot(self) -> None:
        """Step 11: DNS names resolve, no runtime installed or active, no runtime socket; a
        failure opens a gate (approve checks again, reject stops)."""
        s, run = self.steps, self.inp.run
        while True:
            s.set("post-reboot-checks", "DNS resolves, runtimes gone")
            problems: list[str] = []
            for name in run.dns_probe_names:
                if (await s.cmd("post-reboot-checks", ["getent", "hosts", name])).exit_code != 0:
                    problems.append(f"{name} does not resolve")
            inst = plan.packages_installed((await s.cmd("post-reboot-checks", ["rpm", "-q", *plan.RUNTIME_PACKAGES])).stdout, plan.RUNTIME_PACKAGES)
            problems += [f"{p} still installed" for p in inst]
            act = await s.cmd("post-reboot-checks", ["systemctl", "is-active", *plan.RUNTIME_UNITS])
            problems += [f"{u} active" for u, a in zip(plan.RUNTIME_UNITS, act.stdout.split(), strict=False) if a == "active"]
            for sock in plan.RUNTIME_SOCKETS:
                if (await s.cmd("post-reboot-checks", ["test", "-S", sock])).exit_code == 0:
                    problems.append(f"socket {sock} present")
            if not problems:
                s.done("post-reboot-checks")
                return
            self.st.findings = problems
            await s.require("health", "post-reboot-checks", "; ".join(problems) + ": fix by hand, approve checks again, reject stops")

    async def _inventory(self, step: str, ext, text: str) -> None:
        """Steps 14 and 21: the configured command (once) or a human_action gate with the exact change."""
        if ext is not None:
            await self.steps.external(step, self._argv(ext.argv), ext.timeout_seconds, ext.env)
        else:
            await self.steps.require("human", step, text)
        self.steps.done(step)

    def _argv(self, argv: list[str]) -> list[str]:
        return plan.expand_argv(argv, self.node, self.record.bootstrap_config)

    # --- the run -----------------------------------------------------------------------------------

    def _todo(self, step: str) -> bool:
        """False for a step a previous attempt finished (retry-node resumes after it)."""
        return step not in self.st.done_steps

    async def _save_record(self, state: str) -> None:
        """Write the node's record and ``state`` to the record ConfigMap (recoverable without
        Temporal)."""
        run = self.inp.run
        name = plan.record_configmap_name(self.inp.parent_id)
        await acts.call(SAVE_NODE_RECORD, SaveRecordInput(
            namespace=run.record_namespace, name=name, data=plan.record_data(self.node, self.record, state),
            labels={"lockkeeper.io/procedure": PROCEDURE_RUNTIME_MIGRATION}), SaveRecordResult, timeouts=self.node_run.timeouts)
        self.st.record_configmap = f"{run.record_namespace}/{name}"
        self._push()

    async def _migrate(self) -> None:
        run, s, node = self.inp.run, self.steps, self.node
        if not self.destructive:  # a retry after the destructive steps began: the node's own bricks are down, by design
            await self._safety()
            s.done("safety")
        await self._safe()
        if self._todo("approve-migration"):
            await s.require("destructive", "approve-migration", f"migrate {node} to {run.target_runtime}: drain, stop the runtime, "
                            "remove packages, wipe /etc/origin, reboot, delete the Node, scale-up")
            s.done("approve-migration")
        if self._todo("drain"):
            s.set("drain", "cordon and drain (--ignore-daemonsets --delete-local-data)")
            t = run.timing
            try:
                await self.node_run.cordon_and_drain(wait_seconds=t.drain_wait, backoff_initial=t.drain_backoff_initial,
                                                     backoff_max=t.drain_backoff_max, deadline_seconds=t.drain_deadline)
            except Stopped as err:
                raise StepStopped("drain", f"drain stopped ({self.node_run.stop} by {self.node_run.stop_by})",
                                  aborted=self.node_run.stop in ("abort", "skip")) from err
            s.done("drain")
        await self._safe()
        if self._todo("record"):
            await self._record()
            await self._save_record(f"recorded before the destructive steps (attempt {self.st.attempt})")
            s.done("record")
        await self._safe()
        self.destructive = True  # from here on a skip is refused: the host is being changed
        # A retry never repeats a finished host step: after the scale-up they would undo it
        # (stop the new runtime, remove docker, wipe the new /etc/origin).
        if self._todo("stop-services"):
            await self._units_off("stop-services", run.runtime_services)
        if self._todo("resolv-conf"):
            await self._resolv_conf()
        if self._todo("dnsmasq"):
            await self._units_off("dnsmasq", ["dnsmasq"])
        if self._todo("remove-packages"):
            await self._remove_packages()
        if self._todo("wipe"):
            await self._wipe()
        await self._safe()
        if self._todo("reboot"):
            self.st.new_boot_id = await s.reboot(self.record.boot_id, ["systemctl", "reboot"], self.health)
            s.done("reboot")
        if self._todo("post-reboot-checks"):
            await self._post_reboot()
        await self._safe()
        if self._todo("delete-node"):
            await s.require("destructive", "approve-delete", f"delete node {node} (uid {self.record.uid}) from the API; it registers "
                            "again only through the scale-up")
            s.set("delete-node", f"DELETE node {node} uid {self.record.uid}")
            res: DeleteRecordedNodeResult = await acts.call(DELETE_RECORDED_NODE, DeleteRecordedNodeInput(node=node, uid=self.record.uid),
                                                            DeleteRecordedNodeResult, timeouts=self.node_run.timeouts)
            self.st.node_deleted = True
            self.st.reason = res.detail
            s.done("delete-node")
        group = self.record.bootstrap_config
        if self._todo("inventory"):
            await self._inventory("inventory", run.inventory_step, plan.inventory_change(node, group))
        if run.node_group_step is not None and self._todo("node-group"):
            await s.external("node-group", self._argv(run.node_group_step.argv), run.node_group_step.timeout_seconds, run.node_group_step.env)
            s.done("node-group")
        if self._todo("scale-up"):
            await s.external("scale-up", self._argv(run.scaleup_step.argv), run.scaleup_step.timeout_seconds, run.scaleup_step.env)
            s.done("scale-up")
        obj = await self._registered()
        s.done("wait-registered")
        await self._gluster_back()
        if self._todo("inventory-restore"):
            await self._inventory("inventory-restore", run.inventory_restore_step, plan.inventory_restore(node, group))
        s.set("uncordon")
        if obj.unschedulable:
            self.st.findings.append(f"node {node} came back unschedulable: uncordon it by hand (`oc adm uncordon {node}`)")
        s.done("uncordon")

    async def _skipped(self, req: NodeControlInput) -> str:
        """Undo a skip honoured before the destructive steps: uncordon if we cordoned; the record
        ConfigMap (when one was written) says so. Returns the reason."""
        unc = await self.node_run.uncordon()
        if unc.uncordoned:
            self.node_run.cordoned_by_us = False
        reason = (f"skipped by {req.identity}" + (f": {req.comment}" if req.comment else "")
                  + f" at {self.st.step or 'start'}, before the destructive steps; nothing changed on the host"
                  + ("; uncordoned" if unc.uncordoned else ""))
        if self.st.record_configmap:
            await self._save_record(reason)
        return reason

    async def _abort_uncordon(self) -> str:
        """Undo an abort honoured before the destructive steps (issue 39: the abort ends in a
        verified state): uncordon if we cordoned (the activity checks ``cordoned-by`` and
        answers whether the node ends schedulable). Returns what to add to the reason."""
        unc = await self.node_run.uncordon()
        if not unc.uncordoned:
            return f"; left cordoned: {unc.left_cordoned_reason or 'the uncordon did not take'}"
        self.node_run.cordoned_by_us = False
        self.st.uncordoned = True
        return "; nothing changed on the host; uncordoned"

    @workflow.run
    async def run(self, input: NodeMigrationInput) -> NodeMigrationResult:
        self._push()
        outcome, reason = "done", None
        try:
            await self._migrate()
            self.steps.set("finished", phase="done")
        except StepStopped as err:
            if self.skip_by is not None and not self.destructive:
                outcome, reason = "skipped", await self._skipped(self.skip_by)
            else:
                outcome = "aborted" if err.aborted else "failed"
                reason = f"stopped at {err.step}: {err.reason}" + (f"; node {self.node} is DELETED and not registered again"
                                                                    if self.st.node_deleted else "")
                if outcome == "aborted" and not self.destructive:
                    reason += await self._abort_uncordon()
            self.st.reason = reason
            self.steps.set(err.step, None, phase=outcome)
        if self._signals:
            await asyncio.gather(*self._signals)
        await self.node_run.settle()
        rec = self.record.model_copy()
        final = self.st.model_copy(deep=True)
        final.record = rec
        final.gates = [g.model_copy() for g in self.gates.gates.values()]
        return NodeMigrationResult(node=self.node, outcome=outcome, reason=reason, status=final,
                                   gate_history=list(self.history) + list(self.node_run.drain.records))
