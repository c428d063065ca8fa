"""API errors as a read-only preflight reports them: fail fast, with a stable type and the API's words.

Real HTTP through the real ``kubernetes`` client: a closed port (connection refused), a host name
that does not resolve, a small HTTP server on 127.0.0.1 answering 401/403/503 with a ``Status``
body as the kube-apiserver writes it, and clustersim with a 100 % 503 fault. The activities run
through ``temporalio.testing.ActivityEnvironment`` in a worker thread, as a worker runs them.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.cluster.activities import ClusterActivities
from activities.cluster.base import planning_failure
from activities.cluster.models import CordonInput, ReadNodeInput
from activities.kube.errors import Forbidden, ServerError, Unauthorized, Unavailable, Unreachable
from activities.kube.gateway import KubeGateway
from activities.machineconfig.activities import MachineConfigActivities
from activities.machineconfig.models import PreflightInput
from clustersim import ClusterSim
from clustersim.kubeconfig import write_kubeconfig

pytestmark = pytest.mark.timeout(60)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StatusServer:
    """Answers every request with ``code`` and a kube-apiserver ``Status`` body."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": message, "reason": reason, "code": code}).encode()
        self.hits = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                outer.hits += 1
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def status_server(request: pytest.FixtureRequest) -> Iterator[StatusServer]:
    server = StatusServer(*request.param)
    yield server
    server.close()


def gateway_for(url: str, tmp_path: Path) -> KubeGateway:
    return KubeGateway.from_kubeconfig(write_kubeconfig(tmp_path / "kubeconfig", url))


async def run_preflight(gateway: KubeGateway) -> ApplicationError:
    """Run the preflight activity; the ApplicationError it raised (the test fails otherwise)."""
    mco = MachineConfigActivities(lambda: gateway)
    with pytest.raises(ApplicationError) as info:
        await asyncio.to_thread(ActivityEnvironment().run, mco.preflight_machineconfig_rollout, PreflightInput())
    return info.value


# --- the gateway's classification -------------------------------------------------------------


def test_connection_refused_is_unreachable_naming_the_server(tmp_path: Path) -> None:
    url = f"https://127.0.0.1:{closed_port()}"
    gw = gateway_for(url, tmp_path)
    with pytest.raises(Unreachable) as info:
        gw.list("Node")
    assert isinstance(info.value, Unavailable) and info.value.transient  # mid-procedure calls still retry
    assert f"cannot connect to the API server {url}" in str(info.value)
    assert "Connection refused" in str(info.value)
    assert planning_failure(info.value) == ("ApiUnreachable", False)


def resolutions(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every ``(host, port)`` looked up from now on (each connection attempt resolves its host):
    what a call's time stood for, counted."""
    seen: list[tuple[str, int]] = []
    real = socket.getaddrinfo

    def counting(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append((host, port))
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", counting)
    return seen


#: Connection attempts of one request: urllib3's default (the kubernetes client sets no other),
#: 3 retries, no back-off for a connection error: the gateway adds no retry loop of its own.
ATTEMPTS = 4


def test_dns_failure_is_unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gw = gateway_for("https://lockkeeper-no-such-host.invalid:6443", tmp_path)
    looked_up = resolutions(monkeypatch)
    with pytest.raises(Unreachable) as info:
        gw.get("Node", "worker-0")
    assert looked_up == [("lockkeeper-no-such-host.invalid", 6443)] * ATTEMPTS
    assert "lockkeeper-no-such-host.invalid" in str(info.value)
    assert planning_failure(info.value) == ("ApiUnreachable", False)


@pytest.mark.parametrize(
    ("status_server", "cls", "kind", "retryable"),
    [
        ((401, "Unauthorized", "Unauthorized"), Unauthorized, "ApiUnauthorized", False),
        ((403, "Forbidden", 'nodes is forbidden: User "bob" cannot list resource "nodes"'), Forbidden, "ApiForbidden", False),
        ((503, "ServiceUnavailable", "the server is currently unable to handle the request"), Unavailable, "ApiUnavailable", True),
        ((500, "InternalError", "etcdserver: request timed out"), ServerError, "ApiUnavailable", True),
        ((404, "NotFound", "the server could not find the requested resource"), None, "ApiError", False),
    ],
    indirect=["status_server"],
)
def test_http_answers_map_to_planning_failure_types(status_server: StatusServer, tmp_path: Path, cls, kind, retryable) -> None:
    gw = gateway_for(status_server.url, tmp_path)
    with pytest.raises(Exception) as info:
        gw.list("Node")
    if cls is not None:
        assert type(info.value) is cls
    assert planning_failure(info.value) == (kind, retryable)


# --- the preflight activity --------------------------------------------------------------------


async def test_preflight_against_a_closed_port_fails_fast_non_retryable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = closed_port()
    url = f"https://127.0.0.1:{port}"
    gateway = gateway_for(url, tmp_path)
    looked_up = resolutions(monkeypatch)
    err = await run_preflight(gateway)
    assert looked_up == [("127.0.0.1", port)] * ATTEMPTS  # its first request's attempts, then it gave up
    assert err.type == "ApiUnreachable"
    assert err.non_retryable
    assert url in err.message and "Connection refused" in err.message


@pytest.mark.parametrize(
    ("status_server", "kind"),
    [
        ((401, "Unauthorized", "Unauthorized: token expired"), "ApiUnauthorized"),
        ((403, "Forbidden", 'machineconfigpools is forbidden: User "bob" cannot list resource'), "ApiForbidden"),
    ],
    indirect=["status_server"],
)
async def test_preflight_refused_credentials_are_non_retryable_with_the_api_message(
    status_server: StatusServer, tmp_path: Path, kind: str
) -> None:
    err = await run_preflight(gateway_for(status_server.url, tmp_path))
    assert err.type == kind
    assert err.non_retryable
    assert status_server.url in err.message  # names the API
    assert ("token expired" if kind == "ApiUnauthorized" else "is forbidden") in err.message  # the API's own words
    assert status_server.hits == 1  # no client-side retries either


async def test_preflight_on_503_is_retryable_api_unavailable(tmp_path: Path) -> None:
    async with ClusterSim("r1-ovn-interrupted", time_scale=0.005, start_agents=False) as sim:
        sim.faults.configure(error_503=1.0)
        gw = KubeGateway.from_kubeconfig(sim.kubeconfig_path)
        try:
            err = await run_preflight(gw)
        finally:
            gw.close()
    assert err.type == "ApiUnavailable"
    assert not err.non_retryable  # the workflow's planning retry policy bounds it
    assert "503" in err.message and "unable to handle the request" in err.message


async def test_mid_procedure_activities_keep_retrying_on_an_unreachable_api(tmp_path: Path) -> None:
    """Only planning fails fast: a node write lets the transient error escape (retryable); the
    node read, which the drain also makes before it writes, reports ``ApiUnreachable`` but
    retryable, so only the planning retry policy (which lists the type) gives up at once."""
    gw = gateway_for(f"https://127.0.0.1:{closed_port()}", tmp_path)
    acts = ClusterActivities(lambda: gw)
    with pytest.raises(Unreachable):
        await asyncio.to_thread(ActivityEnvironment().run, acts.cordon_node, CordonInput(node="worker-0", owner="t"))
    with pytest.raises(ApplicationError) as info:
        await asyncio.to_thread(ActivityEnvironment().run, acts.read_node, ReadNodeInput(node="worker-0"))
    assert info.value.type == "ApiUnreachable" and not info.value.non_retryable, info.value
