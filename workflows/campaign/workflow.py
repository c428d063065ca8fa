"""CampaignWorkflow: one procedure across a fleet of clusters, in waves (issue 38).

Each cluster's procedure is a child workflow (ID ``<campaign>/<cluster>``) started on that
cluster's own task queue, where only that cluster's worker (with only that cluster's credentials)
polls: the campaign itself runs on the central queue and touches no cluster. The child's own gates
are approved on the child's ID, as for a cluster upgrade's phases.

Waves (:meth:`workflows.campaign.models.CampaignInput.wave_plan`) run one after the other. Within
a wave at most ``max_clusters_in_flight`` children run at once. Between two waves: every child of
the wave has ended (a failed one counts against the failure budget), ``soak_seconds`` passed, and,
with ``approve_each: wave``, the gate ``wave/<n>`` was approved (reject or timeout: the campaign
aborts). When the failures exceed the budget no new cluster starts and the decision gate
``budget/<failures>`` opens: approve to go on (the budget becomes the failures so far), reject to
abort. A failed cluster stops nothing else until then.

Before the first child the kit checks the campaign's preconditions
(:meth:`CampaignWorkflow._preconditions`: a worker on every cluster's queue, each cluster's
input; a dry run adds each cluster's own dry run when the procedure has one); a failed one
refuses the campaign before any cluster starts, and ``dry_run`` ends there with every check's
result and the waves.

Pause, resume and abort of the campaign reach every running child through the kit's parent
signals (``parent_pause``, ``parent_resume``, ``parent_abort``, :mod:`workflows.kit.report`); an
aborted child ends as its own procedure's abort does and the campaign ends once every child has.
Children whose procedure takes ``report_to`` report their summary through the kit's
``child_report`` channel (only on changes); the campaign's own history holds the child's start and
end plus those reports, not a signal per step.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from activities.alerts.models import CHECK_ALERTS, AlertsAnswer
    from activities.cluster.models import ClusterHealthInput, ClusterHealthResult
    from activities.preflight.models import InputCheck, Precondition, QueuePolled
    from workflows.campaign.models import (
        PROCEDURE_CAMPAIGN,
        CampaignCluster,
        CampaignInput,
        CampaignResult,
        CampaignStatus,
        ClusterRun,
        SoakChecks,
        fleet_changed,
    )
    from workflows.kit import calls as acts
    from workflows.kit.inputs import AlertGatePolicy, GatePolicy
    from workflows.kit.models import (
        SA_CLUSTER,
        SA_PROCEDURE,
        ChangedItem,
        ControlInput,
        failure_message,
    )
    from workflows.kit.preflight import Preflight
    from workflows.kit.procedure import ProcedureWorkflow
    from workflows.kit.report import PARENT_ABORT_SIGNAL, PARENT_PAUSE_SIGNAL, PARENT_RESUME_SIGNAL, ChildReport
    from workflows.kit.windows import describe, is_open, next_opening, parse_windows


#: A soak check's retries: a few quick ones within one round (the next round tries again).
SOAK_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=5), maximum_attempts=3)


def child_outcome(result: Any) -> tuple[str, str]:
    """``(state, message)`` of an ended child from its result (a model or, started by type name,
    its JSON object): ``done`` when its outcome is completed (or its ``ok`` is true), ``aborted``
    when aborted, else ``failed``."""
    get = result.get if isinstance(result, dict) else (lambda k, d=None: getattr(result, k, d))
    outcome, ok, message = get("outcome"), get("ok"), get("message") or ""
    if ok is not None:
        return ("done" if ok else "failed"), message or f"outcome {outcome}"
    if outcome in ("completed", None):
        return "done", message or "completed"
    if outcome == "aborted":
        return "aborted", message or "aborted"
    return "failed", message or f"outcome {outcome}"


def _changed_of(result: Any) -> list[ChangedItem]:
    """What an ended child's result (a model or its JSON object) says it changed and left so:
    its ``changed`` (a completed child that reports: what it did; another ending: what stays
    changed), else its ``left_changed``."""
    get = result.get if isinstance(result, dict) else (lambda k, d=None: getattr(result, k, d))
    items = get("changed") or get("left_changed") or []
    return [i if isinstance(i, ChangedItem) else ChangedItem.model_validate(i) for i in items]


@workflow.defn
class CampaignWorkflow(ProcedureWorkflow):
    """Input :class:`CampaignInput`, result :class:`CampaignResult`, status
    :class:`CampaignStatus` (see the module doc)."""

    @workflow.init
    def __init__(self, input: CampaignInput) -> None:
        self._in = input
        self._id = workflow.info().workflow_id
        own_queue = workflow.info().task_queue
        by_name = {c.name: c for c in input.clusters}
        plan = input.wave_plan()
        runs = [ClusterRun(name=n, wave=w, task_queue=by_name[n].task_queue or own_queue)
                for w, names in enumerate(plan, 1) for n in names]
        self._clusters: dict[str, CampaignCluster] = by_name
        self._status = CampaignStatus(target_procedure=input.procedure, clusters=runs, waves=len(plan),
                                      failure_budget=input.failure_budget)
        self._children: dict[str, Any] = {}
        self._windows = parse_windows(input.windows)
        self._in_flight = 0
        self._relayed_pause = False
        self._relayed_abort = False
        self._ended = False
        self.kit_init(procedure=PROCEDURE_CAMPAIGN, noun="campaign", status=self._status, input=input, pause_on_reject=False,
                      reject_note="campaign stops")

    @workflow.query
    def status(self) -> CampaignStatus:
        """Every cluster's wave, state, child and last report; the counts."""
        return self.procedure_status()  # type: ignore[return-value]

    def procedure_status(self) -> CampaignStatus:
        s = super().procedure_status()
        assert isinstance(s, CampaignStatus)
        s.counts = self._counts()
        if s.waiting_for is None:
            running = [r for r in s.clusters if r.state == "running"]
            if running:
                s.waiting_for = f"wave {s.current_wave}: " + ", ".join(
                    f"{r.name} ({(r.child_status.waiting_for or r.child_status.phase) if r.child_status else 'running'})" for r in running)
        return s

    def on_child_report(self, report: ChildReport) -> None:
        for r in self._status.clusters:
            if r.child_id == report.workflow_id and r.state == "running":
                r.child_status = report

    def _counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self._status.clusters:
            counts[r.state] = counts.get(r.state, 0) + 1
        return counts

    def _spent(self) -> bool:
        return self._status.failures > self._status.failure_budget

    def _cap(self) -> int:
        return self._in.max_clusters_in_flight or len(self._status.clusters)

    @workflow.run
    async def run(self, input: CampaignInput) -> CampaignResult:
        return await self.kit_run(lambda: self._run(input), CampaignResult)

    async def _run(self, input: CampaignInput) -> CampaignResult:
        """The waves (module doc); ends ``completed``, ``failed`` (the budget spent) or
        ``aborted`` once every child has ended. The run template maps the outcome to the phase
        and waits for the handlers."""
        # Before the first child: every precondition through the kit (a failed one refuses the
        # campaign, one line per problem, no cluster started); a dry run lists them and ends.
        checked = await self.kit_preflight(await self._preconditions(), refuse=not input.dry_run)
        if input.dry_run:
            plan = " | ".join(f"wave {n}: {', '.join(w)}" for n, w in enumerate(input.wave_plan(), 1))
            return self.kit_end(CampaignResult, "dry-run", f"dry run: {input.procedure} on {len(input.clusters)} cluster(s); {plan}"
                                + (f"; refused today: {len(checked.failed)} precondition(s) failed" if checked.failed else ""),
                                clusters=[r.model_copy() for r in self._status.clusters], counts=self._counts())
        relay = asyncio.ensure_future(self._relay())
        for wave in range(1, self._status.waves + 1):
            if self.control.abort:
                break
            if wave > 1 and not await self._between_waves(wave):
                break
            self._status.current_wave = wave
            self.touch()
            await self._run_wave(wave)
        # Aborted: every running child got parent_abort (the relay); wait until each ended its own way.
        await workflow.wait_condition(lambda: self._in_flight == 0)
        self._ended = True
        await relay
        for r in self._status.clusters:
            if r.state == "pending":
                r.state = "not-started"
        failed = [r.name for r in self._status.clusters if r.state == "failed"]
        if self.control.abort:
            outcome, message = "aborted", self.control.abort_reason or "aborted"
        elif self._spent():
            outcome, message = "failed", f"{len(failed)} cluster(s) failed, budget {self._status.failure_budget}: {', '.join(failed)}"
        else:
            outcome = "completed"
            message = f"{self._counts().get('done', 0)} cluster(s) done" + (
                f"; failed within the budget of {self._status.failure_budget}: {', '.join(failed)}" if failed else "")
        self._status.current_wave = 0
        left = self.kit_left_changed() if outcome != "completed" else fleet_changed(self._status.clusters, done_too=False)
        if left:
            message += "; left changed: " + "; ".join(i.line() for i in left)
        self._status.left_changed = left
        return self.kit_end(CampaignResult, outcome, message, clusters=[r.model_copy() for r in self._status.clusters],
                            failed=failed, counts=self._counts(), left_changed=left, next_commands=self.kit_next_commands(left))

    def kit_left_changed(self) -> list[ChangedItem]:
        """What the fleet stays changed with (the campaign writes through its children only):
        every cluster's ``changed``, done clusters included (:func:`fleet_changed`)."""
        return fleet_changed(self._status.clusters, done_too=True)

    async def _preconditions(self) -> list[Precondition]:
        """What the campaign needs before its first child (issue 39): a worker polling every
        cluster's queue (unless started with ``--queue``: ``check_workers``) and each cluster's
        input valid for the procedure. The CLI validated every cluster's input against the
        procedure's model before the start (the workflow does not import the registry).

        The campaign's dry run adds, when the procedure has a dry run of its own
        (``procedure_has_dry_run``), that dry run on every cluster whose queue has a worker: it
        runs on the cluster's own worker (its reads and its preconditions, decoding the input
        where it runs), in parallel, each bounded by ``child_dry_run_timeout_seconds``. A real
        start does not run them: each child checks its own preconditions through the kit before
        its first write, and a refused child counts against the failure budget (failing clusters
        are the budget's business, not a reason to refuse the fleet)."""
        i = self._in
        queues: list[Precondition] = [
            QueuePolled(task_queue=r.task_queue, name=f"cluster {r.name}", why=f"{i.procedure} on {r.name} runs on its own worker")
            for r in self._status.clusters] if i.check_workers else []
        pre: list[Precondition] = list(queues)
        if not (i.dry_run and i.procedure_has_dry_run):
            why_none = ("each child checks its own preconditions before its first write" if i.procedure_has_dry_run
                        else f"{i.procedure} has no dry run of its own")
            pre.append(InputCheck(about=f"{i.procedure} input of every cluster", ok=True,
                                  detail=f"validated against {i.procedure}'s input model at the start; no dry run per "
                                         f"cluster here ({why_none})",
                                  why="each cluster's procedure starts with it"))
            return pre
        polled = {r.name for r in self._status.clusters}
        if queues:  # only where a worker polls: a dry run elsewhere would wait for one
            first = await Preflight(timeouts=self.timeouts).check(queues)
            polled = {r.name for r, res in zip(self._status.clusters, first.results) if res.ok}
        names = [r.name for r in self._status.clusters if r.name in polled]
        answers = await asyncio.gather(*(self._child_dry_run(n) for n in names))
        pre += [InputCheck(about=f"{i.procedure} dry run on cluster {n}", ok=ok, detail=detail,
                           why=f"{i.procedure}'s own checks on {n}, with the input its child gets")
                for n, (ok, detail) in zip(names, answers)]
        return pre

    async def _child_dry_run(self, name: str) -> tuple[bool, str]:
        """``name``'s procedure's own dry run on its queue: ``(ok, detail)``; ok when it ended
        ``dry-run`` with no failed check."""
        c, r = self._clusters[name], self._run_of(name)
        try:
            res = await workflow.execute_child_workflow(
                self._in.workflow_type, self._in.dry_run_input(c), id=f"{self._id}/{name}/dry-run", task_queue=r.task_queue,
                result_type=dict, execution_timeout=timedelta(seconds=self._in.child_dry_run_timeout_seconds),
                parent_close_policy=workflow.ParentClosePolicy.TERMINATE,
                static_summary=f"dry run of {self._in.procedure} on cluster {name} (campaign preflight)")
        except ChildWorkflowError as err:
            return False, f"its dry run failed: {failure_message(err)}"
        res = res or {}
        failed = [p for p in res.get("preconditions") or [] if p.get("state") == "failed"]
        problems = list(res.get("problems") or []) or [
            f"{p.get('precondition', {}).get('kind', '?')}: {p.get('detail', '')}" for p in failed]
        if res.get("outcome") == "dry-run" and not failed and not problems:
            return True, f"{len(res.get('preconditions') or [])} check(s) passed: {res.get('message', '')}"
        return False, "; ".join(problems) or f"ended {res.get('outcome')}: {res.get('message', '')}"

    async def _relay(self) -> None:
        """Send the campaign's pause, resume and abort to every running child, once per change."""
        while True:
            await workflow.wait_condition(lambda: self._ended or self.control.paused != self._relayed_pause
                                          or (self.control.abort and not self._relayed_abort))
            if self._ended:
                return
            if self.control.abort and not self._relayed_abort:
                self._relayed_abort = True
                self._relayed_pause = False
                await self._signal_running(PARENT_ABORT_SIGNAL, f"campaign aborted: {self.control.abort_reason}",
                                           self.control.abort_by or "lockkeeper")
            elif self.control.paused != self._relayed_pause:
                self._relayed_pause = self.control.paused
                if self.control.paused:
                    await self._signal_running(PARENT_PAUSE_SIGNAL, f"campaign paused: {self.control.paused_reason}", "campaign")
                else:
                    await self._signal_running(PARENT_RESUME_SIGNAL, "campaign resumed", "campaign")

    async def _signal_running(self, signal: str, reason: str, identity: str) -> None:
        handles = [h for name, h in self._children.items() if self._run_of(name).state == "running"]
        results = await asyncio.gather(
            *(h.signal(signal, ControlInput(identity=identity, reason=reason)) for h in handles), return_exceptions=True)
        for h, res in zip(handles, results):
            if isinstance(res, BaseException):  # the child ended meanwhile: nothing to reach
                workflow.logger.info("%s to %s not delivered: %s", signal, h.id, res)

    def _run_of(self, name: str) -> ClusterRun:
        return next(r for r in self._status.clusters if r.name == name)

    async def _between_waves(self, wave: int) -> bool:
        """Soak, then the wave gate; False when the campaign stops (abort, rejected gate)."""
        while self._spent() and not self.control.abort:  # the budget's decision comes before the next wave
            await self._budget_gate()
        if self.control.abort:
            return False
        prev = [r.name for r in self._status.clusters if r.wave == wave - 1]
        nxt = [r.name for r in self._status.clusters if r.wave == wave]
        if self._in.soak_seconds > 0 and self._in.soak_checks is None:
            until = workflow.now() + timedelta(seconds=self._in.soak_seconds)
            self.kit_step("soak", f"soak after wave {wave - 1} ({', '.join(prev)}) before wave {wave}", until=until)
            try:
                await workflow.wait_condition(lambda: self.control.abort, timeout=self._in.soak_seconds)
            except asyncio.TimeoutError:
                pass
        elif self._in.soak_seconds > 0 and not await self._soak(wave, prev):
            return False
        await workflow.wait_condition(lambda: self.control.abort or not self.control.paused)
        if self.control.abort:
            return False
        if self._in.approve_each == "wave":
            gate_id = f"wave/{wave}"
            comment = (f"wave {wave - 1} ended ({', '.join(prev)}); approve to start wave {wave}: {', '.join(nxt)}; "
                       "reject to abort the campaign")
            self.kit_step("wave-gate", f"gate {gate_id} before wave {wave}")
            answer = await self.gates.step(gate_id, comment, self._gate_policy())
            gate = answer.gate
            if not answer.passed:
                if not self.control.abort:
                    self.control.request_abort(f"wave {wave} not started: gate {gate_id} {gate.state}", gate.decided_by or "timeout")
                return False
        self.kit_step("wave", f"wave {wave}")
        return True

    async def _soak(self, wave: int, prev: list[str]) -> bool:
        """The soak with its checks (:class:`workflows.campaign.models.SoakChecks`): a round of
        checks on every completed cluster, then a durable timer, until every check has been green
        for ``soak_seconds`` in a row. Red for ``red_timeout_seconds``: gate ``soak/<wave>/<n>``.
        False when the campaign stops (abort, the gate rejected or timed out)."""
        checks = self._in.soak_checks
        assert checks is not None
        soak = timedelta(seconds=self._in.soak_seconds)
        green_since = red_since = None
        gates = 0
        while not self.control.abort:
            red = await self._check_round(checks)
            now = workflow.now()
            if red:
                green_since, red_since = None, red_since or now
                self.kit_step("soak", f"soak after wave {wave - 1} before wave {wave}: waiting for "
                              + "; ".join(f"{n}: {why}" for n, why in red) + f" (red since {red_since.isoformat(timespec='seconds')})")
                limit = checks.red_timeout_seconds
                if limit is not None and (now - red_since).total_seconds() >= limit:
                    gates += 1
                    gate_id = f"soak/{wave}/{gates}"
                    comment = (f"the soak before wave {wave} stayed red for {limit:g} s: "
                               + "; ".join(f"{n}: {why}" for n, why in red)
                               + ". Approve to start the wave anyway, reject to abort the campaign")
                    answer = await self.gates.step(gate_id, comment, self._gate_policy())
                    gate = answer.gate
                    if answer.passed:
                        return True
                    if not self.control.abort:
                        self.control.request_abort(f"wave {wave} not started: gate {gate_id} {gate.state}", gate.decided_by or "timeout")
                    return False
                pause = checks.poll_seconds
            else:
                green_since, red_since = green_since or now, None
                if now - green_since >= soak:
                    return True
                until = green_since + soak
                self.kit_step("soak", f"soak after wave {wave - 1} ({', '.join(prev)}) before wave {wave}: every check green "
                              f"since {green_since.isoformat(timespec='seconds')}", until=until)
                pause = min(checks.poll_seconds, (until - now).total_seconds())
            try:
                await workflow.wait_condition(lambda: self.control.abort, timeout=max(pause, 1.0),
                                              timeout_summary=f"soak before wave {wave}")
            except asyncio.TimeoutError:
                pass
        return False

    async def _check_round(self, checks: SoakChecks) -> list[tuple[str, str]]:
        """One round of the soak's checks on every completed cluster, concurrently, each on the
        cluster's own queue. Returns ``(cluster, why)`` for each red one; a check that could not
        run (no worker on the cluster's queue, an API error) is red and says why."""
        done = [r for r in self._status.clusters if r.state == "done"]

        async def one(r: ClusterRun) -> tuple[str, str] | None:
            lines: list[str] = []
            health_in = ClusterHealthInput(nodes_ready=checks.nodes_ready, pools_not_degraded=checks.pools_not_degraded,
                                           pod_namespaces=checks.pod_namespaces)
            calls: list[Any] = []
            if checks.nodes_ready or checks.pools_not_degraded or checks.pod_namespaces:
                calls.append(workflow.execute_activity(
                    acts.CHECK_CLUSTER_HEALTH, health_in, result_type=ClusterHealthResult, task_queue=r.task_queue,
                    schedule_to_close_timeout=timedelta(seconds=max(checks.poll_seconds, 60.0)),
                    start_to_close_timeout=timedelta(seconds=30), retry_policy=SOAK_RETRY,
                    summary=f"{acts.CHECK_CLUSTER_HEALTH} · {r.name}"))
            policy = self._alert_policy(r.name, checks)
            if policy is not None:
                calls.append(workflow.execute_activity(
                    CHECK_ALERTS, policy.check_input(), result_type=AlertsAnswer, task_queue=r.task_queue,
                    schedule_to_close_timeout=timedelta(seconds=max(checks.poll_seconds, 60.0)),
                    start_to_close_timeout=timedelta(seconds=policy.timeout_seconds + 10), retry_policy=SOAK_RETRY,
                    summary=f"{CHECK_ALERTS} · {r.name}"))
            answers = await asyncio.gather(*calls, return_exceptions=True)
            red = False
            for a in answers:
                if isinstance(a, BaseException):
                    red = True
                    lines.append(f"no answer: {failure_message(a) if isinstance(a, Exception) else a}")
                elif isinstance(a, ClusterHealthResult):
                    red = red or not a.ok
                    lines.append(a.line())
                else:
                    passes = a.ok or (a.error is not None and policy is not None and policy.fail_open)
                    red = red or not passes
                    lines.append("no alert blocks" if a.ok else (f"Prometheus: {a.error}" if a.error else
                                 "alerts: " + ", ".join(x.name for x in a.blocking[:5])))
            r.health, r.health_at = "; ".join(lines) or "no check", workflow.now()
            return (r.name, r.health) if red else None

        found = await asyncio.gather(*(one(r) for r in done))
        self.touch()
        return [x for x in found if x is not None]

    def _alert_policy(self, cluster: str, checks: SoakChecks) -> AlertGatePolicy | None:
        """The cluster's own procedure alert policy (shared input or its overrides), else the
        soak's; None: no alert check."""
        own = self._in.child_input(self._clusters[cluster], self._id).get("alerts")
        if isinstance(own, dict) and own.get("url"):
            return AlertGatePolicy.model_validate(own)
        return checks.alerts

    def _gate_policy(self) -> GatePolicy:
        """Every campaign gate's policy: the input's ``gates`` (default: wait, a timeout rejects)."""
        return self.gate_policy

    async def _budget_gate(self) -> None:
        """The failures exceed the budget: no new cluster starts until a person decides."""
        st = self._status
        st.budget_spent = True
        failed = [r.name for r in st.clusters if r.state == "failed"]
        gate_id = f"budget/{st.failures}"
        comment = (f"{st.failures} cluster(s) failed ({', '.join(failed)}), failure budget {st.failure_budget}: no new cluster "
                   f"starts. Approve to go on (budget becomes {st.failures}), reject to abort the campaign")
        answer = await self.gates.step(gate_id, comment, self._gate_policy())
        gate = answer.gate
        if answer.passed:
            st.failure_budget = st.failures
            st.budget_spent = False
        elif not self.control.abort:
            self.control.request_abort(f"failure budget spent: gate {gate_id} {gate.state}", gate.decided_by or "timeout")
        self.touch()

    async def _run_wave(self, wave: int) -> None:
        pending = [r for r in self._status.clusters if r.wave == wave]
        tasks: list[asyncio.Task[None]] = []
        while not self.control.abort:
            if self._spent() and any(r.state == "pending" for r in self._status.clusters):
                await self._budget_gate()
                continue
            if not pending:
                break
            if not self.control.paused and self._in_flight < self._cap():
                if self._windows and not is_open(self._windows, workflow.now()):
                    await self._wait_for_window()
                    continue
                r = pending.pop(0)
                # Counted now, before the child's task first runs: the cap holds for the next turn of this loop.
                self._in_flight += 1
                self._status.max_in_flight_seen = max(self._status.max_in_flight_seen, self._in_flight)
                tasks.append(asyncio.ensure_future(self._run_cluster(r)))
                continue
            await workflow.wait_condition(
                lambda: self.control.abort or self._spent() or (not self.control.paused and self._in_flight < self._cap()))
        await workflow.wait_condition(lambda: self._in_flight == 0)
        for t in tasks:
            await t  # raise a bug of ours, if any

    async def _wait_for_window(self) -> None:
        """Every campaign window is closed: no cluster starts until the next one opens (a durable
        timer); the clusters running go on. An abort, a pause or the budget wakes it early."""
        now = workflow.now()
        opening = next_opening(self._windows, now)
        assert opening is not None  # a weekly schedule opens within a week
        self._status.window_opens_at = opening
        self._status.waiting_for = (f"the maintenance window from {opening.isoformat(timespec='seconds')} "
                                    f"({describe(self._windows)}): no cluster starts before it")
        self.touch()
        try:
            await workflow.wait_condition(lambda: self.control.abort or self.control.paused or self._spent(),
                                          timeout=max((opening - now).total_seconds(), 1.0),
                                          timeout_summary=f"campaign window from {opening.isoformat(timespec='seconds')}")
        except asyncio.TimeoutError:
            pass
        self._status.window_opens_at = None
        self._status.waiting_for = None
        self.touch()

    async def _run_cluster(self, r: ClusterRun) -> None:
        """Run ``r``'s child to its end (the caller counted it in flight; this uncounts it)."""
        c = self._clusters[r.name]
        r.child_id = f"{self._id}/{r.name}"
        r.state, r.started_at = "running", workflow.now()
        self.touch()
        try:
            handle = await workflow.start_child_workflow(
                self._in.workflow_type, self._in.child_input(c, self._id), id=r.child_id, task_queue=r.task_queue,
                parent_close_policy=workflow.ParentClosePolicy.TERMINATE,
                static_summary=f"{self._in.procedure} on cluster {r.name} (campaign wave {r.wave})",
                search_attributes=TypedSearchAttributes([
                    SearchAttributePair(SearchAttributeKey.for_keyword(SA_CLUSTER), r.name),
                    SearchAttributePair(SearchAttributeKey.for_keyword(SA_PROCEDURE), self._in.procedure),
                ]) if self._in.search_attributes else None,
            )
            self._children[r.name] = handle
            # Aborted or paused while it started (the relay had no handle yet): it aborts or pauses too.
            if self.control.abort:
                await handle.signal(PARENT_ABORT_SIGNAL, ControlInput(identity=self.control.abort_by or "lockkeeper",
                                                                      reason=f"campaign aborted: {self.control.abort_reason}"))
            elif self.control.paused:
                await handle.signal(PARENT_PAUSE_SIGNAL, ControlInput(identity="campaign", reason=f"campaign paused: {self.control.paused_reason}"))
            result = await handle
            r.state, r.message = child_outcome(result)
            r.outcome = r.state if r.state != "done" else "completed"
            r.changed = _changed_of(result)
        except ChildWorkflowError as err:
            r.state, r.outcome, r.message = "failed", "failed", failure_message(err)
            # A failed child returns nothing: what it left changed is in its last report.
            report = self.inbox.latest.get(r.child_id or "") or r.child_status
            r.changed = list(report.left_changed) if report is not None else []
        except Exception as err:  # noqa: BLE001 - the child could not start (ID taken): this cluster failed
            r.state, r.outcome, r.message = "failed", "failed", f"{type(err).__name__}: {err}"
        if r.state == "aborted" and not self.control.abort:
            r.state = "failed"  # aborted by someone on the child itself: it did not complete
        if r.state == "failed":
            self._status.failures += 1
        r.ended_at = workflow.now()
        self.inbox.latest.pop(r.child_id, None)
        r.child_status = None if r.state == "done" else r.child_status
        self._in_flight -= 1
        self.touch()

