"""Issue 18/17: one exit-code table, one-line errors, on every command, through the real
``lockkeeper`` console script against a real Temporal dev server.

0 ok; 1 the procedure failed or refused the request; 2 usage or validation of the CLI's own
input; 3 not found, no connection or no worker; 130 interrupted.

The worker runs in this process with fake activities under the real names (an in-memory etcd
and cluster) whose ``cordon_node`` fails every attempt, as an API outage would: the drain keeps
retrying, which ``status`` must show. Every case checks the code and that stderr is one line
without a traceback.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from lockkeeper.devserver import free_port
from tests.support.etcd_fakes import FakeEtcd, etcd_members
from tests.support.wf_fakes import FakeCluster, preflight_activity

#: The keys of ``status -o json``, the same for a running and an ended run (lockkeeper/cli/status_doc.py).
STATUS_KEYS = {"workflow_id", "run_id", "procedure", "workflow_type", "state", "status", "result", "failure",
               "warning", "versioning", "priority", "upgrade", "pending_activities"}

pytestmark = pytest.mark.timeout(300)

LOCKKEEPER = str(Path(sys.executable).parent / "lockkeeper")
OUTAGE = "simulated API outage: 503 Service Unavailable"


async def lk(address: str, *args: str, timeout: float = 90) -> tuple[int, str, str]:
    """Run the console script with a clean environment; ``(exit code, stdout, stderr)``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "LOCKKEEPER_", "KUBE"))}
    proc = await asyncio.create_subprocess_exec(
        LOCKKEEPER, "--address", address, *args, env=base,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode or 0, out.decode(), err.decode()


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


async def check_table(address: str, cases: list[tuple[list[str], int, str]], parallel: int = 3) -> None:
    """Run every ``(args, exit code, text in stderr)`` case; assert them all at the end (the
    whole table's mismatches in one message). A non-zero code must come with one stderr line."""
    sem = asyncio.Semaphore(parallel)

    async def one(args: list[str]) -> tuple[int, str, str]:
        async with sem:
            return await lk(address, *args)

    results = await asyncio.gather(*(one(a) for a, _, _ in cases))
    bad = []
    for (args, code, needle), (got, _out, err) in zip(cases, results, strict=True):
        lines = error_lines(err)
        if got != code or needle.lower() not in err.lower():
            bad.append(f"{args}: exit {got} (want {code}), stderr {err!r} (want {needle!r})")
        elif code != 0 and (len(lines) != 1 or "Traceback" in err):
            bad.append(f"{args}: error is not one line: {err!r}")
    assert not bad, "\n".join(bad)


def test_usage_and_validation_errors_exit_2_in_one_line() -> None:
    dead = f"127.0.0.1:{free_port()}"
    cases = [
        (["start", "drain", "--node", "n1", "--decide-after", "-5"], 2, "--decide-after"),
        (["start", "drain", "--node", "n1", "--reboot-command", "reboot", "--exec-via", "ssh", "--ssh-host", "h", "--ssh-port", "0"],
         2, "--ssh-port"),
        (["start", "drain", "--node", "n1", "--ready-timeout", "0"], 2, "--ready-timeout"),
        (["start", "drain", "--node", "n1", "--decision-timeout", "0"], 2, "--decision-timeout"),
        (["start", "drain", "--node", "n1", "--decision-timeout-outcome", "delete-pod"], 2, "delete-pod"),
        (["start", "machineconfig-rollout", "--pool", "app", "--target", "infra=rendered-infra-1"], 2, "infra"),
        (["start", "machineconfig-rollout", "--decide-after", "-1"], 2, "--decide-after"),
        (["start", "machineconfig-rollout", "--gate-timeout", "-3"], 2, "--gate-timeout"),
        (["status", "x", "-o", "xml"], 2, "-o"),
        (["no-such-command"], 2, "no-such-command"),
        (["start", "drain"], 2, "--node"),
    ]
    asyncio.run(check_table(dead, cases, parallel=2))


def test_no_server_exits_3_for_every_command() -> None:
    dead = f"127.0.0.1:{free_port()}"
    cases = [(args, 3, "cannot connect to Temporal") for args in (
        ["status", "x"], ["list"], ["history", "x"], ["approve", "x"], ["reject", "x"], ["pause", "x"],
        ["resume", "x"], ["abort", "x"], ["skip-node", "x", "n1"], ["retry-node", "x", "n1"],
        ["decide", "x", "n1", "wait"], ["revert", "x"], ["setup"], ["start", "drain", "--node", "n1"],
        ["start", "machineconfig-rollout", "--pool", "app"], ["start", "machineconfig-rollout", "--dry-run"],
    )]
    asyncio.run(check_table(dead, cases, parallel=2))


def test_malformed_kubeconfig_is_2_for_worker_and_diagnose(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("not: [valid\n")
    dead = f"127.0.0.1:{free_port()}"
    cases = [(args, 2, "kubeconfig") for args in (
        ["worker", "--kubeconfig", str(bad)],
        ["diagnose", "pool", "app", "--kubeconfig", str(bad)],
        ["diagnose", "gluster", "--kubeconfig", str(bad)],
    )]
    asyncio.run(check_table(dead, cases, parallel=2))


@pytest_asyncio.fixture(loop_scope="session")
async def outage_worker(temporal_client: Any, task_queue: str) -> AsyncIterator[Worker]:
    """Every workflow, fake activities; ``cordon_node`` fails every attempt (retryable)."""
    from workflows import WORKFLOWS

    @activity.defn(name="cordon_node")
    async def cordon_node(inp: Any) -> Any:
        raise ApplicationError(OUTAGE, type="Unavailable")

    fakes = [a for a in FakeCluster({"worker": 2}).activities() if getattr(a, "__temporal_activity_definition").name != "cordon_node"]
    acts = FakeEtcd(etcd_members()).activities() + fakes + [cordon_node, preflight_activity()]
    with ThreadPoolExecutor(4) as pool:
        w = Worker(temporal_client, task_queue=task_queue, workflows=WORKFLOWS, activities=acts,
                   activity_executor=pool, workflow_runner=UnsandboxedWorkflowRunner())
        async with w:
            yield w


async def test_exit_codes_against_running_procedures(dev_server: Any, temporal_client: Any, task_queue: str,
                                                     outage_worker: Worker, tmp_path: Path) -> None:
    cluster = f"xc-{uuid.uuid4().hex[:6]}"
    members = tmp_path / "members.yaml"
    members.write_text(yaml.safe_dump({"members": [m.model_dump(mode="json") for m in etcd_members()]}))
    q = ["--task-queue", task_queue]

    # An etcd restore waits at its first gate; a drain whose cordon keeps failing never gets
    # going: the CLI stops waiting for it and says it is started and still running (exit 0).
    (code, out, err), (dcode, dout, derr) = await asyncio.gather(
        lk(dev_server.address, *q, "start", "etcd-restore", "--members", str(members), "--strategy",
           "force-new-cluster", "--cluster", cluster, "-o", "json"),
        lk(dev_server.address, *q, "start", "drain", "--node", "worker-0", "--cluster", cluster),
    )
    assert code == 0, err
    restore = json.loads(out)["workflow_id"]
    assert dcode == 0 and "started, still running" in derr and "failed" not in derr.lower(), derr
    drain = dout.splitlines()[0].strip()
    assert drain in derr

    # status shows the failing step: its type, attempt count, last failure and next retry.
    doc: dict[str, Any] = {}
    for _ in range(60):
        code, out, err = await lk(dev_server.address, *q, "status", drain, "-o", "json")
        assert code == 0, err
        doc = json.loads(out)
        # In its retry backoff (an attempt that is running has no next attempt time yet).
        rows = [r for r in doc["pending_activities"]
                if r["activity_type"] == "cordon_node" and r["attempt"] >= 2 and r["next_attempt_time"]]
        if rows:
            break
        await asyncio.sleep(0.5)
    assert rows and OUTAGE in (rows[0]["last_failure"] or "") and rows[0]["next_attempt_time"], doc
    assert doc["state"] == "running" and doc["status"] is not None and doc["result"] is None and doc["failure"] is None
    assert set(doc) == STATUS_KEYS, "a running and an ended run's status documents have one shape"
    code, out, err = await lk(dev_server.address, *q, "status", drain)
    assert code == 0 and "cordon_node" in out and "503" in out, out + err
    # status is for a person (issue 42): no Python repr in the drain's or the restore's table
    from tests.support.readme_run import reprs_in

    assert reprs_in(out) == [], out
    code, out, err = await lk(dev_server.address, *q, "status", restore)
    assert code == 0 and reprs_in(out) == [], out + err

    missing = f"nosuch-{uuid.uuid4().hex[:6]}"
    await check_table(dev_server.address, [
        # not found
        (["status", missing], 3, "not found"),
        (["history", missing], 3, "not found"),
        *[([cmd, missing], 3, "not found") for cmd in ("approve", "reject", "pause", "resume", "abort")],
        (["skip-node", missing, "n1"], 3, "not found"),
        (["retry-node", missing, "n1"], 3, "not found"),
        (["decide", missing, "n1", "wait"], 3, "not found"),
        ([*q, "approve", restore, "no-such-gate"], 3, "unknown gate"),
        ([*q, "decide", drain, "worker-9", "wait"], 3, "unknown node"),
        # refused by the procedure
        ([*q, "resume", restore], 1, "not paused"),
        ([*q, "skip-node", drain, "worker-0"], 1, "refused"),
        ([*q, "retry-node", drain, "worker-0"], 1, "refused"),
        ([*q, "decide", drain, "worker-0", "wait"], 1, "no drain decision"),
        # the CLI's own input
        ([*q, "skip-node", restore, "etcd-0"], 2, "no nodes"),
        # ok
        ([*q, "status", restore], 0, ""),
        (["list", "--cluster", cluster], 0, ""),
    ], parallel=3)

    for wid in (restore, drain):
        await temporal_client.get_workflow_handle(wid).terminate(reason="test cleanup")


async def test_start_without_worker_refuses_or_queues(dev_server: Any, temporal_client: Any) -> None:
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError

    empty = f"lk-empty-{uuid.uuid4().hex[:8]}"
    q = ["--task-queue", empty]
    wid = f"no-worker-{uuid.uuid4().hex[:6]}"

    # No worker: refused, exit 3, naming the queue and `lockkeeper worker`; nothing exists.
    for args in (["start", "drain", "--node", "worker-0", "--id", wid],
                 ["start", "machineconfig-rollout", "--pool", "app", "--dry-run", "--id", wid]):
        code, out, err = await lk(dev_server.address, *q, *args)
        assert code == 3 and empty in err and "lockkeeper worker" in err and "--queue" in err, err
        assert len(error_lines(err)) == 1 and out == "", (out, err)
        with pytest.raises(RPCError):
            await temporal_client.get_workflow_handle(wid).describe()

    # --queue: started, says so plainly and how to cancel it; abort ends it before any step.
    code, out, err = await lk(dev_server.address, *q, "start", "drain", "--node", "worker-0", "--queue", "--id", wid,
                              "-o", "json")
    assert code == 0, err
    assert json.loads(out) == {"workflow_id": wid, "queued": True}
    assert "queued" in err and f"lockkeeper abort {wid}" in err and empty in err, err

    # Ctrl-C while a decision waits for a worker that never comes: 130, one line, no traceback.
    proc = await asyncio.create_subprocess_exec(
        LOCKKEEPER, "--address", dev_server.address, *q, "approve", wid,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    await asyncio.sleep(4)
    if proc.returncode is None:
        proc.send_signal(signal.SIGINT)
    # 90 s: on a loaded machine the command may not be waiting yet at the SIGINT (its Python still
    # starting); it then ends by its own decision timeout (30 s) plus the withdrawal, exit 3.
    _, errb = await asyncio.wait_for(proc.communicate(), 90)
    err = errb.decode()
    assert "Traceback" not in err and len(error_lines(err)) == 1, err
    # Interrupted, or (if the update's own deadline answered first) exit 3: nothing was decided.
    assert (proc.returncode == 130 and "interrupted; nothing was decided" in err) or (
        proc.returncode == 3 and "nothing was decided" in err), (proc.returncode, err)

    code, out, err = await lk(dev_server.address, *q, "abort", wid, "--reason", "changed my mind")
    assert code == 0 and "never ran" in err, err
    handle = temporal_client.get_workflow_handle(wid)
    assert (await handle.describe()).status == WorkflowExecutionStatus.TERMINATED
    kinds = [e.event_type async for e in handle.fetch_history_events()]
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in kinds

    # status of an ended run: one shape, with its failure; exit 1.
    code, out, err = await lk(dev_server.address, "status", wid, "-o", "json")
    doc = json.loads(out)
    assert code == 1 and doc["state"] == "terminated" and "changed my mind" in doc["failure"], out + err
    assert set(doc) == STATUS_KEYS, "a running and an ended run's status documents have one shape"
    assert doc["status"] is None and doc["result"] is None and doc["procedure"] == "drain" and doc["upgrade"] is None
    code, out, err = await lk(dev_server.address, "status", wid)
    assert code == 1 and "terminated" in out and "changed my mind" in out, out + err


async def test_dry_runs_never_count_in_the_pool_precheck(dev_server: Any, temporal_client: Any) -> None:
    from lockkeeper.starter import running_with_pools

    empty = f"lk-dry-{uuid.uuid4().hex[:8]}"
    cluster = f"dry-{uuid.uuid4().hex[:6]}"
    code, out, err = await lk(dev_server.address, "--task-queue", empty, "start", "machineconfig-rollout", "--cluster",
                              cluster, "--pool", "app", "--dry-run", "--queue")
    assert code == 0, err
    dry = out.splitlines()[0].strip()
    # Visible (visibility is eventually consistent), still running, and yet no conflict.
    for _ in range(100):
        ids = [wf.id async for wf in temporal_client.list_workflows(f"WorkflowId = '{dry}' AND ExecutionStatus = 'Running'")]
        if ids:
            break
        await asyncio.sleep(0.2)
    assert ids == [dry]
    assert await running_with_pools(temporal_client, "machineconfig-rollout", cluster, ["app"]) == []
    code, out, err = await lk(dev_server.address, "--task-queue", empty, "start", "machineconfig-rollout", "--cluster",
                              cluster, "--pool", "app", "--queue")
    assert code == 0 and "queued" in err, err
    real = out.splitlines()[0].strip()
    for _ in range(100):  # the real one does count
        found = await running_with_pools(temporal_client, "machineconfig-rollout", cluster, ["app"])
        if found:
            break
        await asyncio.sleep(0.2)
    assert [w for w, _ in found] == [real]
    for wid in (dry, real):
        await temporal_client.get_workflow_handle(wid).terminate(reason="test cleanup")


def test_debug_adds_the_traceback_to_the_one_line_error() -> None:
    import subprocess

    dead = f"127.0.0.1:{free_port()}"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "LOCKKEEPER_", "KUBE"))}
    plain = subprocess.run([LOCKKEEPER, "--address", dead, "status", "x"], capture_output=True, text=True, env=base,
                           timeout=60)
    debug = subprocess.run([LOCKKEEPER, "--debug", "--address", dead, "status", "x"], capture_output=True, text=True,
                           env=base, timeout=60)
    assert plain.returncode == debug.returncode == 3
    assert len(error_lines(plain.stderr)) == 1 and "Traceback" not in plain.stderr
    first = error_lines(debug.stderr)[0]
    assert first == error_lines(plain.stderr)[0] and "Traceback (most recent call last)" in debug.stderr
