"""The debug-pod backend: what ``oc debug node/NAME`` does (oc ``pkg/cli/debug``).

A privileged pod pinned to the node (``nodeName``, host PID/network/IPC, the host's ``/`` mounted
at ``/host``) runs the command through the exec API as ``chroot /host ARGV...``; the pod is
deleted afterwards. Every API call goes through the Kubernetes gateway's generic verbs
(``create``, ``get``, ``exec_in_pod``, ``delete`` of a Pod), so this module never imports
``kubernetes``. The pod manifest and exec argv are built by pure functions
(:func:`debug_pod_manifest`, :func:`debug_exec_argv`) that tests check without a cluster.

A worker that dies mid-command deletes nothing, so inside an activity a pod is named after its
command (:func:`pod_token`: stable across the activity's attempts) and labelled with its run
(:data:`RUN_LABEL`) and attempt (:data:`ATTEMPT_LABEL`): a retried attempt deletes its
predecessor's pod before it creates its own, and :func:`sweep_debug_pods` (activity
``sweep_debug_pods``, called by the kit at the end of every run that sent debug-pod commands)
deletes whatever of the run is left and reads back that it is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from temporalio import activity

from activities.host.executors import NodeCommandError, NodeExecutor, RawOutput, with_env
from activities.host.models import DEBUG_POD_START_SECONDS, SweepDebugPodsResult
from activities.kube.errors import AlreadyExists, KubeError, NotFound

if TYPE_CHECKING:
    from activities.kube.gateway import KubeGateway

#: Label put on every debug pod (lets an operator find and clean up leftovers).
DEBUG_POD_LABEL = "lockkeeper.io/debug-pod"
#: Label naming the workflow run whose activity created the pod (its run ID, a UUID): what the
#: end-of-run sweep (:func:`sweep_debug_pods`) selects, and what tells a pod of this run from
#: another's of the same name.
RUN_LABEL = "lockkeeper.io/run-id"
#: Label holding the activity attempt (1, 2, ...) that created the pod: a later attempt deletes
#: an earlier one's pod of the same name before it creates its own.
ATTEMPT_LABEL = "lockkeeper.io/attempt"
#: Annotation naming the workflow and activity that created the pod (for an operator).
SOURCE_ANNOTATION = "lockkeeper.io/created-by"
#: Seconds a command waits for its predecessor's pod (or the sweep for the pods it deleted) to be gone.
GONE_WAIT_SECONDS = 60.0
#: The debug pod's only container.
CONTAINER = "container-00"
#: Seconds between reads of a starting debug pod's phase.
POD_POLL_SECONDS = 1.0
#: Seconds a cancelled command waits for its pod's deletion and its thread before the cancel
#: goes on (see :meth:`DebugPodExecutor.run`).
CANCEL_WAIT_SECONDS = 10.0


def debug_pod_name(node: str, token: str | None = None) -> str:
    """``<node>-lockkeeper-debug-<hex>`` cut to a valid pod name, at most 63 characters, a DNS
    label (oc uses ``<node>-debug``; the hex part lets concurrent commands on one node have their
    own pods). ``token``: the hex part (default: 6 random hex digits; :func:`pod_token` derives
    a stable one for an activity's command)."""
    token = token or secrets.token_hex(3)
    base = "".join(c if c.isalnum() else "-" for c in node.lower())[: 63 - len("-lockkeeper-debug-") - len(token)]
    base = base.strip("-") or "node"
    return f"{base}-lockkeeper-debug-{token}"


@dataclass(frozen=True)
class PodOwner:
    """Who runs a debug pod's command: the workflow run (``workflow_id``, ``run_id``), its
    ``activity_id`` and ``attempt`` (:func:`activity_owner`)."""

    workflow_id: str
    run_id: str
    activity_id: str
    attempt: int


def activity_owner() -> PodOwner | None:
    """The current activity's :class:`PodOwner`; None outside an activity (a test, a CLI)."""
    if not activity.in_activity():
        return None
    info = activity.info()
    return PodOwner(info.workflow_id or "", info.workflow_run_id or "", info.activity_id, info.attempt)


def pod_token(owner: PodOwner, node: str, argv: list[str], env: Mapping[str, str] | None, n: int) -> str:
    """10 hex digits (sha256) of the workflow ID, run ID, activity ID, node, argv, env and ``n``
    (the how-manyth identical command of the attempt, from 0): the same for every attempt of
    one activity's command (the attempt is not in it), another for any other command."""
    key = json.dumps([owner.workflow_id, owner.run_id, owner.activity_id, node, argv, sorted((env or {}).items()), n])
    return hashlib.sha256(key.encode()).hexdigest()[:10]


class _Seen:
    """How many times each (attempt, node, argv, env) was run in this process: an attempt that
    runs the same command on the same node twice (two port checks) gets two pods. Bounded: the
    oldest attempts are forgotten."""

    def __init__(self, size: int = 4096) -> None:
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def next(self, key: str) -> int:
        with self._lock:
            n = self._counts.pop(key, -1) + 1
            self._counts[key] = n
            while len(self._counts) > self._size:
                self._counts.popitem(last=False)
            return n


_SEEN = _Seen()


def pod_labels(owner: PodOwner | None) -> dict[str, str]:
    """A debug pod's labels: :data:`DEBUG_POD_LABEL`, managed-by, and for an activity's pod its
    run (:data:`RUN_LABEL`) and attempt (:data:`ATTEMPT_LABEL`)."""
    labels = {DEBUG_POD_LABEL: "true", "app.kubernetes.io/managed-by": "lockkeeper"}
    if owner is not None and owner.run_id:
        labels[RUN_LABEL] = owner.run_id
        labels[ATTEMPT_LABEL] = str(owner.attempt)
    return labels


def debug_pod_manifest(
    node: str, *, namespace: str, image: str, name: str, lifetime_seconds: int, owner: PodOwner | None = None
) -> dict[str, Any]:
    """The privileged pod ``oc debug node/NODE`` creates (oc ``pkg/cli/debug``): pinned with
    ``nodeName`` (bypassing the scheduler, so cordoned or tainted nodes work), tolerating every
    taint, host PID/network/IPC, privileged, root, the host's ``/`` at ``/host``. The container
    only sleeps ``lifetime_seconds`` (and ``activeDeadlineSeconds`` bounds the pod), the command
    arrives through exec (:func:`debug_exec_argv`). ``owner``: the activity that runs the
    command, in the labels (:func:`pod_labels`) and an annotation."""
    annotations = {"debug.openshift.io/source-resource": f"/v1, Resource=nodes/{node}"}
    if owner is not None:
        annotations[SOURCE_ANNOTATION] = f"workflow {owner.workflow_id} activity {owner.activity_id}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": pod_labels(owner),
            "annotations": annotations,
        },
        "spec": {
            "nodeName": node,
            "hostPID": True,
            "hostNetwork": True,
            "hostIPC": True,
            "restartPolicy": "Never",
            "activeDeadlineSeconds": lifetime_seconds + 60,
            "terminationGracePeriodSeconds": 0,
            "tolerations": [{"operator": "Exists"}],
            "volumes": [{"name": "host", "hostPath": {"path": "/", "type": "Directory"}}],
            "containers": [
                {
                    "name": CONTAINER,
                    "image": image,
                    "command": ["sleep", str(lifetime_seconds)],
                    "securityContext": {"privileged": True, "runAsUser": 0},
                    "volumeMounts": [{"name": "host", "mountPath": "/host"}],
                    "stdin": True,
                }
            ],
        },
    }


def debug_exec_argv(argv: list[str], env: Mapping[str, str] | None = None) -> list[str]:
    """The exec API ``command``: the argv run in the host's root (``chroot /host``), extra
    variables via ``env``. Each element stays one argument: no shell anywhere."""
    return ["chroot", "/host", *with_env(argv, env)]


def gateway_from_environment() -> KubeGateway:
    """A gateway from the worker's environment: ``LOCKKEEPER_IN_CLUSTER`` (service account) or
    the first entry of ``LOCKKEEPER_KUBECONFIG``/``KUBECONFIG`` (default ``~/.kube/config``)
    with context ``LOCKKEEPER_KUBE_CONTEXT``/``KUBE_CONTEXT``. Raises ``KubeconfigError``."""
    from activities.kube.gateway import KubeGateway

    if os.environ.get("LOCKKEEPER_IN_CLUSTER", "").lower() in ("1", "true", "yes"):
        return KubeGateway.in_cluster()
    raw = os.environ.get("LOCKKEEPER_KUBECONFIG") or os.environ.get("KUBECONFIG") or ""
    path = raw.split(os.pathsep)[0] if raw else os.path.expanduser("~/.kube/config")
    context = os.environ.get("LOCKKEEPER_KUBE_CONTEXT") or os.environ.get("KUBE_CONTEXT")
    return KubeGateway.from_kubeconfig(path, context)


class DebugPodExecutor(NodeExecutor):
    """Run commands on ``node`` through a privileged debug pod and the exec API (see module
    docstring). ``gateway_factory`` returns the :class:`KubeGateway` (default:
    :func:`gateway_from_environment`); ``start_timeout``: seconds for the pod to run."""

    def __init__(
        self,
        node: str,
        *,
        namespace: str = "default",
        image: str = "registry.access.redhat.com/ubi9/ubi-minimal:latest",
        gateway_factory: Callable[[], Any] | None = None,
        start_timeout: float = DEBUG_POD_START_SECONDS,
    ) -> None:
        self.node, self.namespace, self.image = node, namespace, image
        self._factory = gateway_factory or gateway_from_environment
        self.start_timeout = start_timeout

    def heartbeat_details(self, argv: list[str]) -> dict[str, str]:
        """The node and the command's program name."""
        return {"debug-pod": self.node, "argv0": argv[0]}

    async def execute(
        self, argv: list[str], *, timeout: float, stdin: str | None, env: Mapping[str, str] | None, max_output: int
    ) -> RawOutput:
        """Run ``argv`` on the node in a fresh debug pod (the exec API does not cap the output;
        :meth:`NodeExecutor.run` caps it at ``max_output``).

        Cancelled (the activity's timeout, its worker shutting down, a workflow's cancel), it
        stops the work in its thread before the cancel goes on: a pod still starting is deleted
        and the command never runs; a command already running is killed with its pod (deleted
        with grace period 0). It waits up to :data:`CANCEL_WAIT_SECONDS` for that, so a command
        that is not safe to repeat cannot run after its call has been given up.

        Inside an activity the pod's name is stable across the activity's attempts
        (:meth:`pod_name`) and labelled with the run and attempt; a later attempt that finds an
        earlier attempt's pod of that name (its worker died, so nothing deleted it) deletes it
        and waits it away before it creates its own (:meth:`_create`). What a dead worker leaves
        and no retry replaces, the end-of-run sweep deletes (:func:`sweep_debug_pods`)."""
        stop = threading.Event()
        owner = activity_owner()
        name = self.pod_name(argv, env, owner)
        work = asyncio.ensure_future(asyncio.to_thread(self._run_sync, name, argv, timeout, stdin, env or {}, stop, owner))
        try:
            code, out, err, timed_out = await asyncio.shield(work)
        except asyncio.CancelledError:
            stop.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(asyncio.to_thread(self._delete, name)), CANCEL_WAIT_SECONDS)
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(work, CANCEL_WAIT_SECONDS)
            raise
        return RawOutput(code, out, err, timed_out=timed_out)

    def pod_name(self, argv: list[str], env: Mapping[str, str] | None, owner: PodOwner | None) -> str:
        """The pod's name: for an activity's command, derived from its workflow, run, activity,
        node, argv and env (:func:`pod_token`), the same for each attempt; outside an activity
        (``owner`` None), random."""
        if owner is None:
            return debug_pod_name(self.node)
        key = json.dumps([owner.workflow_id, owner.run_id, owner.activity_id, owner.attempt, self.namespace, self.node, argv,
                          sorted((env or {}).items())])
        return debug_pod_name(self.node, pod_token(owner, self.node, argv, env, _SEEN.next(key)))

    def _gateway(self) -> Any:
        try:
            return self._factory()
        except KubeError as exc:
            raise NodeCommandError(f"debug pod on node {self.node}: no cluster access: {exc}") from None

    def _delete(self, name: str) -> None:
        """Delete the pod now (grace period 0: its command, if running, is killed); gone is fine."""
        with contextlib.suppress(KubeError, NodeCommandError):
            self._gateway().delete("Pod", name, self.namespace, grace_period_seconds=0)

    def _create(self, gw: Any, manifest: dict[str, Any], owner: PodOwner | None, stop: threading.Event) -> None:
        """Create the pod. A pod of the same name already there is an earlier attempt's of the
        same command (same run label, a lower attempt): deleted (grace period 0, so its command,
        if still running, is killed) and waited away (:data:`GONE_WAIT_SECONDS`), then the pod
        is created. A pod of that name from another run, or of this very attempt, is never
        touched: NodeCommandError."""
        name = manifest["metadata"]["name"]
        try:
            gw.create("Pod", manifest, self.namespace)
            return
        except AlreadyExists:
            pass
        except KubeError as exc:
            raise NodeCommandError(f"debug pod on node {self.node}: create failed: {exc}") from None
        try:
            found = gw.get("Pod", name, self.namespace)
        except NotFound:
            found = None
        except KubeError as exc:
            raise NodeCommandError(f"debug pod {name} on node {self.node}: exists, cannot be read: {exc}") from None
        if found is not None:
            labels = (found.get("metadata") or {}).get("labels") or {}
            theirs = labels.get(ATTEMPT_LABEL, "")
            if owner is None or labels.get(RUN_LABEL) != owner.run_id or not theirs.isdigit() or int(theirs) >= owner.attempt:
                raise NodeCommandError(
                    f"debug pod {name} on node {self.node} already exists (run {labels.get(RUN_LABEL, '?')}, attempt "
                    f"{theirs or '?'}) and is not an earlier attempt of this command: not touched")
            uid = (found.get("metadata") or {}).get("uid")
            try:
                gw.delete("Pod", name, self.namespace, grace_period_seconds=0, uid=uid)
            except NotFound:
                pass
            except KubeError as exc:
                raise NodeCommandError(f"debug pod {name}: the earlier attempt's pod cannot be deleted: {exc}") from None
            deadline = time.monotonic() + GONE_WAIT_SECONDS
            while not pod_gone(gw, name, self.namespace, uid):
                if stop.is_set() or time.monotonic() > deadline:
                    raise NodeCommandError(f"debug pod {name}: the earlier attempt's pod is still there")
                stop.wait(POD_POLL_SECONDS)
        try:
            gw.create("Pod", manifest, self.namespace)
        except KubeError as exc:
            raise NodeCommandError(f"debug pod on node {self.node}: create failed: {exc}") from None

    def _run_sync(
        self, name: str, argv: list[str], timeout: float, stdin: str | None, env: Mapping[str, str], stop: threading.Event,
        owner: PodOwner | None = None,
    ) -> tuple[int | None, bytes, bytes, bool]:
        gw = self._gateway()
        manifest = debug_pod_manifest(
            self.node, namespace=self.namespace, image=self.image, name=name,
            lifetime_seconds=int(timeout + self.start_timeout), owner=owner,
        )
        self._create(gw, manifest, owner, stop)
        try:
            deadline = time.monotonic() + self.start_timeout
            while not stop.is_set():
                pod = gw.get("Pod", name, self.namespace)
                phase = (pod.get("status") or {}).get("phase")
                if phase == "Running":
                    break
                if phase in ("Failed", "Succeeded") or time.monotonic() > deadline:
                    raise NodeCommandError(f"debug pod {name} on node {self.node} did not run (phase {phase})")
                stop.wait(POD_POLL_SECONDS)
            if stop.is_set():
                raise NodeCommandError(f"debug pod {name} on node {self.node}: cancelled before the command started")
            result = gw.exec_in_pod(
                self.namespace, name, debug_exec_argv(argv, env), container=CONTAINER, stdin=stdin, timeout=timeout
            )
            return result.exit_code, result.stdout, result.stderr, result.timed_out
        except KubeError as exc:
            raise NodeCommandError(f"debug pod {name} on node {self.node}: {exc}") from None
        finally:
            with contextlib.suppress(KubeError):
                gw.delete("Pod", name, self.namespace, grace_period_seconds=0)


def pod_gone(gw: Any, name: str, namespace: str, uid: str | None = None) -> bool:
    """Whether pod ``name`` (that incarnation, when ``uid`` is given) is gone. Raises KubeError
    when it cannot be read."""
    try:
        pod = gw.get("Pod", name, namespace)
    except NotFound:
        return True
    return uid is not None and (pod.get("metadata") or {}).get("uid") != uid


def sweep_debug_pods(gw: Any, run_id: str, namespaces: list[str], *, wait_seconds: float = GONE_WAIT_SECONDS,
                     poll_seconds: float = POD_POLL_SECONDS) -> SweepDebugPodsResult:
    """Delete every debug pod of workflow run ``run_id`` (label :data:`RUN_LABEL`) in
    ``namespaces``, grace period 0, then read back until they are gone (at most ``wait_seconds``
    seconds, polled every ``poll_seconds``). Returns a :class:`SweepDebugPodsResult`: the pods
    deleted and gone (``namespace/name``), the pods still there (``remaining``) and the errors
    met, one line each. A pod of another run is never selected. Never raises for a pod; raises
    KubeError when a namespace's pods cannot be listed."""
    selector = f"{DEBUG_POD_LABEL}=true,{RUN_LABEL}={run_id}"
    found: list[tuple[str, str, str | None]] = []
    errors: list[str] = []
    for ns in dict.fromkeys(namespaces):
        for pod in gw.list("Pod", ns, label_selector=selector):
            meta = pod.get("metadata") or {}
            if (meta.get("labels") or {}).get(RUN_LABEL) == run_id:  # the selector's promise, checked
                found.append((ns, str(meta.get("name")), meta.get("uid")))
    for ns, name, uid in found:
        try:
            gw.delete("Pod", name, ns, grace_period_seconds=0, uid=uid)
        except NotFound:
            pass
        except KubeError as exc:
            errors.append(f"{ns}/{name}: {exc}")
    deadline = time.monotonic() + wait_seconds
    left = list(found)
    while True:
        still: list[tuple[str, str, str | None]] = []
        for ns, name, uid in left:
            try:
                if not pod_gone(gw, name, ns, uid):
                    still.append((ns, name, uid))
            except KubeError as exc:
                still.append((ns, name, uid))
                errors.append(f"{ns}/{name}: read back: {exc}")
        left = still
        if not left or time.monotonic() > deadline:
            break
        time.sleep(poll_seconds)
    remaining = {f"{ns}/{name}" for ns, name, _ in left}
    return SweepDebugPodsResult(
        deleted=[f"{ns}/{name}" for ns, name, _ in found if f"{ns}/{name}" not in remaining],
        remaining=sorted(remaining), errors=list(dict.fromkeys(errors)))
