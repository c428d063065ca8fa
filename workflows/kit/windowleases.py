"""The leases of a window procedure (:class:`WindowLeases`): its groups for the whole run, its
nodes up front or each while it is in the node window, a degraded node's lease kept to the end,
and all of it taken again after a continue-as-new. Built on :class:`workflows.kit.lease.Leases`
and :class:`workflows.kit.batches.NodeBatches`; workflow code only."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.exceptions import WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from workflows.kit import calls as acts
    from workflows.kit.lease import Leases
    from workflows.kit.models import FINAL_NODE_PHASES, NodePhase
    from workflows.kit.scopes import node_scope, scope_workflow_id

if TYPE_CHECKING:
    from workflows.kit.batches import NodeBatches, WindowCarry


#: How often :class:`WindowLeases` asks again for a degraded node's lease still held by the node
#: run's own lease while it closes (a second apart).
KEEP_LEASE_TRIES = 10

#: Node phases whose lease a window procedure keeps until it ends (it may still roll the node back).
KEEP_LEASE_PHASES = frozenset({NodePhase.DEGRADED, NodePhase.FAILED})


class WindowLeases:
    """The leases of a procedure whose nodes go through the node window
    (:class:`workflows.kit.batches.NodeBatches`) as node-run children: its groups (pools) for the
    whole run, and its nodes either all up front or, above ``window_above`` nodes, each only while
    it is in the window.

    Up front: the groups and every planned node are leased at the start (all started in one
    workflow task), so no other procedure can take one of them mid-run. In the window: the groups
    are leased and the nodes' scopes probed with one ``find_held_leases`` activity (Temporal caps
    a workflow's pending children at 2,000: one lease per node up front failed a 2,000-node
    start); each node run is then its node's lease (started with the lease's workflow ID,
    answering ``contend`` and ``holder``: :class:`workflows.kit.noderun.NodeRunWorkflow`
    ``lease_info``), so the procedure's history records no lease per node; a node that ends
    degraded or failed is leased again by the procedure, which keeps it until the end (a skip may
    still roll it back). After a continue-as-new the next run takes again the groups and the nodes
    it still needs (:meth:`Leases.retake`); between the two runs the scopes are free for an
    instant: a procedure that takes one then makes the next run fail with LeaseHeld, never share
    the scope.

    ``touch``: the procedure's status refresh (after a node's warning). Workflow code only."""

    def __init__(self, leases: Leases, batches: NodeBatches, *, cluster: str, window_above: int,
                 timeouts: acts.Timeouts, touch: Callable[[], None]) -> None:
        self.leases, self.batches, self.cluster = leases, batches, cluster
        self.window_above, self.timeouts, self.touch = window_above, timeouts, touch
        #: Node runs lease their own nodes (more than ``window_above`` nodes).
        self.in_window = False

    async def take(self, groups: dict[str, str], nodes: list[str], carry: WindowCarry | None = None) -> None:
        """Lease every group scope (``groups``: scope -> its ``LeaseInput.scope`` text) and, in the
        window, probe the ``nodes``' scopes (one ``find_held_leases`` call), else lease every node
        (all started at once); probe the cluster-wide lease. After a continue-as-new (``carry``)
        take again the groups and the nodes not final yet (in the window: those the procedure may
        still roll back), before anything starts. A scope held by another procedure fails us with
        LeaseHeld naming it."""
        scopes = {n: node_scope(self.cluster, n) for n in nodes}
        self.in_window = len(nodes) > self.window_above
        if carry is not None:
            def wanted(phase: NodePhase) -> bool:
                return phase in KEEP_LEASE_PHASES if self.in_window else phase not in FINAL_NODE_PHASES
            keep = [scope for n, scope in scopes.items() if n in carry.nodes and wanted(carry.nodes[n].phase)]
            await self.leases.retake([*groups, *keep], input_scope=groups)
        elif self.in_window:
            await self.leases.acquire(list(groups), input_scope=groups, probe_cluster=True, concurrent=True)
            await self.leases.probe_by_activity(list(scopes.values()), timeouts=self.timeouts)
        else:
            await self.leases.acquire([*groups, *scopes.values()], input_scope=groups, probe_cluster=True, concurrent=True)

    def scope_for_run(self, node: str) -> str | None:
        """The scope the node run leases itself: None when the procedure leases its nodes up front
        or holds this one already (kept from a degraded or failed attempt that is now retried)."""
        scope = node_scope(self.cluster, node)
        return scope if self.in_window and scope not in self.leases.held else None

    async def start_run(self, run: Any, child_input: Any, run_id: str, summary: str) -> workflow.ChildWorkflowHandle:
        """Start the node run ``run`` (a workflow's run method) with ``child_input`` and ID
        ``run_id``, or with its node's lease ID when ``child_input.lease_scope``. Raises the
        LeaseHeld refusal naming the holder (asked with ``contend``) when that lease ID runs."""
        lease = child_input.lease_scope
        try:
            return await workflow.start_child_workflow(
                run, child_input, id=scope_workflow_id(lease) if lease else run_id,
                parent_close_policy=workflow.ParentClosePolicy.TERMINATE, static_summary=summary,
            )
        except WorkflowAlreadyStartedError as err:
            if not lease:
                raise
            raise await self.leases.refusal(lease) from err

    def node_finished(self, node: str) -> None:
        """The window's ``on_node_finished``: release the node's lease (not for a degraded or
        failed node, which a skip may still roll back) without holding the window up. In the
        window, take a degraded or failed node's lease instead (its run's lease ended)."""
        scope = node_scope(self.cluster, node)
        keep = self.batches.nodes[node].phase in KEEP_LEASE_PHASES
        if self.in_window and keep and scope not in self.leases.held:
            self.batches.tasks.append(asyncio.create_task(self._keep_node_lease(node, scope)))
        elif self.in_window and scope in self.leases.held and not keep:
            self.batches.tasks.append(asyncio.create_task(self.leases.release_scope(scope)))

    async def _keep_node_lease(self, node: str, scope: str) -> None:
        """Lease a degraded/failed node whose run's lease just ended. Refused while the run's
        lease still closes: try again a second later, :data:`KEEP_LEASE_TRIES` times, and only
        then ask who holds it (asking a closing lease may go unanswered). Held by another
        procedure (it took the node in that instant): the node's status warns, naming it, that
        a skip's rollback is no longer protected."""
        for _ in range(KEEP_LEASE_TRIES):
            if not await self.leases.acquire_some([scope]):
                return
            await workflow.sleep(timedelta(seconds=1))
        err = await self.leases.refusal(scope)
        holder = str(err.details[0]) if err.details else ""
        warning = ("node lease not retaken: the node run's lease did not close" if holder == self.leases.holder
                   else f"node lease lost after the node run ended: {err.message}")
        self.batches.nodes[node].warning = warning
        self.touch()
