"""``lockkeeper start runtime-migration`` through the real console script against a dev server,
a worker process and clustersim ``r4-crio-to-docker``: the dry run changes nothing, the start
prints the workflow ID, ``status`` shows the node rows and the destructive-step gate, ``reject``
stops the node before anything is done to it."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tests.runtime_migration.test_runtime_migration_e2e import HOOK, INVENTORY, PLAYBOOKS, SCALE, SHIM, commands, hosts_env, sim_get
from workflows.runtime_migration.models import RuntimeMigrationResult, RuntimeMigrationStatus

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

LOCKKEEPER = str(Path(sys.executable).parent / "lockkeeper")
NODE = "gluster1.demo"


async def lk(address: str, task_queue: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(LOCKKEEPER, "--address", address, "--task-queue", task_queue, *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_start_status_reject_through_the_cli(dev_server: Any, temporal_client: Client, sim_factory: Any,
                                                   worker_process_factory: Any, task_queue: str, tmp_path: Path) -> None:
    sim = await sim_factory("r4-crio-to-docker", time_scale=SCALE)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue,
                                    env=hosts_env(sim))
    await worker.start()
    inv, hook = tmp_path / "inventory", tmp_path / "hook.py"
    inv.write_text(INVENTORY)
    hook.write_text(HOOK)
    ssh_map = hosts_env(sim)["CLUSTERSIM_SSH_MAP"]
    args = ["start", "runtime-migration", "--node", NODE, "--to", "docker", "--ssh-map", ssh_map, "--ssh-user", "root",
            "--gluster-namespace", "app-storage", "--dns-probe", "master.demo",
            "--inventory-command", f"{sys.executable} {hook} {inv} to-new {{node}}",
            "--scaleup-command", shlex.join([SHIM, "-i", str(inv), f"{PLAYBOOKS}/openshift-node/scaleup.yml"]),
            "--identity", "alice"]
    code, out, err = await lk(dev_server.address, task_queue, *args, "--dry-run")
    assert code == 0, out + err
    # the preconditions through the SSH executor the migration uses (issue 39)
    assert f"host-executable    yum on {NODE}" in out and f"reboot-access" in out and "FAILED" not in out, out + err
    code, out, err = await lk(dev_server.address, task_queue, *args, "-o", "json")
    assert code == 0, out + err
    wf_id = json.loads(out)["workflow_id"] if out.strip().startswith("{") else out.split()[-1]
    handle = temporal_client.get_workflow_handle(wf_id, result_type=RuntimeMigrationResult)
    gate = f"{NODE}/destructive/approve-migration"
    end = time.monotonic() + 120
    while time.monotonic() < end:
        st = await handle.query("status", result_type=RuntimeMigrationStatus)
        if any(g.id == gate and g.state == "waiting" for g in st.gates):
            break
        await asyncio.sleep(0.5)
    else:
        raise AssertionError(f"gate {gate} never opened: {st.waiting_for} {st.preflight}")
    code, out, err = await lk(dev_server.address, task_queue, "status", wf_id)
    assert code == 0, out + err
    assert "approve-migration" in out and NODE in out and "Nodes" in out
    code, out, err = await lk(dev_server.address, task_queue, "reject", wf_id, gate, "-m", "not today", "--identity", "bob")
    assert code == 0, out + err
    # The node stopped before anything destructive: it holds the run at its gate; skip-node
    # through the CLI leaves it untouched and the run ends.
    hold = f"{NODE}/stopped/1"
    end = time.monotonic() + 120
    while time.monotonic() < end:
        st = await handle.query("status", result_type=RuntimeMigrationStatus)
        if any(g.id == hold and g.state == "waiting" for g in st.gates):
            break
        await asyncio.sleep(0.5)
    else:
        raise AssertionError(f"gate {hold} never opened: {st.waiting_for}")
    code, out, err = await lk(dev_server.address, task_queue, "skip-node", wf_id, NODE, "-m", "another day", "--identity", "bob")
    assert code == 0, out + err
    result = await handle.result()
    assert result.outcome == "completed" and result.nodes[0].outcome == "skipped", result.message
    assert "approve-migration" in (result.nodes[0].reason or "") and "before the destructive steps" in (result.nodes[0].reason or "")
    cmds = commands(await sim_get(sim, f"hosts/{NODE}"))
    assert not any(c[:2] == ["systemctl", "stop"] for c in cmds), "nothing was done to the node"
    assert not sim.store.get("nodes", NODE)["spec"].get("unschedulable")


async def test_a_missing_program_is_refused_before_any_change(dev_server: Any, temporal_client: Client, sim_factory: Any,
                                                             worker_process_factory: Any, task_queue: str) -> None:
    """Issue 39: the scale-up's program is not on the worker. The dry run lists every check with
    the failed one and exits 2; the real start is refused the same way (exit 2, one line per
    problem) and nothing is done to the node."""
    sim = await sim_factory("r4-crio-to-docker", time_scale=SCALE)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue,
                                    env=hosts_env(sim))
    await worker.start()
    args = ["start", "runtime-migration", "--node", NODE, "--to", "docker", "--ssh-map", hosts_env(sim)["CLUSTERSIM_SSH_MAP"],
            "--ssh-user", "root", "--gluster-namespace", "app-storage", "--scaleup-command", "no-such-playbook-runner scaleup.yml",
            "--identity", "alice"]
    code, out, err = await lk(dev_server.address, task_queue, *args, "--dry-run")
    assert code == 2, out + err
    assert "FAILED   worker-executable  no-such-playbook-runner on the worker" in out and f"ok       names-exist" in out, out
    code, out, err = await lk(dev_server.address, task_queue, *args)
    assert code == 2, out + err
    assert "refused before any change" in err and "no-such-playbook-runner on the worker" in err, err
    cmds = commands(await sim_get(sim, f"hosts/{NODE}"))
    assert cmds and all(c[0] in ("command", "true") for c in cmds), cmds  # only the checks ran there (command -v, true)
    assert not sim.store.get("nodes", NODE)["spec"].get("unschedulable")
