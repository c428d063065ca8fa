"""The gateway's exec in a pod, through the real ``kubernetes.stream`` websocket client.

Clustersim has no exec endpoint, so a small aiohttp server here speaks the API server's side of
``pods/exec`` (Kubernetes "channel" websocket protocol, ``v4.channel.k8s.io``: every frame
starts with its channel byte, 0 stdin, 1 stdout, 2 stderr, 3 the final ``Status``, whose
``NonZeroExitCode`` cause carries the exit code). It runs a few fake commands: ``echo``,
``cat`` (stdin to stdout), ``fail`` (stderr and exit 3) and ``sleep`` (runs until the client
hangs up).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from aiohttp import WSMsgType, web

from activities.kube.errors import NotFound
from activities.kube.gateway import KubeGateway

pytestmark = pytest.mark.timeout(60)

SEEN = web.AppKey("seen", list)


def _status(code: int) -> bytes:
    if code == 0:
        return json.dumps({"metadata": {}, "status": "Success"}).encode()
    return json.dumps({
        "metadata": {}, "status": "Failure", "message": f"command terminated with non-zero exit code: {code}",
        "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }).encode()


async def _exec(request: web.Request) -> web.StreamResponse:
    if request.match_info["name"] != "pod-1":
        return web.json_response({"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404,
                                  "message": 'pods "missing" not found'}, status=404)
    ws = web.WebSocketResponse(protocols=("v4.channel.k8s.io",))
    await ws.prepare(request)
    argv = request.query.getall("command")
    request.app[SEEN].append({"argv": argv, "container": request.query.get("container"),
                                "stdin": request.query.get("stdin")})
    code = 0
    if argv[0] == "echo":
        await ws.send_bytes(b"\x01" + (" ".join(argv[1:]) + "\n").encode())
    elif argv[0] == "cat":
        msg = await ws.receive()
        data = msg.data if msg.type == WSMsgType.BINARY else msg.data.encode()
        await ws.send_bytes(b"\x01" + data[1:])
    elif argv[0] == "fail":
        await ws.send_bytes(b"\x02boom\n")
        code = 3
    elif argv[0] == "sleep":
        await ws.receive()  # runs until the client goes away
    await ws.send_bytes(b"\x03" + _status(code))
    await ws.close()
    return ws


@pytest_asyncio.fixture(loop_scope="session")
async def gateway(tmp_path: Path) -> AsyncIterator[tuple[KubeGateway, list[dict[str, Any]]]]:
    app = web.Application()
    app[SEEN] = []
    app.router.add_get("/api/v1/namespaces/{ns}/pods/{name}/exec", _exec)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
        "users": [{"name": "t", "user": {"token": "secret-token"}}],
    }))
    gw = KubeGateway.from_kubeconfig(kubeconfig)
    try:
        yield gw, app[SEEN]
    finally:
        gw.close()
        await runner.cleanup()


async def test_exec_passes_argv_and_separates_the_streams(gateway: Any) -> None:
    gw, seen = gateway
    out = await asyncio.to_thread(gw.exec_in_pod, "ns", "pod-1", ["echo", "two words", "$(x)"], container="c0", timeout=10)
    assert (out.exit_code, out.stdout, out.stderr, out.timed_out) == (0, b"two words $(x)\n", b"", False)
    assert seen[-1] == {"argv": ["echo", "two words", "$(x)"], "container": "c0", "stdin": "false"}
    failed = await asyncio.to_thread(gw.exec_in_pod, "ns", "pod-1", ["fail"], timeout=10)
    assert (failed.exit_code, failed.stdout, failed.stderr) == (3, b"", b"boom\n")


async def test_exec_feeds_stdin(gateway: Any) -> None:
    gw, seen = gateway
    out = await asyncio.to_thread(gw.exec_in_pod, "ns", "pod-1", ["cat"], stdin="manifest: 1\n", timeout=10)
    assert out.exit_code == 0 and out.stdout == b"manifest: 1\n" and seen[-1]["stdin"] == "true"


async def test_exec_is_cut_at_its_timeout_and_errors_are_mapped(gateway: Any) -> None:
    gw, _ = gateway
    out = await asyncio.to_thread(gw.exec_in_pod, "ns", "pod-1", ["sleep"], timeout=1.5)
    assert out.timed_out and out.exit_code is None
    with pytest.raises(NotFound):
        await asyncio.to_thread(gw.exec_in_pod, "ns", "missing", ["echo"], timeout=5)
