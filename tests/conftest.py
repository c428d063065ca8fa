"""Shared fixtures: an embedded Temporal dev server, a client, worker processes, task queues.

- ``dev_server`` (session): one ``temporal server start-dev`` (SQLite in a temp dir, search
  attributes registered) shared by the whole run. Tests that stop or restart a server must use
  ``dev_server_factory`` for a private one instead.
- ``temporal_client`` (session): a client on ``dev_server`` with the pydantic data converter.
- ``task_queue``: a fresh task queue name per test (so workers of other tests never pick up
  this test's tasks).
- ``sim_factory``: ``await make(scenario, time_scale=...)`` → a started ClusterSim in the
  test's event loop, stopped after the test.
- ``worker_process_factory``: builds :class:`lockkeeper.procs.WorkerProcess` children
  (``python -m workers.worker``) that are stopped at the end of the test.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from clustersim import ClusterSim
from lockkeeper.devserver import DevServer
from lockkeeper.procs import WorkerProcess


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def dev_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    server = DevServer(tmp_path_factory.mktemp("temporal"), headless=True)
    async with server:
        yield server


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def temporal_client(dev_server: DevServer) -> Any:
    from workers.client import connect
    from workers.settings import Settings

    return await connect(Settings(temporal_address=dev_server.address, temporal_namespace=dev_server.namespace))


@pytest_asyncio.fixture(loop_scope="session")
async def dev_server_factory(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[DevServer]]]:
    """``await make(**DevServer kwargs)`` → a started private server, stopped after the test."""
    servers: list[DevServer] = []

    async def make(**kwargs: Any) -> DevServer:
        kwargs.setdefault("headless", True)
        server = DevServer(tmp_path / f"temporal-{len(servers)}", **kwargs)
        servers.append(server)
        await server.start()
        return server

    yield make
    for s in servers:
        await s.stop()


@pytest.fixture
def task_queue(request: pytest.FixtureRequest) -> str:
    return f"lk-{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"


@pytest_asyncio.fixture(loop_scope="session")
async def worker_process_factory(tmp_path: Path) -> AsyncIterator[Callable[..., WorkerProcess]]:
    """``make(address=..., kubeconfig=..., task_queue=..., env=...)`` → an unstarted
    :class:`WorkerProcess` logging to ``tmp_path``; every one is stopped after the test."""
    procs: list[WorkerProcess] = []

    def make(**kwargs: Any) -> WorkerProcess:
        kwargs.setdefault("log_path", tmp_path / f"worker-{len(procs)}.log")
        proc = WorkerProcess(**kwargs)
        procs.append(proc)
        return proc

    yield make
    for p in procs:
        await p.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def sim_factory() -> AsyncIterator[Callable[..., Awaitable[ClusterSim]]]:
    """``await make(scenario, time_scale=...)`` → a started ClusterSim, stopped after the test."""
    sims: list[ClusterSim] = []

    async def make(scenario: Any = "r1-ovn-interrupted", **kwargs: Any) -> ClusterSim:
        sim = ClusterSim(scenario, **kwargs)
        await sim.start()
        sims.append(sim)
        return sim

    yield make
    for sim in sims:
        await sim.stop()
