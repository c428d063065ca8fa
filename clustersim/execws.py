"""``pods/exec`` over WebSocket (channel protocols ``v5.channel.k8s.io`` / ``v4.channel.k8s.io``).

Protocol (procedures-spec §9.2, checked against kubectl 1.37 and the kubernetes Python client;
k8s ``staging/src/k8s.io/apimachinery/pkg/util/httpstream/wsstream`` and the kubelet's
``remotecommand`` server):

- ``GET`` (or ``POST`` with ``Upgrade: websocket``) ``/api/v1/namespaces/NS/pods/NAME/exec`` with
  repeated ``command``, optional ``container``, and ``stdin``/``stdout``/``stderr``/``tty`` parsed
  like Go ``strconv.ParseBool``.
- Errors before the upgrade are plain ``Status`` JSON (404 pod not found; 400 no host assigned,
  container not valid, container not running with the kubelet's ``container not found ("c")``,
  a container name required; 400 ``Upgrade request required`` for SPDY or plain HTTP, which makes
  kubectl report ``unable to upgrade connection``; 400 when neither subprotocol is offered).
- Frames are binary, first byte = channel: 0 stdin, 1 stdout, 2 stderr, 3 status, 4 resize;
  v5 adds 255 = close-stream (``[255, 0]`` is the client's stdin EOF). Text frames from the client
  (python ``write_stdin(str)``) are accepted too. stdout/stderr go out in chunks of at most 32 KiB.
- With ``stdin=true`` the command runs once stdin is closed (v5 ``[255, 0]``) or after
  ``stdin_idle_seconds`` without data (v4 has no EOF signal; emulated commands read all of
  stdin at once).
- The end: channel 3 carries ``{"metadata":{},"status":"Success"}`` or the ``NonZeroExitCode``
  Failure Status with the exit code as the ``ExitCode`` cause, then a normal close (1000).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from aiohttp import WSMsgType, web

from clustersim.apierrors import ApiError
from clustersim.apihttp import parse_bool
from clustersim.execsim import ExecLogEntry, ExecRequest, ExecResult, ExecRouter
from clustersim.loops import cancel_and_wait
from clustersim.store import Store

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
CHUNK = 32 * 1024
STDIN, STDOUT, STDERR, STATUS, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255


def _offered_protocols(request: web.Request) -> list[str]:
    out: list[str] = []
    for header in request.headers.getall("Sec-WebSocket-Protocol", []):
        out.extend(p.strip() for p in header.split(",") if p.strip())
    return out


def choose_protocol(offered: list[str]) -> str | None:
    """``v5.channel.k8s.io`` when offered, else ``v4.channel.k8s.io``, else None."""
    for proto in PROTOCOLS:
        if proto in offered:
            return proto
    return None


def select_container(pod: dict[str, Any], wanted: str) -> str:
    """The container to exec into, with the apiserver's and kubelet's 400 messages.

    Raises ApiError 400: ``pod x does not have a host assigned``, ``a container name must be
    specified for pod x, choose one of: [a b]``, ``container y is not valid for pod x``,
    ``container not found ("y")`` (the container is not running)."""
    name = pod["metadata"]["name"]
    spec = pod.get("spec") or {}
    containers = [c.get("name", "") for c in spec.get("containers") or []]
    inits = [c.get("name", "") for c in spec.get("initContainers") or []]
    if not wanted:
        if len(containers) == 1:
            wanted = containers[0]
        else:
            msg = f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
            if inits:
                msg += f" or one of the init containers: [{' '.join(inits)}]"
            raise ApiError.bad_request(msg)
    if wanted not in containers and wanted not in inits:
        raise ApiError.bad_request(f"container {wanted} is not valid for pod {name}")
    if not spec.get("nodeName"):
        raise ApiError.bad_request(f"pod {name} does not have a host assigned")
    status = pod.get("status") or {}
    statuses = (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])
    running = any(s.get("name") == wanted and "running" in (s.get("state") or {}) for s in statuses)
    if not running:
        raise ApiError.bad_request(f'container not found ("{wanted}")')
    return wanted


def exit_status(argv: list[str], code: int) -> dict[str, Any]:
    """The channel-3 Status for an exit code (kubelet ServeExec; message as containerd's CRI
    streaming server words the CodeExitError)."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: error executing command "
                       f"[{' '.join(argv)}], exit code {code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


class ExecServer:
    """Serves exec requests for one ``Store`` through an ``ExecRouter``.

    ``stdin_idle_seconds``: how long (real seconds) to wait for more stdin before running the
    command when the client sent no EOF."""

    def __init__(self, store: Store, router: ExecRouter, stdin_idle_seconds: float = 0.5) -> None:
        self.store = store
        self.router = router
        self.stdin_idle_seconds = stdin_idle_seconds

    async def serve(self, request: web.Request, namespace: str, name: str) -> web.StreamResponse:
        """Validate, upgrade, run, stream the result. Raises ApiError before the upgrade."""
        if request.method not in ("GET", "POST"):
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        q = request.query
        argv = q.getall("command", [])
        want_stdin = parse_bool(q.get("stdin"))
        want_stdout = parse_bool(q.get("stdout"), default=True)
        want_stderr = parse_bool(q.get("stderr"), default=True)
        tty = parse_bool(q.get("tty"))
        pod = self.store.get_ref("pods", name, namespace)
        container = select_container(pod, q.get("container", ""))
        if not argv:
            raise ApiError.bad_request("you must specify at least 1 command")
        upgrade = request.headers.get("Upgrade", "").lower()
        if upgrade != "websocket":
            # SPDY/3.1 (kubectl <= 1.29 or KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false) and plain HTTP.
            raise ApiError.bad_request("Upgrade request required")
        protocol = choose_protocol(_offered_protocols(request))
        if protocol is None:
            raise ApiError.bad_request(
                f"unable to upgrade: the client offered none of the supported subprotocols {list(PROTOCOLS)}")
        ws = web.WebSocketResponse(protocols=(protocol,), autoping=True, max_msg_size=16 * 1024 * 1024)
        await ws.prepare(request)
        started = time.time()
        stdin = bytearray()
        stdin_done = asyncio.Event()
        if not want_stdin:
            stdin_done.set()
        last_data = asyncio.get_running_loop().time()

        async def reader() -> None:
            nonlocal last_data
            async for msg in ws:
                if msg.type == WSMsgType.BINARY:
                    data = msg.data
                elif msg.type == WSMsgType.TEXT:
                    data = msg.data.encode("utf-8", "surrogateescape")
                else:
                    continue
                if not data:
                    continue
                channel, payload = data[0], data[1:]
                if channel == STDIN:
                    stdin.extend(payload)
                    last_data = asyncio.get_running_loop().time()
                elif channel == CLOSE and protocol.startswith("v5") and payload[:1] == bytes([STDIN]):
                    stdin_done.set()
                # RESIZE (4) is accepted and ignored: emulated commands have no terminal.
            stdin_done.set()  # the client closed the connection

        read_task = asyncio.create_task(reader())
        result = ExecResult(exit_code=1)
        route = ""
        recorded = False

        def record() -> None:
            nonlocal recorded
            if recorded:
                return
            recorded = True
            self.router.record(ExecLogEntry(
                namespace=namespace, pod=name, container=container, argv=list(argv), subprotocol=protocol,
                exit_code=result.exit_code, handler=route, start=started, end=time.time(),
                stdin_bytes=len(stdin), stdout_bytes=len(result.stdout), stderr_bytes=len(result.stderr)))

        try:
            while not stdin_done.is_set():
                idle = asyncio.get_running_loop().time() - last_data
                if idle >= self.stdin_idle_seconds:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stdin_done.wait(), self.stdin_idle_seconds - idle)
            req = ExecRequest(namespace, pod, container, list(argv), bytes(stdin) if want_stdin else None, tty)
            result, route = await self.router.run(req)
            # Logged before the client sees the status: a test reading the log right after its
            # exec returned must find it.
            record()
            if not ws.closed:
                out = result.stdout + (result.stderr if tty else b"")
                if want_stdout or tty:
                    await _send(ws, STDOUT, out)
                if want_stderr and not tty:
                    await _send(ws, STDERR, result.stderr)
                status = json.dumps(exit_status(argv, result.exit_code)).encode()
                await ws.send_bytes(bytes([STATUS]) + status)
                await ws.close(code=1000)
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            await cancel_and_wait([read_task])
            record()  # the client went away before the command ran: logged with exit code 1
        return ws


async def _send(ws: web.WebSocketResponse, channel: int, data: bytes) -> None:
    prefix = bytes([channel])
    for i in range(0, len(data), CHUNK):
        await ws.send_bytes(prefix + data[i:i + CHUNK])
