"""The ``check_preconditions`` activity: check every declared precondition, read-only, at once.

One :class:`~activities.preflight.models.PreconditionResult` per precondition, in the input's
order; a check never fails the activity: a check that raises (an API error, an unreachable host)
or outlives its bound is ``failed`` with the error's text. Checks run concurrently, at most
``concurrency`` at a time, each under its own bound (:meth:`CheckPreconditionsInput.check_seconds`);
the activity heartbeats every :data:`activities.context.HEARTBEAT_SECONDS` with how many are done,
so a dead worker is noticed within the caller's heartbeat timeout and a cancel reaches it.

What each kind does (the models' docstrings say what it means):

- ``worker-executable``: ``shutil.which`` in this worker process. It checks the worker that runs
  this activity, so a procedure calls it on the task queue whose worker will run the program (by
  default the procedure's own queue, where its activities run);
- ``host-executable``: ``command -v PROGRAM`` on the host; exit 0 and the path printed = found,
  exit 1 = not found (POSIX ``command``; RHEL and RHCOS ship bash's POSIX builtin wrappers, so
  ``/usr/bin/command`` runs as any argv does, under the SSH executor's ``sudo -n timeout``); a
  ``local`` access is this worker, looked up with ``shutil.which``;
- ``reboot-access``: ``true`` through the access (SSH connects and authenticates; a debug pod is
  created, runs ``true`` and is deleted: the one write a preflight makes); local needs nothing;
- ``port-free``: the well-known table (:mod:`activities.preflight.ports`), then ``ss -Huln`` /
  ``ss -Htln`` on the host, parsed by :func:`~activities.preflight.ports.parse_ss`;
- ``label-unreferenced``: lists every workload kind and the Namespaces (a kind the API server
  does not serve, e.g. DeploymentConfig on plain Kubernetes, is skipped and said so in the
  findings) and ``cat``\\ s each master's ``master-config.yaml``
  (:mod:`activities.preflight.references`);
- ``names-exist`` / ``selector-matches``: one Node list (shared by every check of one call) / a
  Node list with the label selector;
- ``version-skew``: the API server's ``/version`` (read once per call) unless the precondition
  names the control plane's version (:mod:`activities.preflight.versions`);
- ``update-step``: the ClusterVersion ``version`` (OpenShift 4; NotFound: not served), else the
  API server's ``/version`` as an OpenShift 3 release (:mod:`activities.preflight.versions`);
- ``queue-polled``: ``DescribeTaskQueue`` with the worker's own Temporal client
  (``activity.client()``): a workflow poller seen recently;
- ``input``: reports what the procedure computed.

Host commands go through :class:`activities.host.factory.ExecutorFactory`, as host steps do: the
worker's SSH key, known_hosts, SSH user and ``LOCKKEEPER_SSH_SUDO`` apply, commands are argv
lists bounded on the host. Cluster reads go through the Kubernetes gateway (in a thread).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from temporalio import activity

from activities.cluster.base import GatewayActivities
from activities.context import HEARTBEAT_SECONDS
from activities.host.executors import NodeCommandError, find_etcd_binary
from activities.host.factory import ExecutorFactory
from activities.host.models import CommandResult, ExecBackend, HostAccess
from activities.kube import objects
from activities.kube.errors import NotFound
from activities.preflight import ports, references, versions
from activities.preflight.models import (
    CHECK_PRECONDITIONS,
    CheckPreconditionsInput,
    CheckPreconditionsResult,
    HostExecutable,
    InputCheck,
    LabelUnreferenced,
    NamesExist,
    PortFree,
    Precondition,
    QueuePolled,
    PreconditionResult,
    PreconditionState,
    RebootAccess,
    SelectorMatches,
    UpdateStep,
    VersionSkew,
    WorkerExecutable,
)

if TYPE_CHECKING:
    from activities.kube.gateway import KubeGateway

#: References named in a label check's one-line detail (the findings list them all).
SHOWN_REFERENCES = 3


def _result(p: Precondition, state: PreconditionState, detail: str, **kw: Any) -> PreconditionResult:
    return PreconditionResult(precondition=p, state=state, detail=detail, **kw)


def ok(p: Precondition, detail: str, **kw: Any) -> PreconditionResult:
    """An ``ok`` result."""
    return _result(p, PreconditionState.OK, detail, **kw)


def failed(p: Precondition, detail: str, **kw: Any) -> PreconditionResult:
    """A ``failed`` result."""
    return _result(p, PreconditionState.FAILED, detail, **kw)


def not_run(p: Precondition, why: str, detail: str = "", **kw: Any) -> PreconditionResult:
    """A ``not-run`` result saying ``why``."""
    return _result(p, PreconditionState.NOT_RUN, detail, why_not_run=why, **kw)


def error_text(exc: BaseException) -> str:
    """An exception as one line: its message (an ApplicationError's ``message``) or its type."""
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())


def has_label(labels: dict[str, str], label: str) -> bool:
    """``labels`` carry ``label`` (``KEY``: any value; ``KEY=VALUE``: that value)."""
    key, sep, value = label.partition("=")
    return key in labels and (not sep or labels[key] == value)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


class _Check:
    """One call's checks: the shared reads (Node list, ``/version``), the bound and the progress."""

    def __init__(self, owner: PreflightActivities, input: CheckPreconditionsInput) -> None:
        self.owner = owner
        self.input = input
        self.done = 0
        self._sem = asyncio.Semaphore(input.concurrency)
        self._nodes_lock = asyncio.Lock()
        self._version_lock = asyncio.Lock()
        self._nodes: dict[str, dict[str, str]] | None = None
        self._version: str | None = None

    # -- shared reads ---------------------------------------------------------------------------

    async def nodes(self) -> dict[str, dict[str, str]]:
        """Node name → labels, listed once per call."""
        async with self._nodes_lock:
            if self._nodes is None:
                items = await asyncio.to_thread(lambda: self.owner.gateway.list_nodes())
                self._nodes = {objects.meta(n).get("name", ""): objects.labels(n) for n in items}
            return self._nodes

    async def api_version(self) -> str:
        """The API server's ``gitVersion``, read once per call."""
        async with self._version_lock:
            if self._version is None:
                doc = await asyncio.to_thread(lambda: self.owner.gateway.server_version())
                self._version = str(doc.get("gitVersion") or "")
            return self._version

    async def run(self, access: HostAccess, argv: list[str]) -> CommandResult:
        """``argv`` on ``access``'s host with the call's command timeout (NodeCommandError when
        the host cannot be reached)."""
        return await self.owner.executors.for_access(access).run(argv, timeout=self.input.command_timeout_seconds)

    # -- the loop -------------------------------------------------------------------------------

    async def all(self) -> list[PreconditionResult]:
        """Every check, concurrently (bounded), heartbeating the progress."""
        beat = asyncio.create_task(self._beat()) if activity.in_activity() else None
        try:
            return list(await asyncio.gather(*(self.one(p) for p in self.input.preconditions)))
        finally:
            if beat is not None:
                beat.cancel()

    async def _beat(self) -> None:
        total = len(self.input.preconditions)
        while True:
            activity.heartbeat({"checked": self.done, "of": total})
            await asyncio.sleep(HEARTBEAT_SECONDS)

    async def one(self, p: Precondition) -> PreconditionResult:
        """One check under the semaphore and its bound; an error or a timeout is ``failed``."""
        bound = self.input.check_seconds(p)
        async with self._sem:
            try:
                result = await asyncio.wait_for(self._dispatch(p), bound)
            except TimeoutError:
                result = failed(p, f"the check did not finish within {bound:g} s")
            except NodeCommandError as exc:
                result = failed(p, f"cannot run commands there: {error_text(exc)}")
            except Exception as exc:  # noqa: BLE001 - a check that errors is a failed check, never a crash
                result = failed(p, f"the check could not be made: {error_text(exc)}")
            self.done += 1
        return result.model_copy(update={"checked_at": datetime.now(UTC)})

    def _dispatch(self, p: Precondition) -> Awaitable[PreconditionResult]:
        checks: dict[type, Callable[[Any], Awaitable[PreconditionResult]]] = {
            WorkerExecutable: self.worker_executable, HostExecutable: self.host_executable,
            RebootAccess: self.reboot_access, PortFree: self.port_free, LabelUnreferenced: self.label_unreferenced,
            NamesExist: self.names_exist, SelectorMatches: self.selector_matches, VersionSkew: self.version_skew,
            UpdateStep: self.update_step,
            InputCheck: self.input_check, QueuePolled: self.queue_polled,
        }
        return checks[type(p)](p)

    # -- the kinds ------------------------------------------------------------------------------

    async def worker_executable(self, p: WorkerExecutable) -> PreconditionResult:
        """``shutil.which`` on this worker."""
        path = await asyncio.to_thread(self.owner.which, p.program)  # a PATH scan touches the file system
        if path:
            return ok(p, f"found at {path}", resolved=path)
        if os.sep in p.program:
            return failed(p, "no executable file at that path on the worker")
        return failed(p, "not found on the worker's PATH",
                      findings=[f"PATH={os.environ.get('PATH', '')}"])

    async def host_executable(self, p: HostExecutable) -> PreconditionResult:
        """``command -v PROGRAM`` on the host; a ``local`` access's host is this worker, looked up
        like a worker executable (no ``/usr/bin/command`` needed on it)."""
        if p.access.backend == ExecBackend.LOCAL:
            if p.local_lookup == "etcd" and os.sep not in p.program:
                try:
                    path = await asyncio.to_thread(find_etcd_binary, p.program)
                except NodeCommandError as exc:
                    return failed(p, f"not found (local): {error_text(exc)}")
                return ok(p, f"found at {path} (local, etcd's lookup)", resolved=path)
            path = await asyncio.to_thread(self.owner.which, p.program)
            return ok(p, f"found at {path} (local)", resolved=path) if path else failed(p, "not found on the local PATH")
        res = await self.run(p.access, ["command", "-v", p.program])
        if res.ok and _first_line(res.stdout):
            path = _first_line(res.stdout)
            return ok(p, f"found at {path} ({p.access.describe()})", resolved=path)
        if res.exit_code == 1:
            return failed(p, f"not found on the host's PATH (command -v exited 1, {p.access.describe()})")
        return failed(p, f"could not look it up: {res.summary(200)}")

    async def reboot_access(self, p: RebootAccess) -> PreconditionResult:
        """``true`` through the access (local: nothing to prove)."""
        if p.access.backend == ExecBackend.LOCAL:
            return ok(p, "local commands need no access")
        res = await self.run(p.access, ["true"])
        if res.ok:
            return ok(p, f"ran true there in {res.duration_seconds:g} s")
        return failed(p, f"true did not run: {res.summary(200)}")

    async def port_free(self, p: PortFree) -> PreconditionResult:
        """The well-known table, then the host's listening sockets."""
        entry = ports.well_known_owner(p.port, p.protocol, glusterfs=p.glusterfs)
        if entry is not None and not p.allow_well_known:
            return failed(p, f"a well-known cluster port: {entry.describe()}", findings=[f"source: {entry.source}"])
        known = f"well-known ({entry.describe()}), taken back knowingly; " if entry is not None else ""
        if p.access is None:
            return not_run(p, "no host access given: the host's sockets were not listed",
                           detail=known.rstrip("; ") or "not a well-known port")
        res = await self.run(p.access, ports.ss_argv(p.protocol, processes=p.owner is not None))
        if not res.ok:
            return failed(p, f"ss could not list the sockets: {res.summary(200)}")
        sockets = ports.parse_ss(res.stdout)
        listening = ports.listeners_on(sockets, p.port, p.protocol)
        own = [s for s in listening if p.owner is not None and ports.processes_of(s) and
               all(name == p.owner for name in ports.processes_of(s))]
        busy = [s for s in listening if s not in own]
        if busy:
            def shown(s: ports.Socket) -> str:
                names = ports.processes_of(s)
                by = f" by {', '.join(names)}" if names else (" by a process ss does not name" if p.owner else "")
                return s.local() + by
            return failed(p, f"in use on the host: {', '.join(shown(s) for s in busy)}", findings=[s.line for s in busy])
        if own:
            return ok(p, f"{known}held by {p.owner} itself ({', '.join(s.local() for s in own)}), which is stopped before "
                         "the port is taken again; nothing else listens", findings=[s.line for s in own])
        return ok(p, f"{known}free ({len(sockets)} {p.protocol} sockets listen, none on {p.port})")

    async def label_unreferenced(self, p: LabelUnreferenced) -> PreconditionResult:
        """The cluster's workloads and namespaces, and each master's master-config.yaml."""
        key, value = p.key, p.value
        cluster = asyncio.to_thread(self._scan_cluster, key, value, p.covered)
        masters = asyncio.gather(*(self._master_refs(p, m.name, m.access) for m in p.masters))
        (refs, notes), per_master = await asyncio.gather(cluster, masters)
        errors = [e for _, e in per_master if e]
        refs += [r for rs, _ in per_master for r in rs]
        remaining = [r for r in refs if not r.covered]
        rewritten = len(refs) - len(remaining)
        findings = [r.line() for r in refs] + errors + notes
        if remaining or errors:
            parts = []
            if remaining:
                shown = "; ".join(f"{r.where} ({r.text})" for r in remaining[:SHOWN_REFERENCES])
                more = f" and {len(remaining) - SHOWN_REFERENCES} more" if len(remaining) > SHOWN_REFERENCES else ""
                parts.append(f"still selected by {shown}{more}")
                values = references.uncovered_values(remaining)
                if values:
                    parts.append(f"values no mapping covers: {', '.join(f'{key}={v}' for v in values)}")
            if errors:
                parts.append(f"master-config.yaml not read on {len(errors)} master(s)")
            return failed(p, "; ".join(parts), findings=findings)
        done = f" ({rewritten} reference(s) rewritten by the procedure)" if rewritten else ""
        if not p.masters:
            return not_run(p, f"no master access given: {p.master_config_path}'s "
                              f"{references.MASTER_CONFIG_FIELD} was not read",
                           detail=f"no workload or namespace selects it{done}", findings=findings)
        return ok(p, f"nothing else selects it on {len(p.masters)} master(s), the workloads and namespaces{done}",
                  findings=findings)

    def _scan_cluster(self, key: str, value: str | None, covered: list[str]) -> tuple[list[references.LabelReference], list[str]]:
        gw = self.owner.gateway
        refs: list[references.LabelReference] = []
        notes: list[str] = []
        for kind in references.WORKLOAD_KINDS:
            try:
                items = gw.list(kind)
            except NotFound:
                notes.append(f"{kind}: not served by this API server, not scanned")
                continue
            for obj in items:
                if kind in references.OWNED_KINDS and references.has_controller_owner(obj):
                    continue
                refs += references.scan_workload(kind, obj, key, value, covered)
        for ns in gw.list("Namespace"):
            refs += references.scan_namespace(ns, key, value, covered)
        return refs, notes

    async def _master_refs(self, p: LabelUnreferenced, name: str,
                           access: HostAccess) -> tuple[list[references.LabelReference], str]:
        try:
            res = await self.run(access, ["cat", p.master_config_path])
        except NodeCommandError as exc:
            return [], f"MasterConfig {name}: cannot run commands there: {error_text(exc)}"
        if not res.ok:
            return [], f"MasterConfig {name}: {res.summary(200)}"
        try:
            return references.scan_master_config(name, p.master_config_path, res.stdout, p.key, p.value, p.covered,
                                                 rewritten=p.rewrites_master_config), ""
        except ValueError as exc:
            return [], f"MasterConfig {name}: {p.master_config_path}: {exc}"

    async def names_exist(self, p: NamesExist) -> PreconditionResult:
        """Every name is a Node (carrying ``label``)."""
        nodes = await self.nodes()
        missing = [n for n in p.names if n not in nodes]
        unlabelled = [n for n in p.names if n in nodes and p.label and not has_label(nodes[n], p.label)]
        if missing or unlabelled:
            parts = []
            if missing:
                parts.append(f"no Node named {', '.join(missing)}")
            if unlabelled:
                parts.append(f"{', '.join(unlabelled)} not labelled {p.label}")
            return failed(p, "; ".join(parts))
        carry = f", labelled {p.label}" if p.label else ""
        return ok(p, f"{'it exists' if len(p.names) == 1 else f'all {len(p.names)} exist'}{carry}")

    async def selector_matches(self, p: SelectorMatches) -> PreconditionResult:
        """A Node list with the selector."""
        items = await asyncio.to_thread(lambda: self.owner.gateway.list_nodes(label_selector=p.selector))
        names = sorted(objects.meta(n).get("name", "") for n in items)
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        if len(names) >= p.at_least:
            return ok(p, f"matches {len(names)} node(s): {shown}")
        needed = f", at least {p.at_least} needed" if p.at_least > 1 else ""
        return failed(p, f"matches {len(names)} node(s){': ' + shown if names else ''}{needed}")

    async def version_skew(self, p: VersionSkew) -> PreconditionResult:
        """The target kubelet against the control plane's version (kubelet not newer)."""
        if p.control_plane_version:
            cp, source = p.control_plane_version, "given"
        else:
            cp, source = await self.api_version(), "the API server's /version"
        try:
            too_new = versions.kubelet_too_new(p.target_version, cp)
        except ValueError as exc:
            return failed(p, str(exc))
        if too_new:
            return failed(p, f"newer than the control plane's {cp} ({source}): a kubelet must not be newer than "
                             "kube-apiserver (Kubernetes version-skew policy)")
        return ok(p, f"not newer than the control plane's {cp} ({source})")

    async def update_step(self, p: UpdateStep) -> PreconditionResult:
        """The cluster's version now against ``p.target_version`` (one minor version at most, not
        back): :class:`~activities.preflight.models.UpdateStep`."""
        if not p.target_version:
            return not_run(p, "the target version is not known: give it (--to-version, target_version)")
        try:
            target = versions.parse_cluster_version(p.target_version)
        except ValueError as exc:
            return failed(p, str(exc))
        current, source = await self._cluster_version()
        if current is None:
            return not_run(p, source)
        problem = versions.update_step_problem(current, target)
        if problem is not None:
            return failed(p, f"{problem} (now {source})")
        step = "the same minor version" if current == target else "one minor version"
        return ok(p, f"{current} -> {target}: {step} (now {source})")

    async def _cluster_version(self) -> tuple[versions.ClusterVersion | None, str]:
        """(the cluster's release version, where it was read), or (None, why it is not known)."""
        try:
            cv = await asyncio.to_thread(lambda: self.owner.gateway.get("ClusterVersion", "version"))
        except NotFound:
            cv = None
        if cv is not None:
            status = cv.get("status") or {}
            done = [h.get("version") for h in status.get("history") or [] if h.get("state") == "Completed" and h.get("version")]
            text = done[0] if done else (status.get("desired") or {}).get("version")
            if not text:
                return None, "ClusterVersion version reports no version yet"
            return versions.parse_cluster_version(str(text)), f"{text}, ClusterVersion version"
        git = await self.api_version()
        release = versions.openshift_from_kube(git) if git else None
        if release is None:
            return None, f"no ClusterVersion served and /version {git or '(empty)'} is no OpenShift 3 release"
        return release, f"{release}, the API server's /version {git}"

    async def queue_polled(self, p: QueuePolled) -> PreconditionResult:
        """``DescribeTaskQueue`` (workflow tasks) with this worker's client: a poller seen within
        ``fresh_seconds``."""
        from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
        from temporalio.api.taskqueue.v1 import TaskQueue
        from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

        client = activity.client()
        resp = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
            namespace=client.namespace, task_queue=TaskQueue(name=p.task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW))
        now = datetime.now(UTC)
        live = [q.identity for q in resp.pollers
                if not q.HasField("last_access_time") or (now - q.last_access_time.ToDatetime(UTC)).total_seconds() <= p.fresh_seconds]
        if live:
            return ok(p, f"{len(live)} worker(s) poll it: {', '.join(sorted(live)[:3])}", findings=sorted(live))
        return failed(p, f"no worker polled it within {p.fresh_seconds:g} s (namespace {client.namespace})")

    async def input_check(self, p: InputCheck) -> PreconditionResult:
        """What the procedure computed."""
        return ok(p, p.detail or "ok") if p.ok else failed(p, p.detail or "refused")


class PreflightActivities(GatewayActivities):
    """``check_preconditions`` on one gateway factory (cluster reads) and one
    :class:`ExecutorFactory` (host commands; default: one built on the same gateway factory for
    its debug pods). ``which``: the worker-executable lookup (``shutil.which``)."""

    ACTIVITIES = ("check_preconditions",)

    def __init__(
        self,
        gateway_factory: Callable[[], KubeGateway],
        executors: ExecutorFactory | None = None,
        which: Callable[[str], str | None] = shutil.which,
    ) -> None:
        super().__init__(gateway_factory)
        self.executors = executors or ExecutorFactory(gateway_factory=lambda: self.gateway)
        self.which = which

    @activity.defn(name=CHECK_PRECONDITIONS, no_thread_cancel_exception=True)
    async def check_preconditions(self, input: CheckPreconditionsInput) -> CheckPreconditionsResult:
        """Check every precondition (module docstring); never raises for a failing check."""
        return CheckPreconditionsResult(results=await _Check(self, input).all())


def make_preflight_activities(
    gateway: KubeGateway | Callable[[], KubeGateway], executors: ExecutorFactory | None = None
) -> list[Callable[..., Any]]:
    """The preflight activity for a Worker, bound to ``gateway`` (or a factory) and ``executors``."""
    factory = (lambda: gateway) if hasattr(gateway, "get_node") else gateway
    return PreflightActivities(factory, executors).activities()  # type: ignore[arg-type]
