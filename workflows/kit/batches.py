"""The node window: nodes through a procedure ``maxUnavailable`` at a time, one child per node.

DESIGN.md "Batch": nodes go through ``max_unavailable`` at a time in the plan's stable order, never
counting a node that is already unavailable as free capacity. :class:`NodeBatches` runs one
group (a pool) at a time as a sliding window of node-run children (:mod:`workflows.kit.noderun`),
or of in-process steps: a coroutine of the procedure's own workflow per node (:func:`local_run`,
e.g. the masters of a control-plane upgrade or of a port change), with the same board, gates,
holds, windows, pause/abort, skip/retry and results:

- it starts the next node when the window has room, opening the plan's gates on the way (``pool``
  before the first node, ``node`` before each, ``canary`` after the first node and before the rest);
- nodes already unavailable that we have not taken over shrink the window; when nothing is in
  flight and the window is empty, ``recheck_unavailable`` re-reads them, and if none came back the
  procedure pauses saying which they are;
- ``skip_node`` / ``retry_node`` are queued requests applied between steps (and while a gate
  waits): a pending node is skipped, a degraded/failed node is rolled back (``rollback``) then
  skipped, a node in flight is signalled ``skip``; a retry starts a new child attempt and resumes;
- children end with a :class:`workflows.kit.noderun.NodeRunResult`; a degraded/failed node pauses
  the procedure when ``pause_on_degraded`` (else it is marked failed and the window goes on);
- with a :class:`StopGate` (default none) a degraded/failed node opens the gate
  ``<node>/stopped/<attempt>`` instead and the window starts nothing while it waits: approve (or
  ``retry_node``) runs the node again, ``skip_node`` rolls it back (``rollback``), skips it and
  goes on, reject or its timeout stops the window (:attr:`NodeBatches.stopped`), and a retry the
  procedure refuses (``StopGate.refusal``) is refused by ``retry_node`` and ends the window on
  approve;
- a node step may mark the node past its point of no return (``past_no_return`` on the node's
  :class:`~workflows.kit.models.NodeStatus`, from its run's reports and result): before it a skip
  rolls the node back (``rollback``, e.g. uncordon if ours); past it ``skip_node`` is refused while
  the node runs (abort it instead), and a skip of the stopped node leaves it as it is (``leave``,
  e.g. note it in the node's record) and says so in the node's reason.

Where each node stands is the board's (:class:`workflows.kit.board.NodeBoard`). Hooks (the
procedure's own code): ``start_child(node, group, attempt)`` starts the child and returns its
handle; ``rollback(node)`` undoes a node without a child; ``recheck_unavailable(nodes)`` returns
those still unavailable. The window shares the procedure's :class:`Control` (pause/abort)
and :class:`Gates`; the procedure passes aborts on with ``Control(on_abort=batches.abort_children)``.

Continue-as-new (every window procedure's, :meth:`NodeBatches.continue_after`): a window of
thousands of nodes outgrows one workflow history (Temporal caps it at 51,200 events and 50 MB, and
every workflow task replays more of it as it grows). Once the run's history grew by the given
number of events the window holds (starts no node and no gate) and :meth:`NodeBatches.run_group`
returns with its children finished (children do not carry over: the new run would not own them);
the procedure then calls :meth:`NodeBatches.hand_over`, which lets the signal tasks and handlers
finish, releases the leases (the next run takes again what it still needs) and continues as new
with a :class:`WindowCarry` (nodes, groups, attempts, results, gates, passed gates, gate history,
warnings, a pause in force, holds) packed into the input's ``carried`` field; the next run's
:meth:`NodeBatches.take_over` restores it, so an approval is never asked or applied twice.

Sources: MCO ``pkg/controller/node/node_controller.go`` (``getAllCandidateMachines``); Temporal's
continue-as-new (https://docs.temporal.io/workflow-execution/continue-as-new).
"""

from __future__ import annotations

import asyncio
import base64
import zlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NoReturn, TypeVar

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from workflows.kit import metrics as lk_metrics
    from workflows.kit.board import NodeBoard
    from workflows.kit.control import Control
    from workflows.kit.gates import Gates
    from workflows.kit.holds import Holds
    from workflows.kit.lease import Leases
    from workflows.kit.models import (
        FINAL_NODE_PHASES,
        Gate,
        GateKind,
        GateRecord,
        GateState,
        GateTimeoutOutcome,
        HoldInput,
        HoldRecord,
        NodeControlInput,
        NodeHold,
        NodePhase,
        NodeResult,
        NodeStatus,
        ProcedureStatus,
        failure_message,
    )
    from workflows.kit.noderun import NodeRunResult, Stopped
    from workflows.kit.plan import PlannedGate
    from workflows.kit.windows import Window, describe, is_open, next_opening

#: Node starts per workflow task at most (:meth:`NodeBatches.next_starts`): each start costs the
#: task its command, the child's input and a status refresh, so a window of 200 (a 2,000-node
#: pool) is opened in 8 tasks, not one that grows with maxUnavailable. 25 per round trip of about
#: 0.1 s is over 200 starts a second.
MAX_STARTS_PER_TASK = 25

#: Node phases a ``retry_node`` accepts.
RETRYABLE_PHASES = frozenset({NodePhase.DEGRADED, NodePhase.FAILED, NodePhase.ABORTED})

_OUTCOME_PHASE = {
    "done": NodePhase.DONE, "degraded": NodePhase.DEGRADED, "skipped": NodePhase.SKIPPED,
    "aborted": NodePhase.ABORTED, "failed": NodePhase.FAILED,
}

_Action = Literal["requests", "done", "abort", "hold", "gate", "start", "window", "no-capacity", "stuck"]
RequestKind = Literal["skip", "retry"]


@dataclass
class Group:
    """Mutable state of one group (pool) in one workflow run: ``max_unavailable`` (nodes), ``nodes``
    in order, ``unavailable`` nodes counting against the window, the plan's ``gates``, ``queue`` not
    started yet (a retry goes back in front), ``started`` nodes we took over."""

    name: str
    max_unavailable: int
    nodes: list[str]
    unavailable: list[str]
    gates: list[PlannedGate]
    queue: list[str] = field(default_factory=list)
    started: set[str] = field(default_factory=set)
    finished: bool = False

    def __post_init__(self) -> None:
        self.queue = list(self.nodes)


class LocalStop:
    """The skip/abort request of one in-process node step (:class:`LocalRun`): ``kind`` None,
    "skip" or "abort" (an abort always wins), ``by`` who. A step checks :meth:`check` at its
    safe points."""

    def __init__(self) -> None:
        self.kind: str | None = None
        self.by: str = ""

    def request(self, kind: str, identity: str) -> None:
        if kind == "abort" or self.kind is None:
            self.kind, self.by = kind, identity

    def check(self) -> None:
        """Raise :class:`workflows.kit.noderun.Stopped` when a skip or an abort was requested."""
        if self.kind is not None:
            raise Stopped()


class LocalRun:
    """A node step run inside the procedure's own workflow instead of a child (the masters of a
    control-plane upgrade or a port change, one at a time), behind the interface the window uses
    for children: an ``id``, ``signal("skip" | "abort", identity)`` (sets :attr:`stop`), and
    awaiting it gives the step's :class:`NodeRunResult`. A step that raises ends ``failed`` with
    the error's message (``Stopped`` ends ``skipped`` / ``aborted``). Start one with
    :func:`local_run` from the window's ``start_child`` hook."""

    def __init__(self, node: str, attempt: int, result_type: type[NodeRunResult],
                 step: Callable[[LocalStop], Awaitable[NodeRunResult]]) -> None:
        self.id = f"{workflow.info().workflow_id}/local/{node}/{attempt}"
        self.node, self.attempt, self.result_type = node, attempt, result_type
        self.stop = LocalStop()
        self.started_at = workflow.now()
        self._task = asyncio.ensure_future(self._run(step))

    async def _run(self, step: Callable[[LocalStop], Awaitable[NodeRunResult]]) -> NodeRunResult:
        try:
            return await step(self.stop)
        except Stopped:
            outcome = "skipped" if self.stop.kind == "skip" else "aborted"
            return self.result_type(node=self.node, outcome=outcome, attempt=self.attempt, started_at=self.started_at,  # type: ignore[arg-type]
                                    reason=f"{self.stop.kind or 'abort'} requested by {self.stop.by or 'unknown'}", finished_at=workflow.now())
        except (ApplicationError, ActivityError, ChildWorkflowError) as err:
            return self.result_type(node=self.node, outcome="failed", attempt=self.attempt, started_at=self.started_at,  # type: ignore[arg-type]
                                    reason=failure_message(err), finished_at=workflow.now())

    async def signal(self, name: str, arg: Any = "") -> None:
        if name in ("skip", "abort"):
            self.stop.request(name, str(arg or ""))

    def __await__(self) -> Any:
        return self._task.__await__()


async def local_run(node: str, attempt: int, step: Callable[[LocalStop], Awaitable[NodeRunResult]],
                    result_type: type[NodeRunResult] = NodeRunResult) -> Any:
    """Start ``step`` for ``node`` in this workflow (:class:`LocalRun`); the window's
    ``start_child`` hook returns it."""
    return LocalRun(node, attempt, result_type, step)


@dataclass
class StopGate:
    """The window's answer to a node that ended degraded or failed (see the module doc), instead
    of a pause: gate ``<node>/stopped/<attempt>`` (kind node, opened by "lockkeeper", timeout the
    window's gate timeout with outcome reject). ``text(node, result, refusal)``: the gate's comment
    for people (``refusal`` as below); ``refusal(node, result)``: why a retry of that node is not
    safe (None: it is), e.g. a command with an unknown outcome."""

    text: Callable[[str, NodeRunResult, str | None], str]
    refusal: Callable[[str, NodeRunResult], str | None] = lambda node, result: None


def _iso(t: Any) -> str:
    return t.isoformat(timespec="seconds") if t is not None else "-"


class GroupState(BaseModel):
    """What a group's window carries over a continue-as-new (see :meth:`NodeBatches.export_groups`)."""

    queue: list[str] = Field(default_factory=list)
    started: list[str] = Field(default_factory=list)
    unavailable: list[str] = Field(default_factory=list)
    finished: bool = False


class WindowCarry(BaseModel):
    """The window's state across a continue-as-new (see the module doc); a procedure subclasses
    it for its own state (its plan). ``results`` are the children's results as JSON objects
    (validated with the window's ``result_type`` again), without their decisions and drain
    reports (the gate history has the decisions); ``continued`` counts the runs before."""

    nodes: dict[str, NodeStatus] = Field(default_factory=dict)
    groups: dict[str, GroupState] = Field(default_factory=dict)
    attempts: dict[str, int] = Field(default_factory=dict)
    results: dict[str, dict[str, Any]] = Field(default_factory=dict)
    gates: dict[str, Gate] = Field(default_factory=dict)
    passed: list[str] = Field(default_factory=list)
    gate_history: list[GateRecord] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    paused: bool = False
    paused_reason: str | None = None
    started_at: datetime | None = None
    continued: int = 0
    #: The holds in force and the hold history (left out of the packed text when empty).
    holds: dict[str, NodeHold] = Field(default_factory=dict)
    hold_history: list[HoldRecord] = Field(default_factory=list)


C = TypeVar("C", bound=WindowCarry)


def pack(carry: WindowCarry) -> str:
    """``carry`` as base64 of zlib-compressed JSON (about 10x smaller than its JSON: thousands of
    near-identical node statuses; deterministic: same state, same text)."""
    empty = {k for k in ("holds", "hold_history") if not getattr(carry, k)}
    return base64.b64encode(zlib.compress(carry.model_dump_json(exclude=empty or None).encode(), 6)).decode()


def unpack(text: str, carry_type: type[C]) -> C:
    """Inverse of :func:`pack`. Raises ValueError (pydantic ValidationError, zlib.error,
    binascii.Error) for text that is not a packed ``carry_type``."""
    return carry_type.model_validate_json(zlib.decompress(base64.b64decode(text)))


class NodeBatches:
    """The node window of one procedure run (see the module docstring).

    ``board``: the node statuses (:class:`workflows.kit.board.NodeBoard`; ``on_change()`` is the
    procedure's touch); ``result_type``: the children's result model (a failed child becomes one
    with outcome ``failed``); ``gate_timeout_*`` apply to the plan's gates. ``on_node_finished(node)``:
    a child ended. Continue-as-new: :meth:`continue_after`, :meth:`hand_over`, :meth:`take_over`.
    ``start_child`` raising ApplicationError type ``LeaseHeld`` marks the node failed with its
    message (the procedure pauses with ``pause_on_degraded``; the operator retries it).
    ``rollback`` / ``leave`` / ``recheck_unavailable`` default to nothing to undo / nothing to note / no node unavailable (in-process
    steps, :func:`local_run`, e.g. masters one at a time). ``gate_text(planned)``: the comment of
    a planned gate; ``on_gate_refused(gate)``: what a refused planned gate does when a rejection
    does not pause the procedure (see the attributes).
    """

    def __init__(
        self,
        *,
        board: NodeBoard,
        control: Control,
        gates: Gates,
        start_child: Callable[[str, Group, int], Awaitable[workflow.ChildWorkflowHandle]],
        rollback: Callable[[str], Awaitable[None]] | None = None,
        leave: Callable[[str], Awaitable[None]] | None = None,
        recheck_unavailable: Callable[[list[str]], Awaitable[list[str]]] | None = None,
        result_type: type[NodeRunResult] = NodeRunResult,
        pause_on_degraded: bool = True,
        gate_timeout_seconds: float | None = None,
        gate_timeout_outcome: GateTimeoutOutcome = GateTimeoutOutcome.REJECT,
        on_node_finished: Callable[[str], None] | None = None,
        alerts: Any = None,
        stop_gate: StopGate | None = None,
        gate_text: Callable[[PlannedGate], str] | None = None,
        on_gate_refused: Callable[[Gate], None] | None = None,
    ) -> None:
        #: The comment a person reads on a planned gate (None: none; the gate is opened by
        #: "workflow"); with one it is opened by "lockkeeper" with the comment also recorded.
        self.gate_text = gate_text
        #: A planned gate rejected, or timed out with outcome reject, while the gates do not
        #: pause on a rejection (``Gates.pause_on_reject`` False): the procedure's rule, e.g. an
        #: abort. None: the window opens the gate again.
        self.on_gate_refused = on_gate_refused
        #: On a degraded/failed node: its stop gate (:class:`StopGate`) instead of a pause; the
        #: waiting stop gates per node; the node whose stop gate ended the window (None: none).
        self.stop_gate = stop_gate
        self.stop_gates: dict[str, Gate] = {}
        self.stopped: str | None = None
        #: The skip request whose ``rollback`` or ``leave`` runs now (who asked, their comment).
        self.skip_request: NodeControlInput | None = None
        #: The procedure's alert gate (:class:`workflows.kit.alerts.AlertGate`): no node starts
        #: while it blocks. None: no gate.
        self.alerts = alerts
        self.board = board
        #: Continue as new once the history grew by this many events (0: never; :meth:`continue_after`).
        self.continue_after_events = 0
        self._base_events = 0
        self.on_node_finished = on_node_finished
        self.nodes = board.nodes
        self.on_change = board.on_change
        self.control = control
        self.gates = gates
        self.start_child = start_child
        self.rollback = rollback or _nothing_to_roll_back
        #: A skipped node past its point of no return is not rolled back: this notes it left as it is.
        self.leave = leave or _nothing_to_roll_back
        self.recheck_unavailable = recheck_unavailable or _none_unavailable
        self.result_type = result_type
        self.pause_on_degraded = pause_on_degraded
        self.gate_timeout_seconds = gate_timeout_seconds
        self.gate_timeout_outcome = gate_timeout_outcome
        self.groups: dict[str, Group] = {}
        self.group_of: dict[str, str] = {}
        self.children: dict[str, workflow.ChildWorkflowHandle] = {}
        self.tasks: list[asyncio.Task[Any]] = []
        self.attempts: dict[str, int] = {}
        self.results: dict[str, NodeRunResult] = {}
        self.requests: list[tuple[RequestKind, NodeControlInput]] = []
        self.current: str | None = None
        #: Groups whose window is open now, in the order they opened (several with run_groups).
        self.running: list[str] = []
        #: Start every free place of the window in one workflow task (:meth:`next_starts`).
        self.start_together = False
        #: The operator's holds (:mod:`workflows.kit.holds`): a held node is not started.
        self.holds = Holds(on_change=self.on_change)
        #: A held node keeps the nodes after it waiting too (a procedure whose order is a safety
        #: rule, e.g. the controllers' leader last); False: the next unheld node starts instead.
        self.holds_keep_order = False
        #: The maintenance windows (:mod:`workflows.kit.windows`): no node starts outside them;
        #: empty: always open (no timer, no command).
        self.windows: list[Window] = []
        #: While the window waits for the next opening: ``(since, opening)``; else None.
        self.window_wait_at: tuple[Any, Any] | None = None
        #: Called once per closed window with a line for people (the procedure's notification).
        self.on_window_wait: Callable[[str], None] | None = None
        self._window_told: Any = None

    # --- plan -------------------------------------------------------------------------------------

    def add_group(
        self,
        name: str,
        *,
        max_unavailable: int,
        nodes: Sequence[str],
        unavailable: Sequence[str] = (),
        gates: Sequence[PlannedGate] = (),
        skipped: Sequence[str] = (),
        skipped_reason: str = "already at target",
    ) -> Group:
        """Add a group (a pool) in plan order: its ``nodes`` become pending on the board, its
        ``skipped`` nodes skipped with ``skipped_reason``. Returns the group."""
        group = Group(name, max_unavailable, list(nodes), list(unavailable), list(gates))
        self.groups[name] = group
        for n in nodes:
            self.group_of[n] = name
            self.board.add(n, name)
        for n in skipped:
            self.group_of[n] = name
            self.board.add(n, name, phase=NodePhase.SKIPPED, reason=skipped_reason)
        return group

    # --- continue-as-new (see the module doc) -------------------------------------------------------

    def continue_after(self, events: int) -> None:
        """Hold the window once this run's history grew by ``events`` from now (0: never), for a
        continue-as-new; counted from the call, so a run that first took thousands of leases
        still moves nodes."""
        self.continue_after_events = events
        self._base_events = workflow.info().get_current_history_length()

    def holding(self) -> bool:
        """Whether the window holds for a continue-as-new (never while aborting: an abort
        finishes in this run)."""
        grown = workflow.info().get_current_history_length() - self._base_events
        return 0 < self.continue_after_events <= grown and not self.control.abort

    def carry(self, status: ProcedureStatus, carry_type: type[C] = WindowCarry, **own: Any) -> C:  # type: ignore[assignment]
        """The window's state for the next run as ``carry_type`` with the procedure's ``own`` fields;
        ``continued`` is the status' own ``continued`` (0 where the status has none) plus one."""
        return carry_type(
            nodes=self.nodes, groups=self.export_groups(), attempts=self.attempts,
            results={n: r.model_dump(mode="json", exclude={"decisions", "drain_report"}) for n, r in self.results.items()},
            gates=self.gates.gates, passed=sorted(self.gates.passed), gate_history=self.board.gate_history,
            warnings=self.board.warnings, paused=self.control.paused, paused_reason=self.control.paused_reason,
            started_at=status.started_at, continued=getattr(status, "continued", 0) + 1,
            holds=dict(self.holds.active), hold_history=list(self.holds.history), **own,
        )

    async def hand_over(self, input: BaseModel, status: ProcedureStatus, leases: Leases,
                        carry_type: type[WindowCarry] = WindowCarry, **own: Any) -> NoReturn:
        """Continue as new with ``input`` (the procedure's input model; it needs a ``carried:
        str | None`` field, which the next run unpacks with :func:`unpack` and restores with
        :meth:`take_over`) whose ``carried`` is the packed :meth:`carry`: after the
        window is empty, its signal tasks and the handlers finished and ``leases`` are released
        (rather than left to the parent close policy: servers differ on whether it applies at
        continue-as-new; the next run takes them again). Never returns."""
        await self.settle()
        await workflow.wait_condition(workflow.all_handlers_finished)
        await leases.release(concurrent=True, wait_closed=True)
        carry = self.carry(status, carry_type, **own)
        workflow.logger.info("continuing as new after %d events (%d)", workflow.info().get_current_history_length(), carry.continued)
        workflow.continue_as_new(input.model_copy(update={"carried": pack(carry)}))

    def take_over(self, carry: WindowCarry, status: ProcedureStatus) -> None:
        """Restore the previous run's window from ``carry`` (its groups added already; from the
        workflow's ``__init__``, so the first query sees it). Held nodes' expiry timers start
        again when the window runs."""
        self.nodes.update(carry.nodes)
        status.started_at = carry.started_at or status.started_at
        self.board.gate_history.extend(carry.gate_history)
        self.board.warnings.extend(carry.warnings)
        self.restore(carry.groups, carry.attempts, {n: self.result_type.model_validate(r) for n, r in carry.results.items()})
        self.gates.gates.update(carry.gates)
        self.gates.passed.update(carry.passed)
        if carry.paused:
            self.control.paused, self.control.paused_reason = True, carry.paused_reason
        if carry.holds or carry.hold_history:
            self.holds.restore(carry.holds, carry.hold_history)
            self.holds.bind(status)

    def export_groups(self) -> dict[str, GroupState]:
        """The window's state per group for the next run of the procedure (continue-as-new)."""
        return {
            name: GroupState(queue=list(g.queue), started=sorted(g.started), unavailable=list(g.unavailable), finished=g.finished)
            for name, g in self.groups.items()
        }

    def restore(self, groups: dict[str, GroupState], attempts: dict[str, int], results: dict[str, NodeRunResult]) -> None:
        """Take over the window's state exported by the previous run (groups added already)."""
        for name, st in groups.items():
            g = self.groups[name]
            g.queue, g.started, g.unavailable, g.finished = list(st.queue), set(st.started), list(st.unavailable), st.finished
        self.attempts.update(attempts)
        self.results.update(results)

    # --- signals and updates ------------------------------------------------------------------------

    def check_request(self, input: NodeControlInput, kind: RequestKind, *, finished: bool) -> NodeStatus:
        """Validator of ``skip_node`` / ``retry_node``; raises ValueError (the operator's message)
        for no identity, an unknown node, an aborting or ``finished`` procedure, a finished
        group, a skip already pending, or a node in the wrong phase."""
        if not input.identity.strip():
            raise ValueError("an identity is required")
        ns = self.nodes.get(input.node)
        if ns is None:
            raise self.board.unknown_node(input.node)
        if self.control.abort or finished:
            raise ValueError(f"{self.board.noun} is aborting or finished")
        group = self.groups.get(ns.pool)
        if group is not None and group.finished:
            raise ValueError(f"node {input.node} belongs to pool {ns.pool}, which has finished")
        if any(k == "skip" and r.node == input.node for k, r in self.requests):
            raise ValueError(f"a request for node {input.node} is already pending")
        if self.stop_gate is not None and ns.phase in (NodePhase.DEGRADED, NodePhase.FAILED):
            return self._check_stopped(input, kind, ns)
        if kind == "retry" and ns.phase not in RETRYABLE_PHASES:
            raise ValueError(
                f"node {input.node} is {ns.phase}; only {', '.join(sorted(RETRYABLE_PHASES))} nodes can be retried"
            )
        if kind == "skip" and ns.phase in FINAL_NODE_PHASES:
            raise ValueError(f"node {input.node} is already {ns.phase}")
        if kind == "skip" and input.node in self.children and ns.past_no_return:
            raise ValueError(f"node {input.node} is past its point of no return ({ns.past_no_return}, now at {ns.step}): it "
                             "cannot be skipped while it runs; abort it, then skip-node leaves it as it is")
        return ns

    def _check_stopped(self, input: NodeControlInput, kind: RequestKind, ns: NodeStatus) -> NodeStatus:
        """skip/retry of a stopped node under a :class:`StopGate`: only while its gate waits,
        a retry only when the procedure does not refuse it, by an identity that may approve."""
        gate = self.stop_gates.get(input.node)
        if gate is None or gate.state != GateState.WAITING:
            raise ValueError(f"node {input.node} is {ns.phase}; only a node that stopped and waits at its gate "
                             f"{input.node}/stopped/<attempt> can be {'skipped' if kind == 'skip' else 'retried'}")
        result = self.results.get(input.node)
        why = self.stop_gate.refusal(input.node, result) if kind == "retry" and self.stop_gate and result else None
        if why:
            raise ValueError(f"node {input.node} cannot be retried: {why}")
        self.gates.check_approver(input.identity, approving=True)
        return ns

    def check_hold(self, input: HoldInput, *, finished: bool) -> NodeStatus:
        """Validator of ``hold_node``; raises ValueError (the operator's message) for an unknown
        node, an aborting or ``finished`` procedure, a node already final, and what
        :meth:`Holds.check_hold` refuses (no reason, both an end time and a duration, a time in
        the past, a node already held)."""
        ns = self.nodes.get(input.node)
        if ns is None:
            raise self.board.unknown_node(input.node)
        if self.control.abort or finished:
            raise ValueError(f"{self.board.noun} is aborting or finished")
        if ns.phase in FINAL_NODE_PHASES:
            raise ValueError(f"node {input.node} is already {ns.phase}: nothing to hold")
        self.holds.check_hold(input)
        return ns

    def request(self, kind: RequestKind, input: NodeControlInput) -> str:
        """Queue a validated skip/retry (applied between steps); returns the operator's message."""
        self.requests.append((kind, input))
        verb = "skipped" if kind == "skip" else "retried"
        return f"node {input.node} will be {verb} (requested by {input.identity})"

    def abort_children(self, identity: str) -> None:
        """Signal ``abort`` to every child in flight (each stops at its next safe point)."""
        for node, handle in list(self.children.items()):
            self.tasks.append(asyncio.create_task(self._signal_child(node, handle, "abort", identity)))

    async def _signal_child(self, node: str, handle: workflow.ChildWorkflowHandle, name: str, identity: str) -> None:
        try:
            await handle.signal(name, identity)
        except Exception as err:  # noqa: BLE001 - a child that just finished needs no signal
            workflow.logger.info("signal %s to node %s not delivered: %s", name, node, err)

    # --- the window ---------------------------------------------------------------------------------

    def in_flight(self, group: Group | None = None) -> list[str]:
        """Nodes with a running child (of ``group`` when given)."""
        return sorted(self.children) if group is None else [n for n in self.children if self.group_of.get(n) == group.name]

    def next_starts(self, group: Group, first: str) -> list[str]:
        """``first`` (the window's next node, cleared to start) and the queue's next nodes after
        it, as long as the window has room (at most :data:`MAX_STARTS_PER_TASK` in all) and none
        of them waits for a gate (a planned ``node`` gate before it, or the canary's gate after
        the first node): in queue order.

        A window that starts one child per workflow task waits for each start (the command, the
        child's started event, a new task) before it looks at the next node: about 0.1 s a node
        on the dev server, so at most 7 to 10 node starts a second whatever maxUnavailable allows
        (issue 16)."""
        room = min(self._limit(group) - len(self.in_flight(group)), MAX_STARTS_PER_TASK)
        out = [first]
        for node in group.queue:
            if node == first or node in self.holds.active:
                if node != first and self.holds_keep_order:
                    break
                continue
            if len(out) >= room or self._canary_pending(group, node) is not None:
                break
            if any(g.before_node == node and g.id not in self.gates.passed for g in group.gates):
                break
            out.append(node)
        return out

    def _limit(self, group: Group) -> int:
        """maxUnavailable minus the nodes already unavailable that we have not taken over."""
        external = [n for n in group.unavailable if n not in group.started]
        return group.max_unavailable - len(external)

    def _canary_pending(self, group: Group, node: str) -> PlannedGate | None:
        for g in group.gates:
            if g.after_node and g.after_node != node and g.id not in self.gates.passed:
                return g
        return None

    def _next_action(self, group: Group) -> tuple[_Action, PlannedGate | str | None] | None:
        if self.requests:
            return ("requests", None)
        in_flight = self.in_flight(group)
        if self.control.abort or self.stopped:
            return None if in_flight else ("abort", None)
        if self.stop_gates:
            return None  # a stopped node waits at its gate: nothing starts meanwhile
        # any() stops at the first unfinished node: this runs on every wake-up of the window.
        if not any(self.nodes[n].phase not in FINAL_NODE_PHASES for n in group.nodes):
            return ("done", None)
        if self.holding():
            return None if in_flight else ("hold", None)
        if self.control.paused:
            return None
        if group.queue:
            node = self._first_unheld(group)
            if node is None:
                return None  # only held nodes left: wait for a release or an expiry (hold_wait says so)
            canary = self._canary_pending(group, node)
            if canary is not None:
                after = self.nodes.get(canary.after_node or "")
                if after is not None and after.phase in (NodePhase.DONE, NodePhase.SKIPPED) and not in_flight:
                    return ("gate", canary)
                if after is not None and after.phase not in FINAL_NODE_PHASES and canary.after_node not in group.queue and not in_flight:
                    return ("stuck", None)
                return None
            if len(in_flight) >= self._limit(group):
                return ("no-capacity", None) if not in_flight else None
            for g in group.gates:
                # The pool's gate stands before its first node, also when that one is held and
                # another starts first.
                if g.id not in self.gates.passed and (g.before_node == node or (g.kind == GateKind.POOL and node != group.queue[0])):
                    return ("gate", g)
            if self.windows and not is_open(self.windows, workflow.now()):
                return ("window", None)  # no node starts outside a window; the ones in flight finish
            return ("start", node)
        if not in_flight:
            return ("stuck", None)
        return None

    def _first_unheld(self, group: Group) -> str | None:
        """The window's next node: the first of the queue that is not held (no hold: the first)."""
        if not self.holds.active:
            return group.queue[0]
        if self.holds_keep_order:
            return None if group.queue[0] in self.holds.active else group.queue[0]
        return next((n for n in group.queue if n not in self.holds.active), None)

    def window_wait(self) -> tuple[str, Any, Any] | None:
        """``(what, since, until)`` while the window waits for the next maintenance window (not
        paused or aborting); else None."""
        if self.window_wait_at is None or self.control.paused or self.control.abort:
            return None
        since, opening = self.window_wait_at
        return f"the window from {_iso(opening)} ({describe(self.windows)})", since, opening

    async def _wait_for_window(self, group: Group) -> None:
        """Every window is closed: wait on a durable timer until the next one opens (nodes in
        flight finish meanwhile), or until a skip/retry request, an abort, the group's end or
        the procedure's hold wakes the window."""
        now = workflow.now()
        opening = next_opening(self.windows, now)
        assert opening is not None  # a weekly schedule opens within a week
        self.window_wait_at = (now, opening)
        if self._window_told != opening:
            self._window_told = opening
            workflow.logger.info("no maintenance window open: waiting until %s", _iso(opening))
            if self.on_window_wait is not None:
                self.on_window_wait(f"no maintenance window is open: the next node starts at {_iso(opening)} "
                                    f"({describe(self.windows)})")
        self.on_change()

        def wake() -> bool:
            return (bool(self.requests) or self.control.abort or self.holding()
                    or not any(self.nodes[n].phase not in FINAL_NODE_PHASES for n in group.nodes))

        try:
            await workflow.wait_condition(wake, timeout=max((opening - now).total_seconds(), 1.0),
                                          timeout_summary=f"maintenance window from {_iso(opening)}")
        except asyncio.TimeoutError:
            pass
        finally:
            self.window_wait_at = None
            self.on_change()

    def hold_wait(self) -> tuple[str, Any, Any] | None:
        """``(what, since, until)`` when an open window waits for nothing but holds (nothing in
        flight, nothing to do, held nodes in its queue; not paused or aborting); else None."""
        if not self.holds.active or self.control.paused or self.control.abort:
            return None
        for name in self.running:
            group = self.groups[name]
            held = [n for n in group.queue if n in self.holds.active]
            if held and not self.in_flight(group) and self._next_action(group) is None:
                return self.holds.waiting_line(held)
        return None

    async def run_group(self, name: str) -> None:
        """Run group ``name`` until every node is final (or the procedure aborts and nothing is in
        flight). Pauses (never fails) when the window cannot move on its own."""
        group = self.groups[name]
        self.current = name
        self.running.append(name)
        try:
            await self._run_group(group)
        finally:
            self.running.remove(name)

    async def run_groups(self, names: Sequence[str]) -> None:
        """Run the groups ``names`` at once, each in its own window of its own maxUnavailable
        (the machine-config-controller's pools); returns when every one returned. Pause, abort,
        skip/retry requests and gates are shared as in :meth:`run_group`."""
        if len(names) == 1:
            await self.run_group(names[0])
            return
        await asyncio.gather(*(self.run_group(n) for n in names))

    async def _run_group(self, group: Group) -> None:
        group.queue = [n for n in group.queue if self.nodes[n].phase not in FINAL_NODE_PHASES]
        self.holds.start_timers()  # holds taken over from the previous run (none: no command)
        self.on_change()
        while True:
            await workflow.wait_condition(lambda: self._next_action(group) is not None)
            action, arg = self._next_action(group)  # type: ignore[misc]
            match action:
                case "requests":
                    await self.process_requests()
                case "done" | "abort":
                    group.finished = True
                    return
                case "hold":
                    return
                case "gate":
                    assert isinstance(arg, PlannedGate)
                    await self._gate(arg)
                case "window":
                    await self._wait_for_window(group)
                case "start":
                    assert isinstance(arg, str)
                    if self.alerts is not None:
                        # Prometheus first: while an alert blocks (or it cannot be asked and the
                        # gate fails closed) no node starts; then decide again (a pause, an abort
                        # or a skip may have come meanwhile).
                        answer = await self.alerts.wait_clear(f"{group.name}/{arg}")
                        if answer.outcome == "stopped" or self._next_action(group) != ("start", arg):
                            continue
                    batch = self.next_starts(group, arg) if self.start_together else [arg]
                    await asyncio.gather(*(self._start_node(group, n) for n in batch))
                case "no-capacity":
                    external = [n for n in group.unavailable if n not in group.started]
                    await self._refresh_unavailable(group)
                    if self._next_action(group) == ("no-capacity", None):
                        self.control.pause(
                            f"pool {group.name} has no capacity: maxUnavailable={group.max_unavailable} and "
                            f"{len(external)} node(s) already unavailable ({', '.join(external)})"
                        )
                case "stuck":
                    stuck = [n for n in group.nodes if self.nodes[n].phase not in FINAL_NODE_PHASES and n not in self.children]
                    reasons = "; ".join(f"{n} {self.nodes[n].phase}: {self.nodes[n].reason}" for n in stuck)
                    self.control.pause(f"pool {group.name} cannot finish: {reasons}; retry-node or skip-node")

    async def _gate(self, planned: PlannedGate) -> bool:
        """Pass a planned gate; a node gate shows its node as waiting for approval meanwhile, and
        skip/retry requests are applied while it waits (skipping the gated node cancels it)."""
        node_status = self.nodes.get(planned.before_node or "")
        marked = node_status if node_status is not None and planned.kind == GateKind.NODE else None

        def on_open(gate: Gate) -> None:
            if marked is not None:
                marked.phase, marked.waiting_for, marked.since = NodePhase.WAITING_APPROVAL, f"approval of gate {gate.id}", gate.opened_at
                marked.deadline = gate.timeout_at

        passed = await pass_planned_gate(
            self.gates, planned, timeout_seconds=self.gate_timeout_seconds, timeout_outcome=self.gate_timeout_outcome,
            on_open=on_open, on_change=self.on_change, interrupt=lambda: bool(self.requests),
            while_waiting=self.process_requests, noun=self.board.noun,
            comment=self.gate_text(planned) if self.gate_text is not None else "",
        )
        if node_status is not None and node_status.phase == NodePhase.WAITING_APPROVAL:
            node_status.phase, node_status.waiting_for, node_status.deadline = NodePhase.PENDING, None, None
        gate = self.gates.gates.get(planned.id)
        if (not passed and self.on_gate_refused is not None and gate is not None and not self.control.abort
                and not self.control.paused and gate.state in (GateState.REJECTED, GateState.TIMED_OUT)):
            self.on_gate_refused(gate)
        self.on_change()
        return passed

    async def pass_gate(self, planned: PlannedGate) -> bool:
        """A planned gate outside the groups (one after every group, e.g. the rollout's
        ``delete-all-pods``), under the window's gate policy: opened until it passes (a
        rejection or a timeout pauses the procedure and ``resume`` opens it again). Returns True
        once passed, False once the procedure aborts."""
        while not await pass_planned_gate(self.gates, planned, timeout_seconds=self.gate_timeout_seconds,
                                          timeout_outcome=self.gate_timeout_outcome, on_change=self.on_change, noun=self.board.noun):
            self.on_change()
            await workflow.wait_condition(lambda: not self.control.paused or self.control.abort)
            if self.control.abort:
                return False
        self.on_change()
        return True

    async def _refresh_unavailable(self, group: Group) -> None:
        """Re-read the nodes that blocked capacity: one may have come back since planning."""
        taken = [n for n in group.unavailable if n in group.started]
        others = [n for n in group.unavailable if n not in group.started]
        still = set(await self.recheck_unavailable(others)) if others else set()
        group.unavailable = [n for n in group.unavailable if n in taken or n in still]

    async def _start_node(self, group: Group, node: str) -> None:
        group.queue.remove(node)
        group.started.add(node)
        attempt = self.attempts.get(node, 0) + 1
        self.attempts[node] = attempt
        ns = self.nodes[node]
        now = workflow.now()
        ns.phase, ns.step, ns.attempt, ns.since = NodePhase.RUNNING, None, attempt, now
        ns.reason, ns.warning, ns.waiting_for, ns.deadline, ns.drain_report = None, None, None, None, None
        ns.started_at = ns.started_at or now
        try:
            handle = await self.start_child(node, group, attempt)
        except ApplicationError as err:  # another procedure holds the node: never touched it
            if err.type != "LeaseHeld":
                raise
            group.started.discard(node)
            ns.phase, ns.reason, ns.step, ns.finished_at, ns.since = NodePhase.FAILED, err.message, None, now, now
            if self.pause_on_degraded and not self.control.abort:
                self.control.pause(f"node {node} failed: {err.message}")
            return self.on_change()
        self.children[node] = handle
        ns.run_id = handle.id
        ns.in_process = True if isinstance(handle, LocalRun) else None  # None: no byte in a 5,000-node status
        if self.control.abort:  # the abort arrived while the child was starting: it missed the broadcast
            self.tasks.append(asyncio.create_task(self._signal_child(node, handle, "abort", "abort")))
        self.on_change()
        self.tasks.append(asyncio.create_task(self._watch_child(node, attempt, handle)))

    async def _watch_child(self, node: str, attempt: int, handle: workflow.ChildWorkflowHandle) -> None:
        try:
            result: NodeRunResult = await handle  # a child workflow, or a LocalRun (never raises)
        except ChildWorkflowError as err:
            result = self.result_type(
                node=node, outcome="failed", attempt=attempt, reason=failure_message(err), finished_at=workflow.now()
            )
        self.children.pop(node, None)
        self.results[node] = result
        self.board.merge_decisions(node, attempt, result.decisions)
        if result.abort_requested and not self.control.abort:
            # The node's decision gate timed out with the declared default "abort".
            self.control.request_abort(f"node {node}: {result.reason}", "timeout")
        ns = self.nodes[node]
        ns.phase = _OUTCOME_PHASE[result.outcome]
        ns.reason = result.reason
        ns.cordoned_by_us = result.cordoned_by_us
        ns.past_no_return = ns.past_no_return or result.past_no_return
        ns.finished_at = result.finished_at or workflow.now()
        ns.since = ns.finished_at
        ns.waiting_for, ns.deadline, ns.blocked_since = None, None, None
        if result.outcome in ("done", "skipped", "aborted"):
            ns.step = "finished"
        if result.outcome == "degraded" and not self.pause_on_degraded:
            ns.phase = NodePhase.FAILED
        stop = self.stop_gate is not None and result.outcome in ("degraded", "failed") and not self.control.abort
        if stop:
            ns.phase = NodePhase.FAILED
        elif result.outcome in ("degraded", "failed") and self.pause_on_degraded and not self.control.abort:
            self.control.pause(f"node {node} {result.outcome}: {result.reason}")
        lk_metrics.record_node_finished(procedure=self.board.procedure, cluster=self.board.cluster, pool=ns.pool, outcome=result.outcome)
        if ns.phase in FINAL_NODE_PHASES and node in self.holds.active:
            self.holds.end_if_held(node, f"node {ns.phase}")
        if self.on_node_finished is not None:
            self.on_node_finished(node)
        if stop:
            await self._stop_at_gate(node, result)
        self.on_change()

    async def _stop_at_gate(self, node: str, result: NodeRunResult) -> None:
        """Hold the window at ``node``'s stop gate (:class:`StopGate`) until it is decided: a
        retry or a skip was applied by its request; approve retries (unless refused); reject, the
        timeout or an approve of a refused retry stop the window."""
        assert self.stop_gate is not None
        refusal = self.stop_gate.refusal(node, result)
        text = self.stop_gate.text(node, result, refusal)
        gate = self.gates.open(f"{node}/stopped/{result.attempt}", GateKind.NODE, node=node, timeout_seconds=self.gate_timeout_seconds,
                               comment=text, opened_by="lockkeeper", record_comment=text)
        self.stop_gates[node] = gate
        self.on_change()
        await self.gates.wait(gate, timeout_outcome=GateTimeoutOutcome.REJECT, timeout_seconds=self.gate_timeout_seconds)
        if self.stop_gates.pop(node, None) is None or gate.state == GateState.CANCELLED:
            return  # a retry or skip request answered it (and is applied there), or the procedure aborted
        if gate.state == GateState.APPROVED and refusal is None:
            self._requeue(node, gate.decided_by or "?")
        else:
            self.stopped = node

    def _requeue(self, node: str, identity: str) -> None:
        """Put a retried node back in front of its group's queue (pending) and resume."""
        ns = self.nodes[node]
        ns.phase, ns.reason, ns.waiting_for = NodePhase.PENDING, f"retry requested by {identity}", None
        ns.since = workflow.now()
        self.groups[ns.pool].queue.insert(0, node)
        if self.control.paused:
            self.control.unpause_quietly()
        workflow.logger.info("node %s retry requested by %s", node, identity)

    async def process_requests(self) -> None:
        """Apply the queued skip/retry requests in order (see the module docstring)."""
        while self.requests:
            kind, req = self.requests.pop(0)
            ns = self.nodes[req.node]
            group = self.groups[ns.pool]
            stop_gate = self.stop_gates.pop(req.node, None)  # a request answers it (see _stop_at_gate)
            if kind == "retry":
                if ns.phase not in RETRYABLE_PHASES or req.node in self.children:
                    continue
                if stop_gate is not None:
                    self.gates.decide(stop_gate, GateState.APPROVED, req.identity, f"retry-node: {req.comment}".rstrip(": "))
                self._requeue(req.node, req.identity)
            elif req.node in self.children:
                await self._signal_child(req.node, self.children[req.node], "skip", req.identity)
            elif ns.phase not in FINAL_NODE_PHASES or stop_gate is not None:
                if req.node in group.queue:
                    group.queue.remove(req.node)
                for g in self.gates.waiting():
                    if g is stop_gate:  # the skip is its decision
                        self.gates.decide(g, GateState.APPROVED, req.identity, f"skip-node: {req.comment}".rstrip(": "))
                    elif g.node == req.node:
                        self.gates.cancel(g, req.identity, f"node {req.node} skipped")
                left = ""
                if ns.phase in (NodePhase.DEGRADED, NodePhase.FAILED) or req.node in group.started:
                    self.skip_request = req
                    await (self.leave if ns.past_no_return else self.rollback)(req.node)
                    left = f"; left as it is, past its point of no return ({ns.past_no_return})" if ns.past_no_return else ""
                ns.phase, ns.reason = NodePhase.SKIPPED, f"skipped by {req.identity}" + (f": {req.comment}" if req.comment else "") + left
                ns.finished_at = ns.since = workflow.now()
                if req.node in self.holds.active:
                    self.holds.end_if_held(req.node, f"node skipped by {req.identity}")
                reason = self.control.paused_reason
                if self.control.paused and reason and req.node in reason:
                    self.control.unpause_quietly()
            self.on_change()

    async def settle(self) -> None:
        """Let the signal and watch tasks still in flight finish (before the procedure closes)."""
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)

    def totals(self) -> dict[str, int]:
        """The board's counts per node phase with this window's children in flight."""
        return self.board.totals(len(self.children))

    def node_results(self) -> dict[str, NodeResult]:
        """Every node's final state with its attempts and its last child's result."""
        return self.board.node_results(self.attempts, self.results)


async def _nothing_to_roll_back(node: str) -> None:
    """The default ``rollback`` and ``leave``: a node that ran no child has nothing the window can
    undo, and nothing to note."""


async def _none_unavailable(nodes: list[str]) -> list[str]:
    """The default ``recheck_unavailable``: no node counts as unavailable."""
    return []


async def pass_planned_gate(
    gates: Gates,
    planned: PlannedGate,
    *,
    timeout_seconds: float | None,
    timeout_outcome: GateTimeoutOutcome,
    on_change: Callable[[], None],
    on_open: Callable[[Gate], None] | None = None,
    interrupt: Callable[[], bool] = lambda: False,
    while_waiting: Callable[[], Awaitable[None]] | None = None,
    noun: str = "procedure",
    comment: str = "",
) -> bool:
    """Open a gate of the plan and wait for it (:meth:`Gates.wait`); True when passed.

    ``on_open(gate)`` runs right after the gate opened (status of the gated node), then
    ``on_change()``. A timeout applies ``timeout_outcome`` (recorded as a timeout); an abort
    while waiting cancels the gate ("{noun} aborted"). ``comment``: what a person reads on the
    gate (then opened, and recorded, by "lockkeeper" with it)."""
    gate = gates.open(
        planned.id, planned.kind, timeout_seconds=timeout_seconds, pool=planned.pool, node=planned.before_node,
        **({"comment": comment, "opened_by": "lockkeeper", "record_comment": comment} if comment else {}),
    )
    if on_open is not None:
        on_open(gate)
    on_change()
    workflow.logger.info("gate %s waiting for approval", gate.id)
    return await gates.wait(
        gate, timeout_outcome=timeout_outcome, timeout_seconds=timeout_seconds, interrupt=interrupt,
        while_waiting=while_waiting, abort_comment=f"{noun} aborted",
    )
