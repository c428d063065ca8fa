"""skip-node, retry-node and hold for the runtime migration on the kit's node window
(:class:`workflows.kit.batches.NodeBatches` with its stop gate), a mixin of
:class:`workflows.runtime_migration.workflow.RuntimeMigrationWorkflow`.

The kit's meaning, bounded by what is safe on a half-migrated host:

- **skip-node** on a node not started yet: it is never touched. On the node in flight: honoured
  only while no destructive step has begun (safety, approval, drain, record): the child stops,
  uncordons what it cordoned and ends ``skipped``; once the host is being changed it is refused
  (abort instead, then decide). On a node that stopped (failed) and waits at its stop gate
  ``<node>/stopped/<attempt>``: before the destructive steps it is uncordoned; after them it
  is left as it is (cordoned, or DELETED and not registered again) and the record ConfigMap
  gets ``<node>.state`` saying so. Either way the migration goes on with the next node, whose
  safety gate still requires every replica set to keep all but one brick.
- **retry-node** on a node waiting at its stop gate (approving that gate is the same): a new
  child run for the node, given the previous row: its record (Node uid, boot_id, bootstrap
  config, packages) and its done steps. It repeats the step that stopped and never a finished
  one (those are the host changes, the reboot, the Node delete and the external commands that
  run once). A stop whose last run-once command has an unknown outcome is refused: resolve it
  at its unknown-outcome gate instead.

A node that fails stops the migration at the stop gate: approve = retry, reject (or its timeout)
= end the run ``failed``, skip-node = go on.

**hold** / **release** (the kit's holds, :mod:`workflows.kit.holds`) on a node not started yet:
the run goes on with the next node of the order that is not held, and the held one starts once
its hold ends; when only held nodes are left the run waits, saying so. The node being migrated
cannot be held (it is not started again; abort or skip-node stop it).
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import UncordonInput, UncordonResult
    from activities.runtime_migration.models import SaveRecordInput, SaveRecordResult
    from workflows.kit import calls as acts
    from workflows.kit.models import ControlResult, HoldInput, NodeControlInput, ReleaseInput
    from workflows.kit.noderun import NodeRunResult
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
    """The runtime's validators and messages over the kit's window hooks, the stop gate's text
    and the skip of a stopped node (the window's ``rollback``). Uses the workflow's ``_in``,
    ``_id``, ``_status``, ``batches``, ``control`` and ``touch``."""

    _in: Any
    _id: str
    _status: Any
    batches: Any
    control: Any
    touch: Any
    timeouts: Any
    #: node -> the skipped result of a node skipped after it stopped (:meth:`skip_stopped`)
    skipped_stopped: dict[str, NodeMigrationResult]

    def _row(self, input: NodeControlInput | HoldInput) -> NodeMigrationStatus:
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
        if input.node in self.batches.children and destructive_begun(row):
            raise ValueError(f"node {input.node} is past the destructive steps (at {row.step}): it cannot be skipped while it runs; "
                             "abort it, then skip-node leaves it cordoned with its record")
        if input.node not in self.batches.stop_gates and row.phase in ("done", "skipped"):
            raise ValueError(f"node {input.node} is already {row.phase}")
        super().check_skip_node(input)  # type: ignore[misc]

    def on_skip_node(self, input: NodeControlInput) -> ControlResult:
        node = input.node
        if node in self.batches.stop_gates:
            super().on_skip_node(input)  # type: ignore[misc]
            return ControlResult(message=f"node {node} will be skipped as it is (requested by {input.identity})")
        if node in self.batches.children:  # the child takes the comment too (the kit's request passes the identity only)
            handle = self.batches.children[node]
            self.batches.tasks.append(asyncio.ensure_future(self._skip_child(handle, input)))
            return ControlResult(message=f"node {node} will be skipped at its next safe point before the destructive steps "
                                         f"(requested by {input.identity})")
        super().on_skip_node(input)  # type: ignore[misc]
        row = self._status.nodes[node]
        row.phase, row.reason = "skipped", f"skipped by {input.identity} before it started" + (f": {input.comment}" if input.comment else "")
        self.touch()
        return ControlResult(message=f"node {node} will not be migrated (skipped by {input.identity})")

    async def _skip_child(self, handle: Any, input: NodeControlInput) -> None:
        try:
            await handle.signal("skip", args=[input.identity, input.comment])
        except Exception as err:  # noqa: BLE001 - a finished child needs no skip
            workflow.logger.warning("skip to %s failed: %s", handle.id, err)

    def check_retry_node(self, input: NodeControlInput) -> None:
        row = self._row(input)
        if input.node not in self.batches.stop_gates:
            raise ValueError(f"node {input.node} is {row.phase}; only a node that stopped and waits at its gate "
                             f"{input.node}/stopped/<attempt> can be retried")
        super().check_retry_node(input)  # type: ignore[misc]

    def on_retry_node(self, input: NodeControlInput) -> ControlResult:
        super().on_retry_node(input)  # type: ignore[misc]
        return ControlResult(message=f"node {input.node} will run again from its stopped step (requested by {input.identity})")

    def check_hold_node(self, input: HoldInput) -> None:
        row = self._row(input)
        if input.node == self._status.current:
            raise ValueError(f"node {input.node} is being migrated now: a hold only keeps a node from starting "
                             "(abort or skip-node stop it)")
        if row.phase != "pending":
            raise ValueError(f"node {input.node} is already {row.phase}: nothing to hold")
        super().check_hold_node(input)  # type: ignore[misc]

    def check_release_node(self, input: ReleaseInput) -> None:
        if input.node not in self._status.nodes:
            raise ValueError(f"node {input.node} is not part of this migration ({', '.join(self._in.nodes)})")
        super().check_release_node(input)  # type: ignore[misc]

    # --- the window's side ---------------------------------------------------------------------

    def stop_text(self, node: str, res: NodeRunResult, refusal: str | None) -> str:
        """The stop gate's text: where the node stopped, what retry, skip-node and reject do."""
        assert isinstance(res, NodeMigrationResult)
        row = res.status
        state = "cordoned" + (", DELETED and not registered again" if row.node_deleted else "")
        state = state if destructive_begun(row) else "untouched on the host (uncordoned on skip)"
        retry = (f"retry is refused ({refusal})" if refusal else
                 f"approve or `lockkeeper retry-node {self._id} {node}` runs it again from {row.step} (finished steps are not repeated)")
        return (f"node {node} stopped at {row.step}: {res.reason}. {retry}; `lockkeeper skip-node {self._id} {node}` leaves it "
                f"{state} and goes on with the next node; reject ends the migration")

    async def skip_stopped(self, node: str) -> None:
        """skip-node on a stopped node (the window's ``rollback``): uncordon it when its host was
        never changed; otherwise leave it and say so in the row and the record ConfigMap."""
        res = self.batches.results[node]
        req: NodeControlInput = self.batches.skip_request
        row = res.status.model_copy(deep=True)
        who = f"skipped by {req.identity}" + (f" ({req.comment})" if req.comment else "")
        if not destructive_begun(row):
            unc: UncordonResult = await acts.call(acts.UNCORDON_NODE, UncordonInput(node=node, owner=self._id), UncordonResult,
                                                  timeouts=self.timeouts)
            reason = f"{who} after it stopped at {row.step}, before the destructive steps" + ("; uncordoned" if unc.uncordoned else "")
        else:
            reason = (f"{who} after it stopped at {row.step}: left cordoned"
                      + (", DELETED and not registered again" if row.node_deleted else "")
                      + (f"; its record is in ConfigMap {row.record_configmap}" if row.record_configmap else ""))
            if row.record_configmap:
                ns, name = row.record_configmap.split("/", 1)
                await acts.call("save_node_record", SaveRecordInput(namespace=ns, name=name, data={f"{node}.state": reason},
                                labels={"lockkeeper.io/procedure": PROCEDURE_RUNTIME_MIGRATION}), SaveRecordResult,
                                timeouts=self.timeouts)
        row.phase, row.reason = "skipped", reason
        self._status.nodes[node] = row
        self.skipped_stopped[node] = NodeMigrationResult(node=node, outcome="skipped", reason=reason, status=row,
                                                         attempt=row.attempt, gate_history=res.gate_history)
        self.touch()
