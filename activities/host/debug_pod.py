"""The debug-pod backend: what ``oc debug node/NAME`` does (oc ``pkg/cli/debug``).

A privileged pod pinned to the node (``nodeName``, host PID/network/IPC, the host's ``/`` mounted
at ``/host``) runs the command through the exec API as ``chroot /host ARGV...``; the pod is
deleted afterwards. Every API call goes through the Kubernetes gateway's generic verbs
(``create``, ``get``, ``exec_in_pod``, ``delete`` of a Pod), so this module never imports
``kubernetes``. The pod manifest and exec argv are built by pure functions
(:func:`debug_pod_manifest`, :func:`debug_exec_argv`) that tests check without a cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from activities.host.executors import NodeCommandError, NodeExecutor, RawOutput, with_env
from activities.host.models import DEBUG_POD_START_SECONDS
from activities.kube.errors import KubeError

if TYPE_CHECKING:
    from activities.kube.gateway import KubeGateway

#: Label put on every debug pod (lets an operator find and clean up leftovers).
DEBUG_POD_LABEL = "lockkeeper.io/debug-pod"
#: The debug pod's only container.
CONTAINER = "container-00"
#: Seconds between reads of a starting debug pod's phase.
POD_POLL_SECONDS = 1.0
#: Seconds a cancelled command waits for its pod's deletion and its thread before the cancel
#: goes on (see :meth:`DebugPodExecutor.run`).
CANCEL_WAIT_SECONDS = 10.0


def debug_pod_name(node: str, token: str | None = None) -> str:
    """``<node>-lockkeeper-debug-<hex>`` cut to a valid pod name (oc uses ``<node>-debug``; the
    random part lets concurrent commands on one node have their own pods)."""
    token = token or secrets.token_hex(3)
    base = node.replace(".", "-").lower()[: 63 - len("-lockkeeper-debug-") - len(token)]
    return f"{base}-lockkeeper-debug-{token}"


def debug_pod_manifest(
    node: str, *, namespace: str, image: str, name: str, lifetime_seconds: int
) -> dict[str, Any]:
    """The privileged pod ``oc debug node/NODE`` creates (oc ``pkg/cli/debug``): pinned with
    ``nodeName`` (bypassing the scheduler, so cordoned or tainted nodes work), tolerating every
    taint, host PID/network/IPC, privileged, root, the host's ``/`` at ``/host``. The container
    only sleeps ``lifetime_seconds`` (and ``activeDeadlineSeconds`` bounds the pod), the command
    arrives through exec (:func:`debug_exec_argv`)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {DEBUG_POD_LABEL: "true", "app.kubernetes.io/managed-by": "lockkeeper"},
            "annotations": {"debug.openshift.io/source-resource": f"/v1, Resource=nodes/{node}"},
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
        that is not safe to repeat cannot run after its call has been given up."""
        stop = threading.Event()
        name = debug_pod_name(self.node)
        work = asyncio.ensure_future(asyncio.to_thread(self._run_sync, name, argv, timeout, stdin, env or {}, stop))
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

    def _gateway(self) -> Any:
        try:
            return self._factory()
        except KubeError as exc:
            raise NodeCommandError(f"debug pod on node {self.node}: no cluster access: {exc}") from None

    def _delete(self, name: str) -> None:
        """Delete the pod now (grace period 0: its command, if running, is killed); gone is fine."""
        with contextlib.suppress(KubeError, NodeCommandError):
            self._gateway().delete("Pod", name, self.namespace, grace_period_seconds=0)

    def _run_sync(
        self, name: str, argv: list[str], timeout: float, stdin: str | None, env: Mapping[str, str], stop: threading.Event
    ) -> tuple[int | None, bytes, bytes, bool]:
        gw = self._gateway()
        manifest = debug_pod_manifest(
            self.node, namespace=self.namespace, image=self.image, name=name,
            lifetime_seconds=int(timeout + self.start_timeout),
        )
        try:
            gw.create("Pod", manifest, self.namespace)
        except KubeError as exc:
            raise NodeCommandError(f"debug pod on node {self.node}: create failed: {exc}") from None
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
