"""The node board: what a node procedure's ``status`` shows about its nodes, and the parent's side
of their blocked-drain decision gates.

:class:`NodeBoard` holds one :class:`NodeStatus` per node (shared with the procedure's status
model), merges the children's ``node_progress`` reports and decision records into it, answers
``decide`` for a node whose drain is blocked (forwarding the decision to the node run), and
summarises the board for ``status`` (totals, what the run waits for) and for the result. The node
window (:mod:`workflows.kit.batches`) moves the nodes; the board only records where they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.kit import metrics as lk_metrics
    from workflows.kit.control import Control
    from workflows.kit.drain import check_decision
    from workflows.kit.models import (
        FINAL_NODE_PHASES,
        ApprovalRules,
        DecideInput,
        DecideResult,
        DrainDecision,
        DrainDecisionSignal,
        GateRecord,
        GateState,
        NodePhase,
        NodeProgress,
        NodeResult,
        NodeStatus,
    )
    from workflows.kit.noderun import NodeRunResult
    from workflows.kit.order import overtaken

_TOTAL_OF = {
    NodePhase.DONE: "done",
    NodePhase.SKIPPED: "skipped",
    NodePhase.FAILED: "failed",
    NodePhase.DEGRADED: "degraded",
    NodePhase.ABORTED: "aborted",
    NodePhase.PENDING: "pending",
    NodePhase.WAITING_APPROVAL: "pending",
}


class NodeBoard:
    """Node statuses of one procedure run.

    ``nodes``: node -> :class:`NodeStatus` (the procedure's status model holds the same dict);
    ``gate_history`` / ``warnings``: the status lists decision records and warnings go to;
    ``on_change()``: the procedure's touch; ``procedure`` / ``cluster`` label the metrics;
    ``noun`` names the procedure in messages ("rollout").
    """

    def __init__(
        self,
        *,
        procedure: str,
        cluster: str,
        nodes: dict[str, NodeStatus],
        gate_history: list[GateRecord],
        warnings: list[str],
        on_change: Callable[[], None],
        noun: str = "procedure",
    ) -> None:
        self.procedure = procedure
        self.cluster = cluster
        self.nodes = nodes
        self.gate_history = gate_history
        self.warnings = warnings
        self.on_change = on_change
        self.noun = noun
        #: node -> (attempt, seq) of the latest report taken (NodeProgress.seq). Not carried
        #: across a continue-as-new: there the first report of each node is taken as it comes.
        self._latest: dict[str, tuple[int, int]] = {}
        #: node -> (attempt, number of its decision records already in gate_history)
        self._decisions_seen: dict[str, tuple[int, int]] = {}

    def add(self, node: str, group: str, *, phase: NodePhase = NodePhase.PENDING, reason: str | None = None) -> NodeStatus:
        """Put ``node`` of ``group`` (its pool) on the board, since now."""
        ns = self.nodes[node] = NodeStatus(name=node, pool=group, phase=phase, reason=reason, since=workflow.now())
        return ns

    def unknown_node(self, node: str) -> ValueError:
        """The validators' error for a node that is not on the board."""
        known = ", ".join(sorted(self.nodes)) or "none yet (still planning)"
        return ValueError(f"unknown node {node!r}; nodes of this {self.noun}: {known}")

    # --- children's reports ---------------------------------------------------------------------

    def on_progress(self, progress: NodeProgress) -> None:
        """A child's step change (the ``node_progress`` signal). Stale attempts, reports older
        than one already taken (``seq``: they can overtake each other) and nodes already finished
        are ignored; a first BLOCKED counts in the blocked-drain metric; a new warning is added to
        ``warnings`` and logged."""
        ns = self.nodes.get(progress.node)
        if ns is None or progress.attempt != ns.attempt or ns.phase in FINAL_NODE_PHASES:
            return
        if overtaken((progress.attempt, progress.seq), self._latest.get(progress.node)):
            return
        if progress.seq is not None:
            self._latest[progress.node] = (progress.attempt, progress.seq)
        if progress.phase == NodePhase.BLOCKED and ns.phase != NodePhase.BLOCKED:
            lk_metrics.record_drain_blocked(procedure=self.procedure, cluster=self.cluster, pool=ns.pool)
        ns.phase = progress.phase
        ns.step = progress.step
        ns.waiting_for = progress.waiting_for
        ns.since = progress.since
        ns.deadline = progress.deadline
        ns.reason = progress.reason
        ns.cordoned_by_us = progress.cordoned_by_us
        if progress.drain_report is not None or progress.phase != NodePhase.BLOCKED:
            ns.drain_report = progress.drain_report
        ns.blocked_since = progress.blocked_since
        ns.decision_gate = progress.decision_gate
        ns.past_no_return = ns.past_no_return or progress.past_no_return
        self.merge_decisions(progress.node, progress.attempt, progress.decisions)
        if progress.warning and progress.warning != ns.warning:
            ns.warning = progress.warning
            self.warnings.append(f"{progress.node}: {progress.warning}")
            workflow.logger.warning("node %s: %s", progress.node, progress.warning)
        self.on_change()

    def merge_decisions(self, node: str, attempt: int, records: list[GateRecord]) -> None:
        """Append a node run's new decision-gate records to gate_history; the child sends its
        whole list, so only the unseen tail is added."""
        seen_attempt, seen = self._decisions_seen.get(node, (attempt, 0))
        if seen_attempt != attempt:
            seen = 0
        if len(records) > seen:
            self.gate_history.extend(r.model_copy() for r in records[seen:])
            self._decisions_seen[node] = (attempt, len(records))

    # --- decide -----------------------------------------------------------------------------------

    def check_decide(self, input: DecideInput, rules: ApprovalRules, *, finished: str | None, in_flight: bool) -> None:
        """Validator of ``decide``: a node of this run, the run not ``finished`` (its phase when
        it is), the node ``in_flight``, then :func:`workflows.kit.drain.check_decision`
        (identity, an open gate, allowed approvers, four-eyes for delete-pod). Raises ValueError."""
        ns = self.nodes.get(input.node)
        if ns is None:
            raise self.unknown_node(input.node)
        if finished is not None:
            raise ValueError(f"{self.noun} already {finished}")
        if not in_flight:
            raise ValueError(f"node {input.node} is not in flight (it is {ns.phase})")
        check_decision(
            input, ns.decision_gate, requested_by=rules.requested_by, four_eyes=rules.four_eyes,
            allowed_approvers=rules.allowed_approvers,
        )

    async def decide(self, input: DecideInput, child: workflow.ChildWorkflowHandle | None, control: Control) -> DecideResult:
        """Answer a node's blocked-drain gate (validated by :meth:`check_decide`): mark it decided
        at once (so a second decision is refused), forward it to the ``child`` with the
        ``drain_decision`` signal; ``abort`` also aborts the whole procedure through ``control``."""
        ns = self.nodes[input.node]
        gate = ns.decision_gate
        assert gate is not None
        gate.state, gate.decided_by, gate.decided_at = GateState.DECIDED, input.identity, workflow.now()
        gate.decision, gate.comment = input.decision, input.comment
        gate.connection_identity = input.connection_identity
        signal = DrainDecisionSignal(
            decision=input.decision, identity=input.identity, comment=input.comment, at=workflow.now(),
            connection_identity=input.connection_identity,
        )
        if child is not None:
            await child.signal("drain_decision", signal)
        if input.decision == DrainDecision.ABORT:
            control.request_abort(
                f"abort decided on the blocked drain of {input.node} by {input.identity}"
                + (f": {input.comment}" if input.comment else ""),
                input.identity,
            )
        self.on_change()
        return DecideResult(
            gate_id=gate.id, decision=input.decision, message=f"{input.decision} decided for node {input.node} by {input.identity}"
        )

    # --- summaries --------------------------------------------------------------------------------

    def abort_pending(self) -> None:
        """At the end of an aborted run: nodes never started become aborted."""
        for ns in self.nodes.values():
            if ns.phase in (NodePhase.PENDING, NodePhase.WAITING_APPROVAL):
                ns.phase, ns.reason = NodePhase.ABORTED, f"not started: {self.noun} aborted"

    def totals(self, in_flight: int) -> dict[str, int]:
        """Counts per node phase: done, skipped, failed, degraded, aborted, pending (incl. waiting
        for approval), plus ``in_flight`` (children running) as given."""
        counts = dict.fromkeys(("done", "skipped", "failed", "pending", "in_flight", "degraded", "aborted"), 0)
        counts["in_flight"] = in_flight
        for ns in self.nodes.values():
            key = _TOTAL_OF.get(ns.phase)
            if key:
                counts[key] += 1
        return counts

    def node_results(self, attempts: Mapping[str, int], results: Mapping[str, NodeRunResult]) -> dict[str, NodeResult]:
        """Final state of every node, with its attempts and the last child's durations/safe point."""
        out: dict[str, NodeResult] = {}
        for name, ns in self.nodes.items():
            res = results.get(name)
            duration = None
            if ns.started_at and ns.finished_at:
                duration = (ns.finished_at - ns.started_at).total_seconds()
            out[name] = NodeResult(
                name=name,
                pool=ns.pool,
                phase=ns.phase,
                attempts=attempts.get(name, 0),
                duration_seconds=duration,
                drain_seconds=getattr(res, "drain_seconds", None),
                reboot_seconds=getattr(res, "reboot_seconds", None),
                reason=ns.reason,
                safe_point=res.safe_point if res else None,
            )
        return out

    def deciding(self, workflow_id: str) -> tuple[str, datetime | None, datetime | None] | None:
        """(waiting_for, since, deadline) for ``status`` when a node's blocked drain waits for a
        decision: the first such node, with the command that answers it; else None."""
        for n in self.nodes.values():
            gate = n.decision_gate
            if gate is not None and gate.state == GateState.WAITING:
                text = (
                    f"a decision on the blocked drain of node {n.name} (gate {gate.id}): "
                    f"lockkeeper decide {workflow_id} {n.name} wait|skip|delete-pod|abort"
                )
                return text, gate.opened_at, gate.timeout_at
        return None

    def in_flight_summary(
        self, in_flight: Sequence[str], fallback: datetime | None
    ) -> tuple[str, datetime | None, datetime | None] | None:
        """(waiting_for, since, deadline) for ``status`` from the in-flight node closest to its
        deadline (then the longest waiting, then by name); None when nothing is in flight."""
        flights = [self.nodes[n] for n in in_flight if n in self.nodes]
        flights.sort(key=lambda n: (n.deadline is None, n.deadline or n.since or fallback, n.name))
        if not flights:
            return None
        n = flights[0]
        return f"node {n.name}: {n.step or n.phase}" + (f" ({n.waiting_for})" if n.waiting_for else ""), n.since, n.deadline
