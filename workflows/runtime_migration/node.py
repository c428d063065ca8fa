"""One node's migration from CRI-O to Docker: the child workflow ``RuntimeMigrationNodeWorkflow``
(procedures-spec §6.3, steps 1-22, in that order).

Every step checks the host before it acts (the command's outcome says whether it is already
done), records its last command (argv, exit code, output tail) in the node's row, and reports the
row to the parent (the kit's ``child_report``). The reboot and the external commands run at
most once; the row, host commands, gates, health waits and external commands run on the kit's
:class:`workflows.kit.steprow.StepRow` (over :class:`workflows.kit.host.HostSteps`), the reboot
too (:func:`workflows.kit.host.reboot`, by boot ID). Steps 17-20 (the rejoin): the Node registered again (new
uid, Ready, the target runtime, the recorded labels), the GlusterFS pod Ready on it, its bricks
online and heal clean on every volume (falling entries are progress, a stall opens a gate,
split-brain stops the node). Gates are this workflow's own and decided here
(:class:`workflows.kit.noderun.GatedNodeRunWorkflow`): the parent shows them, and ``lockkeeper
approve/reject/decide <parent> GATE`` answers them on this run.

A step that cannot go on stops the node (:class:`StepStopped`): the node is left as it is and the
row says so (``node_deleted`` when the Node object is gone and not registered again), never
forgotten. Order matters: the resolv.conf copy comes before dnsmasq goes and before /etc/origin
is wiped (DNS would break after the reboot otherwise, seed 003).
"""

from __future__ import annotations


from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import DeleteNodeInput, DeleteNodeResult, NodeInfo, SaveRecordResult, SetNodeLabelsInput
    from activities.runtime_migration.models import (
        ExternalObjects,
        ExternalObjectsInput,
        NodeObject,
        NodeObjectInput,
    )
    from workflows.kit import calls as acts
    from workflows.kit.control import Control
    from workflows.kit.drain import DrainGateState
    from workflows.kit.gates import Gates
    from workflows.kit.health import Backoff, Check
    from workflows.kit.host import HostSteps
    from workflows.kit.models import ChangedItem, GateKind, GateRecord, GateState, HealthStatus, NodeControlInput, failure_message
    from workflows.kit.noderun import GatedNodeRunWorkflow, NodeRun, StopKind, Stopped
    from workflows.kit.records import save_record_configmap
    from workflows.kit.report import ChildReport, Reporter
    from workflows.kit.steprow import StepRow, StepStopped
    from workflows.runtime_migration import plan
    from workflows.runtime_migration.models import (
        PROCEDURE_RUNTIME_MIGRATION,
        ExternalStep,
        NodeMigrationInput,
        NodeMigrationResult,
        NodeMigrationStatus,
        NodeRecordView,
    )
    from workflows.shared.glusterfs.health import GlusterHealth
    from workflows.shared.glusterfs.models import GlusterHealthParams

READ_NODE_OBJECT = "read_node_object"
READ_EXTERNAL_OBJECTS = "read_external_objects"
DELETE_NODE = "delete_node"
SAVE_NODE_RECORD = "save_node_record"
SET_NODE_LABELS = "set_node_labels"
#: The steps before anything irreversible happens on the host: a skip is honoured only there.
BEFORE_DESTRUCTIVE = ("start", "safety", "approve-migration", "drain", "record")


def point_of_no_return(row: NodeMigrationStatus) -> str | None:
    """The node's point of no return (the kit's ``past_no_return``): the first destructive step
    done, else the current step when it is destructive (the host is being changed); None while
    only the steps of :data:`BEFORE_DESTRUCTIVE` ran."""
    return next((s for s in [*row.done_steps, row.step] if s is not None and s not in BEFORE_DESTRUCTIVE), None)


@workflow.defn
class RuntimeMigrationNodeWorkflow(GatedNodeRunWorkflow):
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
        #: skip-node: who asked (honoured only before the destructive steps).
        self.skip_by: NodeControlInput | None = None
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
        #: Whether the destructive steps began (a retry: a destructive step was done before).
        self.node_run.past_no_return = next((s for s in self.st.done_steps if s not in BEFORE_DESTRUCTIVE), None)
        #: The kit's host steps: this node's commands (over SSH), the external steps (on the
        #: worker) and its reboot (by boot ID).
        self.access = run.host_access[input.node]
        self.host = HostSteps(self.gates, on_change=self._push, timeouts=timeouts, heartbeat_seconds=run.calls.heartbeat_seconds,
                              gate_timeout_seconds=run.gates.timeout_seconds)
        #: The row's steps on the kit (:class:`workflows.kit.steprow.StepRow`): host commands,
        #: gates ``<node>/<kind>/<step>``, health waits, the run-once external steps.
        self.steps = StepRow(self.st, prefix=input.node, gates=self.gates, host=self.host, access=self.access, push=self._push,
                             gate_timeout_seconds=run.gates.timeout_seconds, command_timeout_seconds=t.host_command_timeout,
                             backoff=Backoff(t.poll, t.poll_max))
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
            if self.node_run.past_no_return:
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

    # --- steps -------------------------------------------------------------------------------------

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

        await self.steps.wait_ok("safety", "every replica set keeps all but at most one brick", check, run.timing.bricks_timeout, self.health)
        self.st.findings = []

    async def _record(self) -> None:
        """Step 4: the full Node, the bootstrap config, boot_id and packages."""
        self.steps.at("record", "the Node object, bootstrap config, boot_id and packages")
        if not self.record.uid:
            obj = await self._node_object()
            if not obj.exists:
                raise StepStopped("record", f"node {self.node} has no Node object to record")
            self.record.uid, self.record.labels, self.record.runtime, self.record.node_object = obj.uid, obj.labels, obj.runtime, obj.raw
            self.record.addresses = obj.addresses
        grep = await self.steps.cmd("record", plan.BOOTSTRAP_GREP)
        self.record.bootstrap_config = plan.bootstrap_group(grep.stdout)
        bid = await self.steps.cmd("record", plan.BOOT_ID)
        self.record.boot_id = bid.stdout.strip()
        pk = await self.steps.cmd("record", plan.RPM_QA)
        self.record.packages = plan.parse_rpm_qa(pk.stdout)
        if not self.record.boot_id or not self.record.packages:
            raise StepStopped("record", f"could not read boot_id/packages: {bid.summary()} / {pk.summary()}")

    async def _units_off(self, step: str, units: list[str]) -> None:
        """Steps 5 and 7: stop and disable ``units``, checked first and verified after."""

        async def left() -> list[str]:
            act = await self.steps.cmd(step, ["systemctl", "is-active", *units])
            ena = await self.steps.cmd(step, ["systemctl", "is-enabled", *units])
            return plan.units_down(act.stdout, ena.stdout, units)

        self.steps.at(step, f"stop and disable {', '.join(units)}")
        if not await left():
            self.steps.done(step)
            return
        for u in units:
            r = await self.steps.cmd(step, ["systemctl", "stop", u])
            if r.exit_code not in (0, 5):  # 5: unit not loaded (missing units are fine)
                raise StepStopped(step, f"systemctl stop {u}: {r.summary()}")
            r = await self.steps.cmd(step, ["systemctl", "disable", u])
            if r.exit_code not in (0, 1) or (r.exit_code == 1 and "No such file" not in r.stderr):
                raise StepStopped(step, f"systemctl disable {u}: {r.summary()}")
        rest = await left()
        if rest:
            raise StepStopped(step, f"still active or enabled after stop/disable: {', '.join(rest)}")
        self.steps.done(step)

    async def _resolv_conf(self) -> None:
        """Step 6: keep DNS once dnsmasq goes: the upstream resolv.conf over /etc/resolv.conf.
        Stops when the upstream file is gone and resolv.conf still points at dnsmasq."""
        self.steps.at("resolv-conf", f"cp -f {plan.UPSTREAM_RESOLV} /etc/resolv.conf")

        async def problem() -> str | None:
            cur = await self.steps.cmd("resolv-conf", ["cat", "/etc/resolv.conf"])
            return plan.resolv_conf_problem(cur.stdout, self.record.addresses)

        why = await problem()
        if why is None:
            self.steps.done("resolv-conf")
            return
        up = await self.steps.cmd("resolv-conf", ["test", "-e", plan.UPSTREAM_RESOLV])
        if up.exit_code != 0:
            raise StepStopped("resolv-conf", f"{why}, and {plan.UPSTREAM_RESOLV} is gone: removing dnsmasq now would break DNS; "
                                             "restore /etc/resolv.conf with the upstream nameservers by hand")
        r = await self.steps.cmd("resolv-conf", ["cp", "-f", plan.UPSTREAM_RESOLV, "/etc/resolv.conf"])
        if not r.ok:
            raise StepStopped("resolv-conf", f"cp failed: {r.summary()}")
        why = await problem()
        if why is not None:
            raise StepStopped("resolv-conf", f"after the copy: {why}")
        self.steps.done("resolv-conf")

    async def _remove_packages(self) -> None:
        """Step 8: ``yum -y remove``; check: ``rpm -q`` says not installed for every one."""
        pkgs = self.inp.run.packages_to_remove
        self.steps.at("remove-packages", f"yum -y remove {' '.join(pkgs)}")
        left = plan.packages_installed((await self.steps.cmd("remove-packages", ["rpm", "-q", *pkgs])).stdout, pkgs)
        if left:
            asked = left
            r = await self.steps.cmd("remove-packages", ["yum", "-y", "remove", *left], timeout=max(600.0, self.inp.run.timing.host_command_timeout))
            left = plan.packages_installed((await self.steps.cmd("remove-packages", ["rpm", "-q", *pkgs])).stdout, pkgs)
            self.st.removed = [p for p in pkgs if p in set(self.st.removed) | (set(asked) - set(left))]
            if left:
                raise StepStopped("remove-packages", f"still installed: {', '.join(left)} ({r.summary()})")
        self.steps.done("remove-packages")

    async def _wipe(self) -> None:
        """Step 9: rm -rf of the paths and the directories' contents, without a shell glob."""
        run = self.inp.run
        self.steps.at("wipe", "remove " + ", ".join(run.wipe_paths + [d + "/ (contents)" for d in run.wipe_dir_contents]))

        async def wiped() -> bool:
            for p in run.wipe_paths:
                if (await self.steps.cmd("wipe", ["test", "-e", p])).exit_code == 0:
                    return False
            for d in run.wipe_dir_contents:
                r = await self.steps.cmd("wipe", ["find", d, "-mindepth", "1", "-maxdepth", "1"])
                if r.ok and r.stdout.strip():
                    return False
            return True

        if not await wiped():
            for argv in plan.wipe_commands(run.wipe_paths, run.wipe_dir_contents):
                r = await self.steps.cmd("wipe", argv)
                if not r.ok:
                    raise StepStopped("wipe", r.summary())
            if not await wiped():
                raise StepStopped("wipe", "paths still present after the wipe")
        self.steps.done("wipe")

    async def _post_reboot(self) -> None:
        """Step 11: DNS names resolve, no runtime installed or active, no runtime socket; a
        failure opens a gate (approve checks again, reject stops)."""
        run = self.inp.run
        while True:
            self.steps.at("post-reboot-checks", "DNS resolves, runtimes gone")
            problems: list[str] = []
            for name in run.dns_probe_names:
                if (await self.steps.cmd("post-reboot-checks", ["getent", "hosts", name])).exit_code != 0:
                    problems.append(f"{name} does not resolve")
            inst = plan.packages_installed((await self.steps.cmd("post-reboot-checks", ["rpm", "-q", *plan.RUNTIME_PACKAGES])).stdout, plan.RUNTIME_PACKAGES)
            problems += [f"{p} still installed" for p in inst]
            act = await self.steps.cmd("post-reboot-checks", ["systemctl", "is-active", *plan.RUNTIME_UNITS])
            problems += [f"{u} active" for u, a in zip(plan.RUNTIME_UNITS, act.stdout.split(), strict=False) if a == "active"]
            for sock in plan.RUNTIME_SOCKETS:
                if (await self.steps.cmd("post-reboot-checks", ["test", "-S", sock])).exit_code == 0:
                    problems.append(f"socket {sock} present")
            if not problems:
                self.steps.done("post-reboot-checks")
                return
            self.st.findings = problems
            await self.steps.require("health", "post-reboot-checks", "; ".join(problems) + ": fix by hand, approve checks again, reject stops")

    async def _inventory(self, step: str, ext: ExternalStep | None, text: str) -> None:
        """Steps 14 and 21: the configured command (once) or a human_action gate with the exact change."""
        if ext is not None:
            await self._external(step, ext)
        else:
            await self.steps.require("human", step, text)
        self.steps.done(step)

    async def _external(self, step: str, ext: ExternalStep) -> None:
        """An external step, its argv expanded for this node (:func:`plan.expand_argv`), run at
        most once per decision on the worker (:meth:`StepRow.external`, its failed and
        unknown-outcome gates). Raises :class:`StepStopped`."""
        argv = plan.expand_argv(ext.argv, self.node, self.record.bootstrap_config)
        namespaces = plan.EXTERNAL_WRITES.get(step)
        if namespaces and self.st.external_baseline is None:
            self.st.external_baseline = sorted((await self._external_objects(namespaces)).objects)
            self._push()
        try:
            await self.steps.external(step, argv, timeout_seconds=ext.timeout_seconds, env=ext.env)
        finally:
            if namespaces:
                await self._read_created(step, namespaces)

    async def _external_objects(self, namespaces: list[str]) -> ExternalObjects:
        """The objects of ``namespaces`` (``read_external_objects``: target → delete command)."""
        return await acts.call(READ_EXTERNAL_OBJECTS, ExternalObjectsInput(namespaces=namespaces), ExternalObjects,
                               timeouts=self.node_run.timeouts)

    async def _read_created(self, step: str, namespaces: list[str]) -> None:
        """After external step ``step`` (ended or not): what it created in ``namespaces`` that the
        baseline did not hold joins ``st.created`` (issue 39: an external step's effects are
        named in ``left_changed`` with their undo). A failed read leaves ``created`` as it was."""
        try:
            after = await self._external_objects(namespaces)
        except ActivityError:
            return
        known = {*(self.st.external_baseline or []), *(i.target for i in self.st.created)}
        self.st.created += [ChangedItem(target=t, what=f"created by the {step} step", undo=undo)
                            for t, undo in sorted(after.objects.items()) if t not in known]
        self._push()

    # --- the run -----------------------------------------------------------------------------------

    async def _save_record(self, state: str) -> None:
        """Write the node's record and ``state`` to the record ConfigMap (recoverable without
        Temporal)."""
        self.st.record_configmap = await save_record_configmap(
            SAVE_NODE_RECORD, SaveRecordResult, namespace=self.inp.run.record_namespace, workflow_id=self.inp.parent_id,
            procedure=PROCEDURE_RUNTIME_MIGRATION, data=plan.record_data(self.node, self.record, state),
            timeouts=self.node_run.timeouts)
        self._push()

    async def _migrate(self) -> None:
        run, node = self.inp.run, self.node
        if not self.node_run.past_no_return:  # a retry after the destructive steps began: the node's own bricks are down, by design
            await self._safety()
            self.steps.done("safety")
        self.steps.safe()
        if self.steps.todo("approve-migration"):
            await self.steps.require("destructive", "approve-migration", f"migrate {node} to {run.target_runtime}: drain, stop the runtime, "
                            "remove packages, wipe /etc/origin, reboot, delete the Node, scale-up", gate_kind=GateKind.STEP)
            self.steps.done("approve-migration")
        if self.steps.todo("drain"):
            self.steps.at("drain", "cordon and drain (--ignore-daemonsets --delete-local-data)")
            d = run.drain
            try:
                await self.node_run.cordon_and_drain(wait_seconds=d.wait_seconds, backoff_initial=d.backoff_initial_seconds,
                                                     backoff_max=d.backoff_max_seconds, deadline_seconds=run.timing.drain_deadline)
            except Stopped as err:
                raise StepStopped("drain", f"drain stopped ({self.node_run.stop} by {self.node_run.stop_by})",
                                  aborted=self.node_run.stop in ("abort", "skip")) from err
            self.steps.done("drain")
        self.steps.safe()
        if self.steps.todo("record"):
            await self._record()
            await self._save_record(f"recorded before the destructive steps (attempt {self.st.attempt})")
            self.steps.done("record")
        self.steps.safe()
        # From here on a skip is refused: the host is being changed.
        self.node_run.past_no_return = self.node_run.past_no_return or "stop-services"
        # A retry never repeats a finished host step: after the scale-up they would undo it
        # (stop the new runtime, remove docker, wipe the new /etc/origin).
        if self.steps.todo("stop-services"):
            await self._units_off("stop-services", run.runtime_services)
        if self.steps.todo("resolv-conf"):
            await self._resolv_conf()
        if self.steps.todo("dnsmasq"):
            await self._units_off("dnsmasq", ["dnsmasq"])
        if self.steps.todo("remove-packages"):
            await self._remove_packages()
        if self.steps.todo("wipe"):
            await self._wipe()
        self.steps.safe()
        if self.steps.todo("reboot"):
            self.st.new_boot_id = await self.steps.reboot("reboot", ["systemctl", "reboot"], before=self.record.boot_id,
                                                          timeout_seconds=run.timing.reboot_timeout, poll_seconds=run.timing.reboot_poll,
                                                          board=self.health)
            self.steps.done("reboot")
        if self.steps.todo("post-reboot-checks"):
            await self._post_reboot()
        self.steps.safe()
        if self.steps.todo("delete-node"):
            await self.steps.require("destructive", "approve-delete", f"delete node {node} (uid {self.record.uid}) from the API; it registers "
                            "again only through the scale-up", gate_kind=GateKind.STEP)
            self.steps.at("delete-node", f"DELETE node {node} uid {self.record.uid}")
            # Only the recorded Node (a resumed step finds it gone, or registered again with a new uid,
            # and sends nothing); drained, so not refused if somebody uncordoned it since.
            res: DeleteNodeResult = await acts.call(DELETE_NODE, DeleteNodeInput(node=node, uid=self.record.uid, require_cordoned=False),
                                                    DeleteNodeResult, timeouts=self.node_run.timeouts)
            self.st.node_deleted = True
            self.st.reason = res.detail
            self.steps.done("delete-node")
        group = self.record.bootstrap_config
        if self.steps.todo("inventory"):
            await self._inventory("inventory", run.inventory_step, plan.inventory_change(node, group))
        if run.node_group_step is not None and self.steps.todo("node-group"):
            await self._external("node-group", run.node_group_step)
            self.steps.done("node-group")
        if self.steps.todo("scale-up"):
            await self._external("scale-up", run.scaleup_step)
            self.steps.done("scale-up")
        obj = await self._registered()
        self.steps.done("wait-registered")
        await self._gluster_back()
        if self.steps.todo("inventory-restore"):
            await self._inventory("inventory-restore", run.inventory_restore_step, plan.inventory_restore(node, group))
        self.steps.at("uncordon")
        if obj.unschedulable:
            self.st.findings.append(f"node {node} came back unschedulable: uncordon it by hand (`oc adm uncordon {node}`)")
        self.steps.done("uncordon")

    # --- rejoin (steps 17-20) --------------------------------------------------------------------

    async def _registered(self) -> NodeObject:
        """Step 17: the Node again, new uid, Ready, docker:// runtime; labels checked (a missing
        GlusterFS label opens a gate: the GlusterFS pod would never schedule)."""
        run = self.inp.run
        seen: dict[str, NodeObject] = {}

        async def check() -> Check:
            obj = await self._node_object()
            seen["obj"] = obj
            if not obj.exists:
                return Check(False, "Node not registered yet")
            if obj.uid == self.record.uid:
                return Check(False, f"Node still has the old uid {obj.uid}")
            self.st.node_deleted, self.st.new_uid = False, obj.uid
            if not obj.ready:
                return Check(False, f"Node {obj.uid} not Ready")
            if not obj.runtime.startswith(f"{run.target_runtime}://"):
                return Check(False, f"runtime {obj.runtime or 'unknown'}, expected {run.target_runtime}://")
            return Check(True, f"uid {obj.uid}, Ready, {obj.runtime}")

        await self.steps.wait_ok("wait-registered", "the Node registered again (new uid, Ready, docker://)", check, run.timing.register_timeout, self.health)
        expected = plan.expected_labels(self.record.labels, run.expected_labels)
        key, value = run.gluster.label_pair()
        expected.setdefault(key, value)
        while True:
            obj = await self._node_object()
            problems = plan.label_problems(obj.labels, expected)
            missing = {k: v for k, v in expected.items() if obj.labels.get(k) != v}
            self.st.findings = problems
            if not missing:
                return obj
            gluster_missing = key in missing
            why = (f"without {key}={value} the GlusterFS pod never schedules on {self.node}" if gluster_missing
                   else "workloads that select them (e.g. Prometheus) cannot come back to this node")
            text = (f"{'; '.join(problems)} (recorded before the migration): {why}. Approve sets "
                    f"{', '.join(f'{k}={v}' for k, v in sorted(missing.items()))} on the Node; reject "
                    + ("stops" if gluster_missing else "goes on without them"))
            if await self.steps.gate("human", "labels", text):
                await acts.call(SET_NODE_LABELS, SetNodeLabelsInput(node=self.node, labels=dict(missing)), NodeInfo,
                                timeouts=self.node_run.timeouts)
                continue
            if gluster_missing:
                raise StepStopped("wait-registered", f"label {key}={value} missing and not restored")
            return obj

    async def _gluster_back(self) -> None:
        """Steps 18-20: the GlusterFS pod Ready on the node, its bricks online, heal clean on
        every volume (falling entries are progress; a stall opens a gate; split-brain stops)."""
        t = self.inp.run.timing

        async def pod() -> Check:
            try:  # the GlusterFS package's read lists the pods of every cluster (run in another node's pod)
                got = [p for p in (await self.gluster.read(None, heal=False, exclude_node=self.node)).pods if p.node == self.node]
            except ActivityError as err:
                return Check(False, f"GlusterFS could not be read: {failure_message(err)}")
            ok = [p for p in got if p.healthy]
            return Check(bool(ok), ok[0].name + " Ready" if ok else ", ".join(f"{p.name} {p.phase}" for p in got) or "no GlusterFS pod yet")

        await self.steps.wait_ok("gluster-pod", "the GlusterFS pod Running and Ready on the node", pod, t.gluster_pod_timeout, self.health)
        self.steps.done("gluster-pod")

        async def bricks() -> Check:
            try:
                a = await self.gluster.read(None, heal=False)
            except ActivityError as err:
                return Check(False, f"GlusterFS could not be read: {failure_message(err)}")
            mine = [b for v in a.volumes for b in v.bricks if b.node == self.node]
            down = [f"{b.volume}: {b.name}" for b in mine if not b.online]
            problems = down + [f"peer {p} disconnected" for p in a.disconnected_peers]
            if not mine:
                problems.append(f"no brick maps to {self.node}")
            return Check(not problems, "; ".join(problems) or f"{len(mine)} bricks online")

        await self.steps.wait_ok("bricks-online", "every brick of the node online, all peers connected", bricks, t.bricks_timeout, self.health)
        self.steps.done("bricks-online")
        await self._heal()
        self.steps.done("heal-clean")

    async def _heal(self) -> None:
        """Step 20 on the GlusterFS package's health gate: every brick online and heal info clean
        on every volume; entries that stop falling for ``heal_stall`` (or the ``heal_timeout``)
        open its gate ``gluster-health/<node>/heal-clean/<n>`` (approve waits again, reject stops);
        a split-brain stops the node (a person resolves it)."""
        self.steps.at("heal-clean", "heal info clean on every volume (entries falling)")
        res = await self.gluster.gate(f"{self.node}/heal-clean", policy=self.inp.run.gates)
        if res.outcome == "stopped":
            raise StepStopped("heal-clean", "aborted", aborted=True)
        if res.outcome == "split-brain":
            raise StepStopped("heal-clean", f"split-brain: {res.detail} (resolve by hand)", aborted=True)
        if res.outcome != "healthy":
            raise StepStopped("heal-clean", f"GlusterFS {res.outcome}: {res.detail}")

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
            self.steps.at("finished", phase="done")
        except StepStopped as err:
            req = self.skip_by if not self.node_run.past_no_return else None
            outcome = "skipped" if req is not None else "aborted" if err.aborted else "failed"
            if req is not None:
                reason = (f"skipped by {req.identity}" + (f": {req.comment}" if req.comment else "")
                          + f" at {self.st.step or 'start'}, before the destructive steps")
            else:
                reason = f"stopped at {err.step}: {err.reason}" + (f"; node {self.node} is DELETED and not registered again"
                                                                    if self.st.node_deleted else "")
            if outcome != "failed" and not self.node_run.past_no_return:
                reason += await self._uncordon_untouched()
            if req is not None and self.st.record_configmap:
                await self._save_record(reason)
            self.st.reason = reason
            self.steps.at(err.step, None, phase=outcome)
        await self.reporter.settle()
        await self.node_run.settle()
        rec = self.record.model_copy()
        final = self.st.model_copy(deep=True)
        final.record = rec
        final.gates = [g.model_copy() for g in self.gates.gates.values()]
        return NodeMigrationResult(node=self.node, outcome=outcome, reason=reason, status=final, attempt=final.attempt,
                                   past_no_return=point_of_no_return(final), gate_history=list(self.history) + list(self.node_run.drain.records))
