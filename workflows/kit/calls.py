"""Activity names and their call options, as the workflows use them.

Workflows call activities BY NAME with ``result_type=`` so they never import the implementations
(workflows import only models from ``activities``). Procedure packages keep their own activity
names beside these shared ones.
Timeouts are seconds; retry policies back off exponentially; the error types listed as
non-retryable are the contract's "bad input / object gone" errors that retrying cannot fix.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    FailureError,
    RetryState,
)
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

with workflow.unsafe.imports_passed_through():
    # Re-exported: the activity names the workflows call are the upper-case names of this module.
    from activities.cluster.models import CHECK_CLUSTER_HEALTH as CHECK_CLUSTER_HEALTH
    from activities.cluster.models import (
        API_FAIL_FAST_TYPES,
        API_FAILURE_TYPES,
        DeleteAllPodsInput,
        DeleteAllPodsResult,
        ListPodsToDeleteInput,
        ListPodsToDeleteResult,
    )

PREFLIGHT = "preflight_machineconfig_rollout"
#: The next page of a pool's nodes after a paged preflight.
LIST_POOL_NODES = "list_pool_nodes"
READ_NODE = "read_node"
SET_NODE_ANNOTATIONS = "set_node_annotations"
WAIT_FOR_NODE = "wait_for_node"
#: Watch from the drain hand-off to Done, answering the daemon's uncordon request on the way.
WAIT_FOR_NODE_DONE = "wait_for_node_done"
#: Wait for the daemon's drain request, then cordon and make one drain pass.
DRAIN_WHEN_ASKED = "drain_when_asked"
CORDON_NODE = "cordon_node"
UNCORDON_NODE = "uncordon_node"
DRAIN_NODE = "drain_node"
RECORD_NODE_EVENT = "record_node_event"
GET_POOLS_STATUS = "get_pools_status"
CHECK_PODS_READY = "check_pods_ready"
DELETE_ALL_PODS = "delete_all_pods"
LIST_PODS_TO_DELETE = "list_pods_to_delete"
#: Bound of one ``delete_all_pods`` call (seconds; it heartbeats, so a dead worker is seen sooner):
#: one DELETE per pod, a few thousand pods on a large cluster. A retry deletes what is left.
DELETE_ALL_PODS_SECONDS = 300.0
SET_NETWORK_TYPE = "set_network_type"
#: The controller's side of a MachineConfigNode (cordoned, drained, uncordoned), where served.
REPORT_MACHINE_CONFIG_NODE = "report_machine_config_node"
DELETE_BLOCKING_PODS = "delete_blocking_pods"
#: Host command on a node (local, SSH or debug-pod backend).
RUN_NODE_COMMAND = "run_node_command"
#: Delete a run's leftover debug pods at its end and read back (activities.host; on the queue whose
#: workers ran its debug-pod commands).
SWEEP_DEBUG_PODS = "sweep_debug_pods"
#: Which lease workflow IDs run now (activities.leases; read-only).
FIND_HELD_LEASES = "find_held_leases"

#: ApplicationError types that fail an activity at once (raised non-retryable by the activities
#: too; listing them here keeps the workflow safe if one is raised retryable by mistake).
NON_RETRYABLE = [
    "UnknownPool",
    "MissingConfig",
    "ConfigOfOtherPool",
    "ConfigTooOld",
    "NoNodes",
    "NodeNotFound",
    "PoolsNotSettled",
    "InvalidInput",
]

#: Transient API trouble (5xx, connection refused while the API server restarts) retries for
#: a long time: a rollout should outlive an API outage rather than fail in the middle of a node.
DEFAULT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    non_retryable_error_types=NON_RETRYABLE,
)

#: Attempts of a read-only planning activity (a preflight) that meets a transient API error.
PLANNING_ATTEMPTS = 5

#: Read-only planning activities fail fast: the activity reports connection refused, DNS, 401,
#: 403 and other refusals as non-retryable ``Api*`` types (also listed here, with
#: ``KubeconfigError``); a transient one (``ApiUnavailable``: 5xx, 429, timeouts) gets
#: :data:`PLANNING_ATTEMPTS` attempts 1, 2, 4, 8 s apart, so a procedure whose API cannot be used
#: fails in planning with the API's error instead of sitting in "planning" forever. Activities in
#: the middle of a procedure keep :data:`DEFAULT_RETRY`.
PLANNING_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=8),
    maximum_attempts=PLANNING_ATTEMPTS,
    non_retryable_error_types=[*NON_RETRYABLE, *API_FAIL_FAST_TYPES, "KubeconfigError"],
)

#: Default start-to-close of the short API calls (one or two requests each), seconds. Short, so
#: that a call lost with a crashed worker is retried quickly: the daemon's uncordon deadline
#: (10 min, much less in scaled simulations) keeps running while we wait for a timeout.
SHORT_CALL_SECONDS = 10.0
#: Default heartbeat timeout of the watching/draining activities, seconds (they heartbeat every
#: 2 s; a watch window plus its read grace stays under 8 s).
HEARTBEAT_SECONDS = 10.0


#: Attempts a short call gets as a local activity before it falls back to a regular activity
#: (:func:`call` with ``Timeouts.local``): one retry 1 s later covers a dropped connection; a
#: longer API outage is then retried by the server, visible in ``status`` as a pending activity.
LOCAL_ATTEMPTS = 2
LOCAL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_attempts=LOCAL_ATTEMPTS,
    non_retryable_error_types=NON_RETRYABLE,
)


class Timeouts:
    """Activity timeouts of one workflow run (seconds), from its input.

    ``local``: short calls (no ``seconds`` bound, no heartbeat) run first as local activities
    (see :func:`call`): a marker in history instead of three activity events and a workflow task.
    """

    def __init__(
        self, short_call: float = SHORT_CALL_SECONDS, heartbeat: float = HEARTBEAT_SECONDS, *, local: bool = False
    ) -> None:
        self.short_call = timedelta(seconds=short_call)
        self.heartbeat = timedelta(seconds=heartbeat)
        self.local = local


DEFAULT_TIMEOUTS = Timeouts()


def summary_of(name: str, arg: Any) -> str | None:
    """The Temporal UI's summary of an activity call: the step (activity name) and the node it
    acts on (``arg.node``, a pydantic input's field), e.g. ``drain_node · node app-1``; None when
    the input names no node. Summaries are user metadata: replay does not compare them, so adding
    them leaves stored histories replayable."""
    node = getattr(arg, "node", None)
    if isinstance(arg, dict):
        node = arg.get("node")
    return f"{name} · node {node}" if isinstance(node, str) and node else None


async def call(
    name: str,
    arg: Any,
    result_type: type | None,
    *,
    seconds: float | None = None,
    heartbeat: bool = False,
    timeouts: Timeouts = DEFAULT_TIMEOUTS,
) -> Any:
    """Execute activity ``name`` with the project's options.

    ``seconds``: the activity's own bound (a wait or drain window); start-to-close then gets the
    short-call timeout as slack on top. ``heartbeat``: the activity heartbeats, so a dead worker
    is noticed within the heartbeat timeout instead of at start-to-close.

    With ``timeouts.local``, a short call (neither ``seconds`` nor ``heartbeat``) runs first as a
    local activity in the workflow's own worker: one marker event in the history instead of three
    activity events and a workflow task, and no server round trip (issue 16: a node run makes
    six such calls). It gets :data:`LOCAL_ATTEMPTS` attempts; when those fail with a retryable
    error or time out, the same call runs as a regular activity with :data:`DEFAULT_RETRY`, so a
    long API outage shows in ``status`` as a pending activity with its attempts and last failure.
    A non-retryable failure of the local activity is raised as the SDK gives it (the activity's
    own ApplicationError, not wrapped in an ActivityError); either fails the workflow alike.
    The calls must be safe to repeat, as every activity's: a worker that crashes after a local
    activity ran but before its workflow task completed runs it again.
    """
    if timeouts.local and seconds is None and not heartbeat:
        try:
            return await workflow.execute_local_activity(
                name,
                arg,
                result_type=result_type,
                start_to_close_timeout=timeouts.short_call,
                retry_policy=LOCAL_RETRY,
                summary=summary_of(name, arg),
            )
        except FailureError as err:  # the SDK raises a local activity's own failure (ApplicationError, TimeoutError)
            if _non_retryable(err):
                raise
            workflow.logger.info("%s did not succeed as a local activity (%s); retrying it as an activity", name, err.cause or err)
    start_to_close = timeouts.short_call if seconds is None else timedelta(seconds=seconds) + timeouts.short_call
    return await workflow.execute_activity(
        name,
        arg,
        result_type=result_type,
        start_to_close_timeout=start_to_close,
        heartbeat_timeout=timeouts.heartbeat if heartbeat else None,
        retry_policy=DEFAULT_RETRY,
        summary=summary_of(name, arg),
    )


def _non_retryable(err: FailureError) -> bool:
    """A local activity's failure is one that retrying cannot fix (a non-retryable
    ApplicationError, or a type in :data:`NON_RETRYABLE`), or the call was cancelled.

    A local attempt that outlived its start-to-close is not: sdk-core reports it as an
    ActivityError with retry state CANCEL_REQUESTED (it cancels the attempt) and a TimeoutError
    cause, and it falls back to a regular activity as a retryable failure does. Taken for a
    cancel, it failed the node run with "Activity timed out" and paused the rollout (issue 40:
    the 5,000-node run whose API server answered a PATCH in more than the short call's 10 s)."""
    if isinstance(err, CancelledError):
        return True
    if isinstance(err, ActivityError):
        if isinstance(err.cause, TemporalTimeoutError):
            return False
        if err.retry_state in (RetryState.NON_RETRYABLE_FAILURE, RetryState.CANCEL_REQUESTED):
            return True
        err = err.cause  # type: ignore[assignment]
    return isinstance(err, ApplicationError) and (err.non_retryable or err.type in NON_RETRYABLE)


def start(
    name: str, arg: Any, result_type: type | None, *, seconds: float, heartbeat: bool = True,
    timeouts: Timeouts = DEFAULT_TIMEOUTS, wait_cancelled: bool = False,
) -> Any:
    """Start activity ``name`` (same options as :func:`call`) and return its handle, so the
    caller can race it against a signal and cancel it. ``wait_cancelled``: a cancelled handle
    resolves only once the activity has ended (``WAIT_CANCELLATION_COMPLETED``: with its result,
    or an ActivityError), not at once; a running activity learns of a cancel only with its next
    heartbeat, and writes until then."""
    return workflow.start_activity(
        name,
        arg,
        result_type=result_type,
        start_to_close_timeout=timedelta(seconds=seconds) + timeouts.short_call,
        heartbeat_timeout=timeouts.heartbeat if heartbeat else None,
        retry_policy=DEFAULT_RETRY,
        summary=summary_of(name, arg),
        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
        if wait_cancelled else workflow.ActivityCancellationType.TRY_CANCEL,
    )


def start_planning(
    name: str, arg: Any, result_type: type | None, *, seconds: float, timeouts: Timeouts = DEFAULT_TIMEOUTS,
) -> Any:
    """Start read-only planning activity ``name`` with :data:`PLANNING_RETRY` (start-to-close:
    ``seconds`` plus the short-call slack, no heartbeat) and return its handle, so the caller can
    race it against an abort (:func:`workflows.kit.planning.planning_call`)."""
    return workflow.start_activity(
        name,
        arg,
        result_type=result_type,
        start_to_close_timeout=timedelta(seconds=seconds) + timeouts.short_call,
        retry_policy=PLANNING_RETRY,
        summary=summary_of(name, arg),
    )


def planning_api_failure(err: ActivityError, what: str = "preflight") -> ApplicationError | None:
    """The procedure's failure for a planning activity that failed on an API error (its cause an
    ``Api*`` ApplicationError, see ``activities.cluster.models.API_FAILURE_TYPES``): non-retryable,
    of the same type, the message "<what> could not use the cluster's API: <API server and the
    API's message>" plus "(gave up after N attempts)" when the retries ran out. None for any
    other failure (the procedure words its own refusal)."""
    cause = err.cause
    if not isinstance(cause, ApplicationError) or cause.type not in API_FAILURE_TYPES:
        return None
    tail = f" (gave up after {PLANNING_ATTEMPTS} attempts)" if err.retry_state == RetryState.MAXIMUM_ATTEMPTS_REACHED else ""
    return ApplicationError(f"{what} could not use the cluster's API: {cause.message}{tail}", type=cause.type, non_retryable=True)


async def call_with(
    name: str,
    arg: Any,
    result_type: type | None,
    *,
    retry: RetryPolicy,
    seconds: float,
    heartbeat_seconds: float | None = None,
    slack_seconds: float = 30.0,
) -> Any:
    """Execute activity ``name`` with a procedure's own retry policy: start-to-close is the
    activity's own bound ``seconds`` plus ``slack_seconds``; ``heartbeat_seconds`` None means the
    activity does not heartbeat. Raises ActivityError when the retries are exhausted."""
    return await workflow.execute_activity(
        name,
        arg,
        result_type=result_type,
        start_to_close_timeout=timedelta(seconds=seconds + slack_seconds),
        heartbeat_timeout=timedelta(seconds=heartbeat_seconds) if heartbeat_seconds else None,
        retry_policy=retry,
        summary=summary_of(name, arg),
    )


async def delete_pods_once(exclude_namespaces: list[str], timeouts: Timeouts = DEFAULT_TIMEOUTS) -> tuple[int, DeleteAllPodsResult]:
    """``oc delete pod -A --all`` (minus ``exclude_namespaces``) as a person approved it: the
    pods that exist now are listed once (``list_pods_to_delete``; the list is in the history),
    then exactly those are deleted by uid (``delete_all_pods``), each at most once, a failed
    request retried in place. A pod created after the listing (a controller's replacement) is
    never touched, however often the delete is retried. Returns (pods listed, the result)."""
    listed: ListPodsToDeleteResult = await call(LIST_PODS_TO_DELETE, ListPodsToDeleteInput(exclude_namespaces=exclude_namespaces),
                                                ListPodsToDeleteResult, timeouts=timeouts)
    result: DeleteAllPodsResult = await call(DELETE_ALL_PODS, DeleteAllPodsInput(pods=listed.pods), DeleteAllPodsResult,
                                             seconds=DELETE_ALL_PODS_SECONDS, heartbeat=True, timeouts=timeouts)
    return len(listed.pods), result
