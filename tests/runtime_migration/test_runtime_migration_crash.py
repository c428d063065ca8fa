"""R4 crash tests: the worker is SIGKILLed at the points where a repeat would hurt (after the
wipe, during the reboot, during the scale-up). Each time the run completes, and the simulator's
own logs show no step that is not safe to repeat ran twice (one reboot, one node-group run, one
scale-up). The scale-up's lost outcome opens an unknown-outcome gate; "mark done" (after checking
the simulator's record of the run) completes the migration.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from clustersim.scenario import load_scenario
from tests.runtime_migration.test_runtime_migration_e2e import (
    APPROVER,
    SCALE,
    approve_destructive,
    commands,
    drive,
    gate_handle,
    hosts_env,
    migration_input,
    reboots,
    sim_get,
    start_migration,
    status_of,
)
from workflows.kit.models import DecideInput

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

NODE = "gluster1.demo"


async def wait_until(pred: Callable[[], Awaitable[bool]], timeout: float = 400.0, handle: Any = None) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if await pred():
            return
        await asyncio.sleep(0.1)
    st = await status_of(handle) if handle is not None else None
    raise AssertionError(f"kill point not reached; status: {st and (st.stage, st.waiting_for, st.preflight, st.nodes)}")


def playbook_runs(ext: Any, suffix: str) -> list[dict[str, Any]]:
    runs = ext if isinstance(ext, list) else ext.get("runs", [])
    return [r for r in runs if str(r.get("playbook", "")).endswith(suffix)]


async def run_with_kill(env: dict[str, Any], kill_point: Callable[[Any, Any], Awaitable[bool]],
                        decide: Callable[[str], str | None] = approve_destructive) -> tuple[Any, Any]:
    """Start a one-node migration (approving its destructive-step gates meanwhile), SIGKILL the
    worker when ``kill_point(sim, handle)`` holds and start a new one. Returns (sim, handle)."""
    sim = env["sim"]
    inp = migration_input(sim, env["tmp"])
    inp.nodes = [NODE]
    handle = await start_migration(env["client"], inp, env["queue"])
    worker = env["worker"]

    async def approve_while_waiting() -> None:
        await drive(handle, decide=decide, until=lambda st: False, timeout=900)

    driver = asyncio.create_task(approve_while_waiting())
    try:
        await wait_until(lambda: kill_point(sim, handle), handle=handle)
    finally:
        driver.cancel()
    await worker.kill()
    await asyncio.sleep(1.0)
    await worker.start()
    return sim, handle


@pytest.fixture
async def r4_env(dev_server: Any, temporal_client: Client, sim_factory: Any, worker_process_factory: Any, task_queue: str,
                 tmp_path: Path) -> dict[str, Any]:
    # The scale-up's Node join takes 600 simulated seconds here (12 s real) instead of the
    # scenario's 60, so a kill "during the scale-up" lands while it runs even on a loaded machine
    # (at 60 the window was 1.2 s, and a slow status query could miss it).
    scenario = load_scenario("r4-crio-to-docker")
    scenario.hosts["options"] = {**scenario.hosts["options"], "join_seconds": 600}
    sim = await sim_factory(scenario, time_scale=SCALE)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue,
                                    env=hosts_env(sim))
    await worker.start()
    return {"sim": sim, "client": temporal_client, "queue": task_queue, "tmp": tmp_path, "worker": worker}


async def assert_once_each(sim: Any) -> None:
    host = await sim_get(sim, f"hosts/{NODE}")
    assert reboots(commands(host)) == 1, [c for c in commands(host) if "reboot" in c]
    ext = await sim_get(sim, "external")
    assert len(playbook_runs(ext, "openshift-node/scaleup.yml")) == 1
    assert len(playbook_runs(ext, "openshift-master/openshift_node_group.yml")) == 1
    node = sim.store.get("nodes", NODE)
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("docker://")


def host_ran(argv_prefix: list[str]) -> Callable[[Any, Any], Awaitable[bool]]:
    async def point(sim: Any, handle: Any) -> bool:
        host = await sim_get(sim, f"hosts/{NODE}")
        return any(c[: len(argv_prefix)] == argv_prefix for c in commands(host))

    return point


async def test_kill_after_wipe_before_reboot(r4_env: dict[str, Any]) -> None:
    sim, handle = await run_with_kill(r4_env, host_ran(["find", "/etc/dnsmasq.d", "-mindepth", "1", "-maxdepth", "1", "-exec"]))
    await drive(handle)
    result = await handle.result()
    assert result.outcome == "completed", result.message
    await assert_once_each(sim)


async def test_kill_during_reboot(r4_env: dict[str, Any]) -> None:
    sim, handle = await run_with_kill(r4_env, host_ran(["systemctl", "reboot"]))
    await drive(handle)
    result = await handle.result()
    assert result.outcome == "completed", result.message
    await assert_once_each(sim)


async def test_kill_during_scaleup_opens_unknown_gate_then_mark_done(r4_env: dict[str, Any]) -> None:
    async def scaleup_running(sim: Any, handle: Any) -> bool:
        # The simulator's own record, not a workflow query: the playbook has started and not
        # ended, so the activity running it is in flight on the worker about to be killed. (A
        # status query could lag behind a busy worker and miss the 12-second window.)
        runs = playbook_runs(await sim_get(sim, "external"), "openshift-node/scaleup.yml")
        return len(runs) == 1 and runs[0].get("end") is None

    sim, handle = await run_with_kill(r4_env, scaleup_running)
    st = await drive(handle)  # returns at the first gate that is not a destructive-step one
    gate = next(g for g in st.gates if g.state == "waiting")
    assert gate.id == f"{NODE}/unknown/scale-up", gate
    # The operator checks: the stand-in's record says the scale-up ran to its end.
    async def ended() -> bool:
        runs = playbook_runs(await sim_get(sim, "external"), "openshift-node/scaleup.yml")
        return len(runs) == 1 and runs[0].get("end") is not None
    await wait_until(ended, timeout=60)
    runs = playbook_runs(await sim_get(sim, "external"), "openshift-node/scaleup.yml")
    assert runs[0]["exit"] == 0, runs
    await gate_handle(handle, gate, st).execute_update("decide", DecideInput(
        node=gate.id, decision="mark-done", identity=APPROVER, comment="scale-up ran to its end: exit 0 in the playbook log"))
    await drive(handle)
    result = await handle.result()
    assert result.outcome == "completed", result.message
    await assert_once_each(sim)
