"""skip-node and retry-node for the runtime migration (the kit's ``NodeProcedureWorkflow`` hooks),
a mixin of :class:`workflows.runtime_migration.workflow.RuntimeMigrationWorkflow`.

The kit's meaning, bounded by what is safe on a half-migrated host:

- **skip-node** on a node not started yet: it is never touched. On the node in flight: honoured
  only while no destructive step has begun (safety, approval, drain, record): the child stops,
  uncordons what it cordoned and ends ``skipped``; once the host is being changed it is refused
  (abort instead, then decide). On a node that stopped (failed) and waits at its hold gate
  ``<node>/stopped/<attempt>``: before the destructive steps it is uncordoned; after them it
  is left as it is (cordoned, or DELETED and not registered again) and the record ConfigMap
  gets ``<node>.state`` saying so. Either way the migration goes on with the next node, whose
  safety gate still requires every replica set to keep all but one brick.
- **retry-node** on a node waiting at its hold gate (approving that gate is the same): a new
  child run for the node, given the previous row: its record (Node uid, boot_id, bootstrap
  config, packages) and its done steps. It repeats the step that stopped and never a finished
  one (those are the host changes, the reboot, the Node delete and the external commands that
  run once). A stop whose last run-once command has an unknown outcome is refused: resolve it
  at its unknown-outcome gate instead.

A node that fails stops the migration at the hold gate: approve = retry, reject (or its timeout)
= end the run ``failed``, skip-node = go on.

**hold** / **release** (the kit's holds, :mod:`workflows.kit.holds`; not the hold gate above) on a
node not started yet: the run goes on with the next node of the order that is not held, and the
held one starts once its hold ends; when only held nodes are left the run waits, saying so. The
node being migrated cannot be held (it is not started again; abort or skip-node stop it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import UncordonInput, UncordonResult
    from activities.runtime_migration.models import SaveRecordInput, SaveRecordResult
    from workflows.kit import calls as acts
    from workflows.kit.holds import Holds
    from workflows.kit.windows import Window, describe, is_open, next_opening, parse_windows
    from workflows.kit.models import (
        ControlResult,
        Gate,
        GateKind,
        GateState,
        GateTimeoutOutcome,
        HoldInput,
        NodeControlInput,
        ReleaseInput,
    )
    from workflows.runtime_migration.models import PROCEDURE_RUNTIME_MIGRATION, NodeMigrationResult, NodeMigrationStatus
    from workflows.runtime_migration.node import BEFORE_DESTRUCTIVE



def destructive_begun(row: NodeMigrationStatus) -> bool:
    """The node's host was being changed (a step past the record was reached)."""
    return any(s not in BEFORE_DESTRUCTIVE for s in row.done_steps) or (row.step is not None and row.step not in BEFORE_DESTRUCTIVE)


def retry_refusal(row: NodeMigrationStatus) -> str | None:
    """Why a retry of this stopped node is not safe (None: it is)."""
    lc = row.last_command
    if lc is not None and lc.tail.startswith("outcome unknown"):
        return (f"the outcome of {' '.join(lc.argv)} ({lc.step}) is unknown; check by hand and answer its unknown-outcome gate "
                "instead of repeating it")
    return None


class NodeControl:
    """The skip/retry hooks and the hold gate (see the module doc). Uses the workflow's ``_in``,
    ``_id``, ``_status``, ``gates``, ``control``, ``touch`` and ``_signal_child`` (no stubs here:
    this mixin comes first in the MRO and would shadow them)."""

    _in: Any
    _id: str
    _status: Any
    gates: Any
    control: Any
    touch: Any
    _signal_child: Any
    _kit_window_notify: Any

    def node_control_init(self) -> None:
        #: skip-node on nodes not started yet
        self.skip_pending: dict[str, NodeControlInput] = {}
        #: node → its waiting hold gate; the choice made on it (retry / skip) and by whom
        self.held: dict[str, Gate] = {}
        self.hold_choice: dict[str, tuple[str, NodeControlInput]] = {}
        #: the operator's holds on nodes not started yet, and the nodes the run waits for while
        #: only held nodes are left
        self.node_holds = Holds(on_change=lambda: self.touch())
        self.waiting_holds: list[str] = []
        #: the maintenance windows (:mod:`workflows.kit.windows`; empty: always open) and, while
        #: the run waits for the next one, ``(since, opening)``
        self.node_windows: list[Window] = []
        self.window_wait_at: tuple[datetime, datetime] | None = None
        self._window_told: datetime | None = None

    def node_control_windows(self, specs: list[str]) -> None:
        """No node starts outside the maintenance windows ``specs`` (validated by the input)."""
        self.node_windows = parse_windows(specs)

    # --- validators and handlers (the kit's hooks) ---------------------------------------------

    def _row(self, input: NodeControlInput) -> NodeMigrationStatus:
        if not input.identity.strip():
            raise ValueError("an identity is required")
        row = self._status.nodes.get(input.node)
        if row is None:
            raise ValueError(f"node {input.node} is not part of this migration ({', '.join(self._in.nodes)})")
        if self.control.abort or self.control.finished() or self._status.stage not in ("preflight", "nodes"):
            raise ValueError(f"the runtime migration is {'aborting' if self.control.abort else self._status.stage}")
        return row

    def check_skip_node(self, input: NodeControlInput) -> None:
        row = self._row(input)
        if input.node in self.held:
            self.gates.check_approver(input.identity, approving=True)  # it decides the hold gate: the gates' approver policy
            return
        if row.phase in ("done", "skipped") or input.node in self.skip_pending:
            raise ValueError(f"node {input.node} is already {'skipped' if input.node in self.skip_pending else row.phase}")
        if input.node == self._status.current:
            if destructive_begun(row):
                raise ValueError(f"node {input.node} is past the destructive steps (at {row.step}): it cannot be skipped while it runs; "
                                 "abort it, then skip-node leaves it cordoned with its record")
            return
        if row.phase != "pending":
            raise ValueError(f"node {input.node} is {row.phase}")

    def on_skip_node(self, input: NodeControlInput) -> ControlResult:
        node = input.node
        if node in self.held:
            self.hold_choice[node] = ("skip", input)
            self.gates.decide(self.held[node], GateState.APPROVED, input.identity, f"skip-node: {input.comment}".rstrip(": "))
            return ControlResult(message=f"node {node} will be skipped as it is (requested by {input.identity})")
        if node == self._status.current:
            self._signal_child(node, "skip", [input.identity, input.comment])
            return ControlResult(message=f"node {node} will be skipped at its next safe point before the destructive steps "
                                         f"(requested by {input.identity})")
        self.skip_pending[node] = input
        row = self._status.nodes[node]
        row.phase, row.reason = "skipped", f"skipped by {input.identity} before it started" + (f": {input.comment}" if input.comment else "")
        if node in self.node_holds.active:
            self.node_holds.end_if_held(node, f"node skipped by {input.identity}")
        self.touch()
        return ControlResult(message=f"node {node} will not be migrated (skipped by {input.identity})")

    def check_retry_node(self, input: NodeControlInput) -> None:
        row = self._row(input)
        gate = self.held.get(input.node)
        if gate is None or gate.state != GateState.WAITING:
            raise ValueError(f"node {input.node} is {row.phase}; only a node that stopped and waits at its gate "
                             f"{input.node}/stopped/<attempt> can be retried")
        why = retry_refusal(row)
        if why:
            raise ValueError(f"node {input.node} cannot be retried: {why}")
        self.gates.check_approver(input.identity, approving=True)

    def on_retry_node(self, input: NodeControlInput) -> ControlResult:
        self.hold_choice[input.node] = ("retry", input)
        self.gates.decide(self.held[input.node], GateState.APPROVED, input.identity, f"retry-node: {input.comment}".rstrip(": "))
        return ControlResult(message=f"node {input.node} will run again from its stopped step (requested by {input.identity})")

    def check_hold_node(self, input: HoldInput) -> None:
        row = self._row(input)  # type: ignore[arg-type]  # the same identity and node fields
        if input.node == self._status.current:
            raise ValueError(f"node {input.node} is being migrated now: a hold only keeps a node from starting "
                             "(abort or skip-node stop it)")
        if row.phase != "pending" or input.node in self.skip_pending:
            raise ValueError(f"node {input.node} is already {row.phase}: nothing to hold")
        self.node_holds.check_hold(input)

    def on_hold_node(self, input: HoldInput) -> ControlResult:
        self.node_holds.bind(self._status)
        hold = self.node_holds.place(input)
        return ControlResult(message=f"node {input.node} held by {hold.by} {hold.until_text()}: {hold.reason}")

    def check_release_node(self, input: ReleaseInput) -> None:
        if input.node not in self._status.nodes:
            raise ValueError(f"node {input.node} is not part of this migration ({', '.join(self._in.nodes)})")
        self.node_holds.check_release(input)

    def on_release_node(self, input: ReleaseInput) -> ControlResult:
        self.node_holds.bind(self._status)
        self.node_holds.release(input)
        return ControlResult(message=f"node {input.node} released by {input.identity}"
                                     + (f": {input.reason.strip()}" if input.reason.strip() else ""))

    def kit_hold_wait(self) -> tuple[str, datetime | None, datetime | None] | None:
        if self.control.paused or self.control.abort:
            return None
        if self.window_wait_at is not None:
            since, opening = self.window_wait_at
            return f"the window from {opening.isoformat(timespec='seconds')} ({describe(self.node_windows)})", since, opening
        if not self.waiting_holds:
            return None
        return self.node_holds.waiting_line(self.waiting_holds)

    # --- the run's side ------------------------------------------------------------------------

    def first_unheld(self, remaining: list[str]) -> str | None:
        """The next node to run: the first of ``remaining`` that is not held (no hold: the first)."""
        holds = self.node_holds.active
        if not holds:
            return remaining[0]
        return next((n for n in remaining if n not in holds or n in self.skip_pending), None)

    async def wait_for_holds(self, remaining: list[str]) -> None:
        """Only held nodes are left: wait, visibly, until one is free or the run aborts."""
        self.waiting_holds = list(remaining)
        self.touch()
        await workflow.wait_condition(lambda: self.control.abort or self.first_unheld(remaining) is not None)
        self.waiting_holds = []
        self.touch()

    async def wait_for_window(self, node: str) -> bool:
        """Every maintenance window is closed: wait on a durable timer until the next opens (or
        the run aborts, or ``node``, the next one, is skipped); True when it waited (the caller
        decides again). No windows, or one open: False at once, no command."""
        now = workflow.now()
        if not self.node_windows or is_open(self.node_windows, now):
            return False
        opening = next_opening(self.node_windows, now)
        assert opening is not None
        self.window_wait_at = (now, opening)
        if self._window_told != opening:
            self._window_told = opening
            self._kit_window_notify(f"no maintenance window is open: the next node starts at "
                                    f"{opening.isoformat(timespec='seconds')} ({describe(self.node_windows)})")
        self.touch()
        try:
            await workflow.wait_condition(lambda: self.control.abort or node in self.skip_pending, timeout=max((opening - now).total_seconds(), 1.0),
                                          timeout_summary=f"maintenance window from {opening.isoformat(timespec='seconds')}")
        except TimeoutError:
            pass
        finally:
            self.window_wait_at = None
            self.touch()
        return True

    async def hold(self, res: NodeMigrationResult) -> tuple[str, NodeControlInput | None]:
        """The hold gate of a failed node; returns ("retry" | "skip" | "stop", the request)."""
        node, row = res.node, res.status
        state = "cordoned" + (", DELETED and not registered again" if row.node_deleted else "")
        state = state if destructive_begun(row) else "untouched on the host (uncordoned on skip)"
        refusal = retry_refusal(row)
        retry = (f"retry is refused ({refusal})" if refusal else
                 f"approve or `lockkeeper retry-node {self._id} {node}` runs it again from {row.step} (finished steps are not repeated)")
        text = (f"node {node} stopped at {row.step}: {res.reason}. {retry}; `lockkeeper skip-node {self._id} {node}` leaves it "
                f"{state} and goes on with the next node; reject ends the migration")
        gate = self.gates.open(f"{node}/stopped/{row.attempt}", GateKind.NODE, node=node, timeout_seconds=self._in.gates.timeout_seconds,
                               comment=text, opened_by="lockkeeper", record_comment=text)
        self.held[node] = gate
        self.touch()
        await self.gates.wait(gate, timeout_outcome=GateTimeoutOutcome.REJECT, timeout_seconds=self._in.gates.timeout_seconds)
        self.held.pop(node, None)
        self.touch()
        choice, req = self.hold_choice.pop(node, (None, None))
        if choice is None and gate.state == GateState.APPROVED and not refusal:
            choice, req = "retry", NodeControlInput(node=node, identity=gate.decided_by or "?", comment=gate.comment)
        return choice or "stop", req

    async def skip_stopped(self, res: NodeMigrationResult, req: NodeControlInput) -> NodeMigrationResult:
        """skip-node on a held node: uncordon it when its host was never changed; otherwise leave
        it and say so in the row and the record ConfigMap."""
        row = res.status.model_copy(deep=True)
        who = f"skipped by {req.identity}" + (f" ({req.comment})" if req.comment else "")
        if not destructive_begun(row):
            unc: UncordonResult = await acts.call(acts.UNCORDON_NODE, UncordonInput(node=res.node, owner=self._id), UncordonResult,
                                                  timeouts=acts.Timeouts(self._in.timing.activity, 10.0))
            reason = f"{who} after it stopped at {row.step}, before the destructive steps" + ("; uncordoned" if unc.uncordoned else "")
        else:
            reason = (f"{who} after it stopped at {row.step}: left cordoned"
                      + (", DELETED and not registered again" if row.node_deleted else "")
                      + (f"; its record is in ConfigMap {row.record_configmap}" if row.record_configmap else ""))
            if row.record_configmap:
                ns, name = row.record_configmap.split("/", 1)
                await acts.call("save_node_record", SaveRecordInput(namespace=ns, name=name, data={f"{res.node}.state": reason},
                                labels={"lockkeeper.io/procedure": PROCEDURE_RUNTIME_MIGRATION}), SaveRecordResult,
                                timeouts=acts.Timeouts(self._in.timing.activity, 10.0))
        row.phase, row.reason = "skipped", reason
        self._status.nodes[res.node] = row
        self.touch()
        return NodeMigrationResult(node=res.node, outcome="skipped", reason=reason, status=row, gate_history=res.gate_history)

    def skipped_before_start(self, node: str) -> NodeMigrationResult:
        row = self._status.nodes[node]
        return NodeMigrationResult(node=node, outcome="skipped", reason=row.reason, status=row.model_copy(deep=True))
