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
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import NodeInfo, SetNodeLabelsInput
    from activities.runtime_migration.models import DeleteRecordedNodeInput, DeleteRecordedNodeResult, NodeObject, NodeObjectInput, PodsOnNode, PodsOnNodeInput
    from workflows.kit import calls as acts
    from workflows.kit.control import Control
    from workflows.kit.drain import DrainGateState
    from workflows.kit.gates import Gates
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.kit.models import ApprovalRules, DrainDecision, GateRecord, GateState, HealthStatus
    from workflows.kit.noderun import NodeRun, NodeRunWorkflow, Stopped
    from workflows.runtime_migration import plan
    from workflows.runtime_migration.gluster import read_assessment
    from workflows.runtime_migration.models import (
        GateDecision,
        NodeMigrationInput,
        NodeMigrationResult,
        NodeMigrationStatus,
        NodeRecordView,
    )
    from workflows.runtime_migration.runner import NodeSteps, StepStopped

READ_NODE_OBJECT = "read_node_object"
DELETE_RECORDED_NODE = "delete_recorded_node"
LIST_PODS_ON_NODE = "list_pods_on_node"
SET_NODE_LABELS = "set_node_labels"


@workflow.defn
class RuntimeMigrationNodeWorkflow(NodeRunWorkflow):
    """Input :class:`NodeMigrationInput`, result :class:`NodeMigrationResult` (see the module doc)."""

    @workflow.init
    def __init__(self, input: NodeMigrationInput) -> None:
        run = input.run
        self.inp = input
        self.node = input.node
        self.st = NodeMigrationStatus(node=input.node, phase="running", since=workflow.now())
        self.history: list[GateRecord] = []
        self.control = Control(on_change=self._push, noun="node migration")
        rules = ApprovalRules(requested_by=run.requested_by, four_eyes=run.four_eyes, allowed_approvers=run.allowed_approvers)
        self.gates = Gates(self.control, rules, self.history, noun="node migration", pause_on_reject=False, on_change=self._push)
        self.health: dict[str, HealthStatus] = {}
        t = run.timing
        self.node_run = NodeRun(
            node=input.node, attempt=1, parent_id=input.parent_id, owner=input.parent_id, warn_fraction=0.8,
            timeouts=acts.Timeouts(t.activity, 10.0), drain=DrainGateState(input.node, t.decide_after, run.gate_timeout_seconds, DrainDecision.WAIT),
            deadline_consequence="the migration of {node} stays at the drain",
        )
        self.steps = NodeSteps(input.node, run.host_access[input.node], t, self.st, self.gates, self._push, run.gate_timeout_seconds)
        self.record = NodeRecordView()
        self._signals: list[asyncio.Future[None]] = []

    # --- parent link ------------------------------------------------------------------------------

    def _push(self) -> None:
        """Send the row (with the gates and a record without the full Node) to the parent."""
        st = self.st.model_copy(deep=True)
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
        if d.choice is not None:
            self.steps.choices[d.gate_id] = d.choice
        self.gates.decide(gate, d.state, d.identity, d.comment)

    @workflow.signal
    def abort_migration(self, identity: str) -> None:
        """Stop at the next safe point (a waiting gate is cancelled)."""
        self.control.request_abort(f"aborted by {identity}", identity)
        self.node_run.request_stop("abort", identity)

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
            r = await s.cmd("remove-packages", ["yum", "-y", "remove", *left], timeout=max(600.0, self.inp.run.timing.host_command_timeout))
            left = plan.packages_installed((await s.cmd("remove-packages", ["rpm", "-q", *pkgs])).stdout, pkgs)
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

    async def _registered(self) -> NodeObject:
        """Step 17: the Node again, new uid, Ready, docker:// runtime; labels checked (a missing
        GlusterFS label opens a gate: the GlusterFS pod would never schedule)."""
        s, run = self.steps, self.inp.run
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

        await s.wait_ok("wait-registered", "the Node registered again (new uid, Ready, docker://)", check, run.timing.register_timeout, self.health)
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
            if await s.gate("human", "labels", text):
                await acts.call(SET_NODE_LABELS, SetNodeLabelsInput(node=self.node, labels=dict(missing)), NodeInfo,
                                timeouts=self.node_run.timeouts)
                continue
            if gluster_missing:
                raise StepStopped("wait-registered", f"label {key}={value} missing and not restored")
            return obj

    async def _gluster_back(self) -> None:
        """Steps 18-20: the GlusterFS pod Ready on the node, its bricks online, heal clean on
        every volume (falling entries are progress; a stall opens a gate; split-brain stops)."""
        s, run, t = self.steps, self.inp.run, self.inp.run.timing

        async def pod() -> Check:
            got: PodsOnNode = await acts.call(LIST_PODS_ON_NODE, PodsOnNodeInput(namespace=run.gluster.namespace,
                                              label_selector=run.gluster.pod_selector(), node=self.node), PodsOnNode, timeouts=self.node_run.timeouts)
            ok = [p for p in got.pods if p.healthy]
            return Check(bool(ok), ok[0].name + " Ready" if ok else ", ".join(f"{p.name} {p.phase}" for p in got.pods) or "no GlusterFS pod yet")

        await s.wait_ok("gluster-pod", "the GlusterFS pod Running and Ready on the node", pod, t.gluster_pod_timeout, self.health)
        s.done("gluster-pod")

        async def bricks() -> Check:
            a = await read_assessment(run.gluster, exclude_node=None, heal=False)
            mine = [b for v in a.volumes for b in v.bricks if b.node == self.node]
            down = [f"{b.volume}: {b.name}" for b in mine if not b.online]
            problems = down + [f"peer {p} disconnected" for p in a.disconnected_peers]
            if not mine:
                problems.append(f"no brick maps to {self.node}")
            return Check(not problems, "; ".join(problems) or f"{len(mine)} bricks online")

        await s.wait_ok("bricks-online", "every brick of the node online, all peers connected", bricks, t.bricks_timeout, self.health)
        s.done("bricks-online")
        await self._heal()
        s.done("heal-clean")

    async def _heal(self) -> None:
        s, run, t = self.steps, self.inp.run, self.inp.run.timing
        while True:
            best: dict[str, object] = {"total": None, "at": workflow.now()}

            async def heal() -> Check:
                a = await read_assessment(run.gluster, exclude_node=None, heal=True)
                self.st.heal = plan.heal_counts(a)
                sb = plan.split_brain(a)
                if sb:
                    raise StepStopped("heal-clean", "split-brain: " + "; ".join(sb) + " (resolve by hand)", aborted=True)
                if a.healthy:
                    return Check(True, "heal info clean on every volume")
                total = sum(v or 0 for v in self.st.heal.values())
                if best["total"] is None or total < best["total"]:  # type: ignore[operator]
                    best["total"], best["at"] = total, workflow.now()
                stalled = (workflow.now() - best["at"]).total_seconds()  # type: ignore[operator]
                if stalled >= t.heal_stall:
                    best["stalled"] = True
                    return Check(False, f"heal stalled at {total} entries for {stalled:.0f}s")
                problems = [p for v in a.volumes for p in v.heal_problems][:5]
                return Check(False, f"{total} entries pending: " + "; ".join(problems))

            self.steps.set("heal-clean", "heal info clean on every volume (entries falling)")
            hs = await wait_until(heal, name=f"{self.node}/heal-clean", backoff=Backoff(t.poll, t.poll_max),
                                  deadline=workflow.now() + timedelta(seconds=t.heal_timeout), board=self.health,
                                  stop=lambda: self.control.abort or bool(best.get("stalled")), on_poll=lambda _: self._push())
            if hs.state == "ok":
                return
            if self.control.abort:
                raise StepStopped("heal-clean", "aborted", aborted=True)
            await s.require("health", "heal-clean", f"{hs.last}; approve waits again, reject stops")

    # --- the run -----------------------------------------------------------------------------------

    async def _migrate(self) -> None:
        run, s, node = self.inp.run, self.steps, self.node
        await self._safety()
        s.done("safety")
        await self._safe()
        await s.require("destructive", "approve-migration", f"migrate {node} to {run.target_runtime}: drain, stop the runtime, remove "
                        f"packages, wipe /etc/origin, reboot, delete the Node, scale-up")
        s.done("approve-migration")
        s.set("drain", "cordon and drain (--ignore-daemonsets --delete-local-data)")
        t = run.timing
        try:
            await self.node_run.cordon_and_drain(wait_seconds=t.drain_wait, backoff_initial=t.drain_backoff_initial,
                                                 backoff_max=t.drain_backoff_max, deadline_seconds=t.drain_deadline)
        except Stopped as err:
            raise StepStopped("drain", f"drain stopped ({self.node_run.stop} by {self.node_run.stop_by})",
                              aborted=self.node_run.stop == "abort") from err
        s.done("drain")
        await self._safe()
        await self._record()
        s.done("record")
        await self._safe()
        await self._units_off("stop-services", run.runtime_services)
        await self._resolv_conf()
        await self._units_off("dnsmasq", ["dnsmasq"])
        await self._remove_packages()
        await self._wipe()
        await self._safe()
        self.st.new_boot_id = await s.reboot(self.record.boot_id, ["systemctl", "reboot"], self.health)
        s.done("reboot")
        await self._post_reboot()
        await self._safe()
        await s.require("destructive", "approve-delete", f"delete node {node} (uid {self.record.uid}) from the API; it registers "
                        "again only through the scale-up")
        s.set("delete-node", f"DELETE node {node} uid {self.record.uid}")
        res: DeleteRecordedNodeResult = await acts.call(DELETE_RECORDED_NODE, DeleteRecordedNodeInput(node=node, uid=self.record.uid),
                                                        DeleteRecordedNodeResult, timeouts=self.node_run.timeouts)
        self.st.node_deleted = True
        self.st.reason = res.detail
        s.done("delete-node")
        group = self.record.bootstrap_config
        await self._inventory("inventory", run.inventory_step, plan.inventory_change(node, group))
        if run.node_group_step is not None:
            await s.external("node-group", self._argv(run.node_group_step.argv), run.node_group_step.timeout_seconds, run.node_group_step.env)
            s.done("node-group")
        await s.external("scale-up", self._argv(run.scaleup_step.argv), run.scaleup_step.timeout_seconds, run.scaleup_step.env)
        s.done("scale-up")
        obj = await self._registered()
        s.done("wait-registered")
        await self._gluster_back()
        await self._inventory("inventory-restore", run.inventory_restore_step, plan.inventory_restore(node, group))
        s.set("uncordon")
        if obj.unschedulable:
            self.st.findings.append(f"node {node} came back unschedulable: uncordon it by hand (`oc adm uncordon {node}`)")
        s.done("uncordon")

    @workflow.run
    async def run(self, input: NodeMigrationInput) -> NodeMigrationResult:
        self._push()
        outcome, reason = "done", None
        try:
            await self._migrate()
            self.steps.set("finished", phase="done")
        except StepStopped as err:
            outcome = "aborted" if err.aborted else "failed"
            reason = f"stopped at {err.step}: {err.reason}" + (f"; node {self.node} is DELETED and not registered again"
                                                                if self.st.node_deleted else "")
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
