"""One node's migration from CRI-O to Docker: the child workflow ``RuntimeMigrationNodeWorkflow``
(procedures-spec §6.3, steps 1-22, in that order).

Every step checks the host before it acts (the command's outcome says whether it is already
done), records its last command (argv, exit code, output tail) in the node's row, and reports the
row to the parent (the kit's ``child_report``). The reboot and the external commands run at
most once; host commands, the reboot and the health waits run on the kit's
:class:`workflows.kit.host.HostSteps`, :func:`workflows.kit.host.reboot` and
:func:`workflows.kit.health.wait_until`. Gates are this workflow's own and decided here
(:class:`workflows.kit.noderun.GatedNodeRunWorkflow`): the parent shows them, and ``lockkeeper
approve/reject/decide <parent> GATE`` answers them on this run.

A step that cannot go on stops the node (:class:`StepStopped`): the node is left as it is and the
row says so (``node_deleted`` when the Node object is gone and not registered again), never
forgotten. Order matters: the resolv.conf copy comes before dnsmasq goes and before /etc/origin
is wiped (DNS would break after the reboot otherwise, seed 003).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.host.models import CommandResult, HostAccess
    from activities.runtime_migration.models import (
        DeleteRecordedNodeInput,
        DeleteRecordedNodeResult,
        NodeObject,
        NodeObjectInput,
        SaveRecordInput,
        SaveRecordResult,
    )
    from workflows.kit import calls as acts
    from workflows.kit.control import Aborted, Control, RevertRequested
    from workflows.kit.drain import DrainGateState
    from workflows.kit.gates import Gates
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.kit.host import HostStep, HostStepFailed, HostSteps, RebootFailed, reboot
    from workflows.kit.inputs import GatePolicy
    from workflows.kit.models import GateKind, GateRecord, GateState, HealthStatus, NodeControlInput
    from workflows.kit.noderun import GatedNodeRunWorkflow, NodeRun, StopKind, Stopped
    from workflows.kit.report import ChildReport, Reporter
    from workflows.runtime_migration import plan
    from workflows.runtime_migration.models import (
        PROCEDURE_RUNTIME_MIGRATION,
        ExternalStep,
        NodeMigrationInput,
        NodeMigrationResult,
        NodeMigrationStatus,
        LastCommand,
        NodeRecordView,
    )
    from workflows.runtime_migration.rejoin import RejoinSteps, StepStopped
    from workflows.shared.glusterfs.health import GlusterHealth
    from workflows.shared.glusterfs.models import GlusterHealthParams

#: Where the external steps run: the worker itself (the kit's host steps, local backend).
WORKER = HostAccess()
#: Idempotent host commands: retried while the host is unreachable, but not forever.
REPEATABLE = RetryPolicy(initial_interval=timedelta(seconds=2), backoff_coefficient=2.0, maximum_interval=timedelta(seconds=30),
                         maximum_attempts=20)
READ_NODE_OBJECT = "read_node_object"
DELETE_RECORDED_NODE = "delete_recorded_node"
SAVE_NODE_RECORD = "save_node_record"
#: The steps before anything irreversible happens on the host: a skip is honoured only there.
BEFORE_DESTRUCTIVE = ("start", "safety", "approve-migration", "drain", "record")


@workflow.defn
class RuntimeMigrationNodeWorkflow(GatedNodeRunWorkflow, RejoinSteps):
    """Input :class:`NodeMigrationInput`, result :class:`NodeMigrationResult` (see the module doc)."""

    choices_needing_comment = frozenset({"mark-done"})  # ``decide GATE mark-done`` says what was checked

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
        t, d, timeouts = run.timing, run.drain, acts.Timeouts(run.calls.short_call_seconds, run.calls.heartbeat_seconds)
        self.node_run = NodeRun(
            node=input.node, attempt=self.st.attempt, parent_id=input.parent_id, owner=input.parent_id, warn_fraction=0.8, timeouts=timeouts,
            drain=DrainGateState(input.node, d.decide_after_seconds, d.decision_timeout_seconds or run.gates.timeout_seconds,
                                 d.decision_timeout_outcome),
            deadline_consequence="the migration of {node} stays at the drain",
        )
        #: The kit's host steps: this node's commands (over SSH), the external steps (on the
        #: worker) and its reboot (by boot ID).
        self.access = run.host_access[input.node]
        self.host = HostSteps(self.gates, on_change=self._push, timeouts=timeouts, heartbeat_seconds=run.calls.heartbeat_seconds,
                              gate_timeout_seconds=run.gates.timeout_seconds)
        #: The GlusterFS package's health gate: the reads, and the heal wait with its stall gate.
        self.gluster = GlusterHealth(
            target=run.gluster.target(), gates=self.gates, control=self.control, board=self.health, progress={}, on_change=self._heal_push,
            params=GlusterHealthParams(interval_seconds=t.poll, max_interval_seconds=t.poll_max, timeout_seconds=t.heal_timeout,
                                       stall_after_seconds=t.heal_stall),
            rule="per-replica-set", short_call_s=run.calls.short_call_seconds)
        self.record = prev.record.model_copy(deep=True) if prev is not None and prev.record is not None else NodeRecordView()
        self.reporter = Reporter(input.parent_id)

    # --- parent link ------------------------------------------------------------------------------

    def _push(self) -> None:
        """Report the row to the parent on the kit's channel (:mod:`workflows.kit.report`): the
        waiting gates and the row (``detail``: its gates, each with this run as its owner, and the
        record without the full Node). Decisions come to this run."""
        st, wid = self.st.model_copy(deep=True), workflow.info().workflow_id
        st.gates = sorted((g.model_copy(update={"workflow_id": wid}) for g in self.gates.gates.values()),
                          key=lambda g: g.state != GateState.WAITING)
        st.record = self.record.model_copy(update={"node_object": None})
        self.reporter.send(ChildReport(workflow_id=wid, procedure=PROCEDURE_RUNTIME_MIGRATION, phase=st.phase, waiting_for=st.waiting_for,
                                       since=st.since, deadline=st.deadline, detail=st.model_dump(mode="json"), gates=st.waiting_gates()))

    def _heal_push(self) -> None:
        """The heal wait's progress in the row (volume → pending entries), then the report."""
        self.st.heal = {v: hp.entries for v, hp in self.gluster.progress.items()}
        self._push()

    def on_stop(self, kind: StopKind, identity: str, comment: str) -> None:
        """abort: stop at the next safe point (a waiting gate is cancelled). skip-node: honoured
        while no destructive step has begun (the node is uncordoned if we cordoned it and ends
        ``skipped``); later it is ignored and the row says so (the parent's validator refuses it
        then, this covers a row that was stale)."""
        if kind == "skip":
            if self.destructive:
                self.st.findings.append(f"skip requested by {identity} ignored: the destructive steps had begun at {self.st.step}")
                self._push()
                return
            self.skip_by = NodeControlInput(node=self.node, identity=identity, comment=comment)
        self.control.request_abort(f"{'skipped' if kind == 'skip' else 'aborted'} by {identity}", identity)
        self.node_run.request_stop(kind, identity)

    @workflow.query
    def row(self) -> NodeMigrationStatus:
        """The node's row as it is now."""
        return self.st

    # --- the row, host commands and gates (on the kit's HostSteps and Gates) --------------------

    def _at(self, step: str, waiting_for: str | None = None, phase: str = "running", deadline: datetime | None = None) -> None:
        """Move the row to ``step`` (``since`` restarts when the step or phase changes), waiting
        for ``waiting_for`` until ``deadline`` (None: no bound of its own)."""
        if (self.st.step, self.st.phase) != (step, phase):
            self.st.since = workflow.now()
        self.st.step, self.st.phase, self.st.waiting_for = step, phase, waiting_for  # type: ignore[assignment]
        self.st.deadline = deadline
        self._push()

    def _done(self, step: str) -> None:
        if step not in self.st.done_steps:
            self.st.done_steps.append(step)
        self._push()

    def _ran(self, step: str, argv: list[str], where: str, result: CommandResult | None) -> None:
        """Record ``argv`` as the row's last command (``result`` None: it is running)."""
        self.st.last_command = (LastCommand.of(step, where, result, workflow.now()) if result is not None else
                                LastCommand(step=step, argv=list(argv), where=where, at=workflow.now(), tail="(running)"))
        self._push()

    async def _cmd(self, step: str, argv: list[str], *, timeout: float | None = None) -> CommandResult:
        """Run ``argv`` on the node (the kit's :meth:`HostSteps.command`, retried while the host
        is unreachable) and record it as the row's last command; the caller judges the exit code.
        Raises ActivityError when the host stays unreachable."""
        t = timeout or self.inp.run.timing.host_command_timeout
        own, self.st.deadline = self.st.deadline, self.st.deadline or workflow.now() + timedelta(seconds=t + 30)
        self._ran(step, argv, self.access.describe(), None)
        result = await self.host.command(argv, self.access, timeout_seconds=t, retry=REPEATABLE)
        self.st.deadline = own
        self._ran(step, argv, self.access.describe(), result)
        return result

    async def _gate(self, kind: str, step: str, what: str, choices: tuple[str, ...] = ()) -> bool:
        """Gate ``<node>/<kind>/<step>`` showing ``what`` (with ``choices`` besides reject)
        through the kit's ``Gates.step``; True when approved or a choice was made, False on a
        rejection, a timeout or an abort. Each call is a new question."""
        gate_id, timeout = f"{self.node}/{kind}/{step}", self.inp.run.gates.timeout_seconds
        self._at(step, f"approval of gate {gate_id}: {what}", phase="waiting",
                 deadline=workflow.now() + timedelta(seconds=timeout) if timeout else None)
        answer = await self.gates.step(gate_id, f"[{kind}] {what}", GatePolicy(timeout_seconds=timeout),
                                       kind=GateKind.NODE if kind != "destructive" else GateKind.STEP, node=self.node,
                                       choices=choices, again=True)
        self._at(step)
        return answer.passed

    async def _require(self, kind: str, step: str, what: str) -> None:
        """:meth:`_gate`, raising :class:`StepStopped` unless approved."""
        if not await self._gate(kind, step, what):
            raise StepStopped(step, f"gate {self.node}/{kind}/{step} not approved", aborted=self.gates.control.abort)

    async def _external(self, step: str, ext: ExternalStep) -> None:
        """Run an external step (its argv expanded, :func:`plan.expand_argv`) on the worker at
        most once per decision (the kit's :meth:`HostSteps.run`, local backend). A command that
        ran and failed: gate ``<node>/failed/<step>`` with the output tail (approve = run again
        after fixing the cause, reject = stop). A lost outcome: the unknown-outcome gate
        ``<node>/unknown/<step>`` with the explicit choices ``mark-done`` (what approve takes; a
        comment is required) and ``rerun`` (the kit's ``decide``); reject = abort. Raises
        :class:`StepStopped`."""
        await self._safe()  # an abort stops the node before a command that cannot be called back
        argv = self._argv(ext.argv)
        host_step = HostStep(name=f"{self.node}/{step}", argv=argv, timeout_seconds=ext.timeout_seconds, env=ext.env)
        while True:
            self._at(step, f"{' '.join(argv)} (on the worker, runs once)", deadline=workflow.now() + timedelta(seconds=ext.timeout_seconds))
            self._ran(step, argv, "worker", None)
            try:
                self._ran(step, argv, "worker", await self.host.run(host_step, WORKER, unknown_opens_gate=False))
                return
            except HostStepFailed as err:
                if err.status.state == "unknown":
                    self.st.last_command.tail = f"outcome unknown: {err.status.detail}"  # type: ignore[union-attr]
                    self._push()
                    text = (f"{' '.join(argv)}: {err.status.detail}. Outcome unknown: check by hand, "
                            "then mark-done (say what you checked), rerun, or reject (= abort)")
                    if not await self._gate("unknown", step, text, choices=("mark-done", "rerun")):
                        raise StepStopped(step, "aborted at the unknown-outcome gate", aborted=True) from err
                    if self.gates.gates[f"{self.node}/unknown/{step}"].decision != "rerun":
                        return
                    continue
                if err.result is not None:
                    self._ran(step, argv, "worker", err.result)
                # ran and failed (an exit code), or its activity failed for good (no result)
                tail = self.st.last_command.tail if err.result else err.status.detail  # type: ignore[union-attr]
                how = f"exited {err.result.exit_code}" if err.result else "failed"
                if not await self._gate("failed", step, f"{' '.join(argv)} {how}: {tail[-400:]}; "
                                        f"approve runs it again (fix the cause first), reject stops"):
                    raise StepStopped(step, f"{argv[0]} {how}: {tail[-200:]}") from err

    async def _reboot(self, old_boot_id: str, argv: list[str], board: dict[str, HealthStatus]) -> str:
        """Reboot once through the kit (:func:`workflows.kit.host.reboot`, boot ID read on the
        host): confirmed by a boot ID other than ``old_boot_id`` within ``reboot_timeout``, else
        its gate ``reboot/<node>/<n>`` offers ``wait`` / ``rerun`` / ``mark-done``. Returns the
        new boot_id ("" when marked done by a person). Raises :class:`StepStopped`."""
        t = self.inp.run.timing
        self.host.boots.setdefault(self.node, old_boot_id)
        self._at("reboot", f"{' '.join(argv)} (runs once), then a new boot_id")
        try:
            done = await reboot(self.host, self.node, self.access, list(argv), via="host", timeout_seconds=t.reboot_timeout,
                                poll_seconds=t.reboot_poll, board=board,
                                on_wait=lambda _, deadline: self._at("reboot", "a new boot_id (the host answering again)", deadline=deadline))
        except RebootFailed as err:
            rejected = any(r.gate_id.startswith(f"reboot/{self.node}/") and r.action == "rejected" for r in self.gates.history)
            raise StepStopped("reboot", err.reason, aborted=rejected or self.gates.control.abort) from err
        except (Aborted, RevertRequested) as err:
            raise StepStopped("reboot", "aborted", aborted=True) from err
        return done.after or ""

    async def _wait_ok(self, step: str, what: str, check: Callable[[], Awaitable[Check]], timeout: float,
                       board: dict[str, HealthStatus], *, initial: float | None = None) -> None:
        """The kit's health wait for ``check`` up to ``timeout`` s; on timeout gate ``health``
        (approve = wait again, reject = stop). Raises :class:`StepStopped`."""
        t = self.inp.run.timing
        while True:
            deadline = workflow.now() + timedelta(seconds=timeout)
            self._at(step, what, deadline=deadline)
            hs = await wait_until(check, name=f"{self.node}/{step}", backoff=Backoff(initial or t.poll, t.poll_max),
                                  deadline=deadline, board=board, stop=lambda: self.gates.control.abort, on_poll=lambda _: self._push())
            if hs.state == "ok":
                return
            if hs.state == "stopped":
                raise StepStopped(step, "aborted", aborted=True)
            await self._require("health", step, f"{what}: not reached within {timeout:.0f}s ({hs.last}); approve waits again, reject stops")

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
            a = await self.gluster.read(None, heal=False, exclude_node=self.node)
            reasons = plan.node_down_safety(a, self.node)
            if not any(b.node == self.node for v in a.volumes for b in v.bricks):
                reasons.append(f"no GlusterFS brick maps to node {self.node}")
            self.st.findings = reasons
            return Check(not reasons, "; ".join(reasons) or "safe")

        await self._wait_ok("safety", "every replica set keeps all but at most one brick", check, run.timing.bricks_timeout, self.health)
        self.st.findings = []

    async def _record(self) -> None:
        """Step 4: the full Node, the bootstrap config, boot_id and packages."""
        self._at("record", "the Node object, bootstrap config, boot_id and packages")
        if not self.record.uid:
            obj = await self._node_object()
            if not obj.exists:
                raise StepStopped("record", f"node {self.node} has no Node object to record")
            self.record.uid, self.record.labels, self.record.runtime, self.record.node_object = obj.uid, obj.labels, obj.runtime, obj.raw
            self.record.addresses = obj.addresses
        grep = await self._cmd("record", plan.BOOTSTRAP_GREP)
        self.record.bootstrap_config = plan.bootstrap_group(grep.stdout)
        bid = await self._cmd("record", plan.BOOT_ID)
        self.record.boot_id = bid.stdout.strip()
        pk = await self._cmd("record", plan.RPM_QA)
        self.record.packages = plan.parse_rpm_qa(pk.stdout)
        if not self.record.boot_id or not self.record.packages:
            raise StepStopped("record", f"could not read boot_id/packages: {bid.summary()} / {pk.summary()}")

    async def _units_off(self, step: str, units: list[str]) -> None:
        """Steps 5 and 7: stop and disable ``units``, checked first and verified after."""

        async def left() -> list[str]:
            act = await self._cmd(step, ["systemctl", "is-active", *units])
            ena = await self._cmd(step, ["systemctl", "is-enabled", *units])
            return plan.units_down(act.stdout, ena.stdout, units)

        self._at(step, f"stop and disable {', '.join(units)}")
        if not await left():
            self._done(step)
            return
        for u in units:
            r = await self._cmd(step, ["systemctl", "stop", u])
            if r.exit_code not in (0, 5):  # 5: unit not loaded (missing units are fine)
                raise StepStopped(step, f"systemctl stop {u}: {r.summary()}")
            r = await self._cmd(step, ["systemctl", "disable", u])
            if r.exit_code not in (0, 1) or (r.exit_code == 1 and "No such file" not in r.stderr):
                raise StepStopped(step, f"systemctl disable {u}: {r.summary()}")
        rest = await left()
        if rest:
            raise StepStopped(step, f"still active or enabled after stop/disable: {', '.join(rest)}")
        self._done(step)

    async def _resolv_conf(self) -> None:
        """Step 6: keep DNS once dnsmasq goes: the upstream resolv.conf over /etc/resolv.conf.
        Stops when the upstream file is gone and resolv.conf still points at dnsmasq."""
        self._at("resolv-conf", f"cp -f {plan.UPSTREAM_RESOLV} /etc/resolv.conf")

        async def problem() -> str | None:
            cur = await self._cmd("resolv-conf", ["cat", "/etc/resolv.conf"])
            return plan.resolv_conf_problem(cur.stdout, self.record.addresses)

        why = await problem()
        if why is None:
            self._done("resolv-conf")
            return
        up = await self._cmd("resolv-conf", ["test", "-e", plan.UPSTREAM_RESOLV])
        if up.exit_code != 0:
            raise StepStopped("resolv-conf", f"{why}, and {plan.UPSTREAM_RESOLV} is gone: removing dnsmasq now would break DNS; "
                                             "restore /etc/resolv.conf with the upstream nameservers by hand")
        r = await self._cmd("resolv-conf", ["cp", "-f", plan.UPSTREAM_RESOLV, "/etc/resolv.conf"])
        if not r.ok:
            raise StepStopped("resolv-conf", f"cp failed: {r.summary()}")
        why = await problem()
        if why is not None:
            raise StepStopped("resolv-conf", f"after the copy: {why}")
        self._done("resolv-conf")

    async def _remove_packages(self) -> None:
        """Step 8: ``yum -y remove``; check: ``rpm -q`` says not installed for every one."""
        pkgs = self.inp.run.packages_to_remove
        self._at("remove-packages", f"yum -y remove {' '.join(pkgs)}")
        left = plan.packages_installed((await self._cmd("remove-packages", ["rpm", "-q", *pkgs])).stdout, pkgs)
        if left:
            asked = left
            r = await self._cmd("remove-packages", ["yum", "-y", "remove", *left], timeout=max(600.0, self.inp.run.timing.host_command_timeout))
            left = plan.packages_installed((await self._cmd("remove-packages", ["rpm", "-q", *pkgs])).stdout, pkgs)
            self.st.removed = [p for p in pkgs if p in set(self.st.removed) | (set(asked) - set(left))]
            if left:
                raise StepStopped("remove-packages", f"still installed: {', '.join(left)} ({r.summary()})")
        self._done("remove-packages")

    async def _wipe(self) -> None:
        """Step 9: rm -rf of the paths and the directories' contents, without a shell glob."""
        run = self.inp.run
        self._at("wipe", "remove " + ", ".join(run.wipe_paths + [d + "/ (contents)" for d in run.wipe_dir_contents]))

        async def wiped() -> bool:
            for p in run.wipe_paths:
                if (await self._cmd("wipe", ["test", "-e", p])).exit_code == 0:
                    return False
            for d in run.wipe_dir_contents:
                r = await self._cmd("wipe", ["find", d, "-mindepth", "1", "-maxdepth", "1"])
                if r.ok and r.stdout.strip():
                    return False
            return True

        if not await wiped():
            for argv in plan.wipe_commands(run.wipe_paths, run.wipe_dir_contents):
                r = await self._cmd("wipe", argv)
                if not r.ok:
                    raise StepStopped("wipe", r.summary())
            if not await wiped():
                raise StepStopped("wipe", "paths still present after the wipe")
        self._done("wipe")

    async def _post_reboot(self) -> None:
        """Step 11: DNS names resolve, no runtime installed or active, no runtime socket; a
        failure opens a gate (approve checks again, reject stops)."""
        run = self.inp.run
        while True:
            self._at("post-reboot-checks", "DNS resolves, runtimes gone")
            problems: list[str] = []
            for name in run.dns_probe_names:
                if (await self._cmd("post-reboot-checks", ["getent", "hosts", name])).exit_code != 0:
                    problems.append(f"{name} does not resolve")
            inst = plan.packages_installed((await self._cmd("post-reboot-checks", ["rpm", "-q", *plan.RUNTIME_PACKAGES])).stdout, plan.RUNTIME_PACKAGES)
            problems += [f"{p} still installed" for p in inst]
            act = await self._cmd("post-reboot-checks", ["systemctl", "is-active", *plan.RUNTIME_UNITS])
            problems += [f"{u} active" for u, a in zip(plan.RUNTIME_UNITS, act.stdout.split(), strict=False) if a == "active"]
            for sock in plan.RUNTIME_SOCKETS:
                if (await self._cmd("post-reboot-checks", ["test", "-S", sock])).exit_code == 0:
                    problems.append(f"socket {sock} present")
            if not problems:
                self._done("post-reboot-checks")
                return
            self.st.findings = problems
            await self._require("health", "post-reboot-checks", "; ".join(problems) + ": fix by hand, approve checks again, reject stops")

    async def _inventory(self, step: str, ext: ExternalStep | None, text: str) -> None:
        """Steps 14 and 21: the configured command (once) or a human_action gate with the exact change."""
        if ext is not None:
            await self._external(step, ext)
        else:
            await self._require("human", step, text)
        self._done(step)

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
        run, node = self.inp.run, self.node
        if not self.destructive:  # a retry after the destructive steps began: the node's own bricks are down, by design
            await self._safety()
            self._done("safety")
        await self._safe()
        if self._todo("approve-migration"):
            await self._require("destructive", "approve-migration", f"migrate {node} to {run.target_runtime}: drain, stop the runtime, "
                            "remove packages, wipe /etc/origin, reboot, delete the Node, scale-up")
            self._done("approve-migration")
        if self._todo("drain"):
            self._at("drain", "cordon and drain (--ignore-daemonsets --delete-local-data)")
            d = run.drain
            try:
                await self.node_run.cordon_and_drain(wait_seconds=d.wait_seconds, backoff_initial=d.backoff_initial_seconds,
                                                     backoff_max=d.backoff_max_seconds, deadline_seconds=run.timing.drain_deadline)
            except Stopped as err:
                raise StepStopped("drain", f"drain stopped ({self.node_run.stop} by {self.node_run.stop_by})",
                                  aborted=self.node_run.stop in ("abort", "skip")) from err
            self._done("drain")
        await self._safe()
        if self._todo("record"):
            await self._record()
            await self._save_record(f"recorded before the destructive steps (attempt {self.st.attempt})")
            self._done("record")
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
            self.st.new_boot_id = await self._reboot(self.record.boot_id, ["systemctl", "reboot"], self.health)
            self._done("reboot")
        if self._todo("post-reboot-checks"):
            await self._post_reboot()
        await self._safe()
        if self._todo("delete-node"):
            await self._require("destructive", "approve-delete", f"delete node {node} (uid {self.record.uid}) from the API; it registers "
                            "again only through the scale-up")
            self._at("delete-node", f"DELETE node {node} uid {self.record.uid}")
            res: DeleteRecordedNodeResult = await acts.call(DELETE_RECORDED_NODE, DeleteRecordedNodeInput(node=node, uid=self.record.uid),
                                                            DeleteRecordedNodeResult, timeouts=self.node_run.timeouts)
            self.st.node_deleted = True
            self.st.reason = res.detail
            self._done("delete-node")
        group = self.record.bootstrap_config
        if self._todo("inventory"):
            await self._inventory("inventory", run.inventory_step, plan.inventory_change(node, group))
        if run.node_group_step is not None and self._todo("node-group"):
            await self._external("node-group", run.node_group_step)
            self._done("node-group")
        if self._todo("scale-up"):
            await self._external("scale-up", run.scaleup_step)
            self._done("scale-up")
        obj = await self._registered()
        self._done("wait-registered")
        await self._gluster_back()
        if self._todo("inventory-restore"):
            await self._inventory("inventory-restore", run.inventory_restore_step, plan.inventory_restore(node, group))
        self._at("uncordon")
        if obj.unschedulable:
            self.st.findings.append(f"node {node} came back unschedulable: uncordon it by hand (`oc adm uncordon {node}`)")
        self._done("uncordon")

    async def _uncordon_untouched(self) -> str:
        """Undo a skip or an abort honoured before the destructive steps (issue 39: it ends in a
        verified state): uncordon if we cordoned (the activity checks ``cordoned-by`` and answers
        whether the node ends schedulable). Returns what to add to the reason."""
        unc = await self.node_run.uncordon()
        if not unc.uncordoned:
            return f"; left cordoned: {unc.left_cordoned_reason or 'the uncordon did not take'}"
        self.node_run.cordoned_by_us, self.st.uncordoned = False, True
        return "; nothing changed on the host; uncordoned"

    @workflow.run
    async def run(self, input: NodeMigrationInput) -> NodeMigrationResult:
        self._push()
        outcome, reason = "done", None
        try:
            await self._migrate()
            self._at("finished", phase="done")
        except StepStopped as err:
            req = self.skip_by if not self.destructive else None
            outcome = "skipped" if req is not None else "aborted" if err.aborted else "failed"
            if req is not None:
                reason = (f"skipped by {req.identity}" + (f": {req.comment}" if req.comment else "")
                          + f" at {self.st.step or 'start'}, before the destructive steps")
            else:
                reason = f"stopped at {err.step}: {err.reason}" + (f"; node {self.node} is DELETED and not registered again"
                                                                    if self.st.node_deleted else "")
            if outcome != "failed" and not self.destructive:
                reason += await self._uncordon_untouched()
            if req is not None and self.st.record_configmap:
                await self._save_record(reason)
            self.st.reason = reason
            self._at(err.step, None, phase=outcome)
        await self.reporter.settle()
        await self.node_run.settle()
        rec = self.record.model_copy()
        final = self.st.model_copy(deep=True)
        final.record = rec
        final.gates = [g.model_copy() for g in self.gates.gates.values()]
        return NodeMigrationResult(node=self.node, outcome=outcome, reason=reason, status=final, attempt=final.attempt,
                                   gate_history=list(self.history) + list(self.node_run.drain.records))
