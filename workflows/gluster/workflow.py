"""GlusterRecoveryWorkflow: GlusterFS brick check and recovery, one host at a time (R3a,
procedures-spec §3.2; field report seed 002).

1. **Read and assess**: ``read_gluster`` (inventory, volume info/status, peers, heal info) and
   the pure :func:`workflows.shared.glusterfs.assess.assess`. ``mode=check`` stops here and reports
   (healthy = every brick online and heal info clean; nothing is written, no lease taken).
   **Preflight** (recover mode, or ``dry_run``): the kit checks the preconditions
   (:meth:`GlusterRecoveryWorkflow._preconditions`: the excluded node, the gluster CLI in a
   GlusterFS pod, every brick host mapped to a node and pod, the pods it would delete); a failed
   one ends the run ``refused`` before the lease and any delete; ``dry_run`` ends ``dry-run``
   there with every check's result and the plan.
2. **Stop** when a volume is down (more bricks offline than the quorum rule allows), a brick is
   in split-brain, or a brick host maps to no node or pod: every brick is named, nothing is
   deleted (seed 002: "In such a case don't continue").
3. **Per host** with an offline brick (lease ``gluster/<cluster>`` held), each step in
   ``status``:
   - with ``alerts``, the kit's alert gate (:mod:`workflows.kit.alerts`, board entry
     ``alerts/host/<host>``): no pod is deleted while Prometheus names a blocking alert;
   - a restart that would take a second brick of a volume down is unsafe: gate
     ``unsafe/<host>/<n>`` asks a person (approve: re-read and re-assess after they fixed it;
     reject: stop). Nothing is deleted;
   - gate ``delete/<host>`` shows volume, brick, host, pod and the last state (skipped with
     ``approve_pod_delete=false``); it covers the bounded restarts of that host;
   - record ``{pod, uid, node, at}`` in the host's ``deletes`` BEFORE the delete; the delete
     activity deletes only that uid, so a retried or resumed delete never deletes twice;
   - wait for a pod with a new uid, Running and Ready, on the same node (``replacement_timeout_seconds``);
   - re-read until the host's bricks are online; if not, restart again up to
     ``max_restarts_per_host``; then gate ``start-force/<host>`` (only with
     ``allow_volume_start_force``: approve runs ``gluster volume start VOL force``), then gate
     ``human/<host>/<n>`` (approve: re-read after a person recovered it; reject: stop);
   - the ``gluster_healthy`` gate on every volume with a brick on that host.
4. **Final check**: ``gluster_healthy`` on every volume; the result lists per volume the
   bricks, online state, heal entries at start and end, and the actions taken.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import PodRef
    from activities.gluster.models import GlusterReadInput, ReplacementInput, ReplacementState, VolumeStartInput
    from activities.preflight.models import InputCheck, NamesExist, Precondition
    from workflows.shared.glusterfs import calls
    from workflows.shared.glusterfs.health import GlusterHealth, unhealthy_reasons
    from workflows.gluster.models import (
        PROCEDURE_GLUSTER_RECOVERY,
        Assessment,
        GlusterRecoveryInput,
        GlusterRecoveryResult,
        GlusterRecoveryStatus,
        HostPlan,
        HostRun,
        PodDelete,
        VolumeResult,
    )
    from workflows.shared.glusterfs.assess import assess
    from workflows.shared.glusterfs.left import volume_items
    from workflows.kit import calls as acts
    from workflows.kit.control import Aborted
    from workflows.kit.planning import planning_abort_message
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.kit.models import (
        ChangedItem,
        ProcedureStatus,
        failure_message,
    )
    from workflows.kit.procedure import ProcedureStopped, ProcedureWorkflow
    from workflows.kit.scopes import subsystem_scope


class Stop(ProcedureStopped):
    """The run stops (outcome ``stopped``) with ``reason``; nothing more is changed. The kit's
    run template ends it (:meth:`ProcedureWorkflow.kit_rule_stopped`: what stays changed
    appended), with ``fatal`` the reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, outcome="stopped", fatal=[reason])


@workflow.defn
class GlusterRecoveryWorkflow(ProcedureWorkflow):
    """Input :class:`GlusterRecoveryInput`, status :class:`GlusterRecoveryStatus`, result
    :class:`GlusterRecoveryResult` (see the module doc)."""

    @workflow.init
    def __init__(self, input: GlusterRecoveryInput) -> None:
        self._in = input
        self._status = GlusterRecoveryStatus(mode=input.mode)
        self.kit_init(procedure=PROCEDURE_GLUSTER_RECOVERY, noun="gluster recovery", input=input, status=self._status,
                      pause_on_reject=False, reject_note="the gluster recovery stops there")
        self._health = GlusterHealth(
            target=input.target(), params=input.heal, gates=self.gates, control=self.control, board=self._status.health,
            progress=self._status.heal, on_change=self.touch, rule=input.quorum_rule, short_call_s=input.calls.short_call_seconds,
            read_attempts=input.read_attempts, command_timeout_s=input.command_timeout_seconds,
        )
        self._start: Assessment | None = None
        self._actions: dict[str, list[str]] = {}

    # --- status --------------------------------------------------------------------------------------

    def procedure_status(self) -> ProcedureStatus:
        st = super().procedure_status()
        if not st.waiting_for:
            running = [h for h in self._status.hosts if h.step not in ("pending", "done", "failed", "aborted")]
            if running:
                h = running[-1]
                st.waiting_for = f"host {h.host} ({h.node}): {h.step}" + (f" ({h.waiting_for})" if h.waiting_for else "")
                st.since = h.since
        return st

    def _step(self, step: str) -> None:
        self._status.step = step
        self.touch()

    def _host_step(self, hr: HostRun, step: str, waiting_for: str | None = None) -> None:
        if hr.step != step:
            hr.since = workflow.now()
        hr.step, hr.waiting_for = step, waiting_for  # type: ignore[assignment]
        self._status.step = f"host {hr.host}: {step}"
        self.touch()

    def _act(self, hr: HostRun | None, volumes: list[str], what: str) -> None:
        if hr is not None:
            hr.actions.append(what)
        for v in volumes:
            self._actions.setdefault(v, []).append(what)

    # --- reads ---------------------------------------------------------------------------------------

    async def _read(self, *, heal: bool, planning: bool = False) -> Assessment:
        """Read and assess GlusterFS. ``planning`` (the first read): an API that cannot be used
        fails the run with the ``Api*`` type at once (issue 18), nothing having been changed, and
        an abort while it runs raises Aborted (the run ends aborted)."""
        i = self._in
        inp = GlusterReadInput(target=i.target(), heal=heal, attempts=i.read_attempts, backoff_seconds=i.read_backoff_seconds,
                               command_timeout_seconds=i.command_timeout_seconds)
        try:
            if planning:  # raced against abort: an abort while it runs ends the run aborted (Aborted)
                report = await calls.read_planning(self.control, inp, self._in.calls.short_call_seconds)
            else:
                report = await calls.read(inp, self._in.calls.short_call_seconds)
        except ActivityError as err:
            api = acts.planning_api_failure(err, "the first GlusterFS read") if planning else None
            if api is None:
                raise
            raise api from err  # the run template ends the run failed
        a = assess(report, i.quorum_rule)
        self._status.assessment = a
        self.touch()
        return a

    async def _gate(self, gate_id: str, what: str) -> bool:
        """The kit's gate step (asked each time it is reached) with the input's ``gates`` policy;
        an abort meanwhile raises :class:`Aborted`."""
        answer = await self.gates.step(gate_id, what, self.gate_policy, again=True)
        if self.control.abort:
            raise Aborted(self.control.abort_reason)
        return answer.passed

    @staticmethod
    def _stop_reasons(a: Assessment) -> list[str]:
        return list(a.fatal) + list(a.unmapped)

    # --- one host ------------------------------------------------------------------------------------

    def _describe(self, plan: HostPlan, a: Assessment) -> str:
        rows = [f"{b.volume}: brick {b.name} ({b.reason or 'online'})" for v in a.volumes for b in v.bricks
                if b.host == plan.host and not b.online]
        return (f"delete GlusterFS pod {plan.pod} (uid {plan.pod_uid}) on node {plan.node} for host {plan.host}, "
                f"up to {self._in.max_restarts_per_host} times; offline there: {'; '.join(rows)}")

    async def _restart_pod(self, hr: HostRun, volumes: list[str]) -> None:
        """Record, delete (uid-guarded), wait for the replacement on the same node."""
        i = self._in
        assert hr.pod and hr.node
        uid = hr.pod_uid or ""
        self._host_step(hr, "delete", f"pod {hr.pod} ({uid})")
        rec = PodDelete(pod=hr.pod, uid=uid, node=hr.node, at=workflow.now())
        hr.deletes.append(rec)  # recorded before the call: the uid is what a retried delete checks
        self.touch()
        res = await calls.delete_pod(PodRef(namespace=i.namespace, name=hr.pod, uid=uid), self._in.calls.short_call_seconds)
        rec.result = res.detail
        hr.restarts += 1
        self._act(hr, volumes, f"deleted pod {hr.pod} (uid {uid}) on {hr.node}" if res.deleted else f"pod {hr.pod} already gone ({res.detail})")
        deadline = workflow.now() + timedelta(seconds=i.replacement_timeout_seconds)
        self._host_step(hr, "wait-replacement", f"a new GlusterFS pod Running and Ready on {hr.node}")
        seen: list[ReplacementState] = []

        async def replaced() -> Check:
            st = await calls.find_replacement(ReplacementInput(target=i.target(), node=hr.node or "", old_uid=uid), self._in.calls.short_call_seconds)
            seen.append(st)
            p = st.replacement
            return Check(st.ready, f"replacement {p.name} {p.phase} ready={p.ready}" if p else "no replacement yet"
                         + ("; old pod still terminating" if st.old_present else ""))

        hs = await wait_until(replaced, name=f"replacement/{hr.host}/{hr.restarts}", backoff=Backoff(initial=2.0, maximum=10.0),
                              deadline=deadline, stop=lambda: self.control.abort, board=self._status.health,
                              on_poll=lambda _: self.touch())
        if hs.state == "stopped":
            raise Aborted(self.control.abort_reason)
        if hs.state != "ok":
            raise Stop(f"no Ready replacement for pod {hr.pod} on node {hr.node} within {i.replacement_timeout_seconds:.0f}s ({hs.last})")
        new = seen[-1].replacement
        assert new is not None
        if new.node != hr.node:  # a DaemonSet pod is node-pinned; anything else is a surprise to report loudly
            raise Stop(f"replacement {new.name} of {hr.pod} runs on {new.node}, not {hr.node}")
        hr.replacement, hr.replacement_uid, hr.pod, hr.pod_uid = new.name, new.uid, new.name, new.uid
        self._act(hr, volumes, f"replacement {new.name} (uid {new.uid}) Ready on {hr.node}")

    async def _bricks_back(self, hr: HostRun) -> bool:
        """Re-read until ``hr.host``'s bricks are all online (a few polls, then False)."""
        i = self._in
        self._host_step(hr, "re-read", f"bricks on {hr.host} online")
        deadline = workflow.now() + timedelta(seconds=max(i.reread_delay_seconds * 6, 30.0))

        async def online() -> Check:
            a = await self._read(heal=False)
            down = [f"{v.name}: {b.name}" for v in a.volumes for b in v.bricks if b.host == hr.host and b.name in v.offline]
            hr.offline_bricks, hr.reread = down, True
            return Check(not down, f"offline on {hr.host}: {', '.join(down)}" if down else f"all bricks on {hr.host} online")

        hs = await wait_until(online, name=f"bricks/{hr.host}/{hr.restarts}", backoff=Backoff(initial=max(i.reread_delay_seconds, 1.0), maximum=15.0),
                              deadline=deadline, stop=lambda: self.control.abort, board=self._status.health, on_poll=lambda _: self.touch())
        if hs.state == "stopped":
            raise Aborted(self.control.abort_reason)
        return hs.state == "ok"

    async def _recover_host(self, plan: HostPlan, a: Assessment) -> None:
        i = self._in
        hr = HostRun(host=plan.host, node=plan.node, pod=plan.pod, pod_uid=plan.pod_uid, offline_bricks=list(plan.offline_bricks))
        self._status.hosts.append(hr)
        volumes = plan.volumes
        if self.alerts is not None:
            # Prometheus before the host's first write: no pod delete while a blocking alert fires
            # (or, failing closed, while Prometheus cannot be asked); an abort meanwhile ends the run.
            self._host_step(hr, "alerts", "no blocking alert (Prometheus)")
            await self.alerts.wait_clear(f"host/{plan.host}")
            await self.control.safe_point()
        if i.approve_pod_delete:
            self._host_step(hr, "approval", f"approval of gate delete/{plan.host}")
            if not await self._gate(f"delete/{plan.host}", self._describe(plan, a)):
                raise Stop(f"the delete of pod {plan.pod} on {plan.node} was not approved")
        back = False
        while not back and hr.restarts < i.max_restarts_per_host:
            await self.control.safe_point()
            await self._restart_pod(hr, volumes)
            back = await self._bricks_back(hr)
        if not back and i.allow_volume_start_force:
            self._host_step(hr, "decision", f"approval of gate start-force/{plan.host}")
            vols = sorted({b.split(": ", 1)[0] for b in hr.offline_bricks})
            what = (f"bricks on {plan.host} still offline after {hr.restarts} pod restarts: {', '.join(hr.offline_bricks)}. "
                    f"Approve to run 'gluster volume start VOL force' for {', '.join(vols)} (restarts only offline bricks); "
                    f"reject to recover by hand")
            if await self._gate(f"start-force/{plan.host}", what):
                for v in vols:
                    self._host_step(hr, "start-force", f"gluster volume start {v} force")
                    res = await calls.start_force(VolumeStartInput(target=i.target(), volume=v), self._in.calls.short_call_seconds)
                    self._act(hr, [v], f"gluster volume start {v} force in {res.pod}: {res.output}")
                back = await self._bricks_back(hr)
        n = 0
        while not back:
            n += 1
            self._host_step(hr, "decision", f"approval of gate human/{plan.host}/{n}")
            what = (f"bricks on {plan.host} still offline: {', '.join(hr.offline_bricks)}. Recover them by hand, then approve to "
                    f"re-read; reject to stop")
            if not await self._gate(f"human/{plan.host}/{n}", what):
                raise Stop(f"bricks on {plan.host} still offline: {', '.join(hr.offline_bricks)}; stopped by decision")
            self._act(hr, volumes, f"recovered by hand (gate human/{plan.host}/{n})")
            back = await self._bricks_back(hr)
        self._host_step(hr, "heal", f"heal info clean on {', '.join(volumes)}")
        res = await self._health.gate(f"heal/{plan.host}", volumes, policy=self.gate_policy)
        if res.outcome != "healthy":
            raise Stop(f"after the restart of {plan.host}: {res.detail}")
        self._host_step(hr, "done")

    # --- the run -------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: GlusterRecoveryInput) -> GlusterRecoveryResult:
        return await self.kit_run(lambda: self._run(input), GlusterRecoveryResult)

    def _preconditions(self, a: Assessment) -> list[Precondition]:
        """What the recovery needs before its first write (issue 39), from the input and the
        first read: the ``--exclude-node`` node exists (checked by the kit against the API),
        the gluster CLI runs in a GlusterFS pod of the ``--gluster-cluster`` clusters through
        pod exec (every read and ``gluster volume start VOL force`` run it there: the first
        read proved it, or found no pod), every brick host maps to a node and its GlusterFS
        pod (the pod it would delete), and the pods it would delete are named."""
        i = self._in
        selectors = ", ".join(i.target().selectors())
        pre: list[Precondition] = []
        if i.exclude_node:
            pre.append(NamesExist(names=[i.exclude_node], role="excluded node",
                                  why="--exclude-node: its pod never runs the CLI and is never counted on"))
        pre.append(InputCheck(about=f"gluster CLI in namespace {i.namespace} ({selectors})", ok=bool(a.exec_pod),
                              detail=(f"ran in pod {a.exec_pod}; {len(a.pods)} GlusterFS pod(s) found" if a.exec_pod
                                      else "no GlusterFS pod ran it"),
                              why="every read and 'gluster volume start VOL force' run it there (pod exec)"))
        pre.append(InputCheck(about="brick hosts", ok=not a.unmapped,
                              detail="; ".join(a.unmapped) if a.unmapped else "every brick host maps to a node and its GlusterFS pod",
                              why="a brick is recovered by deleting the GlusterFS pod on its host's node"))
        for plan in [h for h in a.hosts if h.pod]:  # an unmapped host is the check above
            pre.append(InputCheck(about=f"GlusterFS pod of brick host {plan.host}", ok=bool(plan.pod and plan.node),
                                  detail=f"pod {plan.pod} (uid {plan.pod_uid}) on node {plan.node}" if plan.pod else "no pod",
                                  why="the recovery deletes it (uid-guarded) to restart the offline brick(s) "
                                      + ", ".join(plan.offline_bricks)))
        return pre

    async def _run(self, input: GlusterRecoveryInput) -> GlusterRecoveryResult:
        """Check or recover; a Stop, an abort or a failed read ends the run with that outcome
        (``stopped``, ``aborted``, ``failed``) and what stays changed. The run template maps
        the outcome to the phase (``completed`` done, ``aborted`` aborted, the others failed),
        releases the lease and waits for the handlers."""
        try:
            self._step("read")
            a = self._start = await self._read(heal=True, planning=True)
            if input.mode == "check" and not input.dry_run:
                message = "GlusterFS healthy" if a.healthy else "GlusterFS not healthy: " + "; ".join(unhealthy_reasons(a, None))
                return self._end("completed" if a.healthy else "unhealthy", message, self._stop_reasons(a), a)
            # Every precondition through the kit before the lease and the first delete: a failed
            # one ends the run refused (one line per problem); a dry run lists them and ends.
            self._step("preflight")
            checked = await self.kit_preflight(self._preconditions(a), refuse=not input.dry_run)
            if input.dry_run:
                plan = ", ".join(f"{h.host} (pod {h.pod} on {h.node})" for h in a.hosts)
                message = (f"dry run: would restart the GlusterFS pod of {len(a.hosts)} host(s) one at a time: {plan}" if a.hosts
                           else "dry run: no brick offline, nothing to restart")
                stop = self._stop_reasons(a)
                if stop:
                    message += "; would stop before any delete: " + "; ".join(stop)
                if checked.failed:
                    message += f"; refused today: {len(checked.failed)} precondition(s) failed"
                return self._end("dry-run", message, stop, a)
            await self.leases.acquire([subsystem_scope("gluster", input.cluster)])
            self._status.leases = list(self.leases.held)
            end = await self._recover(a)
            hosts = ", ".join(h.host for h in self._status.hosts)
            return self._end("completed", "GlusterFS healthy" + (f" after restarting {hosts}" if hosts else ""), [], end)
        except Aborted as ab:  # from a gate, a wait, or the first read (workflows.kit.planning)
            return self._end("aborted", (ab.reason or "aborted") if self._start is not None else planning_abort_message(self.control, ab))
        except ActivityError as err:
            return self._end("failed", failure_message(err))

    def _end(self, outcome: str, message: str, fatal: list[str] | None = None, end: Assessment | None = None) -> GlusterRecoveryResult:
        """The result (:meth:`kit_end`): hosts not done marked aborted or failed with
        ``message``; unless completed, what stays changed appended to the message."""
        self._mark_hosts(outcome, message)
        healthy = end is not None and end.healthy and outcome in ("completed",)
        left = self.kit_left_changed() if outcome not in ("completed", "dry-run") else []
        if left:
            self._status.left_changed = left
            message += "; left changed: " + "; ".join(i.line() for i in left)
        self._step("finished")
        return self.kit_end(
            GlusterRecoveryResult, outcome, message, mode=self._in.mode, healthy=healthy, ok=healthy and outcome == "completed",
            fatal=fatal or [], hosts=[h.model_copy() for h in self._status.hosts],
            volumes=self._volume_results(self._start, end or self._status.assessment), assessment_start=self._start,
            assessment_end=end or self._status.assessment, left_changed=left,
        )

    def kit_result_fields(self) -> dict[str, object]:
        """The recovery's own fields of an ending the kit builds (a refusal, a :class:`Stop`):
        the mode, the host runs, the volumes and the assessments (not healthy, not ok)."""
        return {"mode": self._in.mode, "healthy": False, "ok": False, "hosts": [h.model_copy() for h in self._status.hosts],
                "volumes": self._volume_results(self._start, self._status.assessment), "assessment_start": self._start,
                "assessment_end": self._status.assessment}

    async def kit_rule_stopped(self, stop: ProcedureStopped, result_type: type[Any]) -> Any:
        """A :class:`Stop`: the hosts not done are marked failed with its reason, then the kit
        ends the run (what stays changed appended)."""
        self._mark_hosts("stopped", stop.reason)
        self._step("finished")
        return await super().kit_rule_stopped(stop, result_type)

    def _mark_hosts(self, outcome: str, message: str) -> None:
        for h in self._status.hosts:
            if h.step not in ("done",):
                h.step = "aborted" if outcome == "aborted" else "failed"  # type: ignore[assignment]
                h.reason = message

    def kit_left_changed(self) -> list[ChangedItem]:
        return super().kit_left_changed() + self._left_changed()

    def _left_changed(self) -> list[ChangedItem]:
        """What a recovery that did not complete leaves changed (issue 39): per host whose
        GlusterFS pod this run deleted (its DaemonSet starts a new one), each volume with a brick
        there that was offline at the start and is not known to be offline still (the last
        re-read; without one the restart is taken to have brought it back), named as the
        simulator's diff names it, ``gluster volume VOL``. No undo: the bricks came back."""
        start = {h.host: h for h in (self._start.hosts if self._start is not None else [])}
        bricks: dict[str, list[str]] = {}
        for hr in self._status.hosts:
            if not hr.deletes:
                continue
            plan = start.get(hr.host)
            still = set(hr.offline_bricks) if hr.reread else set()
            pods = ", ".join(d.pod for d in hr.deletes)
            for b in (plan.offline_bricks if plan else []):
                if b not in still:
                    vol, brick = b.split(": ", 1)
                    bricks.setdefault(vol, []).append(f"brick {brick} (offline at the start) restarted by deleting pod {pods}")
        return volume_items(bricks)

    async def _recover(self, a: Assessment) -> Assessment:
        """Hosts one at a time (see the module doc), then the final check. Raises Stop/Aborted."""
        done: set[str] = set()
        unsafe_asked: dict[str, int] = {}
        for _ in range(3 * max(1, len(a.hosts)) + 3):  # bounded: each pass handles a host or asks a person
            stop = self._stop_reasons(a)
            if stop:
                raise Stop("; ".join(stop))
            todo = [h for h in a.hosts if h.host not in done]
            if not todo:
                if a.hosts:  # a host already handled is offline again: a person decides
                    raise Stop(f"bricks offline again after recovery: {', '.join(a.offline)}")
                break
            plan = todo[0]
            await self.control.safe_point()
            if not plan.safe:
                n = unsafe_asked[plan.host] = unsafe_asked.get(plan.host, 0) + 1
                self._step(f"unsafe restart of {plan.host}")
                what = (f"{plan.unsafe_reason}. Restarting {plan.host} is unsafe; recover by hand, then approve to re-read "
                        f"and re-assess, or reject to stop")
                if not await self._gate(f"unsafe/{plan.host}/{n}", what):
                    raise Stop(f"unsafe to restart {plan.host}: {plan.unsafe_reason}")
                a = await self._read(heal=False)
                continue
            await self._recover_host(plan, a)
            done.add(plan.host)
            a = await self._read(heal=False)
        else:
            raise Stop(f"gave up after too many passes; still offline: {', '.join(a.offline)}")
        self._step("final check")
        res = await self._health.gate("final", None, policy=self.gate_policy)
        if res.outcome != "healthy" or res.assessment is None:
            raise Stop(f"final check: {res.detail}")
        self._status.assessment = res.assessment
        return res.assessment

    def _volume_results(self, start: Assessment | None, end: Assessment | None) -> list[VolumeResult]:
        out = []
        names = [v.name for v in (end or start or Assessment()).volumes]
        for name in names:
            s = next((v for v in (start.volumes if start else []) if v.name == name), None)
            e = next((v for v in (end.volumes if end else []) if v.name == name), None)
            ref = e or s
            assert ref is not None
            out.append(VolumeResult(
                name=name, bricks=list(ref.bricks), online=not ref.offline and all(b.online for b in ref.bricks),
                heal_entries_start=s.heal_entries if s else None, heal_entries_end=e.heal_entries if e else None,
                heal_problems=list(ref.heal_problems), actions=list(self._actions.get(name, [])),
            ))
        return out
