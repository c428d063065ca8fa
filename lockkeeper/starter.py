"""Starting any procedure the same way: :func:`start_procedure`.

Used by every ``lockkeeper start`` subcommand and by the demo (which does not go through the
CLI). For every procedure it

0. refuses (:class:`NoWorker`) when no worker would take the new run (``DescribeTaskQueue``):
   none polls the task queue, or, with worker versioning, none of the build new runs go to (the
   deployment's current version, and a ramping one) polls it, or the deployment has no current
   version (:meth:`workers.versioning.QueueWorkers.gap`); so nothing is started that would only
   run, unwatched, whenever a worker appears. With :data:`QUEUE_WITHOUT_WORKER` set
   (``lockkeeper start ... --queue``) it starts anyway and calls :data:`ON_QUEUED`;
1. refuses early when another procedure holds an overlapping lease scope (a courtesy pre-check:
   the workflow's own leases stay the authority, this only answers before a run is started);
   dry runs (memo ``lockkeeper_dry_run``) never count;
2. picks the workflow ID (``<id_prefix>-<cluster>[-<name>]-<UTC time>-<4 hex>`` unless given);
3. sets the search attributes ``LockkeeperCluster``, ``LockkeeperProcedure``,
   ``LockkeeperStatus`` and ``LockkeeperPools`` at start, so ``lockkeeper list`` shows drains and
   etcd procedures as well as rollouts (start-time attributes are not workflow commands: no
   history changes);
4. starts the spec's workflow type on its task queue, with the memo ``lockkeeper_dry_run``
   (true for an input with ``dry_run`` set: the pool pre-check skips such runs).

:func:`wait_for_status` then polls the ``status`` query (validated with the spec's status model)
until a condition holds, e.g. the rollout's plan exists.

Sources: Temporal visibility list filter syntax (``ExecutionStatus``, ``WorkflowType``), the
lease scopes of :mod:`workflows.kit.scopes`.
"""

from __future__ import annotations

import asyncio
import contextvars
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from workers.versioning import POLLER_FRESH_SECONDS  # re-exported: a poller seen this recently is live


class StartRefused(Exception):
    """The procedure was not started: ``holder`` (a workflow ID) holds an overlapping scope, or
    the workflow ID is taken. The message names it and says what to look at."""

    def __init__(self, message: str, holder: str | None = None) -> None:
        super().__init__(message)
        self.holder = holder


class NoWorker(Exception):
    """No worker would take a new run on ``task_queue``: nothing was started. The message names the
    queue, ``lockkeeper worker`` and ``--queue``; with ``detail`` (workers poll, but none of the
    build new runs go to: :meth:`workers.versioning.QueueWorkers.gap`) it says which builds poll
    and how to promote one."""

    def __init__(self, task_queue: str, namespace: str, detail: str | None = None, cluster: str | None = None) -> None:
        if detail is None and cluster is not None:
            super().__init__(
                f"no worker of cluster {cluster!r} polls its task queue {task_queue!r} (namespace {namespace}); nothing "
                f"was started. Run `lockkeeper worker --cluster {cluster}` with that cluster's kubeconfig, "
                f"or add --queue to start it anyway; it then waits for that worker"
            )
        elif detail is None:
            super().__init__(
                f"no worker polls task queue {task_queue!r} (namespace {namespace}); nothing was started. "
                f"Run `lockkeeper worker` on that queue (LOCKKEEPER_TASK_QUEUE / --task-queue), "
                f"or add --queue to start it anyway; it then waits for a worker"
            )
        else:
            super().__init__(
                f"{detail}. Nothing was started (namespace {namespace}); add --queue to start it anyway, it then "
                "waits for such a worker"
            )
        self.task_queue = task_queue
        self.detail = detail
        self.cluster = cluster


#: Start even when no worker polls the task queue (``lockkeeper start ... --queue``).
QUEUE_WITHOUT_WORKER: contextvars.ContextVar[bool] = contextvars.ContextVar("lockkeeper_queue", default=False)
#: Called as ``f(workflow_id, task_queue)`` after a start that no worker will pick up yet.
ON_QUEUED: contextvars.ContextVar[Callable[[str, str], None] | None] = contextvars.ContextVar(
    "lockkeeper_on_queued", default=None
)
#: Memo key set at start: true for a dry run (the pre-checks skip it).
MEMO_DRY_RUN = "lockkeeper_dry_run"


async def task_queue_pollers(client: Any, task_queue: str, fresh_seconds: float = POLLER_FRESH_SECONDS) -> list[str]:
    """The workers that polled the workflow task queue ``task_queue`` within the last
    ``fresh_seconds``, each as ``identity (build B)`` or ``identity (unversioned)``
    (:func:`workers.versioning.describe_queue`). Empty: no worker. Raises ``RPCError`` as the
    server does."""
    from workers.versioning import describe_queue

    return [p.label() for p in (await describe_queue(client, task_queue, fresh_seconds=fresh_seconds)).pollers]


async def new_run_gap(client: Any, task_queue: str) -> tuple[bool, str | None]:
    """Would a run started on ``task_queue`` now wait for a worker? ``(waits, detail)``: ``detail``
    None when no worker polls at all, else why none of the pollers takes it (wrong build, no
    current version). Raises ``RPCError`` as the server does."""
    from workers.versioning import describe_queue

    queue = await describe_queue(client, task_queue)
    if not queue.pollers:
        return True, None
    gap = queue.gap()
    return gap is not None, gap


def quote(value: str) -> str:
    """A string literal for a visibility query."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def new_workflow_id(spec: Any, cluster: str, name: str | None = None, now: datetime | None = None) -> str:
    """``<id_prefix>-<cluster>[-<name>]-<YYYYmmdd-HHMMSS>-<4 hex>`` (UTC): sortable by start
    time, and unique for two starts within a second."""
    stamp = f"{(now or datetime.now(UTC)):%Y%m%d-%H%M%S}"
    parts = [spec.id_prefix, cluster, *([name] if name else []), stamp, secrets.token_hex(2)]
    return "-".join(parts)


def _lease_ids_to_check(scopes: Iterable[str]) -> tuple[list[str], set[str]]:
    """Lease workflow IDs that would conflict with ``scopes``: each scope's own lease and its
    cluster's ``cluster/<c>`` lease; plus the clusters whose every lease conflicts (the new
    procedure takes ``cluster/<c>`` itself)."""
    from workflows.kit.scopes import LeaseScope, cluster_scope, scope_workflow_id

    ids: list[str] = []
    whole: set[str] = set()
    for scope in scopes:
        parsed = LeaseScope.parse(scope)
        for sid in (scope_workflow_id(scope), scope_workflow_id(cluster_scope(parsed.cluster))):
            if sid not in ids:
                ids.append(sid)
        if parsed.kind == "cluster":
            whole.add(parsed.cluster)
    return ids, whole


async def lease_holders(client: Any, scopes: Sequence[str]) -> list[tuple[str, str, str]]:
    """Running leases that overlap ``scopes``: ``[(scope, holder workflow ID, holder procedure)]``.

    Asks each candidate lease workflow (or node run that is its node's lease) its ``holder``
    query; a lease that is not running (or not there) holds nothing."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError

    from workflows.kit.models import LeaseInfo

    ids, whole = _lease_ids_to_check(scopes)
    for cluster in sorted(whole):
        prefix = f"lease/{cluster}/"
        # A large rollout's node runs are their node leases (same IDs, workflows.kit.lease).
        async for wf in client.list_workflows(
            "WorkflowType IN ('LeaseWorkflow', 'NodeRolloutWorkflow') AND ExecutionStatus = 'Running'"
        ):
            if wf.id.startswith(prefix) and wf.id not in ids:
                ids.append(wf.id)
    held: list[tuple[str, str, str]] = []
    for lease_id in ids:
        handle = client.get_workflow_handle(lease_id)
        try:
            if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
                continue
            info = await handle.query("holder", result_type=LeaseInfo, rpc_timeout=timedelta(seconds=10))
        except RPCError:
            continue  # no such lease, or no worker answers: the workflow's own acquire decides
        held.append((info.scope, info.holder, info.procedure))
    return held


async def running_with_pools(client: Any, spec_name: str, cluster: str, pools: Sequence[str]) -> list[tuple[str, list[str]]]:
    """Running procedures of type ``spec_name`` on ``cluster`` whose ``LockkeeperPools`` overlap
    ``pools`` (any of them when ``pools`` is empty): ``[(workflow ID, pools)]``. Visibility only,
    so it also sees runs that have not taken their leases yet (they lease after planning). Dry
    runs (memo :data:`MEMO_DRY_RUN`) are left out: they take no lease and write nothing."""
    from workflows.kit.models import SA_CLUSTER, SA_POOLS, SA_PROCEDURE

    q = f"{SA_PROCEDURE} = {quote(spec_name)} AND {SA_CLUSTER} = {quote(cluster)} AND ExecutionStatus = 'Running'"
    if pools:
        q += f" AND {SA_POOLS} IN ({', '.join(quote(p) for p in pools)})"
    found = []
    async for wf in client.list_workflows(q):
        if await wf.memo_value(MEMO_DRY_RUN, False):
            continue
        found.append((wf.id, list(wf.search_attributes.get(SA_POOLS, []) or [])))
    return found


async def start_procedure(
    client: Any,
    settings: Any,
    spec: Any,
    inp: Any,
    *,
    cluster: str,
    scopes: Sequence[str] = (),
    pools: Sequence[str] | None = None,
    workflow_id: str | None = None,
    id_name: str | None = None,
    summary: str | None = None,
    precheck: bool = True,
    require_worker: bool | None = None,
) -> Any:
    """Start ``spec``'s workflow with ``inp`` and return its handle (result type: the spec's
    result model).

    ``scopes``: lease scopes the run will take (checked against running leases); ``pools``: for
    procedures that lease pools only after planning (the rollout), the pools to check against
    running runs of the same type (``[]`` = any pool: every such run on the cluster conflicts;
    None = no such check); ``precheck`` False skips both (a dry run writes nothing). The task
    queue is :func:`procedure_queue`: ``settings.task_queue`` (a host-only worker serves the same
    queue name), or the cluster's own with per-cluster queues.
    ``require_worker``: refuse when no worker polls that queue (default: unless
    :data:`QUEUE_WITHOUT_WORKER` is set; then :data:`ON_QUEUED` is told of the queued start).

    Raises :class:`NoWorker` (nothing started: no worker polls, or none of the build new runs go
    to), :class:`StartRefused` naming the holder, or when the workflow ID exists.
    """
    from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
    from temporalio.exceptions import WorkflowAlreadyStartedError

    from workflows.kit.models import SA_CLUSTER, SA_POOLS, SA_PROCEDURE, SA_STATUS, ProcedurePhase

    if require_worker is None:
        require_worker = not QUEUE_WITHOUT_WORKER.get()
    task_queue = procedure_queue(settings, spec, cluster)
    per_cluster = task_queue != settings.task_queue
    queued, detail = await new_run_gap(client, task_queue)
    if queued and require_worker:
        raise NoWorker(task_queue, client.namespace, detail, cluster=cluster if per_cluster else None)
    if precheck:
        held = await lease_holders(client, scopes)
        if held:
            scope, holder, procedure = held[0]
            raise StartRefused(
                f"{procedure or 'procedure'} {holder} holds lease {scope}; see `lockkeeper status {holder}`", holder
            )
        if pools is not None:
            running = await running_with_pools(client, spec.name, cluster, pools)
            if running:
                wid, theirs = running[0]
                what = f"pool(s) {', '.join(theirs)}" if theirs else "this cluster"
                hint = "" if pools else " (no --pool given: any running rollout on the cluster conflicts)"
                raise StartRefused(
                    f"rollout {wid} is already running on {what} of cluster {cluster}{hint}; "
                    f"see `lockkeeper status {wid}`",
                    wid,
                )
    wid = workflow_id or new_workflow_id(spec, cluster, id_name)
    sa = TypedSearchAttributes(
        [
            SearchAttributePair(SearchAttributeKey.for_keyword(SA_CLUSTER), cluster),
            SearchAttributePair(SearchAttributeKey.for_keyword(SA_PROCEDURE), spec.name),
            SearchAttributePair(SearchAttributeKey.for_keyword(SA_STATUS), str(ProcedurePhase.PLANNING)),
            SearchAttributePair(SearchAttributeKey.for_keyword_list(SA_POOLS), list(pools or [])),
        ]
    )
    try:
        handle = await client.start_workflow(
            spec.workflow_type,
            inp,
            id=wid,
            task_queue=task_queue,
            search_attributes=sa,
            static_summary=summary or default_summary(spec.name, cluster, scopes, pools, inp),
            result_type=spec.result_model,
            memo={MEMO_DRY_RUN: bool(getattr(inp, "dry_run", False))},
            priority=run_priority(spec, cluster),
        )
    except WorkflowAlreadyStartedError:
        raise StartRefused(f"a workflow with ID {wid} already exists", wid) from None
    on_queued = ON_QUEUED.get()
    if queued and on_queued is not None:
        on_queued(handle.id, task_queue)
    return handle


def procedure_queue(settings: Any, spec: Any, cluster: str) -> str:
    """The task queue a run of ``spec`` for ``cluster`` starts on: with per-cluster queues
    (``settings.cluster_queues``, issue 38) the cluster's own (``<task_queue>-<cluster>``),
    except for a ``central`` spec (a campaign: it only orchestrates, on ``task_queue``);
    otherwise ``settings.task_queue``."""
    if getattr(spec, "central", False) or not getattr(settings, "cluster_queues", False):
        return str(settings.task_queue)
    from workers.settings import cluster_task_queue

    return cluster_task_queue(settings.task_queue, cluster)


def run_priority(spec: Any, cluster: str) -> Any:
    """The Temporal task priority of a run of ``spec`` on ``cluster`` (issue 40): the spec's
    priority key (1 highest; etcd, the blocked-drain decision and GlusterFS recovery before
    control-plane work before rollouts) and the cluster as fairness key, so that on a worker
    shared by many clusters one cluster's backlog does not starve another's of the same key.
    Children and activities inherit both (nothing in the workflows sets its own)."""
    from temporalio.common import Priority

    key = cluster.encode()[:FAIRNESS_KEY_BYTES].decode(errors="ignore")
    return Priority(priority_key=getattr(spec, "priority", None), fairness_key=key or None)


#: The server's limit on a fairness key.
FAIRNESS_KEY_BYTES = 64


def default_summary(procedure: str, cluster: str, scopes: Sequence[str], pools: Sequence[str] | None, inp: Any) -> str:
    """The Temporal UI's static summary of a start: procedure, cluster, scope and requester, e.g.
    ``machineconfig-rollout on cluster prod · pools app · requested by alice``."""
    parts = [f"{procedure} on cluster {cluster}"]
    if pools:
        parts.append(f"pools {', '.join(pools)}")
    elif scopes:
        parts.append(f"scope {', '.join(scopes)}")
    who = getattr(inp, "requested_by", None) or getattr(getattr(inp, "approvals", None), "requested_by", None)
    if who and who != "unknown":
        parts.append(f"requested by {who}")
    return " · ".join(parts)


async def query_status(handle: Any, spec: Any, timeout: float = 10.0, *, live: bool = True) -> Any:
    """The ``status`` query validated with ``spec.status_model``; with ``live``, the running
    node runs' steps merged in (:func:`lockkeeper.live.merge_live_progress`)."""
    from lockkeeper.live import client_of, merge_live_progress

    st = await handle.query("status", result_type=spec.status_model, rpc_timeout=timedelta(seconds=timeout))
    if live:
        await merge_live_progress(client_of(handle), st)
    return st


async def wait_for_status(
    handle: Any, spec: Any, ready: Callable[[Any], bool], timeout: float = 120.0, interval: float = 0.3
) -> Any:
    """Poll ``status`` until ``ready(status)`` holds; returns that status, or None when the run
    closed first without failing (a failed run raises ``WorkflowFailureError`` from its result).
    Raises TimeoutError after ``timeout`` seconds (no worker picked the run up?)."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError

    deadline = time.monotonic() + timeout
    while True:
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            await handle.result()
            return None
        try:
            st = await query_status(handle, spec)
            if ready(st):
                return st
        except RPCError:
            pass  # no worker has the run yet
        if time.monotonic() > deadline:
            raise TimeoutError(f"{handle.id}: no answer after {timeout:.0f}s; is a worker running on the task queue?")
        await asyncio.sleep(interval)


def rollout_planned(status: Any) -> bool:
    """The rollout has a plan, or has left planning (``wait_for_status`` condition)."""
    return status.plan is not None or str(status.phase) != "planning"
