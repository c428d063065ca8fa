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
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from activities.context import heartbeating
from activities.host.executors import NodeCommandError, cap_output, with_env
from activities.host.models import DEFAULT_OUTPUT_CAP, CommandResult
from activities.kube.errors import KubeError

if TYPE_CHECKING:
    from activities.kube.gateway import KubeGateway

#: Label put on every debug pod (lets an operator find and clean up leftovers).
DEBUG_POD_LABEL = "lockkeeper.io/debug-pod"
#: The debug pod's only container.
CONTAINER = "container-00"


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


class DebugPodExecutor:
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
        start_timeout: float = 120.0,
    ) -> None:
        self.node, self.namespace, self.image = node, namespace, image
        self._factory = gateway_factory or gateway_from_environment
        self.start_timeout = start_timeout

    async def run(
        self,
        argv: list[str],
        *,
        timeout: float,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        max_output: int = DEFAULT_OUTPUT_CAP,
    ) -> CommandResult:
        """Run ``argv`` on the node (see :class:`activities.host.executors.NodeExecutor`)."""
        started = time.monotonic()
        async with heartbeating({"debug-pod": self.node, "argv0": argv[0]}):
            code, out, err, timed_out = await asyncio.to_thread(self._run_sync, argv, timeout, stdin, env or {})
        stdout, t1 = cap_output(out, max_output)
        stderr, t2 = cap_output(err, max_output)
        return CommandResult(
            argv=argv,
            exit_code=code,
            stdout=stdout,
            stderr=stderr,
            stdout_truncated=t1,
            stderr_truncated=t2,
            timed_out=timed_out,
            duration_seconds=round(time.monotonic() - started, 3),
        )

    def _run_sync(
        self, argv: list[str], timeout: float, stdin: str | None, env: Mapping[str, str]
    ) -> tuple[int | None, bytes, bytes, bool]:
        try:
            gw = self._factory()
        except KubeError as exc:
            raise NodeCommandError(f"debug pod on node {self.node}: no cluster access: {exc}") from None
        name = debug_pod_name(self.node)
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
            while True:
                pod = gw.get("Pod", name, self.namespace)
                phase = (pod.get("status") or {}).get("phase")
                if phase == "Running":
                    break
                if phase in ("Failed", "Succeeded") or time.monotonic() > deadline:
                    raise NodeCommandError(f"debug pod {name} on node {self.node} did not run (phase {phase})")
                time.sleep(1.0)
            result = gw.exec_in_pod(
                self.namespace, name, debug_exec_argv(argv, env), container=CONTAINER, stdin=stdin, timeout=timeout
            )
            return result.exit_code, result.stdout, result.stderr, result.timed_out
        except KubeError as exc:
            raise NodeCommandError(f"debug pod {name} on node {self.node}: {exc}") from None
        finally:
            with contextlib.suppress(KubeError):
                gw.delete("Pod", name, self.namespace, grace_period_seconds=0)
