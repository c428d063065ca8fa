"""The ``lockkeeper`` command against a real Temporal dev server, for every procedure type.

A worker in this process runs every workflow of ``workflows.PROCEDURES`` with fake activities
registered under the real names (an in-memory etcd and cluster), and the real ``lockkeeper``
console script runs as a subprocess. Checked: ``start`` of each procedure prints its workflow
ID, ``list`` shows drains and etcd procedures (search attributes set at start), ``status``
decodes each run with its own model (``-o json`` prints it) and renders its panel, the lease
pre-check refuses a second procedure on an overlapping scope naming the holder, and the generic
operator commands reach an etcd restore.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from tests.support.etcd_fakes import FakeEtcd, etcd_members
from tests.support.wf_fakes import FakeCluster, preflight_activity

pytestmark = pytest.mark.timeout(240)

LOCKKEEPER = str(Path(sys.executable).parent / "lockkeeper")


@pytest_asyncio.fixture(loop_scope="session")
async def worker(temporal_client: Any, task_queue: str) -> AsyncIterator[Worker]:
    from workflows import WORKFLOWS

    acts = FakeEtcd(etcd_members()).activities() + FakeCluster({"worker": 2}).activities() + [preflight_activity()]
    with ThreadPoolExecutor(4) as pool:
        w = Worker(temporal_client, task_queue=task_queue, workflows=WORKFLOWS, activities=acts,
                   activity_executor=pool, workflow_runner=UnsandboxedWorkflowRunner())
        async with w:
            yield w


async def lk(dev_server: Any, task_queue: str, *args: str) -> tuple[int, str, str]:
    """Run the console script; returns (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        LOCKKEEPER, "--address", dev_server.address, "--task-queue", task_queue, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_every_procedure_through_the_cli(dev_server: Any, temporal_client: Any, task_queue: str, worker: Worker,
                                               tmp_path: Path) -> None:
    cluster = f"cli-{uuid.uuid4().hex[:6]}"
    members = tmp_path / "members.yaml"
    members.write_text(yaml.safe_dump({"members": [m.model_dump(mode="json") for m in etcd_members()]}))

    # An etcd restore stops at its first gate and holds etcd/<cluster> meanwhile.
    code, out, err = await lk(dev_server, task_queue, "start", "etcd-restore", "--members", str(members),
                              "--strategy", "force-new-cluster", "--cluster", cluster, "-o", "json")
    assert code == 0, err
    restore = json.loads(out)["workflow_id"]
    assert restore.startswith(f"etcd-restore-{cluster}-")

    # The reboot command's SSH endpoint and the reboot's time bound reach the input.
    code, out, err = await lk(dev_server, task_queue, "start", "drain", "--node", "worker-0", "--cluster", cluster,
                              "--reboot-command", "systemctl reboot", "--exec-via", "ssh", "--ssh-host", "10.0.0.7",
                              "--ssh-port", "2222", "--ready-timeout", "900", "--dry-run", "-o", "json")
    assert code == 0, err
    inp = json.loads(out)["input"]
    assert inp["reboot_command"] == ["systemctl", "reboot"] and inp["ready_timeout_seconds"] == 900
    assert {k: inp["reboot_access"][k] for k in ("backend", "host", "port")} == {"backend": "ssh", "host": "10.0.0.7", "port": 2222}
    # The dry run is the drain's own: it checked the node and the command's program there.
    checked = json.loads(out)["result"]["preconditions"]
    assert [(c["precondition"]["kind"], c["state"]) for c in checked] == [("names-exist", "ok"), ("host-executable", "ok")]
    assert checked[1]["precondition"]["access"]["host"] == "10.0.0.7"

    # A drain runs to its end; the table output's first line is the workflow ID.
    code, out, err = await lk(dev_server, task_queue, "start", "drain", "--node", "worker-0", "--cluster", cluster,
                              "--uncordon-after", "--wait")
    assert code == 0, err
    drain = out.splitlines()[0].strip()
    assert drain.startswith(f"drain-{cluster}-worker-0-")

    # A backup on the same cluster is refused before it starts: the restore holds etcd/<cluster>.
    deadline = time.monotonic() + 60
    while True:
        code, out, err = await lk(dev_server, task_queue, "start", "etcd-backup", "--members", str(members),
                                  "--cluster", cluster)
        if code == 1 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)  # the restore's lease may not be taken yet
    assert code == 1 and restore in err and f"etcd/{cluster}" in err, (code, err)
    code, out, err = await lk(dev_server, task_queue, "start", "etcd-backup", "--members", str(members),
                              "--cluster", cluster, "--dry-run", "-o", "json")
    assert code == 1 and json.loads(out)["conflicts"][0]["holder"] == restore

    # list shows both procedure types (visibility is eventually consistent: poll).
    deadline = time.monotonic() + 30
    while True:
        code, out, err = await lk(dev_server, task_queue, "list", "--cluster", cluster, "-o", "json")
        assert code == 0, err
        rows = {r["id"]: r for r in json.loads(out)}
        if {restore, drain} <= set(rows) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert rows[restore]["procedure"] == "etcd-restore" and rows[drain]["procedure"] == "drain"
    assert all(r["cluster"] == cluster for r in rows.values())

    # status decodes each run with its own model and renders its own panel.
    code, out, err = await lk(dev_server, task_queue, "status", restore, "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    st = doc["status"]
    assert doc["workflow_id"] == restore and doc["state"] == "running" and doc["result"] is None
    assert st["workflow_id"] == restore and "step" in st and "members" in st and st["gates"]
    # issue 40: an etcd restore goes first on a shared worker, balanced by cluster
    assert doc["priority"] == {"priority_key": 1, "fairness_key": cluster, "fairness_weight": None}, doc["priority"]
    code, out, err = await lk(dev_server, task_queue, "status", restore)
    assert code == 0 and restore in out and "waiting for" in out and "Members" in out, out + err
    code, out, err = await lk(dev_server, task_queue, "status", drain, "-o", "json")
    doc = json.loads(out)
    assert code == 0 and doc["state"] == "completed" and doc["result"]["outcome"] == "completed", out + err
    assert doc["status"] is None and doc["failure"] is None and doc["pending_activities"] == []
    code, out, err = await lk(dev_server, task_queue, "status", drain)
    assert code == 0 and "outcome completed" in out and "worker-0" in out, out + err

    # The generic operator commands reach the restore; node commands are refused for it.
    code, out, err = await lk(dev_server, task_queue, "skip-node", restore, "etcd-0")
    assert code == 2 and "no nodes" in err, err
    code, out, err = await lk(dev_server, task_queue, "pause", restore, "--reason", "change freeze", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["status"]["phase"] == "paused"
    code, out, err = await lk(dev_server, task_queue, "abort", restore, "--reason", "not today")
    assert code == 0, err
    handle = temporal_client.get_workflow_handle(restore)
    await asyncio.wait_for(handle.result(), 60)
    code, out, err = await lk(dev_server, task_queue, "status", restore, "-o", "json")
    assert code == 1 and json.loads(out)["result"]["outcome"] == "aborted", out + err
