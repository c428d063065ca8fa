"""The fault-matrix harness: every procedure, at each mutating step, aborted, failed, or with its
worker killed, judged by the simulator's own view of what changed (issue 39, "Proof against the
simulator's own view").

A procedure owner writes, per procedure, the list of its mutating :class:`Step`s (each with the
clustersim trap that catches the step's FIRST request: an API request or a host command) and a
``start`` callable, then for every step and :class:`Case`::

    cr = await run_case(world, start, step, case, ignore=DOCUMENTED)
    judge(cr)

:func:`run_case` snapshots the world (clustersim.snapshots), arms the trap (``hold`` for an abort
and a kill, ``fail`` for a failure), starts the procedure, approves every gate that opens as a
person would until the trap is hit, then:

- ``abort``: sends ``abort`` while the request is held and releases it once the abort is
  accepted;
- ``fail``: the request is refused (the trap's Status or exit code), once: a retry passes, as
  after a passing refusal; when the procedure then pauses or waits at a gate instead of ending
  (or goes on for ``stall`` seconds doing neither), it is aborted;
- ``kill-then-abort``: SIGKILLs the worker while the request is held, starts a new worker,
  releases the request (it lands: the apiserver or sshd had it), then aborts;

and waits for the end (result or failure), approving gates that the wind-down opens (a restore
behind a gate), lets the pods settle, and diffs the world against the snapshot with the
procedure's documented ignores (clustersim ignore patterns, :mod:`clustersim.snapshots.ignore`:
``ConfigMap/openshift-config/lockkeeper-record-*``, ``host/*/image/REF``). :func:`judge` passes
only if the procedure completed, or the diff is empty (restored), or its ``left_changed``
targets equal the diff's targets (:func:`clustersim.snapshots.targets.by_target`: the
simulator's changes named as lockkeeper names them, ``DaemonSet openshift-sdn/sdn``,
``host node01``); otherwise its message lists both sides line by line.

Which steps a matrix must have is not left to its author's memory: :func:`happy_writes` runs the
matrix's own scenario once to its end (every gate approved) and returns every distinct kind of
write lockkeeper sent (:class:`Writes`: the API requests with the worker's User-Agent and a
mutating verb, by verb, resource and subresource; the host commands that are not reads
(:data:`HOST_READS`), by command); :func:`assert_covers` fails unless each kind is caught by the
trap of one of the matrix's steps, or is listed as falling inside a step the matrix has, with
the reason (the second eviction of a drain already begun).
"""

from __future__ import annotations

import asyncio
import re
import shlex
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle

from clustersim import snapshots, traps
from clustersim.faults import MUTATING_VERBS
from clustersim.hosts.interp import strip_wrappers
from clustersim.snapshots.ignore import IgnoreSet
from clustersim.snapshots.models import Diff
from clustersim.snapshots.objects import object_keys
from clustersim.snapshots.targets import by_target
from clustersim.traps.model import TrapSpec, TrapState
from tests.support.harness import forget_dead_worker
from workflows.kit.models import (
    FINAL_PHASES,
    ApproveInput,
    ChangedItem,
    ControlInput,
    DecideInput,
    Gate,
    GateState,
    ProcedurePhase,
    ProcedureStatus,
)

IDENTITY = "fault-matrix"


class Case(StrEnum):
    """What happens at the step: ``abort`` (an abort while its first request is held), ``fail``
    (its first request is refused), ``kill-then-abort`` (the worker SIGKILLed while the request
    is held, a new worker started, the request let go, then an abort)."""

    ABORT = "abort"
    FAIL = "fail"
    KILL_THEN_ABORT = "kill-then-abort"


CASES: tuple[Case, ...] = (Case.ABORT, Case.FAIL, Case.KILL_THEN_ABORT)


@dataclass(frozen=True)
class Step:
    """A mutating step of a procedure: its ``name`` (as the procedure's plan names it) and the
    ``trap`` that catches its first request (``clustersim.traps.api(...)`` or
    ``clustersim.traps.host(...)``; the harness sets ``action`` and ``times`` per case, so a
    ``fail`` trap's ``status``/``message``/``exit_code``/``stderr`` given here are used)."""

    name: str
    trap: TrapSpec


@dataclass
class World:
    """What a case runs against: the simulator (``sim``, a started ClusterSim), the Temporal
    ``client``, and the ``worker`` process serving the procedure's task queue (a
    :class:`lockkeeper.procs.WorkerProcess`: ``kill()`` SIGKILLs it, ``start()`` starts a new one)."""

    sim: Any
    client: Client
    worker: Any


@dataclass
class CaseResult:
    """What a case ended with.

    ``reached``: the trap caught the step (False: the procedure ended or timed out before it);
    ``outcome``: the result's ``outcome`` (``completed``, ``aborted``, ``reverted`` ...),
    ``failed`` when the workflow failed, ``timeout`` when it did not end in time; ``result`` the
    result as JSON, ``failure`` the failure's message; ``status`` the last ``status`` query as
    JSON (the procedure's own fields included);
    ``left_changed`` what the procedure says stays changed (the result's, else the status's);
    ``diff`` the simulator's diff against the snapshot taken before the start, with ``ignore``;
    ``trap`` the trap's last state; ``log`` what the harness did, in order."""

    step: str
    case: Case
    workflow_id: str = ""
    reached: bool = False
    outcome: str = ""
    result: dict[str, Any] | None = None
    failure: str | None = None
    status: dict[str, Any] | None = None
    left_changed: list[ChangedItem] = field(default_factory=list)
    diff: Diff | None = None
    ignore: list[str] = field(default_factory=list)
    trap: TrapState | None = None
    log: list[str] = field(default_factory=list)

    def note(self, what: str) -> None:
        self.log.append(f"{time.strftime('%H:%M:%S')} {what}")


# --- talking to the procedure as a person would ---------------------------------------------------------


#: The kit's status fields the harness reads (a procedure's own status may narrow others, e.g.
#: a boolean ``point_of_no_return``, so only these are read into the base model).
STATUS_FIELDS = ("procedure", "workflow_id", "phase", "paused_reason", "abort_requested", "gates", "waiting_for", "error",
                 "left_changed")


async def read_raw_status(handle: WorkflowHandle[Any, Any]) -> dict[str, Any] | None:
    """The procedure's ``status`` query as JSON; None while no worker answers (it was just killed)."""
    try:
        raw = await handle.query("status")
    except Exception:  # noqa: BLE001 - no worker right now, or the query failed: the next poll retries
        return None
    return raw if isinstance(raw, dict) else None


def base_status(raw: dict[str, Any]) -> ProcedureStatus:
    """The kit's view of a procedure's status JSON (:data:`STATUS_FIELDS`)."""
    return ProcedureStatus.model_validate({k: raw[k] for k in STATUS_FIELDS if k in raw})


async def read_status(handle: WorkflowHandle[Any, Any]) -> ProcedureStatus | None:
    """The procedure's ``status`` query in the kit's base model (:func:`base_status`); None while
    no worker answers."""
    raw = await read_raw_status(handle)
    return None if raw is None else base_status(raw)


async def answer_gate(client: Client, handle: WorkflowHandle[Any, Any], gate: Gate, comment: str) -> bool:
    """Approve ``gate`` as a person would (on the workflow that shows it, or the child it names):
    a gate with choices gets its first choice through ``decide``, others ``approve``. Returns
    False when the answer was refused (raced with another decision; the next poll sees it).
    A gate shown without its owner is routed as the CLI routes it (``owner_of``: a runtime
    migration node's row names its node run)."""
    from lockkeeper.cli.operate import owner_of

    try:
        owner = gate.workflow_id or owner_of(await handle.query("status", result_type=dict), gate.id)
        target = client.get_workflow_handle(owner) if owner else handle
        if gate.choices:
            await target.execute_update("decide", DecideInput(node=gate.node or gate.id, gate_id=gate.id, decision=gate.choices[0],
                                                              identity=IDENTITY, comment=comment))
        else:
            await target.execute_update("approve", ApproveInput(gate_id=gate.id, identity=IDENTITY, comment=comment))
    except Exception:  # noqa: BLE001 - refused or raced: the next poll tries again if it still waits
        return False
    return True


async def approve_waiting(client: Client, handle: WorkflowHandle[Any, Any], status: ProcedureStatus, comment: str,
                          cr: CaseResult | None = None) -> int:
    """Answer every waiting gate of ``status``; returns how many answers were accepted."""
    n = 0
    for gate in status.gates:
        if gate.state == GateState.WAITING and await answer_gate(client, handle, gate, comment):
            n += 1
            if cr is not None:
                cr.note(f"answered gate {gate.id}" + (f" with {gate.choices[0]}" if gate.choices else ""))
    return n


async def abort(handle: WorkflowHandle[Any, Any], reason: str) -> None:
    """Send ``abort`` (as the CLI does) and wait until it is accepted."""
    await handle.execute_update("abort", ControlInput(identity=IDENTITY, reason=reason, comment=reason))


def _stuck(status: ProcedureStatus) -> bool:
    """Paused, or waiting for a person, instead of ending."""
    return status.phase in (ProcedurePhase.PAUSED, ProcedurePhase.WAITING_APPROVAL) or any(
        g.state == GateState.WAITING for g in status.gates)


# --- one case ---------------------------------------------------------------------------------------------


def trap_hit(trap: Any, spec: Any, result_task: asyncio.Future[Any], handle: Any, client: Any, cr: CaseResult, comment: str,
             *, approve_gates: bool = True) -> Callable[[], Awaitable[bool]]:
    """The predicate a case waits on before it acts: ``trap`` was hit (and, for a hold, holds
    the request) or the run ended; while neither, every waiting gate of ``handle`` is approved as
    a person would (with ``comment``, noted in ``cr``)."""
    async def hit() -> bool:
        state = await trap.refresh()
        if (state.hits and (spec.action != "hold" or state.held)) or result_task.done():
            return True
        st = await read_status(handle)
        if st is not None and approve_gates:
            await approve_waiting(client, handle, st, comment, cr)
        return False
    return hit


async def _until(pred: Callable[[], Awaitable[bool]], timeout: float, interval: float = 0.2) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if await pred():
            return True
        await asyncio.sleep(interval)
    return False


def _lockkeeper_activity(sim: Any) -> tuple[int, int, bool]:
    """What lockkeeper is doing to ``sim`` right now, as a reading to compare: how many API
    requests with its User-Agent the simulator has handled, how many host commands it has run,
    and whether one of them is still running (a record without ``end``)."""
    requests = sum(1 for e in sim.requests.entries() if e.user_agent.startswith(LOCKKEEPER_USER_AGENT))
    records = [r for h in _hosts(sim).values() for r in h.log]
    return requests, len(records), any(r.end is None for r in records)


def _debug_pods(d: Diff) -> list[str]:
    """The lockkeeper debug pods (``<node>-lockkeeper-debug-<hex>``) ``d`` shows added."""
    return [o.key for o in d.objects if o.resource == "pods" and "-lockkeeper-debug-" in o.name and o.change == "added"]


async def _settled_diff(sim: Any, sid: str, ignore: list[str], settle: float) -> Diff:
    """The diff once the world has settled, or after ``settle`` seconds (then the last one).
    Settled: for :data:`STILL_SECONDS` the readings named the same changes while lockkeeper sent
    no API request and ran no host command (none still running), no debug pod of the run is left
    (an activity cancelled by the end of its run deletes its debug pod at its next heartbeat,
    seconds after the run ended: a pod still there when ``settle`` runs out is judged as left),
    and no owner's pod counts differ (a drain's replacements scheduled and Ready); pod counts
    that differ are taken as they are once they held for :data:`STILL_PODS_SECONDS` (pods that
    cannot be Ready, e.g. on a node not rebooted onto a switched network, and say so in the
    procedure's ``left_changed``)."""
    end = time.monotonic() + settle
    readings: list[tuple[dict[str, list[str]], tuple[int, int, bool]]] = []
    need, need_pods = round(STILL_SECONDS / STILL_INTERVAL), round(STILL_PODS_SECONDS / STILL_INTERVAL)
    while True:
        d = await snapshots.diff(sim.url, sid, ignore=ignore)
        now = _lockkeeper_activity(sim)
        readings = [*readings[-need_pods:], (by_target(d), now)]
        held = 0  # readings before the last one equal to it
        while held < len(readings) - 1 and readings[-2 - held] == readings[-1]:
            held += 1
        still = held >= need and not now[2] and not _debug_pods(d)
        if (still and (not d.pods or held >= need_pods)) or time.monotonic() > end:
            return d
        await asyncio.sleep(STILL_INTERVAL)


#: Seconds the simulator's diff and lockkeeper's requests and host commands must stay the same
#: before a case is judged (:func:`_settled_diff`), read every :data:`STILL_INTERVAL` seconds;
#: :data:`STILL_PODS_SECONDS` when pod counts differ. (Once 5 s of unchanged diffs alone, and
#: differing pod counts waited for the whole settle budget: the wait for a cancelled activity's
#: debug pod is now explicit, and any request or command of lockkeeper restarts the count.)
STILL_SECONDS = 1.0
STILL_PODS_SECONDS = 5.0
STILL_INTERVAL = 0.25


async def run_case(
    world: World,
    start: Callable[[], Awaitable[WorkflowHandle[Any, Any]]],
    step: Step,
    case: Case,
    *,
    approve_gates: bool = True,
    ignore: Sequence[str] = (),
    reach_timeout: float = 120.0,
    end_timeout: float = 180.0,
    stall: float = 60.0,
    settle: float = 20.0,
    settle_timeout: float = 60.0,
) -> CaseResult:
    """Run one case of the fault matrix (module docstring). ``start`` starts the procedure and
    returns its handle; ``ignore``: the procedure's documented changes (clustersim ignore
    patterns, :mod:`clustersim.snapshots.ignore`, e.g. ``ConfigMap/*/lockkeeper-record-*``). Times in seconds: ``reach_timeout``
    until the trap is hit, ``end_timeout`` from there to the end, ``settle`` for pods to come
    back after the end, ``settle_timeout`` for the world to stop changing before the snapshot
    (:func:`clustersim.snapshots.settle`); ``stall``: after a ``fail``, how long the procedure may go on neither
    ending nor pausing nor waiting at a gate (retrying the refused request, say) before it is
    aborted. Never raises for the procedure's behaviour: :func:`judge` decides."""
    sim = world.sim
    cr = CaseResult(step=step.name, case=case, ignore=list(ignore))
    await snapshots.settle(sim.url, timeout=settle_timeout)  # the scenario's own start-up is no change of the procedure
    sid = await snapshots.take(sim.url, f"{step.name}/{case}")
    spec = step.trap.model_copy(update={"action": "fail" if case == Case.FAIL else "hold", "times": 1,
                                        "label": f"{step.name}/{case}"})
    trap = await traps.arm(sim.url, spec)
    cr.note(f"snapshot {sid}; trap {trap.id} ({spec.action}) on {step.name}")
    handle = await start()
    cr.workflow_id = handle.id
    result_task = asyncio.ensure_future(handle.result())
    comment = f"fault matrix {step.name}/{case}: approved as a person would"
    try:
        await _until(trap_hit(trap, spec, result_task, handle, world.client, cr, comment, approve_gates=approve_gates),
                     reach_timeout)
        cr.reached = trap.state.hits > 0
        if not cr.reached:
            cr.note("the trap was never hit" + (" (the procedure ended first)" if result_task.done() else ""))
            await trap.delete()
            if not result_task.done():
                await abort(handle, f"fault matrix: {step.name} never reached")
        else:
            cr.note(f"trap hit: {trap.state.log[0].request if trap.state.log else '?'}")
            await _act(world, handle, trap, case, cr, result_task, stall, step.name)
        await _wait_end(world, handle, result_task, cr, end_timeout, approve_gates)
        cr.trap = await _final_trap(trap)
        if cr.trap is not None and cr.trap.log:
            cr.note("trap saw: " + "; ".join(f"{h.request} ({h.action})" for h in cr.trap.log))
        cr.status = await read_raw_status(handle)
        if cr.result is not None:
            cr.left_changed = [ChangedItem.model_validate(i) for i in cr.result.get("left_changed") or []]
        if not cr.left_changed and cr.status is not None:
            cr.left_changed = list(base_status(cr.status).left_changed)
        cr.diff = await _settled_diff(sim, sid, list(ignore), settle)
        cr.note(f"ended {cr.outcome}; diff: {len(cr.diff.objects) + len(cr.diff.pods) + len(cr.diff.state)} changed entries, "
                f"{cr.diff.ignored_total()} ignored")
    finally:
        if not result_task.done():
            result_task.cancel()
        for t in await traps.list_traps(sim.url):
            await traps.Trap(sim.url, t).delete()
        await snapshots.delete(sim.url, sid)
    return cr


async def _act(world: World, handle: WorkflowHandle[Any, Any], trap: traps.Trap, case: Case, cr: CaseResult,
               result_task: asyncio.Future[Any], stall: float, step: str) -> None:
    reason = f"fault matrix: {case} at {step}"
    if case == Case.ABORT:
        await abort(handle, reason)
        cr.note("abort accepted")
        await trap.release()
        cr.note("request released")
        return
    if case == Case.KILL_THEN_ABORT:
        await world.worker.kill()
        cr.note("worker SIGKILLed")
        n = await forget_dead_worker(world.client, world.worker.task_queue)
        cr.note(f"sticky task queues of {n} running workflow(s) reset")
        await world.worker.start()
        cr.note("new worker started")
        await trap.release()
        cr.note("request released")
        await abort(handle, reason)
        cr.note("abort accepted")
        return
    # fail: let it happen; abort once the procedure pauses or waits at a gate instead of ending.
    async def ended_or_stuck() -> bool:
        if result_task.done():
            return True
        st = await read_status(handle)
        return st is not None and (st.phase in FINAL_PHASES or _stuck(st))

    stuck = await _until(ended_or_stuck, stall)
    if not result_task.done():
        st = await read_status(handle)
        if st is not None and st.phase not in FINAL_PHASES:
            why = "" if stuck else f"still {st.phase} {stall:.0f}s after the failure (retrying it?); "
            cr.note(f"after the failure: {why}{st.phase}, waiting for {st.waiting_for!r}: abort")
            try:
                await abort(handle, reason)
                cr.note("abort accepted")
            except Exception as err:  # noqa: BLE001 - ended meanwhile: its end is what counts
                cr.note(f"abort refused: {err}")


async def _wait_end(world: World, handle: WorkflowHandle[Any, Any], result_task: asyncio.Future[Any], cr: CaseResult,
                    timeout: float, approve_gates: bool) -> None:
    comment = f"fault matrix {cr.step}/{cr.case}: approved during the wind-down"

    async def ended() -> bool:
        if result_task.done():
            return True
        if approve_gates:
            st = await read_status(handle)
            if st is not None:
                await approve_waiting(world.client, handle, st, comment, cr)
        return False

    if not await _until(ended, timeout, interval=0.3):
        cr.outcome = "timeout"
        st = await read_status(handle)
        cr.failure = f"did not end within {timeout:.0f}s; last status: {st.model_dump_json() if st else None}"
        return
    try:
        res = result_task.result()
    except WorkflowFailureError as err:
        cr.outcome = "failed"
        cr.failure = f"{err.cause}" if err.cause is not None else str(err)
        return
    data = res.model_dump(mode="json") if hasattr(res, "model_dump") else dict(res or {})
    cr.result = data
    cr.outcome = str(data.get("outcome", "completed"))


async def _final_trap(trap: traps.Trap) -> TrapState | None:
    try:
        return await trap.refresh()
    except traps.TrapError:
        return trap.state


# --- judging ----------------------------------------------------------------------------------------------


class NotJudged(AssertionError):
    """The case cannot be judged: its step was never reached, or the procedure did not end."""


class Mismatch(AssertionError):
    """The procedure ended neither completed nor restored, and its ``left_changed`` does not name
    what the simulator saw change (the message lists both sides)."""


def documented_away(d: Diff, patterns: Sequence[str]) -> Diff:
    """``d`` without what ``patterns`` (clustersim ignore patterns, matched against the entries'
    keys as the diff's own ``ignore`` is: :mod:`clustersim.snapshots.ignore`) document."""
    if not patterns:
        return d
    hide = IgnoreSet(patterns)
    objects = []
    for o in d.objects:
        keys = object_keys(o.resource, o.namespace, o.name)
        if hide.hide(keys):
            continue
        kept = [f for f in o.fields if not hide.hide([f"{k}#{f.pointer}" for k in keys])]
        if o.fields and not kept and o.change == "changed":
            continue
        objects.append(o.model_copy(update={"fields": kept}))
    return d.model_copy(update={"objects": objects, "pods": [p for p in d.pods if not hide.hide([p.key])],
                                "state": [s for s in d.state if not hide.hide([s.key])]})


def judge(cr: CaseResult, documented: Sequence[str] = ()) -> None:
    """Pass only if the case ended ``completed``, or restored (the diff empty but for what the
    procedure documents: ``documented`` patterns, on top of the ignores the diff was taken with),
    or stopped (aborted, failed, ...) with ``left_changed`` naming exactly the diff's targets
    (:func:`clustersim.snapshots.targets.by_target`). Raises :class:`Mismatch` (an
    AssertionError) listing both sides line by line otherwise, and :class:`NotJudged` when the
    step was never reached or the procedure did not end."""
    head = f"{cr.step}/{cr.case} ({cr.workflow_id}): "
    if not cr.reached:
        raise NotJudged(head + "the step's trap was never hit\n" + "\n".join(cr.log))
    if cr.outcome == "timeout" or cr.diff is None:
        raise NotJudged(head + f"did not end: {cr.failure}\n" + "\n".join(cr.log))
    if cr.outcome == "completed":
        return
    named = by_target(documented_away(cr.diff, documented))
    diff_targets = set(named)
    left_targets = {i.target for i in cr.left_changed}
    if diff_targets == left_targets:
        return
    message = (cr.result or {}).get("message") or cr.failure or ""
    lines = [head + f"ended {cr.outcome!r} ({message})",
             "  the outcome's left_changed does not name what the simulator saw change.",
             "  simulator's diff, by target (one change per line):"]
    lines += [f"    {t}: {ln}" for t, lns in named.items() for ln in lns] or ["    (nothing)"]
    lines += ["  left_changed:"] + ([f"    {i.line()}" for i in cr.left_changed] or ["    (nothing)"])
    lines += [f"  only in the diff: {sorted(diff_targets - left_targets)}",
              f"  only in left_changed: {sorted(left_targets - diff_targets)}"]
    if cr.diff.reboots:
        lines.append("  reboots (informational): " + ", ".join(f"host {r.host} x{r.boots}" for r in cr.diff.reboots))
    lines += ["  harness log:"] + [f"    {ln}" for ln in cr.log]
    raise Mismatch("\n".join(lines))


def matrix_params(steps: Sequence[str], xfail: dict[tuple[str, Case], str] | None = None) -> list[Any]:
    """The matrix's ``pytest.param(step, case)`` for every step and :data:`CASES`, id
    ``<step>-<case>``; a pair in ``xfail`` is ``xfail(strict=True, raises=Mismatch)`` with the
    reason the run showed, so it turns into an error once fixed."""
    import pytest

    out = []
    for step in steps:
        for case in CASES:
            reason = (xfail or {}).get((step, case))
            marks = [pytest.mark.xfail(strict=True, raises=Mismatch, reason=reason)] if reason else []
            out.append(pytest.param(step, case, marks=marks, id=f"{step}-{case}"))
    return out


def new_workflow_id(prefix: str) -> str:
    """A fresh workflow ID for a case (``prefix-fm-xxxxxxxx``)."""
    return f"{prefix}-fm-{uuid.uuid4().hex[:8]}"



# --- which steps a matrix must have ---------------------------------------------------------------------

#: The User-Agent of lockkeeper's requests (the kubernetes python client's; clustersim's own
#: agents do not go through HTTP, the tests' kubectl sends ``kubectl/...``).
LOCKKEEPER_USER_AGENT = "OpenAPI-Generator/"

#: Host commands that change nothing (reads, probes, waits), searched in the command line as
#: :func:`shlex.join` prints it (after the ``sudo``/``timeout``/``env`` wrappers). Any other
#: command lockkeeper runs on a host is a write and must be a step of the matrix.
HOST_READS: tuple[str, ...] = (
    r"^(cat|test|ls|stat|head|tail|grep|sha256sum|md5sum|uname|hostname|true|id|df|du|date|echo|find|readlink|getent) ",
    r"^(cat|true|hostname|uname|id|date)$",
    r"^command -v ", r"^(which|type) ", r"^ss( |$)", r"^ip (-[a-z0-9]+ )*(addr|link|route|-br)( |$)(show|list)?",
    r"^systemctl (is-active|is-enabled|is-failed|status|show|list-units|list-unit-files|cat) ",
    r"^rpm -q", r"^yum (list|info|check-update|-q list|--showduplicates list)", r"^repoquery ",
    r"^iptables(-save)?( -w)? (-C|-S|-L|-n|-t \S+ (-C|-S|-L))", r"^iptables-save",
    r"^(docker|crictl|runc) (ps|images|inspect|info|version|pods)( |$)", r"^(docker|crictl) --version",
    r"^docker (image|container) (inspect|ls)( |$)",
    r"^gluster (volume (info|status|heal \S+ info)|peer status|pool list)", r"^gluster --version",
    r"^etcdctl( --?\S+)* (endpoint|member list|get|version|alarm list)( |$)", r"^etcdutl( --?\S+)* snapshot status ",
    r"^journalctl ", r"^master-logs ",
    r"^(ovs-vsctl|ovs-ofctl) (show|list|get|dump-flows|find|br-exists|list-br)", r"^oc (get|version|whoami) ",
    r"^awk ", r"^sed -n ", r"^cut ", r"^sort ", r"^wc ", r"^openssl (x509|verify) ", r"^mount$", r"^findmnt ",
    r"^sleep ", r"^nproc$", r"^free( |$)", r"^lsblk", r"^blkid",
)
_HOST_READS = [re.compile(rx) for rx in HOST_READS]
#: Tools whose last argument is the file they write (so it makes the kind).
_FILE_TOOLS = ("install", "mv", "cp", "rm", "ln", "chmod", "chown", "touch")
#: iptables' command options (the option IS the action: ``-A`` appends a rule).
_IPTABLES_ACTIONS = ("-A", "-I", "-D", "-R", "-N", "-X", "-F", "-P", "-Z", "-E")


def command_kind(argv: Sequence[str]) -> str:
    """The kind of a host command: its program's base name and its first word that is not an
    option (``systemctl stop``, ``yum remove``, ``tee /etc/origin/node/pods/apiserver.yaml``);
    for a file tool (:data:`_FILE_TOOLS`) the directory of the file it writes, its last argument
    (``mv /etc/origin/master``: a per-member or per-run file name makes no new kind); for
    iptables the action option (``iptables -A``)."""
    if not argv:
        return ""
    base = argv[0].rsplit("/", 1)[-1]
    rest = list(argv[1:])
    if base.startswith("ip6tables") or base.startswith("iptables"):
        return " ".join([base, *[a for a in rest if a in _IPTABLES_ACTIONS][:1]])
    if base in _FILE_TOOLS and rest and not rest[-1].startswith("-"):
        return f"{base} {rest[-1].rstrip('/').rsplit('/', 1)[0] or '/'}"
    words = [a for a in rest if not a.startswith("-")]
    return f"{base} {words[0]}" if words else base


def api_kind(verb: str, resource: str, group: str, subresource: str) -> str:
    """The kind of an API write: ``verb resource[.group][/subresource]`` (``create pods/eviction``,
    ``patch networks.operator.openshift.io``)."""
    return f"{verb} {resource}{'.' + group if group else ''}{'/' + subresource if subresource else ''}"


@dataclass
class Writes:
    """Every distinct kind of write a run sent, with every request of that kind: ``api`` maps
    :func:`api_kind` to the requests' ``(verb, resource, group, namespace, name, subresource)``,
    ``host`` maps :func:`command_kind` (prefixed ``host: ``) to ``(host, command line, via)``."""

    api: dict[str, list[tuple[str, str, str, str, str, str]]] = field(default_factory=dict)
    host: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)

    def kinds(self) -> list[str]:
        """Every kind, API kinds first, each sorted."""
        return sorted(self.api) + sorted(self.host)

    def example(self, kind: str) -> str:
        """The first request of ``kind``, as a person reads it."""
        if kind in self.api:
            verb, res, group, ns, name, sub = self.api[kind][0]
            return f"{api_kind(verb, res, group, sub)} {ns + '/' if ns else ''}{name}".rstrip()
        host, command, via = self.host[kind][0]
        return f"{host} ({via}): {command}"


@dataclass
class WriteMark:
    """Where a run starts in the simulator's records (:func:`mark_writes`)."""

    since: float
    host_logs: dict[str, int]


def _hosts(sim: Any) -> dict[str, Any]:
    comp = getattr(sim, "components", {}).get("hosts")
    return dict(comp.hosts) if comp is not None else {}


def mark_writes(sim: Any) -> WriteMark:
    """The simulator's records as they are now: :func:`writes_since` reads what comes after."""
    return WriteMark(since=time.time(), host_logs={name: len(h.log) for name, h in _hosts(sim).items()})


def writes_since(sim: Any, mark: WriteMark) -> Writes:
    """What lockkeeper wrote to ``sim`` since ``mark``: API requests with
    :data:`LOCKKEEPER_USER_AGENT` and a mutating verb (whatever their answer), host commands not
    matched by :data:`HOST_READS`."""
    out = host_writes((name, strip_wrappers(rec.argv), rec.via) for name, h in _hosts(sim).items()
                      for rec in h.log[mark.host_logs.get(name, 0):])
    for e in sim.requests.entries():
        if e.time >= mark.since and e.verb in MUTATING_VERBS and e.user_agent.startswith(LOCKKEEPER_USER_AGENT):
            out.api.setdefault(api_kind(e.verb, e.resource, e.group, e.subresource), []).append(
                (e.verb, e.resource, e.group, e.namespace, e.name, e.subresource))
    return out


def host_writes(commands: Iterable[tuple[str, Sequence[str], str]]) -> Writes:
    """The writes among host commands ``(host, argv, via)``: those :data:`HOST_READS` does not
    match, by :func:`command_kind` (a world other than the simulator's, e.g. the etcd matrix's
    local members, logs its commands and passes them here)."""
    out = Writes()
    for host, argv, via in commands:
        command = shlex.join(argv)
        if not argv or any(rx.search(command) for rx in _HOST_READS):
            continue
        out.host.setdefault("host: " + command_kind(argv), []).append((host, command, via))
    return out


def _catches(trap: TrapSpec, writes: Writes, kind: str) -> bool:
    """Does ``trap`` catch a request of ``kind``? An API kind by verb, resource, group and
    subresource (the name of a create is in its body, not in the record: names do not make a
    kind); a host kind by its commands (the trap's ``host`` and ``argv``)."""
    if kind in writes.api:
        kind_only = trap.model_copy(update={"namespace": None, "name": None, "name_regex": None})
        return any(kind_only.matches_api(v, r, g, n, m, s) for v, r, g, n, m, s in writes.api[kind])
    return any(trap.matches_host(host, command, via) for host, command, via in writes.host.get(kind, []))


def uncovered(steps: Mapping[str, Any], writes: Writes, within: Mapping[str, tuple[str, str]] | None = None) -> list[str]:
    """What the matrix misses, one line each (empty: it covers every write):

    - a kind of write no step's trap catches and ``within`` does not place inside a step;
    - a ``within`` entry (kind -> (step, reason)) naming a step the matrix does not have, or a
      kind the run did not send (a stale entry);
    - a step whose trap caught none of the run's writes (a step that is not one).

    ``steps``: the matrix's steps by name (each with a ``trap``: a :class:`Step`)."""
    within = dict(within or {})
    problems = []
    for kind in writes.kinds():
        if any(_catches(step.trap, writes, kind) for step in steps.values()):
            continue
        if kind in within:
            continue
        problems.append(f"no step catches {kind!r} (first: {writes.example(kind)})")
    for kind, (step, reason) in within.items():
        if step not in steps:
            problems.append(f"{kind!r} is said to fall inside step {step!r}, which the matrix does not have ({reason})")
        if kind not in writes.api and kind not in writes.host:
            problems.append(f"{kind!r} (inside {step!r}: {reason}) was not sent by the run")
    for name, step in steps.items():
        if not any(_catches(step.trap, writes, kind) for kind in writes.kinds()):
            problems.append(f"step {name!r} catches none of the run's writes")
    return problems


def assert_covers(steps: Mapping[str, Any], writes: Writes, within: Mapping[str, tuple[str, str]] | None = None) -> None:
    """Raise AssertionError listing :func:`uncovered`'s lines and every kind the run wrote."""
    problems = uncovered(steps, writes, within)
    if problems:
        seen = [f"    {k}: {len(writes.api.get(k) or writes.host.get(k) or [])}x, first {writes.example(k)}" for k in writes.kinds()]
        raise AssertionError("the fault matrix misses mutating steps:\n  " + "\n  ".join(problems)
                             + "\n  the run's writes:\n" + "\n".join(seen))


async def check_coverage(world: World, start: Callable[[], Awaitable[WorkflowHandle[Any, Any]]], steps: Mapping[str, Any],
                         within: Mapping[str, tuple[str, str]] | None = None, *, timeout: float = 360.0) -> Writes:
    """The coverage test of a matrix: a happy run (:func:`happy_writes`) must complete and its
    writes be covered by ``steps`` and ``within`` (:func:`assert_covers`); returns the writes.
    Raises AssertionError otherwise."""
    cr, writes = await happy_writes(world, start, timeout=timeout)
    assert cr.outcome == "completed", f"the happy run ended {cr.outcome}: {cr.failure or cr.result}\n" + "\n".join(cr.log)
    assert_covers(steps, writes, within)
    return writes


async def happy_writes(world: World, start: Callable[[], Awaitable[WorkflowHandle[Any, Any]]], *, timeout: float = 300.0,
                       approve_gates: bool = True) -> tuple[CaseResult, Writes]:
    """Run the matrix's scenario once to its end, every gate approved as a person would, and
    return the case (``outcome`` ``completed`` or what it ended with; ``timeout``) and the
    writes it sent (:func:`writes_since`). ``timeout`` in seconds."""
    cr = CaseResult(step="happy", case=Case.ABORT, reached=True)
    await snapshots.settle(world.sim.url, timeout=60)
    mark = mark_writes(world.sim)
    handle = await start()
    cr.workflow_id = handle.id
    result_task = asyncio.ensure_future(handle.result())
    try:
        await _wait_end(world, handle, result_task, cr, timeout, approve_gates)
    finally:
        if not result_task.done():
            result_task.cancel()
    return cr, writes_since(world.sim, mark)
