"""The live step of in-flight node runs, merged into a procedure's ``status`` (issue 16).

A node procedure's own ``status`` query knows each node's phase from its node runs' results and
from the few signals a run sends its parent (a blocked drain, a warning, a decision). The step a
running node is at (``drain``, ``wait-reboot``, ...) lives in the node run's ``progress`` query
(:class:`workflows.kit.noderun.NodeRunWorkflow`); a signal per step would cost the parent's
history a few events per node and a workflow task, which a 2,000-node pool cannot afford.
:func:`merge_live_progress` asks the running node runs (``NodeStatus.run_id``) and copies their
step, what they wait for, since and until when into the status, so ``lockkeeper status`` shows
the same as when every step was signalled.

Bounds: at most :data:`LIVE_NODES_MAX` node runs per call (the longest-running first), at most
:data:`LIVE_CONCURRENCY` queries at a time, each with its own RPC timeout. A node run that does
not answer (no worker yet, just closed) keeps the parent's view; nothing is raised.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

#: Node runs asked per status call (a rollout keeps at most maxUnavailable nodes in flight per pool).
LIVE_NODES_MAX = 250
#: Queries in flight at a time.
LIVE_CONCURRENCY = 16


def client_of(handle: Any) -> Any:
    """The client a ``temporalio.client.WorkflowHandle`` was made by (temporalio keeps it as
    ``_client`` and offers no public accessor)."""
    return handle._client


async def merge_live_progress(client: Any, status: Any, *, timeout: float = 5.0) -> int:
    """Update ``status.nodes`` (a dict of :class:`workflows.kit.models.NodeStatus`; other rows
    and any other status are left alone) with the ``progress`` of each running node's run. Returns the number of
    nodes updated. Only a run's answer for the same attempt, still running, is taken."""
    from temporalio.client import WorkflowQueryFailedError
    from temporalio.service import RPCError

    from workflows.kit.models import NodePhase, NodeProgress, NodeStatus

    if isinstance(getattr(status, "clusters", None), list) and hasattr(status, "counts"):
        return await merge_campaign_children(client, status, timeout=timeout)
    nodes = getattr(status, "nodes", None)
    if not isinstance(nodes, dict):
        return 0
    far = datetime.max.replace(tzinfo=UTC)
    running = sorted(  # only the kit's node rows: a procedure may keep its own row type in ``nodes``
        (ns for ns in nodes.values()  # an in-process step (``in_process``) is no workflow: nothing to query
         if isinstance(ns, NodeStatus) and ns.phase == NodePhase.RUNNING and ns.run_id and not ns.in_process),
        key=lambda ns: ns.since or far,
    )[:LIVE_NODES_MAX]
    if not running:
        return 0
    gate = asyncio.Semaphore(LIVE_CONCURRENCY)

    async def one(ns: Any) -> bool:
        async with gate:
            try:
                p: NodeProgress = await client.get_workflow_handle(ns.run_id).query(
                    "progress", result_type=NodeProgress, rpc_timeout=timedelta(seconds=timeout)
                )
            except (RPCError, WorkflowQueryFailedError, asyncio.TimeoutError):
                return False
        if p.attempt != ns.attempt or p.phase != NodePhase.RUNNING or p.step is None:
            return False
        ns.step, ns.waiting_for, ns.since, ns.deadline = p.step, p.waiting_for, p.since, p.deadline
        ns.cordoned_by_us = p.cordoned_by_us
        if p.warning:
            ns.warning = p.warning
        return True

    return sum(await asyncio.gather(*(one(ns) for ns in running)))


async def merge_campaign_children(client: Any, status: Any, *, timeout: float = 5.0) -> int:
    """A campaign's status (:class:`workflows.campaign.models.CampaignStatus`): give each running
    cluster its child's live summary (phase, what it waits for, its waiting gates) from the
    child's ``status`` query; nothing goes into history. A child reports only its milestones to
    the campaign (``report_progress`` False), so its step is read here. Returns the number of
    clusters updated; a child that does not answer keeps its last report."""
    from temporalio.client import WorkflowQueryFailedError
    from temporalio.service import RPCError

    from workflows.kit.models import ProcedureStatus
    from workflows.kit.report import summary

    rows = [r for r in status.clusters if r.state == "running" and r.child_id][:LIVE_NODES_MAX]
    gate = asyncio.Semaphore(LIVE_CONCURRENCY)

    async def one(r: Any) -> bool:
        async with gate:
            try:
                st = await client.get_workflow_handle(r.child_id).query(
                    "status", result_type=ProcedureStatus, rpc_timeout=timedelta(seconds=timeout))
            except (RPCError, WorkflowQueryFailedError, asyncio.TimeoutError):
                return False
        r.child_status = summary(st)
        return True

    return sum(await asyncio.gather(*(one(r) for r in rows)))
