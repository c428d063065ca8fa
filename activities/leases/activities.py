"""``find_held_leases``: which lease workflow IDs have a running execution.

A large rollout probes its planned nodes' leases before it changes anything (issue 16). A
``contend`` signal per node from the workflow cost its history two events per node (the signal
initiated, then failed for a lease that does not run); this activity asks the server instead,
with ``DescribeWorkflowExecution`` per ID (strongly consistent, unlike a visibility query, which
can lag behind a lease started an instant before), and costs the workflow one activity.
"""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from activities.leases.models import FindHeldLeasesInput, FindHeldLeasesResult

#: Describe calls in flight at a time.
DESCRIBE_CONCURRENCY = 32
#: IDs described between two heartbeats.
HEARTBEAT_EVERY = 256


@activity.defn(name="find_held_leases")
async def find_held_leases(input: FindHeldLeasesInput) -> FindHeldLeasesResult:
    """The IDs of ``input.lease_ids`` whose latest run is RUNNING (a lease workflow, or a node run
    that is its node's lease), in input order; an ID never used, or whose run has closed, is free.

    Heartbeats ``{"described": n, "of": total}`` every :data:`HEARTBEAT_EVERY` IDs. Raises
    non-retryable ``InvalidInput`` for an empty ID; other server errors propagate (retried by
    the caller's policy). Reads only."""
    ids = list(input.lease_ids)
    if any(not i.strip() for i in ids):
        raise ApplicationError("empty lease workflow ID", type="InvalidInput", non_retryable=True)
    client = activity.client()
    gate = asyncio.Semaphore(DESCRIBE_CONCURRENCY)

    async def running(wid: str) -> bool:
        async with gate:
            try:
                desc = await client.get_workflow_handle(wid).describe()
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    return False
                raise
            return desc.status == WorkflowExecutionStatus.RUNNING

    held: list[str] = []
    for start in range(0, len(ids), HEARTBEAT_EVERY):
        chunk = ids[start : start + HEARTBEAT_EVERY]
        flags = await asyncio.gather(*(running(i) for i in chunk))
        held += [i for i, f in zip(chunk, flags, strict=True) if f]
        activity.heartbeat({"described": start + len(chunk), "of": len(ids)})
    return FindHeldLeasesResult(held=held)
