"""Worker deployment versioning: which build a worker is, where new procedures go, promotion.

Temporal's worker versioning (docs.temporal.io/worker-versioning, "Worker Versioning" in the
production deployment guide; samples-python ``worker_versioning/``): every worker declares a
*deployment* (``LOCKKEEPER_DEPLOYMENT_NAME``, default ``lockkeeper``) and a *build ID*
(``LOCKKEEPER_BUILD_ID``, default the package version, :func:`workers.settings.default_build_id`);
the pair is a *deployment version*, ``<deployment>.<build ID>`` in Temporal's canonical form. A new
workflow starts on the deployment's *current* version (with none set, no versioned worker takes
it: it waits), and a PINNED workflow keeps every workflow task on that version until it closes. So
a release may change workflow code freely: runs already going finish on the old build, new runs
start on the new build once it is promoted (:func:`promote`, ``lockkeeper deployment promote``).
``workflow.patched`` stays for a fix shipped inside one build (same build ID: the runs already
started on it replay the new code), and ``workflow.deprecate_patch`` once no such run is left.

Every lockkeeper workflow is PINNED: the worker's ``default_versioning_behavior``
(:func:`deployment_config`), and no workflow class declares a behaviour of its own
(tests/worker/test_versioning_rules.py keeps it so; one rule in one place, and a new procedure is pinned
without anyone remembering to say so). Why for each kind:

- a procedure's run carries state (gates, records, the node window) whose shape and meaning are
  its build's: moving it to another build mid-run is the replay hazard ``workflow.patched`` was
  needed for;
- children (node runs, lease workflows) start on their parent's version (Temporal: a child, or a
  continue-as-new, inherits its parent's pinned version for its first workflow task when its task
  queue is in that version, as lockkeeper's always are: children use the parent's queue) and then
  follow their own behaviour. AUTO_UPGRADE there would move a node run to the new build while its
  parent, on the old one, still signals it and waits for it with the old protocol;
- the MachineConfig rollout continues as new with its window in its input's ``carried`` state
  (workflows.machineconfig.handover): continue-as-new of a pinned run stays on its version
  (Temporal's default, ``ContinueAsNewVersioningBehavior.UNSPECIFIED``), so the carried state is
  read by the build that wrote it. Upgrading at continue-as-new would make that format a contract
  between builds; it is not one;
- a lease workflow lives exactly as long as its holder (a child with parent close policy
  TERMINATE, released when the holder ends), so it drains with its holder and never keeps a build
  alive on its own; a node run that is its own node lease likewise.

The price of PINNED: a build's workers must run until its last run closes. :func:`deployment_state`
(``lockkeeper deployment status``) shows per build how many runs are still open on it; visibility
has it too (``TemporalWorkerDeploymentVersion = '<deployment>:<build>'``). docs/production.md,
"Upgrading lockkeeper while procedures run", has the whole procedure.

Promotion: a worker with ``LOCKKEEPER_PROMOTE=auto`` (default) makes its build current when the
deployment has never had a current version (:func:`settle`), so the first worker on a fresh
namespace just works; every later build is promoted by an operator. Servers without worker
deployments (before 1.29.1, ``system.enableDeploymentVersions`` off, the time-skipping test
server) refuse at the worker's start (:class:`VersioningRefused`, :func:`check_server`):
``LOCKKEEPER_VERSIONING=false`` runs unversioned there.

APIs: WorkflowService ``DescribeWorkerDeployment``, ``DescribeWorkerDeploymentVersion``,
``SetWorkerDeploymentCurrentVersion`` (with its conflict token) and ``DescribeTaskQueue`` (its
pollers' ``deployment_options`` and the queue's ``versioning_info``); visibility's
``TemporalWorkerDeploymentVersion`` and ``TemporalWorkflowVersioningBehavior``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from workers.logging import get_logger
from workers.settings import UNVERSIONED

if TYPE_CHECKING:
    from temporalio.worker import WorkerDeploymentConfig

    from workers.settings import Settings

log = get_logger("lockkeeper.versioning")

#: A poller seen this recently (seconds) counts as a live worker. An idle worker's long poll is
#: renewed at least every minute (the server's long-poll expiry), so a live one is never older.
POLLER_FRESH_SECONDS = 120.0
#: How long a starting worker waits for the server to add its task queue to its version.
REGISTER_TIMEOUT_SECONDS = 60.0
#: How long a starting worker waits for its task queue to route new work to the current version.
ROUTING_TIMEOUT_SECONDS = 30.0


class VersioningRefused(RuntimeError):
    """The Temporal server does not run worker deployment versioning for this namespace (too old,
    ``system.enableDeploymentVersions`` off, the time-skipping test server), or did not register
    this worker's task queue in its version. The message says why and how to run anyway
    (``LOCKKEEPER_VERSIONING=false``)."""


class PromoteRefused(RuntimeError):
    """A build was not made current: the deployment or the build is unknown, no worker of it polls,
    or it does not poll a task queue the current build serves. The message says which and what to do."""


def deployment_config(settings: Settings) -> WorkerDeploymentConfig | None:
    """The worker's deployment config: ``settings.deployment_name`` / ``settings.build_id``,
    versioning on, every workflow PINNED unless its class says otherwise (none does: see the
    module doc). ``None`` when ``settings.versioning`` is off: the worker is unversioned.

    This is the one place the split is made. ``lockkeeper worker``, ``python -m workers.worker``,
    the demo and the end-to-end tests' worker processes all go through
    :func:`workers.worker.run_worker` and so are versioned unless told otherwise; the workflow
    tests build the SDK's ``Worker`` themselves without a deployment config, i.e. unversioned,
    which is also all the time-skipping test server supports (it refuses versioning APIs with
    UNIMPLEMENTED).
    """
    if not settings.versioning:
        return None
    from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
    from temporalio.worker import WorkerDeploymentConfig

    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(deployment_name=settings.deployment_name, build_id=settings.build_id),
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )


def _refused_message(address: str, reason: str) -> str:
    return (
        f"the Temporal server at {address} does not run worker versioning ({reason}). lockkeeper pins every "
        "procedure to the worker build it started on, which needs worker deployments (Temporal server 1.29.1 or "
        "newer, dynamic config system.enableDeploymentVersions=true, the default). Set LOCKKEEPER_VERSIONING=false "
        "to run this worker unversioned (then every history-changing workflow edit needs workflow.patched)"
    )


def refuses_versioning(exc: BaseException) -> bool:
    """Whether ``exc`` (an ``RPCError`` of a versioning API) says the server or namespace does not
    run worker deployments at all (see :func:`check_server`), rather than a passing problem."""
    from temporalio.service import RPCError, RPCStatusCode

    if not isinstance(exc, RPCError):
        return False
    return exc.status in (RPCStatusCode.UNIMPLEMENTED, RPCStatusCode.FAILED_PRECONDITION) or (
        "disabled" in exc.message.lower() and "deployment" in exc.message.lower()
    )


async def check_server(client: Any, settings: Settings) -> None:
    """Make sure the server runs worker deployments before a versioned worker polls: a server
    that does not still accepts the versioned polls and then never hands them a task, silently.

    Asks ``DescribeWorkerDeployment`` for ``settings.deployment_name``: an answer or NOT_FOUND is
    fine; UNIMPLEMENTED (an old server, the time-skipping test server: "Worker Versioning not yet
    supported in test server"), FAILED_PRECONDITION, or any error saying versions are disabled
    (Server 1.32 with ``system.enableDeploymentVersions`` off answers PERMISSION_DENIED "Worker
    Deployment Versions are disabled on this namespace.") raise :class:`VersioningRefused`. Any
    other error (a credential without read rights) is logged and left to the polls.
    """
    from temporalio.api.workflowservice.v1 import DescribeWorkerDeploymentRequest
    from temporalio.service import RPCError, RPCStatusCode

    try:
        await client.workflow_service.describe_worker_deployment(
            DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=settings.deployment_name)
        )
    except RPCError as exc:
        if refuses_versioning(exc):
            raise VersioningRefused(_refused_message(settings.temporal_address, exc.message)) from None
        if exc.status != RPCStatusCode.NOT_FOUND:
            log.warning("cannot check worker versioning", deployment=settings.deployment_name, error=exc.message)


# --- who polls a task queue, and where its new workflows go -------------------------------------


@dataclass(frozen=True)
class Poller:
    """One worker polling a task queue: its ``identity``, its deployment and build (both None for
    an unversioned worker) and when the server last saw it (UTC, None if unknown)."""

    identity: str
    deployment: str | None = None
    build_id: str | None = None
    last_seen: datetime | None = None

    def label(self) -> str:
        """``identity (build B)`` or ``identity (unversioned)``."""
        return f"{self.identity} (build {self.build_id})" if self.build_id else f"{self.identity} (unversioned)"


@dataclass(frozen=True)
class QueueWorkers:
    """Who polls one task queue (workflow or activity tasks), and where its new workflows go.

    ``pollers``: the live ones (:data:`POLLER_FRESH_SECONDS`). ``deployment`` / ``current``: the
    deployment and build ID the queue sends new workflows to (``current`` None: the queue is
    unversioned, or in a deployment without a current version, and new workflows go to
    unversioned workers only). ``ramping`` / ``ramping_percentage``: a build taking that share of
    new workflows, if any.
    """

    task_queue: str
    pollers: list[Poller]
    deployment: str | None = None
    current: str | None = None
    ramping: str | None = None
    ramping_percentage: float = 0.0

    def targets(self) -> list[str | None]:
        """The builds new workflows go to (None: unversioned workers)."""
        out: list[str | None] = [self.current]
        if self.ramping and self.ramping_percentage > 0:
            out.append(self.ramping)
        return out

    def of_build(self, build_id: str | None) -> list[Poller]:
        """The pollers of ``build_id`` (None: the unversioned ones)."""
        if build_id is None:
            return [p for p in self.pollers if p.build_id is None]
        return [p for p in self.pollers if p.build_id == build_id and p.deployment == self.deployment]

    def serving(self) -> list[Poller]:
        """The pollers that would take a new workflow's first task (of the current or ramping build)."""
        return [p for t in self.targets() for p in self.of_build(t)]

    def gap(self) -> str | None:
        """Why a workflow started now would wait for a worker, or None when every build new workflows
        go to has a live poller. One sentence that names the builds that poll and the fix."""
        if not self.pollers:
            return f"no worker polls task queue {self.task_queue!r}"
        polling = sorted({p.build_id for p in self.pollers if p.build_id}) + (
            ["unversioned workers"] if any(p.build_id is None for p in self.pollers) else []
        )
        polling_text = ", ".join(b if b == "unversioned workers" else f"build {b}" for b in polling)
        missing = [t for t in self.targets() if not self.of_build(t)]
        if not missing:
            return None
        target = missing[0]
        others = [b for b in polling if b not in ("unversioned workers", target)]
        promote = (
            f"`lockkeeper deployment promote {others[0]}`" if len(others) == 1
            else f"`lockkeeper deployment promote BUILD` with one of {', '.join(others)}"
        )
        if target is None:
            deployment = sorted({p.deployment or "" for p in self.pollers if p.build_id})[0]
            return (
                f"workers of deployment {deployment!r} poll task queue {self.task_queue!r} ({polling_text}), but the "
                f"deployment has no current version, so new workflows go to unversioned workers and there are none. "
                f"Make a build current: {promote}"
            )
        role = "current" if target == self.current else f"ramping ({self.ramping_percentage:g}%)"
        hint = f"{promote}, or " if others else ""
        return (
            f"no worker of build {target}, the {role} version of deployment {self.deployment!r} where new workflows go, "
            f"polls task queue {self.task_queue!r} (it is polled by {polling_text}). Fix: {hint}start a worker of build "
            f"{target} (LOCKKEEPER_BUILD_ID={target})"
        )


def _version_of(msg: Any) -> tuple[str | None, str | None]:
    """(deployment name, build ID) of a ``WorkerDeploymentVersion`` message; (None, None) when
    it is empty (unversioned)."""
    if msg is None or not msg.build_id or msg.build_id == UNVERSIONED:
        return None, None
    return msg.deployment_name or None, msg.build_id


async def describe_queue(
    client: Any, task_queue: str, *, activity: bool = False, fresh_seconds: float = POLLER_FRESH_SECONDS
) -> QueueWorkers:
    """Who polls ``task_queue`` (workflow tasks, or activity tasks with ``activity``) and where
    its new workflows go (``DescribeTaskQueue``: ``pollers`` with their ``deployment_options``,
    ``versioning_info`` with the current and ramping versions). Raises ``RPCError`` as the server does."""
    from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType, WorkerVersioningMode
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    kind = TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY if activity else TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW
    resp = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
            task_queue_type=kind,
        )
    )
    now = datetime.now(UTC)
    pollers = []
    for p in resp.pollers:
        seen = p.last_access_time.ToDatetime(UTC) if p.HasField("last_access_time") else None
        if seen is not None and (now - seen).total_seconds() > fresh_seconds:
            continue
        opts = p.deployment_options
        versioned = opts.worker_versioning_mode == WorkerVersioningMode.WORKER_VERSIONING_MODE_VERSIONED
        pollers.append(
            Poller(
                identity=p.identity,
                deployment=opts.deployment_name if versioned else None,
                build_id=opts.build_id if versioned else None,
                last_seen=seen,
            )
        )
    vi = resp.versioning_info
    current_dep, current = _version_of(vi.current_deployment_version if vi.HasField("current_deployment_version") else None)
    ramp_dep, ramping = _version_of(vi.ramping_deployment_version if vi.HasField("ramping_deployment_version") else None)
    deployment = current_dep or ramp_dep
    if deployment is None:
        # A queue whose deployment has no current version yet says nothing about the deployment:
        # name it after its versioned pollers, for the message.
        names = sorted({p.deployment for p in pollers if p.deployment})
        deployment = names[0] if names else None
    return QueueWorkers(
        task_queue=task_queue,
        pollers=pollers,
        deployment=deployment,
        current=current,
        ramping=ramping,
        ramping_percentage=float(vi.ramping_version_percentage) if ramping else 0.0,
    )


# --- a deployment's versions ----------------------------------------------------------------------

def _status_name(summary: Any) -> str:
    """``current`` / ``ramping`` / ``draining`` / ``drained`` / ``inactive`` / ``created`` of a
    version summary (``WorkerDeploymentVersionStatus`` without its prefix)."""
    from temporalio.api.enums.v1 import VersionDrainageStatus, WorkerDeploymentVersionStatus

    name = WorkerDeploymentVersionStatus.Name(summary.status).removeprefix("WORKER_DEPLOYMENT_VERSION_STATUS_").lower()
    if name == "draining" and summary.drainage_status == VersionDrainageStatus.VERSION_DRAINAGE_STATUS_DRAINED:
        return "drained"
    return name


@dataclass
class VersionState:
    """One build of a deployment: ``build_id``; ``status`` (current, ramping, draining: no longer
    current and runs may still be pinned to it, drained: none is, inactive: never current);
    ``created`` (UTC); ``task_queues`` it polls (``name/workflow``, ``name/activity``);
    ``workers`` (the live ones, as ``identity on queue``); ``running`` (open
    workflows whose last task ran on it) and ``pinned`` (those of them pinned to it), from
    visibility, None when the server cannot count them."""

    build_id: str
    status: str
    created: datetime | None = None
    task_queues: list[str] = field(default_factory=list)
    workers: list[str] = field(default_factory=list)
    running: int | None = None
    pinned: int | None = None


@dataclass
class DeploymentState:
    """A worker deployment: ``name``, its ``current`` build (None: none, new workflows go to
    unversioned workers), ``ramping`` build and share (percent), and every version, newest first.
    ``conflict_token``: the server's token of this reading (a change made on it is refused if the
    deployment changed since)."""

    name: str
    current: str | None
    ramping: str | None
    ramping_percentage: float
    versions: list[VersionState]
    conflict_token: bytes = field(default=b"", repr=False)

    def version(self, build_id: str) -> VersionState | None:
        """The version of ``build_id``, None if the deployment has none."""
        return next((v for v in self.versions if v.build_id == build_id), None)

    def to_data(self) -> dict[str, Any]:
        """Plain data for ``-o json|yaml`` (times as ISO 8601 strings)."""
        d = asdict(self)
        d.pop("conflict_token")
        for v in d["versions"]:
            v["created"] = v["created"].isoformat(timespec="seconds") if v["created"] else None
        return d


def visibility_version(deployment: str, build_id: str) -> str:
    """The value of the ``TemporalWorkerDeploymentVersion`` search attribute for a build
    (``<deployment>:<build ID>``, as the server writes it)."""
    return f"{deployment}:{build_id}"


def _literal(value: str) -> str:
    """A string literal for a visibility query."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


async def _count(client: Any, query: str) -> int | None:
    from temporalio.service import RPCError

    try:
        return int((await client.count_workflows(query)).count)
    except RPCError:
        return None


async def deployment_state(client: Any, name: str, *, counts: bool = True) -> DeploymentState | None:
    """``name``'s current and ramping builds and its versions with their task queues, live pollers
    and (``counts``) open and pinned workflow counts. None when the deployment does not exist
    (no versioned worker of it ever polled). Raises ``RPCError`` as the server does (e.g.
    FAILED_PRECONDITION when versioning is off)."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.workflowservice.v1 import DescribeWorkerDeploymentRequest, DescribeWorkerDeploymentVersionRequest
    from temporalio.service import RPCError, RPCStatusCode

    try:
        resp = await client.workflow_service.describe_worker_deployment(
            DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=name)
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    info = resp.worker_deployment_info
    rc = info.routing_config
    _, current = _version_of(rc.current_deployment_version if rc.HasField("current_deployment_version") else None)
    _, ramping = _version_of(rc.ramping_deployment_version if rc.HasField("ramping_deployment_version") else None)
    queues: dict[tuple[str, bool], QueueWorkers] = {}
    versions = []
    for s in info.version_summaries:
        build = s.deployment_version.build_id
        v = VersionState(
            build_id=build,
            status=_status_name(s),
            created=s.create_time.ToDatetime(UTC) if s.HasField("create_time") else None,
        )
        vresp = await client.workflow_service.describe_worker_deployment_version(
            DescribeWorkerDeploymentVersionRequest(namespace=client.namespace, deployment_version=s.deployment_version)
        )
        workers: list[str] = []
        for tq in vresp.worker_deployment_version_info.task_queue_infos:
            activity = tq.type == TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
            v.task_queues.append(f"{tq.name}/{'activity' if activity else 'workflow'}")
            key = (tq.name, activity)
            if key not in queues:
                queues[key] = await describe_queue(client, tq.name, activity=activity)
            for p in queues[key].pollers:
                if p.deployment == name and p.build_id == build and f"{p.identity} on {tq.name}" not in workers:
                    workers.append(f"{p.identity} on {tq.name}")
        v.workers = workers
        if counts:
            where = f"TemporalWorkerDeploymentVersion = {_literal(visibility_version(name, build))} AND ExecutionStatus = 'Running'"
            v.running = await _count(client, where)
            v.pinned = await _count(client, where + " AND TemporalWorkflowVersioningBehavior = 'Pinned'")
        versions.append(v)
    versions.sort(key=lambda v: v.created or datetime.min.replace(tzinfo=UTC), reverse=True)
    return DeploymentState(
        name=name,
        current=current,
        ramping=ramping,
        ramping_percentage=float(rc.ramping_version_percentage) if ramping else 0.0,
        versions=versions,
        conflict_token=resp.conflict_token,
    )


async def promote(client: Any, name: str, build_id: str, *, identity: str, force: bool = False) -> str | None:
    """Make ``build_id`` the current version of deployment ``name``: every new workflow on its task
    queues starts there; runs pinned to other builds stay where they are. Returns the build that
    was current before (None: none), or ``build_id`` itself when it already was.

    Refuses (:class:`PromoteRefused`) when the deployment or the build is unknown (a build is known
    once one of its workers polled), and, unless ``force``, when no worker of the build polls now
    (new procedures would wait for one) or when it does not poll a workflow task queue that the
    current build serves (the server would leave that queue with no current version: its new
    procedures would wait too; e.g. a host-only worker of the old build not upgraded yet).
    Rollback is a promotion of the older build. Raises ``RPCError`` for other server errors, e.g.
    when the deployment changed between this reading and the change (its conflict token).
    """
    from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest

    state = await deployment_state(client, name, counts=False)
    if state is None:
        raise PromoteRefused(
            f"no worker deployment {name!r} in namespace {client.namespace!r}: it appears when a worker of it first "
            "polls (`lockkeeper worker`, LOCKKEEPER_DEPLOYMENT_NAME)"
        )
    target = state.version(build_id)
    if target is None:
        known = ", ".join(v.build_id for v in state.versions) or "none"
        raise PromoteRefused(
            f"build {build_id!r} is not a version of deployment {name!r} (versions: {known}); a build appears when one "
            f"of its workers first polls (LOCKKEEPER_BUILD_ID={build_id})"
        )
    if state.current == build_id:
        return build_id
    if not force:
        if not target.workers:
            raise PromoteRefused(
                f"no worker of build {build_id!r} polls now: new procedures would wait for one. Start its workers "
                "first, or add --force"
            )
        current = state.version(state.current) if state.current else None
        if current is not None:
            theirs = {q for q in current.task_queues if q.endswith("/workflow")}
            ours = {q for q in target.task_queues if q.endswith("/workflow")}
            missing = sorted(q.removesuffix("/workflow") for q in theirs - ours)
            if missing:
                raise PromoteRefused(
                    f"build {build_id!r} does not poll task queue(s) {', '.join(missing)} that build {state.current!r} "
                    "serves: after the promotion new procedures there would have no current version and wait. Start "
                    f"workers of build {build_id!r} on them (a host-only worker too), or add --force"
                )
    await client.workflow_service.set_worker_deployment_current_version(
        SetWorkerDeploymentCurrentVersionRequest(
            namespace=client.namespace,
            deployment_name=name,
            build_id=build_id,
            conflict_token=state.conflict_token,
            identity=identity,
            ignore_missing_task_queues=force,
        )
    )
    return state.current


# --- a starting worker ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settled:
    """Where a started worker stands: ``current`` (the deployment's current build, None: none),
    ``promoted`` (this worker just made its build current); ``known`` False when the server would
    not let this worker read its deployment (then neither is known)."""

    current: str | None
    promoted: bool
    known: bool = True


async def _registered(client: Any, settings: Settings, activity: bool) -> tuple[bytes, Any] | None:
    """(conflict token, routing config) once the server lists ``settings.task_queue`` (workflow or
    activity tasks) in this worker's version, else None."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.workflowservice.v1 import DescribeWorkerDeploymentRequest, DescribeWorkerDeploymentVersionRequest
    from temporalio.common import WorkerDeploymentVersion
    from temporalio.service import RPCError, RPCStatusCode

    kind = TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY if activity else TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW
    try:
        vresp = await client.workflow_service.describe_worker_deployment_version(
            DescribeWorkerDeploymentVersionRequest(
                namespace=client.namespace,
                deployment_version=WorkerDeploymentVersion(settings.deployment_name, settings.build_id)._to_proto(),
            )
        )
        if not any(
            tq.name == settings.task_queue and tq.type == kind
            for tq in vresp.worker_deployment_version_info.task_queue_infos
        ):
            return None
        resp = await client.workflow_service.describe_worker_deployment(
            DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=settings.deployment_name)
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    return resp.conflict_token, resp.worker_deployment_info.routing_config


async def settle(
    client: Any,
    settings: Settings,
    *,
    identity: str,
    runs_workflows: bool,
    running: asyncio.Future[Any] | None = None,
    register_timeout: float = REGISTER_TIMEOUT_SECONDS,
    routing_timeout: float = ROUTING_TIMEOUT_SECONDS,
) -> Settled:
    """After a versioned worker started polling, before it says it is ready:

    1. wait until the server lists its task queue in its version (workflow tasks, or activity
       tasks for a worker that ``runs_workflows`` not), else raise :class:`VersioningRefused`
       after ``register_timeout`` seconds (a version holds at most
       ``matching.maxTaskQueuesInDeploymentVersion`` task queues, 100 by default; past that the
       server refuses the polls with ResourceExhausted, which the SDK retries forever);
    2. with ``settings.promote == "auto"`` and a worker that runs workflows: make its build current
       when the deployment has never had a current version (set by nobody, ever: an operator's
       deliberate return to "unversioned" is left alone); a concurrent worker doing the same wins
       through the conflict token and this one re-reads;
    3. when its build is current: wait (``routing_timeout`` seconds at most) until its task queue
       routes new workflows to it, so a ``lockkeeper start`` right after "worker started" finds it.

    ``running``: the worker's run task; raises its error if it ends meanwhile. A server refusing
    the promotion (PERMISSION_DENIED, ...) is logged, not raised: an operator can still promote.
    """
    from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest
    from temporalio.service import RPCError

    def check_running() -> None:
        if running is not None and running.done():
            running.result()
            raise RuntimeError("the worker stopped before the server registered its version")

    deadline = time.monotonic() + register_timeout
    while True:
        check_running()
        try:
            got = await _registered(client, settings, activity=not runs_workflows)
        except RPCError as exc:
            if refuses_versioning(exc):
                raise VersioningRefused(_refused_message(settings.temporal_address, exc.message)) from None
            log.warning("cannot read the worker deployment: not waiting for this build's registration, not promoting it",
                        deployment=settings.deployment_name, error=exc.message)
            return Settled(current=None, promoted=False, known=False)
        if got is not None:
            break
        if time.monotonic() > deadline:
            raise VersioningRefused(
                f"the server did not add task queue {settings.task_queue!r} to version "
                f"{settings.deployment_name}.{settings.build_id} within {register_timeout:.0f}s, so this worker would "
                "never get a task (its log has the server's reason). A version holds at most "
                "matching.maxTaskQueuesInDeploymentVersion task queues (100 by default), a deployment at most "
                "matching.maxTaskQueuesInDeployment (1,000) and a namespace at most matching.maxDeployments deployments "
                "(100): raise them, use another LOCKKEEPER_DEPLOYMENT_NAME, or set LOCKKEEPER_VERSIONING=false"
            )
        await asyncio.sleep(0.2)
    promoted = False
    error: str | None = None
    for _ in range(3):
        token, rc = got
        _, current = _version_of(rc.current_deployment_version if rc.HasField("current_deployment_version") else None)
        fresh = current is None and not rc.HasField("current_version_changed_time")
        if not (fresh and runs_workflows and settings.promote == "auto"):
            error = None
            break
        try:
            await client.workflow_service.set_worker_deployment_current_version(
                SetWorkerDeploymentCurrentVersionRequest(
                    namespace=client.namespace,
                    deployment_name=settings.deployment_name,
                    build_id=settings.build_id,
                    conflict_token=token,
                    identity=identity,
                )
            )
        except RPCError as exc:
            # A stale conflict token (another worker promoted first) or a refusal: read again;
            # the next round sees what the other one set, or gives up with the error.
            error = exc.message
            got = await _registered(client, settings, activity=False) or got
            continue
        promoted, current, error = True, settings.build_id, None
        break
    if error is not None:
        log.warning("could not make this build current", build_id=settings.build_id, error=error)
    if current == settings.build_id and runs_workflows:
        deadline = time.monotonic() + routing_timeout
        while (await describe_queue(client, settings.task_queue)).current != settings.build_id:
            check_running()
            if time.monotonic() > deadline:
                log.warning("task queue does not route to this build yet", task_queue=settings.task_queue,
                            build_id=settings.build_id)
                break
            await asyncio.sleep(0.2)
    return Settled(current=current, promoted=promoted)
