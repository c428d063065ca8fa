"""The embedded dev server: binary lookup, search attributes, persistence across a crash/restart."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import pytest
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client, WorkflowExecutionStatus

from lockkeeper.devserver import SEARCH_ATTRIBUTES, DevServer, find_temporal_binary


def test_binary_is_the_wheels_next_to_python() -> None:
    assert find_temporal_binary() == Path(sys.executable).parent / "temporal"


def test_command_registers_search_attributes_and_sqlite(tmp_path: Path) -> None:
    server = DevServer(tmp_path, port=7999, ui_port=8999)
    cmd = server.command()
    assert cmd[1:3] == ["server", "start-dev"]
    assert cmd[cmd.index("--db-filename") + 1] == str(tmp_path / "temporal.sqlite")
    assert cmd[cmd.index("--port") + 1] == "7999" and cmd[cmd.index("--ui-port") + 1] == "8999"
    assert "LockkeeperPools=KeywordList" in cmd and "LockkeeperCluster=Keyword" in cmd
    assert server.ui_url == "http://127.0.0.1:8999"
    pragmas = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--sqlite-pragma"]
    assert pragmas == ["journal_mode=wal", "synchronous=normal"]
    memory = DevServer(tmp_path, persist=False, sqlite_pragmas=()).command()
    assert "--db-filename" not in memory and "--sqlite-pragma" not in memory


def test_command_passes_dynamic_config_and_overrides(tmp_path: Path) -> None:
    """Eager activities, the fast queue reads and room for every test's task queue in one worker
    deployment version go to the server; a caller's value wins."""

    def values(cmd: list[str]) -> dict[str, str]:
        return dict(cmd[i + 1].split("=", 1) for i, a in enumerate(cmd) if a == "--dynamic-config-value")

    assert values(DevServer(tmp_path).command()) == {
        "system.enableActivityEagerExecution": "true",
        "history.transferProcessorMaxPollRPS": "200",
        "history.timerProcessorMaxPollRPS": "200",
        "matching.maxTaskQueuesInDeploymentVersion": "100000",
        "matching.maxTaskQueuesInDeployment": "100000",
    }
    mine = values(DevServer(tmp_path, dynamic_config={"history.transferProcessorMaxPollRPS": "20", "x.y": "1"}).command())
    assert mine["history.transferProcessorMaxPollRPS"] == "20" and mine["x.y"] == "1"
    assert mine["system.enableActivityEagerExecution"] == "true"


def _accepts(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.mark.parametrize("hard", [True, False])
async def test_restart_keeps_workflows_and_port(dev_server_factory, hard: bool) -> None:
    server: DevServer = await dev_server_factory()
    client = await Client.connect(server.address)
    attrs = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace="default"))
    assert set(SEARCH_ATTRIBUTES) <= set(attrs.custom_attributes)
    # No worker: the workflow just sits in history, which must survive the restart.
    handle = await client.start_workflow("NoSuchWorkflow", id=f"persist-{hard}", task_queue="nobody")
    address, pid = server.address, server.pid

    await server.restart(hard=hard)
    assert server.address == address and server.pid != pid and server.running

    client = await Client.connect(server.address)
    desc = await client.get_workflow_handle(handle.id).describe()
    assert desc.status == WorkflowExecutionStatus.RUNNING and desc.run_id == handle.result_run_id

    await server.stop()
    assert not server.running and not _accepts(address)


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: sim, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: admin, user: {token: abc}}]
contexts: [{name: sim, context: {cluster: sim, user: admin}}]
current-context: sim
"""


async def test_worker_process_start_kill_restart(dev_server, worker_process_factory, task_queue, tmp_path) -> None:
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    proc = worker_process_factory(address=dev_server.address, kubeconfig=kubeconfig, task_queue=task_queue)
    await proc.start()
    first = proc.pid
    assert proc.running and first is not None

    client = await Client.connect(dev_server.address)
    request = DescribeTaskQueueRequest(
        namespace="default",
        task_queue=TaskQueue(name=task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )
    for _ in range(100):  # the first poll follows the ready line shortly
        if (await client.workflow_service.describe_task_queue(request)).pollers:
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail("the worker never polled its task queue")

    await proc.kill()
    assert not proc.running
    await proc.restart()
    assert proc.running and proc.pid != first and proc.starts == 2
    assert await proc.stop() == 0  # SIGTERM: graceful shutdown, clean exit


async def test_worker_process_reports_bad_kubeconfig(dev_server, worker_process_factory, task_queue, tmp_path) -> None:
    from lockkeeper.procs import WorkerProcessError

    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: [oops\n")
    proc = worker_process_factory(address=dev_server.address, kubeconfig=bad, task_queue=task_queue)
    with pytest.raises(WorkerProcessError, match="exited with code 2") as err:
        await proc.start()
    assert f"{bad} is not valid YAML" in str(err.value)


class _HttpPortTakenOnce(DevServer):
    """A dev server whose first start asks for an HTTP API port somebody else holds (as when the
    port the CLI picked is taken before it binds it); later starts let the CLI pick."""

    def __init__(self, *args, busy_port: int, **kw) -> None:
        super().__init__(*args, **kw)
        self.busy_port = busy_port
        self.commands = 0

    def command(self) -> list[str]:
        self.commands += 1
        extra = ["--http-port", str(self.busy_port)] if self.commands == 1 else []
        return [*super().command(), *extra]


async def test_start_again_when_a_port_is_taken_meanwhile(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        server = _HttpPortTakenOnce(tmp_path / "state", headless=True, persist=False, busy_port=busy.getsockname()[1])
        try:
            await server.start()
            # The first start exited on the taken port (any other exit would have raised), the second serves.
            assert server.commands == 2 and server.running
        finally:
            await server.stop()
