"""The MachineConfig rollout's leases (:mod:`workflows.kit.lease`): its pools for the whole run,
and its nodes either all up front or, for a large plan, each only while it is in the node window.

A mixin of :class:`workflows.machineconfig.workflow.MachineConfigRolloutWorkflow` (it uses the
rollout's ``_in``, ``_id``, ``leases``, ``batches``, ``_status``, ``_leases_concurrent`` and
``_window_leases``, ``_node_run_leases``, ``_node_run_is_lease``). Workflow code only
(deterministic).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from workflows.kit.batches import Group
    from workflows.kit.models import NodePhase
    from workflows.kit.scopes import node_scope, pool_scope, scope_workflow_id
    from workflows.machineconfig.handover import RolloutCarry, lease_scopes_to_retake, retake_leases
    from workflows.machineconfig.models import MachineConfigRolloutInput, NodeRolloutInput, RolloutPlan
    from workflows.kit.starts import PATCH_START_TOGETHER
    from workflows.machineconfig.node import LEASE_REFUSED, NodeRolloutWorkflow

#: ``workflow.patched`` id: the rollout leases the node scopes of its plan as well as its pools,
#: and probes the cluster-wide lease (runs recorded before took pool leases only).
PATCH_LEASE_SCOPES = "lease-scopes"


#: ``workflow.patched`` id: a plan of more than ``window_node_leases_above`` nodes leases its pools
#: for the whole run and a node only from just before its child starts (with the next
#: maxUnavailable of its queue) until it is done; planned nodes are probed at the start. Up front,
#: one lease per planned node passed Temporal's cap on a workflow's pending children (2,000 by
#: default: the start of a 2,000-node rollout failed with PendingChildWorkflowsLimitExceeded).
#: (``node-leases-in-window``, its first version for every plan, never reached a stored history.)
PATCH_WINDOW_LEASES = "node-leases-in-window-large"

#: ``workflow.patched`` id: the probe of a large plan's node leases sends at most
#: :data:`PROBE_CHUNK` ``contend`` signals per workflow task (all at once, 2,000 nodes made the
#: rollout's largest task, about 1 s; 5,000 would make 2.5 s).
PATCH_PROBE_CHUNKS = "lease-probe-in-chunks"
PROBE_CHUNK = 250

#: ``workflow.patched`` id: the probe of a large plan's node leases is one ``find_held_leases``
#: activity (:meth:`workflows.kit.lease.Leases.probe_by_activity`) instead of a ``contend``
#: signal per node, which cost the rollout's history two events per node (initiated, then failed
#: for a lease that does not run): 2 of the 10.2 parent events per node at 100 nodes.
PATCH_PROBE_BY_ACTIVITY = "lease-probe-by-activity"

#: ``workflow.patched`` id: in a large plan (leases in the window) each node run takes its node's
#: lease itself, as its own child, for as long as it runs (:meth:`workflows.kit.lease.Leases.hold_while_running`):
#: the rollout's history then records no lease start, release or completion per node (5 events
#: and 3 workflow-task triggers per node before). A node that ends degraded or failed is leased
#: again by the rollout, which keeps it until the end as before.
PATCH_NODE_RUN_LEASES = "node-run-holds-node-lease"

#: ``workflow.patched`` id: under :data:`PATCH_NODE_RUN_LEASES`, a node run the rollout starts
#: with its node's lease ID (``lease/<cluster>/node:<node>``) is that lease
#: (:class:`workflows.kit.noderun.NodeRunWorkflow` ``lease_info``), instead of starting a lease
#: workflow as its child: that cost the server a workflow start, a workflow task and a
#: termination per node (600 nodes at time scale 0.1: 12 node completions/s with them, 15.5
#: without). A start refused because the ID runs is the node held: the rollout asks the holder
#: (``contend``) and the window fails the node untouched, naming it.
PATCH_NODE_RUN_IS_LEASE = "node-run-is-node-lease"

#: ``workflow.patched`` id: the rollout retakes a degraded node's lease by trying again a second
#: apart, and asks who holds it only after the last try (see ``_keep_node_lease``).
PATCH_KEEP_LEASE_QUIETLY = "keep-lease-retries-quietly"

#: How often the rollout asks again for a degraded node's lease still held by the node run's own
#: lease while it closes (a second apart).
KEEP_LEASE_TRIES = 10

#: Node phases whose lease the rollout keeps until it ends (it may still roll the node back).
_KEEP_LEASE_PHASES = frozenset({NodePhase.DEGRADED, NodePhase.FAILED})


class RolloutLeasing:
    """Taking, retaking and releasing the rollout's leases (see the module doc)."""

    async def _retake_leases(self, input: MachineConfigRolloutInput, plan: RolloutPlan, carry: RolloutCarry) -> None:
        """Take the pools' leases and those of the nodes still to do again (the previous run's
        ended with it), before anything starts."""
        pools = {pool_scope(input.cluster, pp.name): f"pool/{pp.name}" for pp in plan.pools}
        nodes = {n: node_scope(input.cluster, n) for pp in plan.pools for n in pp.nodes}
        self._leases_concurrent = True
        if self._in_window(plan):
            # The pools, and the nodes we may still roll back; the others as they start.
            self._window_leases = True
            keep = [nodes[n] for n, st in carry.nodes.items() if n in nodes and st.phase in _KEEP_LEASE_PHASES]
            await retake_leases(self.leases, self._id, [*pools, *keep], pools)
            return
        await retake_leases(self.leases, self._id, lease_scopes_to_retake(carry, list(pools), nodes), pools)

    def _in_window(self, plan: RolloutPlan) -> bool:
        """Whether this run leases nodes in the window (a plan above ``window_node_leases_above``
        nodes, runs with :data:`PATCH_WINDOW_LEASES`); asked once per run, small plans never ask."""
        return plan.node_count > self._in.window_node_leases_above and workflow.patched(PATCH_WINDOW_LEASES)

    async def _acquire_leases(self, input: MachineConfigRolloutInput, plan: RolloutPlan) -> None:
        """Lease every pool (``lease/{cluster}/{pool}``, the ID since the first lease) and, in runs
        with :data:`PATCH_LEASE_SCOPES`, every planned node (all started at once), then probe the
        cluster-wide lease. A scope held by another procedure fails us with LeaseHeld naming its
        holder."""
        pools = {pool_scope(input.cluster, pp.name): f"pool/{pp.name}" for pp in plan.pools}
        if self._in_window(plan):
            # One lease workflow per pool now; the nodes' are probed, and taken as they start.
            self._window_leases = self._leases_concurrent = True
            await self.leases.acquire(list(pools), input_scope=pools, probe_cluster=True, concurrent=True)
            nodes = [node_scope(input.cluster, n) for pp in plan.pools for n in pp.nodes]
            if workflow.patched(PATCH_PROBE_BY_ACTIVITY):
                await self.leases.probe_by_activity(nodes, timeouts=self._timeouts)
            else:
                chunk = PROBE_CHUNK if workflow.patched(PATCH_PROBE_CHUNKS) else 0
                await self.leases.probe(nodes, chunk=chunk)
        elif workflow.patched(PATCH_LEASE_SCOPES):
            # Thousands of node leases: start them in one workflow task, release them likewise.
            self._leases_concurrent = True
            nodes = [node_scope(input.cluster, n) for pp in plan.pools for n in pp.nodes]
            await self.leases.acquire([*pools, *nodes], input_scope=pools, probe_cluster=True, concurrent=True)
        else:
            await self.leases.acquire(list(pools), input_scope=pools, probe_cluster=False)

    async def _lease_node(self, node: str, group: Group) -> None:
        """Take ``node``'s lease unless held, with those of the next maxUnavailable nodes of its
        pool's queue (one workflow task for a whole window's worth). A refused look-ahead node is
        asked again when its turn comes; a refused ``node`` raises LeaseHeld naming the holder."""
        scope = node_scope(self._in.cluster, node)
        if scope in self.leases.held:
            return
        ahead = [node_scope(self._in.cluster, n) for n in group.queue[: max(group.max_unavailable, 1)]]
        refused = await self.leases.acquire_some([scope, *ahead])
        if scope in refused:
            raise await self.leases.refusal(scope)

    def _leases_in_node_runs(self) -> bool:
        """Whether this run's node runs take their node's lease themselves
        (:data:`PATCH_NODE_RUN_LEASES`, asked at the first node of a window-leased run)."""
        if self._node_run_leases is None:
            self._node_run_leases = workflow.patched(PATCH_NODE_RUN_LEASES)
        return self._node_run_leases

    def _node_runs_are_leases(self) -> bool:
        """Whether this run's node runs are their node's lease (:data:`PATCH_NODE_RUN_IS_LEASE`,
        asked at the first node run that leases its node)."""
        if self._node_run_is_lease is None:
            self._node_run_is_lease = workflow.patched(PATCH_NODE_RUN_IS_LEASE)
        return self._node_run_is_lease

    async def _start_node_run(self, child_input: NodeRolloutInput, run_id: str, summary: str) -> workflow.ChildWorkflowHandle:
        """Start the node run ``child_input`` with ID ``run_id``, or with its node's lease ID when
        ``child_input.lease_is_run``. Raises the LeaseHeld refusal naming the holder (asked with
        ``contend``) when that lease ID runs already."""
        lease = child_input.lease_scope if child_input.lease_is_run else None
        try:
            return await workflow.start_child_workflow(
                NodeRolloutWorkflow.run,
                child_input,
                id=scope_workflow_id(lease) if lease else run_id,
                parent_close_policy=workflow.ParentClosePolicy.TERMINATE,
                static_summary=summary,
            )
        except WorkflowAlreadyStartedError as err:
            if not lease:
                raise
            raise await self.leases.refusal(lease) from err

    def _start_together(self) -> bool:
        """Whether the window starts all its free places in one workflow task
        (:data:`workflows.kit.starts.PATCH_START_TOGETHER`, asked at the first start of a run).
        Not while the rollout takes each node's lease itself as the node starts: those take the
        next nodes' leases too, and two at once would race for the same lease."""
        if self._window_leases and not self._leases_in_node_runs():
            return False
        if self._starts_together is None:
            self._starts_together = workflow.patched(PATCH_START_TOGETHER)
        return self._starts_together

    def _node_lease_for_run(self, node: str) -> str | None:
        """The scope the node run leases itself, or None when the rollout holds it already (kept
        from a degraded or failed attempt that is now retried)."""
        scope = node_scope(self._in.cluster, node)
        return None if scope in self.leases.held else scope

    def _node_finished(self, node: str) -> None:
        """A node's child ended: release its lease (not for a degraded or failed node, which a
        skip may still roll back) without holding the window up. When node runs hold their own
        leases, the rollout takes a degraded or failed node's lease instead (its run's ended)."""
        scope = node_scope(self._in.cluster, node)
        keep = self._status.nodes[node].phase in _KEEP_LEASE_PHASES
        if self._window_leases and keep and scope not in self.leases.held and self._leases_in_node_runs():
            result = self.batches.results.get(node)
            if result is not None and result.safe_point == LEASE_REFUSED:
                return  # another procedure holds it: the run never touched the node
            self.batches.tasks.append(asyncio.create_task(self._keep_node_lease(node, scope)))
            return
        if not self._window_leases or scope not in self.leases.held or keep:
            return
        self.batches.tasks.append(asyncio.create_task(self.leases.release_scope(scope)))

    async def _keep_node_lease(self, node: str, scope: str) -> None:
        """Lease a degraded/failed node whose run's lease just ended. Refused while the run's
        lease still closes: ask again a second later, :data:`KEEP_LEASE_TRIES` times. Held by
        another procedure (it took the node in that instant): the node's status warns, naming
        it, that a skip's rollback is no longer protected.

        Runs with :data:`PATCH_KEEP_LEASE_QUIETLY` ask who holds the lease only after the last
        try. Asking (``contend``) the run's closing lease could go unanswered (the server's parent
        close policy terminated it meanwhile): the rollout then waited LEASE_ANSWER_TIMEOUT and
        warned that another procedure held the node."""
        if workflow.patched(PATCH_KEEP_LEASE_QUIETLY):
            for _ in range(KEEP_LEASE_TRIES):
                if not await self.leases.acquire_some([scope]):
                    return
                await workflow.sleep(timedelta(seconds=1))
            if not await self._lost_to_another(node, scope):
                self._warn(node, "node lease not retaken: the node run's lease did not close")
            return
        for _ in range(KEEP_LEASE_TRIES):  # runs before the patch: ask the holder after each try
            if not await self.leases.acquire_some([scope]):
                return
            if await self._lost_to_another(node, scope):
                return
            await workflow.sleep(timedelta(seconds=1))
        self._warn(node, "node lease not retaken: the node run's lease did not close")

    async def _lost_to_another(self, node: str, scope: str) -> bool:
        """Ask who holds ``scope``; another procedure than this rollout: warn on ``node``, True."""
        err = await self.leases.refusal(scope)
        holder = str(err.details[0]) if err.details else ""
        if holder == self._id:
            return False
        self._warn(node, f"node lease lost after the node run ended: {err.message}")
        return True

    def _warn(self, node: str, warning: str) -> None:
        self._status.nodes[node].warning = warning
        self.touch()
