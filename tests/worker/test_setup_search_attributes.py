"""Search attributes on a plainly started dev server (``temporal server start-dev`` with no
``--search-attribute``): the worker registers them, then ``start`` and ``list`` work; a server
that refuses the registration stops the worker and ``lockkeeper setup`` with exit 3 and the fix."""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client
from temporalio.service import RPCError

from lockkeeper.devserver import find_temporal_binary, free_port, popen_child, stop_child
from workers.search_attributes import SEARCH_ATTRIBUTES, fix_commands, missing_search_attributes

LOCKKEEPER = str(Path(sys.executable).parent / "lockkeeper")


@pytest_asyncio.fixture(loop_scope="session")
async def plain_server(tmp_path: Path) -> AsyncIterator[str]:
    """``temporal server start-dev`` as a new user runs it (only a free port and no UI, so tests
    do not collide); yields its address."""
    port = free_port()
    proc = popen_child(
        [str(find_temporal_binary()), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port), "--headless"],
        env={k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")},
        log_path=tmp_path / "plain-temporal.log",
    )
    address = f"127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                client = await Client.connect(address)
                await client.workflow_service.get_system_info(GetSystemInfoRequest())
                break
            except Exception:
                await asyncio.sleep(0.1)
        else:
            raise RuntimeError("plain dev server did not start:\n" + (tmp_path / "plain-temporal.log").read_text())
        yield address
    finally:
        await stop_child(proc)


async def lk(address: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> tuple[int, str, str]:
    """Run the console script; ``(exit code, stdout, stderr)``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "LOCKKEEPER_", "KUBE"))}
    proc = await asyncio.create_subprocess_exec(
        LOCKKEEPER, "--address", address, *args, env={**base, **(env or {})},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, errb = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode or 0, out.decode(), errb.decode()


def test_fix_commands_name_every_attribute_and_type() -> None:
    cmds = fix_commands("prod ns")
    assert cmds[0] == (
        "temporal operator search-attribute create --namespace 'prod ns' --name LockkeeperCluster --type Keyword"
    )
    assert any(c.endswith("--name LockkeeperPools --type KeywordList") for c in cmds)
    assert len(cmds) == len(SEARCH_ATTRIBUTES)


async def test_plain_dev_server_worker_start_and_list_with_no_setup(
    plain_server: str, sim_factory: Any, worker_process_factory: Any, task_queue: str
) -> None:
    client = await Client.connect(plain_server)
    missing, _ = await missing_search_attributes(client, "default")
    assert missing == list(SEARCH_ATTRIBUTES)  # really plain

    # Before any worker ran, the CLI names the fix instead of the bare server error.
    code, _, err = await lk(plain_server, "list")
    assert code == 3, err
    assert "lockkeeper setup" in err and "LockkeeperProcedure" in err

    sim = await sim_factory("r1-ovn-interrupted", time_scale=0.02)
    worker = worker_process_factory(address=plain_server, kubeconfig=sim.kubeconfig_path, task_queue=task_queue)
    await worker.start()  # waits for "worker started": after the registration
    assert await missing_search_attributes(client, "default") == ([], [])
    assert "search attributes registered" in worker.log_path.read_text()
    assert "garbage collector tuned" in worker.log_path.read_text()  # the worker owns its process

    code, out, err = await lk(plain_server, "--task-queue", task_queue, "start", "machineconfig-rollout",
                              "--pool", "app", env={"KUBECONFIG": str(sim.kubeconfig_path)})
    assert code == 0, err
    wid = out.splitlines()[0].strip()
    try:
        rows: list[dict[str, Any]] = []
        for _ in range(100):  # visibility is eventually consistent
            code, out, err = await lk(plain_server, "list", "-o", "json")
            assert code == 0, err
            rows = json.loads(out)
            if any(r["id"] == wid for r in rows):
                break
            await asyncio.sleep(0.2)
        row = next(r for r in rows if r["id"] == wid)
        # The Temporal UI's static summary names the procedure, cluster and requester.
        summary = await (await client.get_workflow_handle(wid).describe()).static_summary()
        assert "default" in summary and getpass.getuser() in summary and "ollout" in summary
        assert row["procedure"] == "machineconfig-rollout" and row["pools"] == ["app"]
        # `setup` on a server that has them: all present, exit 0.
        code, out, err = await lk(plain_server, "setup", "-o", "json")
        assert code == 0, err
        assert {r["state"] for r in json.loads(out)["search_attributes"]} == {"present"}
    finally:
        try:
            await client.get_workflow_handle(wid).terminate("test over")
        except RPCError:
            pass  # it already finished


async def test_refused_registration_exits_3_with_the_exact_fix(
    plain_server: str, sim_factory: Any, worker_process_factory: Any, task_queue: str
) -> None:
    # The SQL visibility store has three KeywordList columns; taking them all makes the server
    # refuse LockkeeperPools, as a server without rights would refuse the whole registration.
    client = await Client.connect(plain_server)
    await client.operator_service.add_search_attributes(AddSearchAttributesRequest(
        namespace="default",
        search_attributes={f"Other{i}": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST for i in range(3)},
    ))
    code, out, err = await lk(plain_server, "setup")
    assert code == 3, (out, err)
    assert "LockkeeperPools" in err
    assert "temporal operator search-attribute create --namespace default --name LockkeeperPools --type KeywordList" in err

    sim = await sim_factory("r1-ovn-interrupted", time_scale=0.02)
    worker = worker_process_factory(address=plain_server, kubeconfig=sim.kubeconfig_path, task_queue=task_queue)
    await worker.start(wait_ready=False)
    for _ in range(600):
        if worker._proc is not None and worker._proc.poll() is not None:
            break
        await asyncio.sleep(0.1)
    assert worker._proc is not None and worker._proc.returncode == 3
    log = worker.log_path.read_text()
    assert "--name LockkeeperPools --type KeywordList" in log


def test_default_summary_names_procedure_cluster_scope_and_requester() -> None:
    from types import SimpleNamespace

    from lockkeeper.starter import default_summary

    inp = SimpleNamespace(requested_by="alice")
    assert default_summary("drain", "prod", ["node/prod/n1"], None, inp) == (
        "drain on cluster prod · scope node/prod/n1 · requested by alice"
    )
    assert default_summary("machineconfig-rollout", "prod", [], ["app", "infra"], SimpleNamespace()) == (
        "machineconfig-rollout on cluster prod · pools app, infra"
    )


async def test_status_watch_ctrl_c_exits_130_and_restores_the_terminal(
    plain_server: str, sim_factory: Any, worker_process_factory: Any, task_queue: str
) -> None:
    import pty
    import signal

    sim = await sim_factory("r1-ovn-interrupted", time_scale=0.02)
    worker = worker_process_factory(address=plain_server, kubeconfig=sim.kubeconfig_path, task_queue=task_queue)
    await worker.start()
    code, out, err = await lk(plain_server, "--task-queue", task_queue, "start", "machineconfig-rollout",
                              "--pool", "app", "--approve-each", "pool", env={"KUBECONFIG": str(sim.kubeconfig_path)})
    assert code == 0, err
    wid = out.splitlines()[0].strip()
    client = await Client.connect(plain_server)
    try:
        # stdout on a terminal (a pty), so rich runs its live view and hides the cursor.
        master, slave = pty.openpty()
        base = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "LOCKKEEPER_", "KUBE"))}
        proc = await asyncio.create_subprocess_exec(
            LOCKKEEPER, "--address", plain_server, "--task-queue", task_queue, "status", wid, "--watch",
            stdout=slave, stderr=asyncio.subprocess.PIPE, env={**base, "TERM": "xterm", "COLUMNS": "120"},
        )
        os.close(slave)
        chunks: list[bytes] = []

        def drain() -> None:
            while True:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    return
                if not data:
                    return
                chunks.append(data)

        reader = asyncio.get_running_loop().run_in_executor(None, drain)
        for _ in range(300):  # until the live view shows the gate
            if b"pool/app" in b"".join(chunks):
                break
            await asyncio.sleep(0.1)
        assert b"pool/app" in b"".join(chunks)
        proc.send_signal(signal.SIGINT)
        _, errb = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 130, errb
        await asyncio.wait_for(reader, 10)
        os.close(master)
        screen = b"".join(chunks)
        hidden, shown = screen.rfind(b"\x1b[?25l"), screen.rfind(b"\x1b[?25h")
        assert hidden != -1 and shown > hidden  # the cursor is back
        assert b"interrupted" in errb and b"Traceback" not in errb
        # The rollout itself goes on: still running, still waiting at its gate.
        assert (await client.get_workflow_handle(wid).describe()).status.name == "RUNNING"
    finally:
        try:
            await client.get_workflow_handle(wid).terminate("test over")
        except RPCError:
            pass
