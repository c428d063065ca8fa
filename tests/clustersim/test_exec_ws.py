"""pods/exec over WebSocket with real kubectl 1.37 and the kubernetes Python client (spec §9)."""

from __future__ import annotations

import asyncio
import base64
import gc
import os
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from clustersim.agents.objects import make_node
from clustersim.execsim import ExecRequest, ExecResult
from clustersim.sim import ClusterSim
from tests.support.smallcluster import kubectl_binary

KUBECTL = kubectl_binary()  # next to the interpreter, else on PATH


def running_pod(name: str, node: str, containers: list[str], running: list[str] | None = None) -> dict[str, Any]:
    """A pod in namespace app whose ``running`` containers (default: all) are running."""
    pod: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "app", "labels": {"app": name}},
        "spec": {"nodeName": node, "containers": [{"name": c, "image": f"{c}:1"} for c in containers]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    up = containers if running is None else running
    pod["status"]["containerStatuses"] = [
        {"name": c, "image": f"{c}:1", "imageID": "", "ready": c in up, "restartCount": 0,
         "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}} if c in up else
         {"waiting": {"reason": "ContainerCreating"}}}
        for c in containers]
    return pod


@pytest.fixture
async def esim(tmp_path: Path) -> AsyncIterator[ClusterSim]:
    """Pods: app/gfs (one running container), app/two (two), app/down (container not running),
    app/pending (no node)."""
    async with ClusterSim(None, time_scale=0.01, kubeconfig_path=tmp_path / "kubeconfig") as s:
        s.store.create("namespaces", {"metadata": {"name": "app"}})
        s.store.create("nodes", make_node("node1", roles=["worker"], config="rendered-worker-0",
                                          created="2025-01-01T00:00:00Z"))
        s.store.create("pods", running_pod("gfs", "node1", ["glusterfs"]))
        s.store.create("pods", running_pod("two", "node1", ["a", "b"]))
        s.store.create("pods", running_pod("down", "node1", ["glusterfs"], running=[]))
        pending = running_pod("pending", "", ["c"], running=[])
        pending["spec"].pop("nodeName")
        s.store.create("pods", pending)

        async def gluster(req: ExecRequest) -> ExecResult:
            if req.argv[1:] == ["volume", "list"]:
                return ExecResult(stdout=b"heketidbstorage\nvol_app\n")
            return ExecResult(stderr=b"unrecognized word\n", exit_code=1)

        s.exec_router.register("gluster", lambda r: r.argv[:1] == ["gluster"], gluster)
        yield s


async def kubectl(sim: ClusterSim, *args: str, stdin: bytes | None = None,
                  env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Real kubectl against ``sim`` -> (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(sim.kubeconfig_path), *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, **(env or {})})
    out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_kubectl_exec_output_and_exit_codes(esim: ClusterSim) -> None:
    rc, out, err = await kubectl(esim, "exec", "-n", "app", "gfs", "--", "gluster", "volume", "list")
    assert (rc, out) == (0, "heketidbstorage\nvol_app\n"), err
    rc, out, err = await kubectl(esim, "exec", "-n", "app", "gfs", "--", "false")
    assert rc == 1
    assert "command terminated with exit code 1" in err
    rc, out, err = await kubectl(esim, "exec", "-n", "app", "gfs", "--", "sh", "-c", "echo hi; exit 3")
    assert (rc, out) == (3, "hi\n")
    rc, out, err = await kubectl(esim, "exec", "-n", "app", "gfs", "--", "nope")
    assert rc == 126
    assert 'exec: "nope": executable file not found in $PATH' in err
    rc, out, err = await kubectl(esim, "exec", "-n", "app", "gfs", "--", "gluster", "bogus")
    assert (rc, err.splitlines()[0]) == (1, "unrecognized word")

    log = esim.exec_router.log_json()
    assert [e["argv"] for e in log][:2] == [["gluster", "volume", "list"], ["false"]]
    assert {e["subprotocol"] for e in log} == {"v5.channel.k8s.io"}
    assert [e["exit_code"] for e in log] == [0, 1, 3, 126, 1]
    assert log[0]["handler"] == "gluster" and log[1]["handler"] == "builtin"
    async with aiohttp.ClientSession() as http, http.get(f"{esim.url}/_sim/exec") as resp:
        served = (await resp.json())["execs"]
    assert served[0]["pod"] == "gfs" and served[0]["container"] == "glusterfs"


async def test_kubectl_exec_stdin(esim: ClusterSim) -> None:
    rc, out, err = await kubectl(esim, "exec", "-i", "-n", "app", "gfs", "--", "cat", stdin=b"line1\nline2\n")
    assert (rc, out) == (0, "line1\nline2\n"), err
    assert esim.exec_router.log_json()[-1]["stdin_bytes"] == 12


async def test_kubectl_exec_errors(esim: ClusterSim) -> None:
    rc, out, err = await kubectl(esim, "exec", "-n", "app", "nope", "--", "true")
    assert rc == 1 and 'pods "nope" not found' in err
    rc, out, err = await kubectl(esim, "exec", "-n", "app", "down", "--", "true")
    assert rc == 1
    assert 'unable to upgrade connection: container not found ("glusterfs")' in err
    rc, out, err = await kubectl(esim, "exec", "-n", "app", "two", "-c", "zzz", "--", "true")
    assert rc == 1 and "container zzz is not valid for pod two" in err
    # kubectl picks the first container itself (with a notice); the server sees -c a.
    rc, out, err = await kubectl(esim, "exec", "-n", "app", "two", "-c", "b", "--", "echo", "x")
    assert (rc, out) == (0, "x\n"), err
    # SPDY (old kubectl behaviour) is refused clearly.
    rc, out, err = await kubectl(esim, "exec", "-n", "app", "gfs", "--", "true",
                                 env={"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"})
    assert rc == 1 and "unable to upgrade connection: Upgrade request required" in err


def _ws_headers(protocol: str | None) -> dict[str, str]:
    h = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
         "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode()}
    if protocol:
        h["Sec-WebSocket-Protocol"] = protocol
    return h


async def test_errors_before_upgrade_are_status_json(esim: ClusterSim) -> None:
    base = f"{esim.url}/api/v1/namespaces/app/pods"
    cases = [
        ("nope/exec?command=true", 404, 'pods "nope" not found'),
        ("down/exec?command=true", 400, 'container not found ("glusterfs")'),
        ("two/exec?command=true", 400, "a container name must be specified for pod two, choose one of: [a b]"),
        ("pending/exec?command=true", 400, "pod pending does not have a host assigned"),
        ("gfs/exec?command=true&container=x", 400, "container x is not valid for pod gfs"),
        ("gfs/exec?command=true&stdin=maybe", 400, 'strconv.ParseBool: parsing "maybe": invalid syntax'),
    ]
    async with aiohttp.ClientSession() as http:
        for path, code, message in cases:
            async with http.get(f"{base}/{path}", headers=_ws_headers("v5.channel.k8s.io")) as resp:
                body = await resp.json()
                assert (resp.status, body["code"], body["message"]) == (code, code, message), path
                assert body["kind"] == "Status"
        async with http.get(f"{base}/gfs/exec?command=true", headers=_ws_headers("v3.channel.k8s.io")) as resp:
            assert resp.status == 400 and "subprotocols" in (await resp.json())["message"]
        async with http.get(f"{esim.url}/api/v1") as resp:
            entry = next(r for r in (await resp.json())["resources"] if r["name"] == "pods/exec")
        assert entry == {"name": "pods/exec", "singularName": "", "namespaced": True, "kind": "PodExecOptions",
                         "verbs": ["create", "get"]}


async def test_v4_frames_and_text_stdin(esim: ClusterSim) -> None:
    """A v4-only client (as the classic Python client and kubernetes.aio offer) with capitalised
    booleans; stdin sent as a text frame runs after the idle time (v4 has no EOF)."""
    url = (f"{esim.url}/api/v1/namespaces/app/pods/gfs/exec?command=cat&stdin=True&stdout=True"
           f"&stderr=True&tty=False")
    frames: list[bytes] = []
    async with aiohttp.ClientSession() as http, http.ws_connect(url, protocols=("v4.channel.k8s.io",)) as ws:
        assert ws.protocol == "v4.channel.k8s.io"
        await ws.send_str("\x00hello ")
        await ws.send_bytes(b"\x00world")
        async for msg in ws:
            assert msg.type == aiohttp.WSMsgType.BINARY  # the aio client decodes msg.data bytes
            frames.append(msg.data)
    assert frames == [b"\x01hello world", b'\x03{"metadata": {}, "status": "Success"}']


async def test_python_client_stream_v5(esim: ClusterSim) -> None:
    from kubernetes import client, config
    from kubernetes.stream import stream

    api = config.new_client_from_config(config_file=str(esim.kubeconfig_path))
    core = client.CoreV1Api(api)

    def run(command: list[str]) -> tuple[int | None, str, str]:
        resp = stream(core.connect_get_namespaced_pod_exec, "gfs", "app", command=command,
                      stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
        out, err = "", ""
        while resp.is_open():
            resp.update(timeout=1)
            out += resp.read_stdout() if resp.peek_stdout() else ""
            err += resp.read_stderr() if resp.peek_stderr() else ""
        resp.close()
        # websocket-client 1.9 marks the socket disconnected when it answers the server's close
        # frame, so WSClient.close() no longer closes it: release it here (client-side leak).
        resp.sock.shutdown()
        return resp.returncode, out, err

    def preloaded(command: list[str]) -> Any:
        # stream(..., _preload_content=True) never closes its socket (same client leak as above).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            out = stream(core.connect_get_namespaced_pod_exec, "gfs", "app", command=command,
                         stderr=True, stdin=False, stdout=True, tty=False)
            gc.collect()
        return out

    try:
        assert await asyncio.to_thread(run, ["gluster", "volume", "list"]) == (0, "heketidbstorage\nvol_app\n", "")
        assert (await asyncio.to_thread(run, ["false"]))[0] == 1
        code, _, err = await asyncio.to_thread(run, ["sh", "-c", "exit 3"])
        assert code == 3
        assert await asyncio.to_thread(preloaded, ["echo", "pre"]) == "pre\n"
    finally:
        api.close()
    assert {e["subprotocol"] for e in esim.exec_router.log_json()} == {"v5.channel.k8s.io"}


async def test_python_aio_client_v4(esim: ClusterSim) -> None:
    from kubernetes.aio import client, config
    from kubernetes.aio.stream import WsApiClient

    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(esim.kubeconfig_path), client_configuration=cfg)
    async with WsApiClient(configuration=cfg) as api:
        core = client.CoreV1Api(api_client=api)
        out = await core.connect_get_namespaced_pod_exec("gfs", "app", command=["gluster", "volume", "list"],
                                                         stderr=True, stdin=False, stdout=True, tty=False)
    assert out == "heketidbstorage\nvol_app\n"
    assert esim.exec_router.log_json()[-1]["subprotocol"] == "v4.channel.k8s.io"


async def test_large_output_is_chunked(esim: ClusterSim) -> None:
    big = b"x" * (100 * 1024)

    async def blob(req: ExecRequest) -> ExecResult:
        return ExecResult(stdout=big)

    esim.exec_router.register("blob", lambda r: r.argv == ["blob"], blob)
    url = f"{esim.url}/api/v1/namespaces/app/pods/gfs/exec?command=blob&stdout=true"
    sizes = []
    async with aiohttp.ClientSession() as http, http.ws_connect(url, protocols=("v5.channel.k8s.io",)) as ws:
        async for msg in ws:
            if msg.data[0] == 1:
                sizes.append(len(msg.data) - 1)
    assert sum(sizes) == len(big) and max(sizes) <= 32 * 1024
