"""RuntimeMigrationWorkflow: CRI-O → Docker on GlusterFS nodes, one node at a time (R4,
procedures-spec §6.3).

1. Preconditions as data (:meth:`RuntimeMigrationWorkflow._preconditions`, checked by the kit):
   the external commands' programs on the worker, the nodes exist with the GlusterFS label, SSH
   to each node and its host programs; a failed one refuses the start (outcome ``refused``, the
   CLI exits 2) before any lease or write; ``dry_run`` ends here (outcome ``dry-run``). Then the
   preflight, changing nothing: every GlusterFS brick online and heal clean; each node runs a
   Ready GlusterFS pod; SSH reaches every peer; package baselines (name and version) from nodes
   and peers. Any finding ends the run ``failed`` with the findings, before a single write.
2. Per node, in the given order, a child :class:`RuntimeMigrationNodeWorkflow` (steps 1-22)
   through the kit's node window (:class:`workflows.kit.batches.NodeBatches`, one group ``node``,
   one node at a time): the next node starts only after the previous one ended ``done`` (or
   ``skipped``). A node the operator holds (``lockkeeper hold``) is passed over until its hold
   ends; no node starts outside the maintenance windows. A node that failed holds the run at the
   window's stop gate ``<node>/stopped/<attempt>``: retry-node (or approve) runs it again from the
   step that stopped, skip-node goes on, reject ends the run; an aborted node ends it
   (node control below). With ``alerts``, the kit's alert gate (:mod:`workflows.kit.alerts`)
   comes first: no node starts while Prometheus names a blocking alert (``alerts/node/<node>``).
   The node is reported as it was left, e.g. deleted and not registered again, and its record is
   in ConfigMap ``<record_namespace>/lockkeeper-record-<id>``.
3. Post-check (:mod:`.postcheck`) over the migrated nodes, per node group: packages present
   before (or on the group's peers) but missing now, version differences (packages, kubelet,
   runtime), then a gated ``yum -y install`` of the missing ones; the outcome message says what
   was removed and what is installed again or still missing.

Node control (skip-node, retry-node and hold on the kit's node window with its stop gate): the
kit's meaning, bounded by what is safe on a half-migrated host:

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

A node's gates live in its child and are decided there (the kit's child report shows them here
with the child as their owner, and ``lockkeeper approve/reject/decide`` answers them on the child;
``decide GATE rerun|mark-done`` answers an unknown-outcome gate there, reject aborts);
``decide`` on a node answers a blocked drain (the kit's board routes it to the child); ``abort``
stops the node at its next safe point. Leases: ``node/<cluster>/<node>`` for every migrated node.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import SaveRecordResult, UncordonInput, UncordonResult
    from activities.gluster.models import GlusterPod, GlusterReadInput
    from activities.host.models import CommandResult
    from activities.preflight.models import HostExecutable, NamesExist, Precondition, RebootAccess, WorkerExecutable
    from activities.runtime_migration.models import ListNodesInput, NodeLabels, NodeObject, NodeObjectInput
    from workflows.kit import calls as acts
    from workflows.kit.batches import Group, NodeBatches, StopGate
    from workflows.kit.board import NodeBoard
    from workflows.kit.host import HostSteps
    from workflows.kit.models import (
        ChangedItem,
        ControlResult,
        GateState,
        HoldInput,
        NodeControlInput,
        NodePhase,
        ProcedurePhase,
        ProcedureStatus,
        ReleaseInput,
        failure_message,
    )
    from workflows.kit.noderun import NodeRunResult
    from workflows.kit.planning import abortable, planning_read
    from workflows.kit.procedure import NodeProcedureWorkflow, ProcedureWorkflow
    from workflows.kit.records import save_record_configmap
    from workflows.kit.report import ChildReport
    from workflows.kit.scopes import node_scope
    from workflows.runtime_migration import plan
    from workflows.runtime_migration.models import (
        PROCEDURE_RUNTIME_MIGRATION,
        NodeMigrationInput,
        NodeMigrationResult,
        NodeMigrationStatus,
        RuntimeMigrationInput,
        RuntimeMigrationResult,
        RuntimeMigrationStatus,
    )
    from workflows.kit.steprow import REPEATABLE
    from workflows.runtime_migration.node import BEFORE_DESTRUCTIVE, RuntimeMigrationNodeWorkflow, point_of_no_return
    from workflows.runtime_migration.postcheck import post_check, summary
    from workflows.shared.glusterfs import calls as gluster_calls
    from workflows.shared.glusterfs.assess import assess
    from workflows.shared.glusterfs.left import node_down_left
    from workflows.shared.glusterfs.models import Assessment

MASTER_LABEL = "node-role.kubernetes.io/master"
#: The programs the node's host steps run besides coreutils (``command -v`` on each node first).
HOST_PROGRAMS = ("systemctl", "rpm", "yum", "getent")


def child_id(parent: str, node: str) -> str:
    """Workflow ID of a node's child run."""
    return f"{parent}/node/{node}"


def retry_refusal(row: NodeMigrationStatus) -> str | None:
    """Why a retry of this stopped node is not safe (None: it is)."""
    lc = row.last_command
    if lc is not None and lc.tail.startswith("outcome unknown"):
        return (f"the outcome of {' '.join(lc.argv)} ({lc.step}) is unknown; check by hand and answer its unknown-outcome gate "
                "instead of repeating it")
    return None


@workflow.defn
class RuntimeMigrationWorkflow(NodeProcedureWorkflow):
    """Input :class:`RuntimeMigrationInput`, result :class:`RuntimeMigrationResult`, status
    :class:`RuntimeMigrationStatus` (see the module doc)."""

    @workflow.init
    def __init__(self, input: RuntimeMigrationInput) -> None:
        self._in = input
        self._id = workflow.info().workflow_id
        self._status = RuntimeMigrationStatus(nodes={n: NodeMigrationStatus(node=n) for n in input.nodes})
        #: The Nodes the preflight read (for the node order).
        self._read: dict[str, NodeObject] = {}
        #: From the preflight (issue 39's left_changed): the GlusterFS brick hosts per volume and
        #: each node's GlusterFS pods; rebuilt on replay from the same reads, no command of its own.
        self._brick_hosts: dict[str, set[str]] = {}
        self._gluster_pods: dict[str, list[str]] = {}
        #: The last GlusterFS read before an ending that names GlusterFS (None: not read, or failed).
        self._gluster_last: Assessment | None = None
        #: The preflight's findings (the result's ``preflight``).
        self._findings: list[str] = []
        self.kit_init(procedure=PROCEDURE_RUNTIME_MIGRATION, noun="runtime migration", input=input, status=self._status,
                      pause_on_reject=False, reject_note="the node's migration stops there", preflight=True)
        self.host = HostSteps(self.gates, timeouts=self.timeouts, heartbeat_seconds=input.calls.heartbeat_seconds)
        # The kit's window over the nodes: its board rows (phase, blocked drain, attempt) stay
        # out of the status, whose rows are the children's own (NodeMigrationStatus); the
        # children's drain decisions and warnings are in their results and rows, not the board's.
        self.board = NodeBoard(procedure=PROCEDURE_RUNTIME_MIGRATION, cluster=input.cluster, nodes={}, gate_history=[],
                               warnings=[], on_change=self.touch, noun="runtime migration")
        self.batches = NodeBatches(
            board=self.board, control=self.control, gates=self.gates, start_child=self._start_child, rollback=self._uncordon_stopped,
            leave=self._leave_stopped,
            result_type=NodeMigrationResult, gate_timeout_seconds=input.gates.timeout_seconds,
            on_node_finished=self._node_finished, alerts=self.alerts,
            stop_gate=StopGate(text=self.stop_text, refusal=lambda node, res: retry_refusal(res.status)),  # type: ignore[attr-defined]
        )
        self.skipped_stopped: dict[str, NodeMigrationResult] = {}
        #: The nodes in the order they ended (the result's order).
        self._ended: list[str] = []
        self.kit_windows(input.windows)
        # On the board from the start, so skip-node and hold reach a node during the preflight;
        # the preflight's reads give the order (:meth:`_run`).
        self.batches.add_group("node", max_unavailable=1, nodes=input.nodes)

    # --- status ----------------------------------------------------------------------------------

    def procedure_status(self) -> ProcedureStatus:
        st = super().procedure_status()
        assert isinstance(st, RuntimeMigrationStatus)
        # A node's gates are shown as this run's, as the README has them (`approve ID GATE`):
        # the CLI finds their owner in the node's row and answers them there.
        owner = next((g.workflow_id for g in st.gates if g.state == GateState.WAITING), None)
        if owner and st.waiting_for:
            st.waiting_for = st.waiting_for.replace(f" on {owner}", "", 1)
        st.gates = [g.model_copy(update={"workflow_id": None}) for g in st.gates]
        for node, ns in self.board.nodes.items():
            row = st.nodes.get(node)
            if row is not None and ns.phase == NodePhase.BLOCKED and row.step == "drain":
                row.waiting_for = (f"blocked drain ({ns.reason}); lockkeeper decide {self._id} {node} wait|skip|delete-pod|abort")
                if ns.decision_gate is not None:
                    st.gates.append(ns.decision_gate.model_copy())
        cur = st.nodes.get(st.current or "")
        if cur is not None and not st.waiting_for and cur.waiting_for:
            st.waiting_for, st.since, st.deadline = f"node {cur.node}: {cur.step} ({cur.waiting_for})", cur.since, cur.deadline
        return st

    def kit_node_waiting(self, s: ProcedureStatus) -> None:
        """None: :meth:`procedure_status` says what the node being migrated waits for from its
        row (its step, and a blocked drain's decide command), which the kit's summary lacks."""
        return None

    # --- node control (see the module doc) -----------------------------------------------------

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
        if input.node not in self.batches.stop_gates and row.phase in ("done", "skipped"):
            raise ValueError(f"node {input.node} is already {row.phase}")
        super().check_skip_node(input)

    def on_skip_node(self, input: NodeControlInput) -> ControlResult:
        node = input.node
        if node in self.batches.stop_gates:
            super().on_skip_node(input)
            return ControlResult(message=f"node {node} will be skipped as it is (requested by {input.identity})")
        if node in self.batches.children:  # the child takes the comment too (the kit's request passes the identity only)
            handle = self.batches.children[node]
            self.batches.tasks.append(asyncio.ensure_future(self._skip_child(handle, input)))
            return ControlResult(message=f"node {node} will be skipped at its next safe point before the destructive steps "
                                         f"(requested by {input.identity})")
        super().on_skip_node(input)
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
        super().check_retry_node(input)

    def on_retry_node(self, input: NodeControlInput) -> ControlResult:
        super().on_retry_node(input)
        return ControlResult(message=f"node {input.node} will run again from its stopped step (requested by {input.identity})")

    def check_hold_node(self, input: HoldInput) -> None:
        row = self._row(input)
        if input.node == self._status.current:
            raise ValueError(f"node {input.node} is being migrated now: a hold only keeps a node from starting "
                             "(abort or skip-node stop it)")
        if row.phase != "pending":
            raise ValueError(f"node {input.node} is already {row.phase}: nothing to hold")
        super().check_hold_node(input)

    def check_release_node(self, input: ReleaseInput) -> None:
        if input.node not in self._status.nodes:
            raise ValueError(f"node {input.node} is not part of this migration ({', '.join(self._in.nodes)})")
        super().check_release_node(input)

    # --- the window's hooks: the stop gate's text, the skip of a stopped node ---------------------------------------------------------------------

    def stop_text(self, node: str, res: NodeRunResult, refusal: str | None) -> str:
        """The stop gate's text: where the node stopped, what retry, skip-node and reject do."""
        assert isinstance(res, NodeMigrationResult)
        row = res.status
        state = "cordoned" + (", DELETED and not registered again" if row.node_deleted else "")
        state = state if res.past_no_return else "untouched on the host (uncordoned on skip)"
        retry = (f"retry is refused ({refusal})" if refusal else
                 f"approve or `lockkeeper retry-node {self._id} {node}` runs it again from {row.step} (finished steps are not repeated)")
        return (f"node {node} stopped at {row.step}: {res.reason}. {retry}; `lockkeeper skip-node {self._id} {node}` leaves it "
                f"{state} and goes on with the next node; reject ends the migration")

    def _skip_reason(self, node: str, what: str) -> str:
        """The skipped stopped node's reason: who skipped it (the window's request), where it stopped, ``what``."""
        req: NodeControlInput = self.batches.skip_request
        return (f"skipped by {req.identity}" + (f" ({req.comment})" if req.comment else "")
                + f" after it stopped at {self.batches.results[node].status.step}{what}")  # type: ignore[attr-defined]

    async def _uncordon_stopped(self, node: str) -> None:
        """skip-node on a node that stopped before its point of no return (the window's
        ``rollback``): its host was never changed; uncordon it if we cordoned it."""
        unc: UncordonResult = await acts.call(acts.UNCORDON_NODE, UncordonInput(node=node, owner=self._id), UncordonResult,
                                              timeouts=self.timeouts)
        self._skipped(node, self._skip_reason(node, ", before the destructive steps" + ("; uncordoned" if unc.uncordoned else "")))

    async def _leave_stopped(self, node: str) -> None:
        """skip-node on a node that stopped past its point of no return (the window's ``leave``):
        it stays as it is, and the row and the record ConfigMap (``<node>.state``) say so."""
        row: NodeMigrationStatus = self.batches.results[node].status  # type: ignore[attr-defined]
        reason = self._skip_reason(node, ": left cordoned" + (", DELETED and not registered again" if row.node_deleted else "")
                                   + (f"; its record is in ConfigMap {row.record_configmap}" if row.record_configmap else ""))
        if row.record_configmap:
            await save_record_configmap("save_node_record", SaveRecordResult, namespace=row.record_configmap.split("/", 1)[0],
                                        workflow_id=self._id, procedure=PROCEDURE_RUNTIME_MIGRATION,
                                        data={f"{node}.state": reason}, timeouts=self.timeouts)
        self._skipped(node, reason)

    def _skipped(self, node: str, reason: str) -> None:
        """The stopped node ends skipped: its row (a copy of its last) and its result say ``reason``."""
        res = self.batches.results[node]
        assert isinstance(res, NodeMigrationResult)
        row = self._status.nodes[node] = res.status.model_copy(update={"phase": "skipped", "reason": reason}, deep=True)
        self.skipped_stopped[node] = NodeMigrationResult(node=node, outcome="skipped", reason=reason, status=row,
                                                         attempt=row.attempt, gate_history=res.gate_history)
        self.touch()

    # --- child links -------------------------------------------------------------------------------

    def on_child_report(self, report: ChildReport) -> None:
        """A node's row from its child (kept newest-first by the kit's inbox); the child's
        waiting gates are shown from the inbox, owned by the child."""
        if report.detail is not None:
            row = NodeMigrationStatus.model_validate(report.detail)
            self._status.nodes[row.node] = row
            if row.node in self.board.nodes:  # the window refuses a skip past it (``past_no_return``)
                self.board.nodes[row.node].past_no_return = point_of_no_return(row)

    def kit_left_changed(self) -> list[ChangedItem]:
        """The records' changes only: the nodes this run left changed are :meth:`_left_changed`'s."""
        return ProcedureWorkflow.kit_left_changed(self)

    async def _start_child(self, node: str, group: Group, attempt: int) -> workflow.ChildWorkflowHandle:
        """The window's hook: the node's child; a retry is given the previous row (its record and
        done steps) and reuses the ID (the previous run closed: signals still reach it)."""
        prev = self.batches.results.get(node)
        self._reached(node)
        self._status.current = node
        self.touch()
        return await workflow.start_child_workflow(
            RuntimeMigrationNodeWorkflow.run,
            NodeMigrationInput(run=self._in, node=node, parent_id=self._id, index=self._status.order.index(node),
                               previous=prev.status if isinstance(prev, NodeMigrationResult) else None),
            id=child_id(self._id, node), result_type=NodeMigrationResult,
            static_summary=f"node {node} · runtime migration to {self._in.target_runtime}",
        )

    def _node_finished(self, node: str) -> None:
        """The window's hook: a child ended. Its row is its final one; its gates ended with it (a
        retry counts afresh); an aborted node ends the run."""
        res = self.batches.results[node]
        assert isinstance(res, NodeMigrationResult)
        self.inbox.latest.pop(child_id(self._id, node), None)
        self._status.nodes[node] = res.status
        if node in self._ended:
            self._ended.remove(node)
        self._ended.append(node)
        self._status.current = None
        if res.outcome == "aborted" and not self.control.abort:
            self.batches.stopped = node

    def _reached(self, node: str | None) -> None:
        """The nodes skipped before they started end where the order reaches them: before
        ``node`` (None: at the end)."""
        order = self._status.order
        for n in order[: order.index(node) if node is not None else None]:
            if n not in self._ended and n not in self.batches.results and self.board.nodes[n].phase == NodePhase.SKIPPED:
                self._ended.append(n)

    # --- helpers -----------------------------------------------------------------------------------

    async def _host(self, node: str, argv: list[str]) -> CommandResult | None:
        """An idempotent command on a node or peer (the kit's host steps); None when the host
        stays unreachable."""
        try:
            return await self.host.command(argv, self._in.host_access[node], timeout_seconds=120, retry=REPEATABLE)
        except ActivityError as err:
            workflow.logger.warning("%s on %s: %s", argv[0], node, failure_message(err))
            return None

    async def _packages(self, nodes: list[str]) -> tuple[dict[str, dict[str, str]], list[str]]:
        """name → version per node (``rpm -qa``), and the nodes that did not answer."""
        out: dict[str, dict[str, str]] = {}
        bad: list[str] = []
        for n in nodes:
            r = await self._host(n, plan.RPM_QA)
            if r is None or not r.ok:
                bad.append(f"{n}: rpm -qa failed ({r.summary() if r else 'unreachable'})")
            else:
                out[n] = plan.parse_rpm_qa(r.stdout)
        return out, bad

    def _phase(self, phase: ProcedurePhase, stage: str) -> None:
        self.control.base_phase = phase
        self._status.stage = stage  # type: ignore[assignment]
        self.touch()

    # --- preflight -------------------------------------------------------------------------------

    async def _preflight(self) -> tuple[list[str], dict[str, dict[str, str]]]:
        """Checks that change nothing; returns (findings, package baselines). Raises Aborted on an
        abort while a read of the cluster or a host check runs (:mod:`workflows.kit.planning`)."""
        inp, t = self._in, self.timeouts
        found: list[str] = []
        pods: list[GlusterPod] | None = None  # every GlusterFS pod, as the read saw them
        self._doing("preflight", "GlusterFS: every brick online, heal clean")
        try:
            report = await gluster_calls.read_planning(self.control, GlusterReadInput(target=inp.gluster.target()), inp.calls.short_call_seconds)
            a, pods = assess(report, "per-replica-set"), report.pods
            found += [f"GlusterFS: {x}" for x in a.fatal]
            self._brick_hosts = {v.name: {b.host for b in v.bricks} for v in a.volumes}
            found += [f"GlusterFS brick offline: {b}" for b in a.offline]
            found += [f"GlusterFS heal {v.name}: {p}" for v in a.volumes for p in v.heal_problems]
            found += [f"GlusterFS peer {p} disconnected" for p in a.disconnected_peers]
        except ActivityError as err:
            found.append(f"GlusterFS could not be read: {failure_message(err)}")
        key, value = inp.gluster.label_pair()
        self._doing("preflight", "each node: GlusterFS label and a Ready GlusterFS pod")
        for n in inp.nodes:
            # An API that cannot be used fails the migration here (issue 18): nothing was changed.
            obj = await planning_read(self.control, "read_node_object", NodeObjectInput(node=n), NodeObject, timeouts=t)
            self._read[n] = obj
            if not obj.exists or obj.labels.get(key) != value:  # the preconditions saw it; it changed since
                found.append(f"node {n} does not exist or lacks the GlusterFS label {key}={value}")
                continue
            self._gluster_pods[n] = [p.name for p in pods or [] if p.node == n]
            if pods is not None and not any(p.healthy for p in pods if p.node == n):
                found.append(f"node {n} runs no Ready GlusterFS pod")
        peers = inp.peers
        if peers is None:
            labels: NodeLabels = await abortable(self.control, acts.call("list_node_labels", ListNodesInput(), NodeLabels, timeouts=t))
            peers = sorted(n for n in inp.host_access if n not in inp.nodes and n in labels.nodes and MASTER_LABEL not in labels.nodes[n])
        self._status.peers = list(peers)
        self._doing("preflight", "SSH to every peer")
        for n in peers:
            r = await abortable(self.control, self._host(n, ["hostname"]))
            if r is None or not r.ok:
                found.append(f"SSH to {n} ({inp.host_access[n].describe()}) failed")
        self._doing("preflight", "package baselines (rpm -qa) of nodes and peers")
        baseline, bad = await self._packages([*inp.nodes, *peers]) if not found else ({}, [])
        self._doing("preflight", None)
        return found + bad, baseline

    def _doing(self, stage: str, what: str | None) -> None:
        """Show what ``stage`` (the preflight, the post-check) does now in ``status``
        (``waiting_for`` ``<stage>: <what>``; None: nothing any more)."""
        self._status.waiting_for = f"{stage}: {what}" if what else None
        self._status.since = workflow.now() if what else None
        self.touch()

    # --- run ---------------------------------------------------------------------------------------

    async def kit_settle(self) -> None:
        """An ending the run template builds (an abort during the preflight, a refusal): the
        signals in flight settle, and the stage says the run is over."""
        await self.batches.settle()
        self._status.waiting_for = self._status.since = None
        self._status.stage = "failed"  # type: ignore[assignment]

    def kit_result_fields(self) -> dict[str, Any]:
        """Every ending's own fields: the post-check findings, the packages installed and the
        preflight's findings."""
        return {"findings": list(self._status.findings), "installed": dict(self._status.installed),
                "preflight": list(self._findings)}

    async def _read_gluster_last(self, nodes: list[NodeMigrationResult]) -> None:
        """Before an ending that names GlusterFS (a node past a destructive step, its bricks not
        seen online): read GlusterFS once more (the planning read's retry: a failed read keeps
        the preflight's view, everything named), so that what is named is what is still down."""
        if not any(r.outcome not in ("done", "skipped") and "bricks-online" not in r.status.done_steps
                   and any(s not in BEFORE_DESTRUCTIVE for s in r.status.done_steps) for r in nodes):
            return
        try:
            self._gluster_last = assess(await gluster_calls.read(GlusterReadInput(target=self._in.gluster.target()),
                                                                 self._in.calls.short_call_seconds, planning=True), "per-replica-set")
        except ActivityError:
            self._gluster_last = None

    def _left_changed(self, nodes: list[NodeMigrationResult]) -> list[ChangedItem]:
        """What a migration that did not complete leaves changed (issue 39), per node not done,
        named as the simulator's diff names it: ``Node NAME`` cordoned by this run (once its
        drain began, unless an abort before the destructive steps uncordoned it; ``kubectl
        uncordon NAME`` while no destructive step ran) or deleted and not
        registered again; ``host NAME`` once a destructive step finished (runtime stopped,
        packages removed, /etc/origin wiped ...: the record ConfigMap holds what it was), and
        until its bricks are online again its GlusterFS DaemonSet and volumes
        (:func:`workflows.shared.glusterfs.left.node_down_left`, as the last read saw them); and what the external steps created
        (``created``: the node-group ConfigMaps, their Namespace, with ``oc delete``). A
        destructive step that failed part way, with no destructive step finished, is not named
        (its row's ``reason`` says where it stopped)."""
        items: list[ChangedItem] = []
        for r in nodes:
            st = r.status
            items += [i for i in st.created if i.target not in {j.target for j in items}]
            if r.outcome in ("done", "skipped") and not st.node_deleted:
                continue
            steps = {*st.done_steps, *([st.step] if st.step else [])}
            destructive = [s for s in st.done_steps if s not in BEFORE_DESTRUCTIVE]
            record = f" (record: ConfigMap {st.record_configmap})" if st.record_configmap else ""
            if st.node_deleted:
                items.append(ChangedItem(target=f"Node {r.node}", what="deleted and not registered again" + record))
            elif "drain" in steps and not st.uncordoned:
                items.append(ChangedItem(target=f"Node {r.node}", what="cordoned by this run (spec.unschedulable)",
                                         undo=None if destructive else f"kubectl uncordon {r.node}"))
            if destructive:
                items.append(ChangedItem(target=f"host {r.node}", what=f"left at {st.step or destructive[-1]} after "
                                         f"{', '.join(destructive)}" + record))
                if "bricks-online" not in st.done_steps:
                    obj = self._read.get(r.node)
                    # Before its scale-up registered the node again its runtime is stopped or gone.
                    items += node_down_left(r.node, obj.addresses if obj is not None else [], namespace=self._in.gluster.namespace,
                                            pods=self._gluster_pods.get(r.node, []), brick_hosts=self._brick_hosts,
                                            last=self._gluster_last, pod_ready_counts="wait-registered" in st.done_steps)
        return items

    def _result(self, outcome: str, message: str, nodes: list[NodeMigrationResult]) -> RuntimeMigrationResult:
        left = self._left_changed(nodes) if outcome != "completed" else []
        if left:
            self._status.left_changed = left
            message += "; left changed: " + "; ".join(i.line() for i in left)
        return self.kit_end(
            RuntimeMigrationResult, outcome, message, left_changed=left, next_commands=list(dict.fromkeys(i.undo for i in left if i.undo)),
            nodes=nodes, removed={n.node: list(n.status.removed) for n in nodes if n.status.removed},
            gate_history=sorted([*self._status.gate_history, *(r for n in nodes for r in n.gate_history)], key=lambda r: r.at),
        )

    @workflow.run
    async def run(self, input: RuntimeMigrationInput) -> RuntimeMigrationResult:
        self.kit_status_attributes()
        return await self.kit_run(lambda: self._run(input), RuntimeMigrationResult)

    def _preconditions(self, inp: RuntimeMigrationInput) -> list[Precondition]:
        """What the migration needs before it writes (issue 39), checked by the kit
        (:meth:`kit_preflight`): each external command's program on the worker, the ``--node``
        names as Nodes with the GlusterFS label, and per node SSH access (its host steps and its
        reboot) and the host programs of :data:`HOST_PROGRAMS` (``command -v`` over that SSH)."""
        steps = (inp.inventory_step, inp.node_group_step, inp.scaleup_step, inp.inventory_restore_step)
        pre: list[Precondition] = [WorkerExecutable(program=p, why="an external command of each node's migration runs it")
                                   for p in sorted({s.argv[0] for s in steps if s})]
        pre.append(NamesExist(names=list(inp.nodes), label=inp.gluster.node_label, why="--node: the GlusterFS nodes to migrate"))
        for n in inp.nodes:
            pre.append(RebootAccess(node=n, access=inp.host_access[n], why="its host steps and its reboot run over SSH"))
            pre += [HostExecutable(program=p, node=n, access=inp.host_access[n], why="a host step of its migration runs it")
                    for p in HOST_PROGRAMS]
        return pre

    async def _run(self, input: RuntimeMigrationInput) -> RuntimeMigrationResult:
        """The migration; an abort during the read-only preflight, a failure or a refusal ends
        through the kit's run template (:meth:`kit_run`). The preconditions come first (a failed
        one refuses the start before any lease or write; a dry run ends here with every result)."""
        checked = await self.kit_preflight(self._preconditions(input), refuse=not input.dry_run)
        if input.dry_run:
            self._phase(ProcedurePhase.DONE, "done")
            return self.kit_end(RuntimeMigrationResult, "dry-run", "; ".join(f"precondition {line}" for line in checked.lines()),
                                problems=checked.problems)
        await self.leases.acquire([node_scope(input.cluster, n) for n in input.nodes])
        self._status.leases = list(self.leases.held)
        self._phase(ProcedurePhase.RUNNING, "preflight")
        findings, baseline = await self._preflight()
        self._findings = findings
        if findings:
            self._phase(ProcedurePhase.FAILED, "failed")
            return self._result("failed", "preflight: " + "; ".join(findings) + " (nothing was changed)", [])
        name, order = plan.migration_order(input.nodes, input.node_order, self._read)
        self._status.node_order, self._status.order = name, order
        self._status.nodes = {n: self._status.nodes[n] for n in order}
        self._phase(ProcedurePhase.RUNNING, "nodes")
        group = self.batches.groups["node"]
        group.nodes, group.queue = list(order), [n for n in order if n in group.queue]
        await self.batches.run_group("node")
        self._status.current = None
        self._reached(None)
        results = [r for r in map(self._final, self._ended) if r is not None]
        done = len(results) == len(input.nodes) and all(r.outcome in ("done", "skipped") for r in results)
        if not done:
            last = self._final(self.batches.stopped) if self.batches.stopped else (results[-1] if results else None)
            aborted = self.control.abort or (last is not None and last.outcome == "aborted")
            self._phase(ProcedurePhase.ABORTED if aborted else ProcedurePhase.FAILED, "failed")
            await self.batches.settle()
            await self._read_gluster_last(results)
            return self._result("aborted" if aborted else "failed",
                                (last.reason if last else "aborted before the first node") or "stopped", results)
        migrated = [r.node for r in results if r.outcome == "done"]
        self._phase(ProcedurePhase.RUNNING, "post-check")
        if migrated:
            await post_check(self, baseline, migrated)
        self._phase(ProcedurePhase.DONE, "done")
        await self.batches.settle()
        return self._result("completed", self._message(input, results), results)

    def _final(self, node: str) -> NodeMigrationResult | None:
        """How ``node`` ended (None: it never started): skipped after it stopped, skipped before
        it started, or its last child's result."""
        if node in self.skipped_stopped:
            return self.skipped_stopped[node]
        res = self.batches.results.get(node)
        if isinstance(res, NodeMigrationResult):
            return res
        row = self._status.nodes[node]
        if self.board.nodes[node].phase == NodePhase.SKIPPED:
            return NodeMigrationResult(node=node, outcome="skipped", reason=row.reason, status=row.model_copy(deep=True))
        return None

    def _message(self, input: RuntimeMigrationInput, results: list[NodeMigrationResult]) -> str:
        """The outcome in words, true to the end state: migrated and skipped nodes, what was
        removed, and the post-check (installed again / still missing / version differences)."""
        done = [r for r in results if r.outcome == "done"]
        msg = f"{len(done)} nodes migrated to {input.target_runtime}"
        skipped = [r.node for r in results if r.outcome == "skipped"]
        if skipped:
            msg += f"; skipped: {', '.join(skipped)}"
        removed = {tuple(r.status.removed) for r in done if r.status.removed}
        if len(removed) == 1:
            msg += f"; removed on each: {', '.join(next(iter(removed)))}"
        elif removed:
            msg += "; removed: " + "; ".join(f"{r.node}: {', '.join(r.status.removed)}" for r in done if r.status.removed)
        post = summary(self._status.findings)
        return msg + (f"; post-check: {post}" if post else "")
