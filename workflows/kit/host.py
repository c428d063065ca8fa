"""Host steps: commands on a node, checked before they act, never repeated blindly.

DESIGN.md "Host command": a step is an argv (never a shell string) run on a node through the
``run_node_command`` activity (local, SSH or debug pod: :class:`HostAccess`).

- Check before act: a step with a ``check`` argv runs the check first; exit 0 means the work is
  already done (a resumed or re-run procedure), so the step is not run.
- A step that is not safe to repeat (``idempotent=False``, e.g. a reboot, ``member add``) runs at
  most once per decision: the activity gets ``maximum_attempts=1``.
- An unknown outcome (the activity timed out or its worker died, or the command hit its own
  timeout: it may or may not have acted) does not run the step again. With ``unknown_opens_gate``
  it opens gate ``host/<step>``: approve runs it again (after the check, if any), reject or the
  gate's timeout stops with :class:`HostStepFailed`. Without, it fails at once.
- A command that ran and failed (exit code != 0) is a known failure: :class:`HostStepFailed`.
- A command whose session ended with no exit status (the connection or the debug pod's exec
  was lost mid-command) is an unknown outcome too. A step whose command takes its own session down
  (``drops_session``, a reboot) is returned to its caller as before, to be judged by the host.

Each step's :class:`HostStepStatus` (pending / already-done / running / done / failed / unknown,
attempts, detail) is kept in the procedure's status board.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import NodeInfo, ReadNodeInput
    from activities.host.models import CommandResult, ExecBackend, HostAccess, RunCommandInput, SweepDebugPodsInput, SweepDebugPodsResult
    from workflows.kit import calls as acts
    from workflows.kit.gates import Gates
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.kit.inputs import GatePolicy
    from workflows.kit.models import ChangedItem, GateKind, GateState, GateTimeoutOutcome, HealthStatus, HostStepStatus, failure_message


# --- debug pods -------------------------------------------------------------------------------------

#: The patch that adds the end-of-run sweep of a run that ran debug-pod commands (histories from
#: before it end without the sweep).
PATCH_DEBUG_POD_SWEEP = "kit-debug-pod-sweep"
#: Seconds one sweep attempt may take: its deletes and up to 60 s of reading back
#: (``activities.host.debug_pod.GONE_WAIT_SECONDS``), with room for a slow API.
SWEEP_SECONDS = 90.0
#: Where the current workflow keeps the queues and namespaces of its debug-pod commands.
_USED_ATTR = "_kit_debug_pod_use"


def note_debug_pods(accesses: list[HostAccess | None], task_queue: str | None = None) -> None:
    """Remember that this workflow run sends commands through debug pods on ``accesses`` (the
    others are ignored), from activities on ``task_queue`` (None: the workflow's own), so that
    :func:`sweep_debug_pods` deletes what a dead worker left. Call it before the activity is
    scheduled; :class:`HostSteps`, :func:`read_boot_id` and the kit's preflight do."""
    pods = [a for a in accesses if a is not None and a.backend == ExecBackend.DEBUG_POD]
    if not pods:
        return
    inst = workflow.instance()
    used: dict[str, list[str]] | None = getattr(inst, _USED_ATTR, None)
    if used is None:
        used = {}
        setattr(inst, _USED_ATTR, used)
    namespaces = used.setdefault(task_queue or "", [])
    for a in pods:
        if a.namespace not in namespaces:
            namespaces.append(a.namespace)


def debug_pods_used() -> dict[str, list[str]]:
    """task queue ("" = the workflow's own) -> namespaces of this run's debug-pod commands."""
    return dict(getattr(workflow.instance(), _USED_ATTR, None) or {})


class DebugPodSweep(BaseModel):
    """What the end-of-run sweep did: ``deleted`` pods (``namespace/name``, read back gone),
    ``left`` the pods it could not delete as :class:`ChangedItem` s (target ``Pod NS/NAME``, undo
    ``oc delete pod -n NS NAME``), ``problems`` one line each (a sweep that could not run)."""

    deleted: list[str] = Field(default_factory=list)
    left: list[ChangedItem] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)


async def sweep_debug_pods(timeouts: acts.Timeouts = acts.DEFAULT_TIMEOUTS) -> DebugPodSweep:
    """At the end of a run that sent debug-pod commands (:func:`note_debug_pods`): delete every
    debug pod labelled with this run's ID on each queue and namespace it used, and read back
    that they are gone (activity ``sweep_debug_pods``). A command's pod is deleted by the command
    itself; what is left is a dead worker's (SIGKILLed mid-command, no retry ran) or a pod whose
    delete failed. Nothing happens for a run without debug pods, or when replaying a history
    from before this sweep (:data:`PATCH_DEBUG_POD_SWEEP`). Never raises: a sweep that fails is
    in ``problems``, a pod that stays in ``left``."""
    used = debug_pods_used()
    out = DebugPodSweep()
    if not used or not workflow.patched(PATCH_DEBUG_POD_SWEEP):
        return out
    run_id = workflow.info().run_id
    for queue, namespaces in used.items():
        try:
            res = await workflow.execute_activity(
                acts.SWEEP_DEBUG_PODS, SweepDebugPodsInput(run_id=run_id, namespaces=namespaces), result_type=SweepDebugPodsResult,
                task_queue=queue or None, start_to_close_timeout=timedelta(seconds=SWEEP_SECONDS) + timeouts.short_call,
                schedule_to_close_timeout=timedelta(seconds=3 * SWEEP_SECONDS),  # an unreachable API delays the ending this long at most
                retry_policy=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=1)),
            )
        except ActivityError as err:
            out.problems.append(f"debug pods of this run in {', '.join(namespaces)} not swept: {failure_message(err)}; "
                                f"find them with oc get pods -A -l lockkeeper.io/run-id={run_id}")
            continue
        out.deleted += res.deleted
        out.problems += res.errors
        for ref in res.remaining:
            ns, _, name = ref.partition("/")
            out.left.append(ChangedItem(target=f"Pod {ns}/{name}", what="a debug pod of this run still there after its sweep",
                                        undo=f"oc delete pod -n {ns} {name}"))
    return out


class HostStep(BaseModel):
    """One host step: ``name`` (unique in the procedure; status key and gate ``host/<name>``),
    ``argv``, ``check`` (argv; exit 0 = already done), ``idempotent`` (safe to repeat: retried
    like any activity), ``timeout_seconds`` of the command itself."""

    name: str
    argv: list[str] = Field(min_length=1)
    check: list[str] | None = None
    idempotent: bool = False
    timeout_seconds: float = Field(60.0, gt=0)
    #: The command takes its own session down (a reboot): no exit status is its expected end,
    #: so it is a :class:`HostStepFailed` with the result for the caller to judge, never a gate.
    drops_session: bool = False
    #: Extra non-secret environment variables of the command (e.g. an ``ansible-playbook`` run
    #: on the worker, ``HostAccess()``: the local backend).
    env: dict[str, str] = Field(default_factory=dict)


class HostStepFailed(Exception):
    """The step failed (``status.state`` failed) or its unknown outcome was not confirmed for a
    re-run (``status.state`` unknown). ``result``: the command's result when it ran."""

    def __init__(self, status: HostStepStatus, result: CommandResult | None = None) -> None:
        super().__init__(f"host step {status.name}: {status.detail}")
        self.status = status
        self.result = result


#: Default heartbeat timeout of a host command, seconds (``HostSteps(heartbeat_seconds=...)``),
#: and the floor of the procedures that keep it (a run's ``calls.host_heartbeat_seconds`` lowers
#: it). The command's activity beats every second, but a step that is not safe to repeat turns a
#: missed heartbeat into an unknown outcome, i.e. a gate a person must answer: 30 s rides out a
#: worker that is busy or paused for a while (a loaded host, a slow SSH handshake, a debug pod
#: being scheduled) at the price of noticing a dead worker 30 s late.
HOST_HEARTBEAT_SECONDS = 30.0


def _unknown(err: ActivityError) -> bool:
    """A lost activity (start-to-close or heartbeat timeout, worker gone): it may have run."""
    return isinstance(err.cause, TemporalTimeoutError)


class HostSteps:
    """Runs :class:`HostStep` s for one procedure. ``gates``: where unknown outcomes ask a
    person (None for a run without gates, e.g. a node child: then only :meth:`command` and
    :meth:`run` with ``unknown_opens_gate=False`` may be used); ``board``: the status's
    ``host_steps``; ``heartbeat_seconds``: the activity's heartbeat timeout (seconds; at least ``timeouts.heartbeat``); ``task_queue``: None = the workflow's own (host-only workers serve
    procedures whose spec says "host")."""

    def __init__(
        self,
        gates: Gates | None,
        *,
        board: dict[str, HostStepStatus] | None = None,
        on_change: Callable[[], None] = lambda: None,
        timeouts: acts.Timeouts = acts.DEFAULT_TIMEOUTS,
        heartbeat_seconds: float = HOST_HEARTBEAT_SECONDS,
        task_queue: str | None = None,
        gate_timeout_seconds: float | None = None,
    ) -> None:
        self.gates = gates
        self.board = board if board is not None else {}
        self.on_change = on_change
        self.timeouts = timeouts
        self.heartbeat = timedelta(seconds=heartbeat_seconds)
        self.task_queue = task_queue
        self.gate_timeout_seconds = gate_timeout_seconds
        #: The policy of the gates these steps open (unknown outcomes, reboots).
        self.gate_policy = GatePolicy(timeout_seconds=gate_timeout_seconds)
        #: node -> the boot ID read before this run rebooted it (:func:`reboot`).
        self.boots: dict[str, str] = {}

    async def _exec(self, argv: list[str], access: HostAccess, timeout: float, *, once: bool, retry: RetryPolicy | None = None,
                    env: dict[str, str] | None = None, stdin: str | None = None) -> CommandResult:
        cmd = RunCommandInput(access=access, argv=list(argv), timeout_seconds=timeout, env=dict(env or {}), stdin=stdin)
        note_debug_pods([access], self.task_queue)
        return await workflow.execute_activity(
            acts.RUN_NODE_COMMAND,
            cmd,
            result_type=CommandResult,
            start_to_close_timeout=timedelta(seconds=cmd.bound_seconds()) + self.timeouts.short_call,
            heartbeat_timeout=max(self.heartbeat, self.timeouts.heartbeat),
            task_queue=self.task_queue,
            retry_policy=RetryPolicy(maximum_attempts=1) if once else retry or acts.DEFAULT_RETRY,
        )

    async def command(self, argv: list[str], access: HostAccess, *, timeout_seconds: float = 60.0, once: bool = False,
                      retry: RetryPolicy | None = None, stdin: str | None = None,
                      env: dict[str, str] | None = None) -> CommandResult:
        """Run ``argv`` on ``access`` and return its :class:`CommandResult` whatever its exit
        code: a read or a check whose outcome the caller judges (a step with its own check and
        gates). ``once``: ``maximum_attempts=1`` (the caller handles a lost outcome), else
        ``retry`` (default: the kit's policy) while the host is unreachable; ``stdin``: text fed
        to the command (a file written with ``tee``); ``env``: extra non-secret environment
        variables of the command. Raises ActivityError when the activity fails for good."""
        return await self._exec(argv, access, timeout_seconds, once=once, retry=retry, stdin=stdin, env=env)

    async def _checked(self, step: HostStep, access: HostAccess, st: HostStepStatus) -> bool:
        if not step.check:
            return False
        result = await self._exec(step.check, access, step.timeout_seconds, once=False)
        if result.exit_code == 0 and not result.timed_out:
            st.state, st.detail = "already-done", f"check {' '.join(step.check)} passed"
            self.on_change()
            return True
        return False

    async def run(self, step: HostStep, access: HostAccess, *, unknown_opens_gate: bool = True) -> CommandResult | None:
        """Run ``step`` on ``access`` (see the module doc). Returns the command's result, or
        None when the check said it is already done. Raises :class:`HostStepFailed`."""
        st = self.board.setdefault(step.name, HostStepStatus(name=step.name))
        while True:
            if await self._checked(step, access, st):
                return None
            st.state, st.attempts = "running", st.attempts + 1
            st.detail = f"{' '.join(step.argv)} via {access.describe()}"
            self.on_change()
            result: CommandResult | None = None
            try:
                result = await self._exec(step.argv, access, step.timeout_seconds, once=not step.idempotent, env=step.env)
            except ActivityError as err:
                if not _unknown(err):
                    st.state, st.detail = "failed", f"{' '.join(step.argv)}: {failure_message(err)}"
                    self.on_change()
                    raise HostStepFailed(st) from err
                st.state, st.detail = "unknown", f"outcome unknown ({failure_message(err)}); it may have run"
            if result is not None:
                if result.exit_code == 0 and not result.timed_out:
                    st.state, st.detail = "done", result.summary()
                    self.on_change()
                    return result
                lost = result.session_lost and not step.drops_session
                if not result.timed_out and not lost:
                    tail = (result.stderr or result.stdout).strip()[-500:]
                    st.state, st.detail = "failed", f"exited {result.exit_code}: {tail}"
                    self.on_change()
                    raise HostStepFailed(st, result)
                st.state, st.detail = "unknown", (
                    "no exit status (its session was lost mid-command); it may have acted" if lost
                    else f"timed out after {step.timeout_seconds:.0f}s; it may have acted")
            self.on_change()
            if step.idempotent:
                continue  # safe to repeat: the check (if any) decides again
            if not unknown_opens_gate:
                raise HostStepFailed(st, result)
            if not await self._confirm_rerun(step, st):
                raise HostStepFailed(st, result)

    async def _confirm_rerun(self, step: HostStep, st: HostStepStatus) -> bool:
        """Gate ``host/<name>``: approve = run again, reject / timeout / abort = stop."""
        assert self.gates is not None, "an unknown outcome's gate needs the procedure's gates"
        gate_id = f"host/{step.name}"
        what = f"{step.name}: {st.detail}; approve runs {' '.join(step.argv)} again, reject stops"
        gate = self.gates.open(gate_id, GateKind.STEP, timeout_seconds=self.gate_timeout_seconds, comment=what, record_comment=what)
        self.gates.on_change()
        await self.gates.wait(gate, timeout_outcome=GateTimeoutOutcome.REJECT, timeout_seconds=self.gate_timeout_seconds)
        self.gates.on_change()
        self.gates.passed.discard(gate_id)  # a later unknown outcome asks afresh
        return gate.state == GateState.APPROVED



# --- reboots ---------------------------------------------------------------------------------------

#: The host's boot ID (Linux: a random UUID per boot, ``/proc/sys/kernel/random/boot_id``; the
#: kubelet reports the same value as ``Node.status.nodeInfo.bootID``).
BOOT_ID_ARGV = ["cat", "/proc/sys/kernel/random/boot_id"]


class Rebooted(BaseModel):
    """A reboot confirmed by a new boot ID: ``before`` / ``after`` the IDs (``after`` None when a
    person marked it done), ``seconds`` from the command to the new boot, ``how`` in words."""

    node: str
    before: str
    after: str | None
    seconds: float
    how: str


class RebootFailed(Exception):
    """The reboot did not happen and nobody chose to go on: ``reason`` says why (the command
    failed, or no new boot ID and the gate was rejected or timed out). The node is as it was
    before the command (or unknown: the reason says which). ``kind``: ``command`` (the command
    failed, was lost and not confirmed for a re-run, or nothing was sent), ``not-rebooted`` (no
    new boot ID in time, ``on_timeout="fail"``) or ``not-ready`` (a new boot ID, not Ready in
    time, ``on_timeout="fail"``)."""

    def __init__(self, node: str, reason: str, kind: str = "command") -> None:
        super().__init__(f"reboot of {node}: {reason}")
        self.node = node
        self.reason = reason
        self.kind = kind


async def read_node_info(node: str, timeouts: acts.Timeouts) -> NodeInfo | None:
    """The Node as the API reports it (``read_node``: boot ID, Ready), None when it cannot be read."""
    try:
        return await acts.call(acts.READ_NODE, ReadNodeInput(node=node), NodeInfo, timeouts=timeouts)
    except ActivityError:
        return None


async def read_boot_id(node: str, access: HostAccess | None, via: str, timeouts: acts.Timeouts, task_queue: str | None = None) -> str | None:
    """The node's boot ID now: ``via="api"`` from the Node's ``status.nodeInfo.bootID``
    (``read_node``), ``via="host"`` from the host itself over ``access``. None when it does not
    answer (rebooting, unreachable)."""
    if via == "api":
        info = await read_node_info(node, timeouts)
        return (info.boot_id or None) if info is not None else None
    assert access is not None, "reading the boot ID on the host needs its access"
    cmd = RunCommandInput(access=access, argv=list(BOOT_ID_ARGV), timeout_seconds=15.0)
    note_debug_pods([access], task_queue)
    try:
        res = await workflow.execute_activity(
            acts.RUN_NODE_COMMAND, cmd, result_type=CommandResult, task_queue=task_queue,
            start_to_close_timeout=timedelta(seconds=cmd.bound_seconds()) + timeouts.short_call,
            retry_policy=RetryPolicy(maximum_attempts=2, initial_interval=timedelta(seconds=1)),
        )
    except ActivityError:
        return None
    text = res.stdout.strip()
    return text if res.exit_code == 0 and text else None


async def reboot(
    steps: HostSteps,
    node: str,
    access: HostAccess,
    argv: list[str],
    *,
    via: str = "api",
    timeout_seconds: float,
    ready: Callable[[], Awaitable[bool]] | None = None,
    poll_seconds: float = 2.0,
    board: dict[str, HealthStatus] | None = None,
    on_wait: Callable[[str, datetime], None] = lambda what, deadline: None,
    step_name: str | None = None,
    command_timeout_seconds: float = 60.0,
    unknown_opens_gate: bool = False,
    killed_by_reboot: Callable[[CommandResult], bool] = lambda result: False,
    until_ready: bool = False,
    watch: bool = True,
    wait_name: str | None = None,
    on_timeout: str = "gate",
    resend_after_grace_seconds: float | None = None,
    on_send: Callable[[CommandResult | None], None] = lambda result: None,
    stop: Callable[[], bool] | None = None,
    safe_point: Callable[[], Awaitable[None]] | None = None,
    read: Callable[[], Awaitable[tuple[str | None, bool | None]]] | None = None,
) -> Rebooted:
    """Reboot ``node`` once with ``argv`` over ``access`` and confirm it by a new boot ID
    (never by Ready alone: a Node stays Ready for the node monitor's grace period after its
    kubelet stops), read ``via`` the API or the host (:func:`read_boot_id`), or by the
    procedure's own ``read()`` returning ``(boot ID or None when not answering, Ready or None)``.

    1. Read the boot ID (``before``; a caller that read it earlier puts it in ``steps.boots``).
       Already different from the one this run saw before a crash or a re-run: the reboot
       happened, return.
    2. Run ``argv`` at most once (host step ``step_name``, default ``reboot/<node>``,
       ``drops_session``, its own timeout ``command_timeout_seconds``): a lost session, a
       command killed by the going-down host or a lost activity are what a reboot does to its
       command, judged by the boot ID; an exit status other than 0 is :class:`RebootFailed`
       unless ``killed_by_reboot(result)`` says the reboot caused it (e.g. 128+N: killed by a
       signal). ``unknown_opens_gate``: a lost activity or the command's own timeout opens the
       host step's gate ``host/<step>`` (approve runs it again; reject or its timeout:
       :class:`RebootFailed`) instead of being judged by the boot ID. ``on_send(result)`` after
       each command (None: its outcome is unknown). ``watch=False``: a command that exits 0 is
       not watched (returns with ``after`` None); a dropped session still is.
    3. ``resend_after_grace_seconds`` (a lost call, no result): wait that long for the node to
       move (not answering, NotReady or a new boot ID); a node still Ready on the same boot ID
       then never got the command, which is sent once more (never otherwise).
    4. Wait up to ``timeout_seconds`` for another boot ID (and ``ready()``, when given; with
       ``until_ready``, Ready in the same read: ``via="api"`` or ``read``), visible in the
       ``board`` as ``wait_name`` (default ``reboot/<node>``; ``on_wait(what, deadline)`` for the
       procedure's own row). The wait stops at once when ``stop()`` holds (default: an abort or
       a revert), and ``safe_point()`` (default the control's) raises
       (:class:`workflows.kit.control.Aborted` / ``RevertRequested``); the same safe point
       stands before each command.
    5. No new boot ID in time: with ``on_timeout="fail"``, :class:`RebootFailed` (kind
       ``not-rebooted`` or ``not-ready``). Else gate ``reboot/<node>/<n>`` with the choices
       ``wait`` (wait again), ``rerun`` (send the command again; a person checked it did not
       reboot) and ``mark-done`` (a person checked it did); reject or the gate's timeout raise
       :class:`RebootFailed`.
    """
    assert steps.gates is not None, "a reboot needs the procedure's gates (its pause, abort and gate)"
    control = steps.gates.control
    stopping = stop or control.stopping
    safe = safe_point or control.safe_point
    name = f"reboot/{node}"
    assert not (until_ready and via != "api" and read is None), "until_ready needs a read that reports Ready"

    async def look() -> tuple[str | None, bool | None]:
        """(boot ID or None when not answering, Ready when the read reports it)."""
        if read is not None:
            return await read()
        if via == "api":
            info = await read_node_info(node, steps.timeouts)
            return ((info.boot_id or None), info.ready) if info is not None else (None, None)
        return await read_boot_id(node, access, via, steps.timeouts, steps.task_queue), None

    before = steps.boots.get(node)
    current, _ = await look()
    if before is None:
        if current is None:
            raise RebootFailed(node, f"cannot read its boot ID before the reboot ({'the Node' if via == 'api' else access.describe()} "
                                     "does not answer); nothing was sent")
        before = steps.boots[node] = current
    elif current is not None and current != before:
        return Rebooted(node=node, before=before, after=current, seconds=0.0, how="already rebooted (a resumed run)")
    started = workflow.now()
    send, n, resent = True, 0, False
    while True:
        lost = False
        if send:
            await safe()
            step = HostStep(name=(step_name or name) + (f"#{n}" if n else ""), argv=list(argv), timeout_seconds=command_timeout_seconds,
                            drops_session=True)
            try:
                result = await steps.run(step, access, unknown_opens_gate=unknown_opens_gate)
            except HostStepFailed as err:
                res = err.result
                on_send(res)
                if res is not None and res.exit_code not in (None, 0) and not res.timed_out and not res.session_lost \
                        and not killed_by_reboot(res):
                    raise RebootFailed(node, f"{' '.join(argv)} exited {res.exit_code}: {res.summary()}") from err
                if unknown_opens_gate and err.status.state == "unknown":  # its gate was rejected or timed out
                    raise RebootFailed(node, f"{' '.join(argv)}: {err.status.detail}; not run again") from err
                # no exit status: the host went down under it, or the activity was lost: look
                lost = res is None
            else:
                on_send(result)
                if not watch and result is not None:
                    return Rebooted(node=node, before=before, after=None, seconds=(workflow.now() - started).total_seconds(),
                                    how=f"{' '.join(argv)} exited 0 (not watched)")
        if lost and resend_after_grace_seconds is not None and not resent:
            async def moved() -> Check:
                bid, up = await look()
                if bid is None or bid != before or up is False:
                    return Check(True, "rebooting" if bid in (None, before) else f"booted as {bid}")
                return Check(False, f"Ready on the same boot ID {before}")

            hs = await wait_until(moved, name=f"{wait_name or name}/started", board=board, stop=stopping, on_poll=lambda _: steps.on_change(),
                                  deadline=workflow.now() + timedelta(seconds=resend_after_grace_seconds),
                                  backoff=Backoff(initial=poll_seconds, maximum=poll_seconds * 4))
            if hs.state == "stopped":
                await safe()
            if hs.state == "timed-out":  # the lost call never reached the node: sent again, once
                send, n, resent = True, n + 1, True
                continue
        deadline = workflow.now() + timedelta(seconds=timeout_seconds)
        seen: list[str] = []

        async def check() -> Check:
            bid, up = await look()
            if bid is None:
                return Check(False, "not answering (rebooting)")
            if bid == before:
                return Check(False, f"boot ID still {before}: not rebooted yet")
            seen[:] = [bid]
            if (until_ready and not up) or (ready is not None and not await ready()):
                return Check(False, f"booted as {bid}, not Ready yet")
            return Check(True, f"booted as {bid}")

        what = f"a new boot ID of {node} (not {before})" + (" and Ready" if ready is not None or until_ready else "")
        on_wait(what, deadline)
        hs = await wait_until(check, name=wait_name or name, deadline=deadline, board=board, stop=stopping,
                              backoff=Backoff(initial=poll_seconds, maximum=poll_seconds * 4), on_poll=lambda _: steps.on_change())
        if hs.state == "ok":
            return Rebooted(node=node, before=before, after=seen[0], seconds=(workflow.now() - started).total_seconds(),
                            how=f"rebooted (boot ID {before} -> {seen[0]})")
        await safe()  # stopped by an abort or a revert
        if on_timeout == "fail":
            raise RebootFailed(node, f"no new boot ID within {timeout_seconds:.0f}s ({hs.last})" if not seen else
                               f"booted as {seen[0]} but not Ready within {timeout_seconds:.0f}s ({hs.last})",
                               kind="not-ready" if seen else "not-rebooted")
        n += 1
        answer = await steps.gates.step(
            f"{name}/{n}", f"{node}: no new boot ID within {timeout_seconds:.0f}s after {' '.join(argv)} ({hs.last}). "
            "wait: wait again; rerun: send the reboot again (checked: it did not reboot); mark-done: it did reboot; reject stops",
            steps.gate_policy, kind=GateKind.NODE, node=node, choices=["wait", "rerun", "mark-done"])
        await safe()
        if not answer.passed:
            raise RebootFailed(node, f"no new boot ID within {timeout_seconds:.0f}s; {answer.why_not()}")
        if answer.choice == "mark-done":
            return Rebooted(node=node, before=before, after=None, seconds=(workflow.now() - started).total_seconds(),
                            how=f"marked rebooted by {answer.gate.decided_by}")
        send = answer.choice == "rerun"
