"""A real Prometheus for the tests: Debian's ``prometheus`` binary scraping running simulators.

:class:`PrometheusServer` writes a config that scrapes each simulator's ``/metrics`` every second
(job ``kube-state-metrics``, ``honor_labels: true``: see :mod:`clustersim.metrics`) and evaluates
``prometheus_rules.yml`` (beside this file) every second, then runs ``prometheus`` on a free
loopback port with its own data directory. It never touches the system's Prometheus: Debian's
package may have started a ``prometheus`` service on port 9090 with ``/var/lib/prometheus``; this
one listens elsewhere and keeps its data in the test's directory. ``stop`` and ``start`` again keep
the port and the data (a test stops Prometheus mid-run to see a gate fail closed or open).

:func:`prometheus_factory` is the fixture (import it into a conftest): ``await make(sim, ...)``
returns a started server that is ready and has scraped every simulator once; each is stopped
after the test. A missing binary fails the test with the install command, never skips it.

Prometheus' own endpoints used: ``/-/ready`` (https://prometheus.io/docs/prometheus/latest/
management_api/) and ``/api/v1/query``, ``/api/v1/alerts`` (https://prometheus.io/docs/prometheus/
latest/querying/api/).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml

from lockkeeper.devserver import ChildProcess, free_port, popen_child

#: The rule file every test Prometheus evaluates.
RULES = Path(__file__).with_name("prometheus_rules.yml")
#: The scrape job of the simulators' /metrics (the kubernetes-mixin's kube-state-metrics selector).
JOB = "kube-state-metrics"
INSTALL_HINT = "apt-get install -y --no-install-recommends prometheus (.ci/run installs it when missing)"


def find_prometheus() -> str:
    """The ``prometheus`` binary on PATH (Debian installs /usr/bin/prometheus); fails the test
    with the install command when there is none."""
    found = shutil.which("prometheus")
    if not found:
        pytest.fail(f"prometheus binary not found: {INSTALL_HINT}")
    return found


class PrometheusError(RuntimeError):
    """Prometheus exited or did not become ready in time (the log's tail is in the message)."""


class PrometheusServer(ChildProcess):
    """One Prometheus child process. ``workdir``: config, data and log go there; ``targets``:
    ``host:port`` of the simulators to scrape; ``interval``: scrape and evaluation interval,
    seconds; ``rules``: the rule file. Attributes: ``port``, ``url`` (after ``start``)."""

    stop_timeout = 10.0

    def __init__(self, workdir: Path, targets: list[str], *, interval: float = 1.0, rules: Path = RULES) -> None:
        self.workdir = workdir
        self.targets = list(targets)
        self.interval = interval
        self.rules = rules
        self.port: int | None = None
        self.log_path = workdir / "prometheus.log"
        self._proc = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (the port is chosen by the first ``start``)."""
        return f"http://127.0.0.1:{self.port}"

    def config(self) -> dict[str, Any]:
        """The ``prometheus.yml`` written at start (https://prometheus.io/docs/prometheus/latest/
        configuration/configuration/)."""
        every = f"{int(self.interval * 1000)}ms"
        return {
            "global": {"scrape_interval": every, "scrape_timeout": every, "evaluation_interval": every},
            "rule_files": [str(self.workdir / "rules.yml")],
            "scrape_configs": [{
                "job_name": JOB, "honor_labels": True, "metrics_path": "/metrics",
                "static_configs": [{"targets": self.targets}],
            }],
        }

    async def start(self) -> None:
        """Write the config, start ``prometheus`` and wait until ``/-/ready`` answers 200 (30 s).
        A first start picks a free port (three tries if it is taken meanwhile); a restart reuses
        port and data. Raises PrometheusError with the log's tail."""
        binary = find_prometheus()
        self.workdir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.rules, self.workdir / "rules.yml")
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(self.config(), sort_keys=False))
        fixed = self.port is not None
        for attempt in range(1 if fixed else 3):
            if not fixed:
                self.port = free_port()
            args = [binary, f"--config.file={self.workdir / 'prometheus.yml'}",
                    f"--storage.tsdb.path={self.workdir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1h", "--log.level=info"]
            self._proc = popen_child(args, env=dict(os.environ), log_path=self.log_path)
            try:
                await self._wait_ready(30.0)
                return
            except PrometheusError:
                await self.stop()
                if fixed or attempt == 2 or "address already in use" not in self.log_tail(10):
                    raise

    async def _wait_ready(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while loop.time() < end:
                if self._proc is None or self._proc.poll() is not None:
                    raise PrometheusError(f"prometheus exited:\n{self.log_tail()}")
                try:
                    async with session.get(f"{self.url}/-/ready") as resp:
                        if resp.status == 200:
                            return
                except (aiohttp.ClientError, TimeoutError):
                    pass
                await asyncio.sleep(0.1)
        raise PrometheusError(f"prometheus not ready after {timeout}s:\n{self.log_tail()}")

    async def get(self, path: str, **params: str) -> Any:
        """GET ``path`` of the API with ``params``; the ``data`` of a success envelope. Raises
        AssertionError for an error envelope."""
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            async with session.get(f"{self.url}{path}", params=params) as resp:
                body = await resp.json()
        assert body.get("status") == "success", body
        return body["data"]

    async def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of ``expr`` now (``/api/v1/query``)."""
        data = await self.get("/api/v1/query", query=expr)
        return list(data["result"])

    async def alerts(self) -> list[dict[str, Any]]:
        """The active alerts (``/api/v1/alerts``), as Prometheus lists them."""
        return list((await self.get("/api/v1/alerts"))["alerts"])

    async def wait_for(self, what: str, pred: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> Any:
        """Poll the coroutine function ``pred`` every 0.2 s until it returns something true;
        that value. Raises AssertionError naming ``what`` after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            got = await pred()
            if got:
                return got
            if loop.time() >= end:
                raise AssertionError(f"{what}: not within {timeout}s")
            await asyncio.sleep(0.2)

    async def wait_scraped(self, timeout: float = 30.0) -> None:
        """Until every target's scrape succeeded once (``up{job="kube-state-metrics"} == 1``)."""
        async def all_up() -> bool:
            up = await self.query(f'up{{job="{JOB}"}} == 1')
            return len(up) == len(self.targets)

        await self.wait_for("every simulator scraped", all_up, timeout)

    async def alert_state(self, name: str, **labels: str) -> str | None:
        """``pending`` / ``firing`` of the active alert ``name`` whose labels include ``labels``;
        None when no such alert is active."""
        for a in await self.alerts():
            have = a.get("labels") or {}
            if have.get("alertname") == name and all(have.get(k) == v for k, v in labels.items()):
                return str(a.get("state"))
        return None


@pytest_asyncio.fixture(loop_scope="session")
async def prometheus_factory(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[PrometheusServer]]]:
    """``await make(sim, ..., interval=1.0)`` → a started Prometheus scraping every ``sim`` (a
    started ClusterSim), ready and with one scrape of each done; stopped after the test."""
    servers: list[PrometheusServer] = []

    async def make(*sims: Any, interval: float = 1.0) -> PrometheusServer:
        targets = [f"{s.host}:{s.port}" for s in sims]
        server = PrometheusServer(tmp_path / f"prometheus-{len(servers)}", targets, interval=interval)
        servers.append(server)
        await server.start()
        await server.wait_scraped()
        return server

    yield make
    for s in servers:
        await s.stop()


async def set_node_ready(sim: Any, node: str, ready: bool) -> None:
    """Set ``node``'s Ready condition out of band, as a kubelet (or the node controller) would:
    a strategic-merge PATCH of ``nodes/NODE/status`` through the simulator's API (merge key
    ``type``: the other conditions stay). Nothing in a scenario without hosts or a reboot in
    flight writes it back. Raises AssertionError when the API refuses."""
    cond = {"type": "Ready", "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else "KubeletNotReady",
            "message": "kubelet is posting ready status" if ready else "out-of-band test: kubelet stopped posting"}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        async with session.patch(f"{sim.url}/api/v1/nodes/{node}/status", data=json.dumps({"status": {"conditions": [cond]}}),
                                 headers={"Content-Type": "application/strategic-merge-patch+json"}) as resp:
            assert resp.status == 200, await resp.text()
