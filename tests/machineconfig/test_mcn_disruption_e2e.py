"""Issue 41 end to end (dev server + clustersim ``r1-ocp421``, OpenShift 4.21): the node
disruption policies decide what a rollout does to each node, and MachineConfigNodes show it.

- A rollout to the config that only adds ``/etc/containers/registries.d/99-mirror.yaml``
  (default policy: Reload crio.service) is planned and shown as "no drain, no reboot", completes
  with no eviction, no cordon and no reboot (the simulator's request record, the Nodes' bootIDs
  and the hosts' boot counts), crio reloaded on every worker's host, while ``kubectl get
  machineconfignodes -w`` shows each node's phases moving in the daemon's order.
- A rollout to the config with a file no policy lists is planned as Reboot, drains and reboots
  every worker, and ``lockkeeper status`` names the nodes' phases as MachineConfigNodes do.
- A retried node that meets the daemon's drain request outstanding is cordoned in the kit's drain
  loop, and its MachineConfigNode shows ``Cordoned`` before ``Drained`` there too.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any

import pytest

from tests.support.smallcluster import kubectl_binary
from tests.support.harness import drive
from tests.cluster_upgrade.test_upgrade_cli_e2e import lk
from workflows.machineconfig.models import MachineConfigRolloutResult, RolloutStatus

pytestmark = pytest.mark.e2e

SCALE = 0.05
REGISTRIES_ONLY = "rendered-worker-f545564a866bce772bf3fb8e1a72a29d"
UNLISTED_FILE = "rendered-worker-2d9da3fc5a35ca72698d05d948ad6872"
WORKERS = ["qsu-worker-01", "qsu-worker-02", "qsu-worker-03"]
#: ``kubectl get machineconfignodes -o wide --output-watch-events`` columns (openshift/api 4.21 printcolumns).
COLUMNS = ["EVENT", "NAME", "POOLNAME", "DESIREDCONFIG", "CURRENTCONFIG", "UPDATED", "AGE", "UPDATEPREPARED",
           "UPDATEEXECUTED", "UPDATEPOSTACTIONCOMPLETE", "UPDATECOMPLETE", "RESUMED", "UPDATEDFILESANDOS",
           "CORDONEDNODE", "DRAINEDNODE", "REBOOTEDNODE", "UNCORDONEDNODE"]


class MachineConfigNodeWatch:
    """``kubectl get machineconfignodes -o wide -w --output-watch-events`` running beside the rollout."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> MachineConfigNodeWatch:
        self.proc = await asyncio.create_subprocess_exec(
            kubectl_binary(), "--kubeconfig", str(self.sim.kubeconfig_path), "get", "machineconfignodes", "-o", "wide",
            "-w", "--output-watch-events", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            await self.proc.wait()

    async def rows(self) -> dict[str, list[dict[str, str]]]:
        """Stop kubectl; every row it printed, per node, in order (a dict per row by column)."""
        assert self.proc is not None and self.proc.stdout is not None
        await asyncio.sleep(0.5)  # the last events reach kubectl
        self.proc.terminate()
        out = (await self.proc.stdout.read()).decode()
        await self.proc.wait()
        lines = [re.split(r"\s{2,}", line.strip()) for line in out.strip().splitlines()]
        assert lines and lines[0] == COLUMNS, out[:500]
        per: dict[str, list[dict[str, str]]] = {}
        for cells in lines[1:]:
            if len(cells) == len(COLUMNS):
                row = dict(zip(COLUMNS, cells, strict=True))
                per.setdefault(row["NAME"], []).append(row)
        return per


async def watched_rollout(env: tuple[Any, str, Any], sim: Any, base: tuple[str, ...], timeout: float,
                          on_status: Any = None) -> tuple[MachineConfigRolloutResult, dict[str, list[dict[str, str]]]]:
    """Start the rollout ``base`` with the ``lockkeeper`` command (``env``: dev server, task queue,
    Temporal client) while ``kubectl get machineconfignodes -w`` runs beside it, and drive it to
    its end (``on_status(handle, status)`` on every poll); its result and the rows kubectl printed."""
    dev_server, task_queue, client = env
    async with MachineConfigNodeWatch(sim) as watch:
        await asyncio.sleep(1.0)  # kubectl's first list is in before the rollout starts
        code, out, err = await lk(dev_server, task_queue, *base)
        assert code == 0, (out, err)
        handle = client.get_workflow_handle(out.splitlines()[0].strip(), result_type=MachineConfigRolloutResult)

        async def polled(st: RolloutStatus) -> None:
            if on_status is not None:
                await on_status(handle, st)

        result = await drive(handle, timeout=timeout, on_status=polled)
        return result, await watch.rows()


def firsts(rows: list[dict[str, str]], *wanted: tuple[str, str]) -> list[int]:
    """Index of the first row where each (column, value) holds (fails when one never does)."""
    out = []
    for col, value in wanted:
        idx = next((i for i, r in enumerate(rows) if r[col] == value), None)
        assert idx is not None, f"{col}={value} never shown: {[(r['UPDATED'], r['UPDATEEXECUTED']) for r in rows]}"
        out.append(idx)
    return out


async def _dry_run(dev_server: Any, task_queue: str, *base: str) -> tuple[dict[str, Any], str]:
    code, out, err = await lk(dev_server, task_queue, *base, "--dry-run", "-o", "json")
    assert code == 0, (out, err)
    code, text, err = await lk(dev_server, task_queue, *base, "--dry-run")
    assert code == 0, (text, err)
    return json.loads(out)["result"]["plan"], " ".join(text.split())  # the console wraps long lines


def _boot_ids(sim: Any) -> dict[str, str]:
    return {n["metadata"]["name"]: n["status"]["nodeInfo"]["bootID"] for n in sim.store.list("nodes")}


@pytest.mark.timeout(120)
async def test_registries_d_rollout_drains_nothing_and_reboots_nothing(
    dev_server: Any, sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str
) -> None:
    sim = await sim_factory("r1-ocp421", time_scale=SCALE)
    await worker_for(sim)
    boots = _boot_ids(sim)
    base = ("start", "machineconfig-rollout", "--pool", "worker", "--cluster", f"mcn-{uuid.uuid4().hex[:6]}",
            "--target", f"worker={REGISTRIES_ONLY}")
    plan, text = await _dry_run(dev_server, task_queue, *base)
    [d] = plan["pools"][0]["disruption"]
    assert (d["nodes"], d["drain"], d["reboot"], d["actions"]) == (
        WORKERS, False, False, [{"type": "Reload", "service": "crio.service"}])
    assert plan["machine_config_nodes"] is True
    assert "Reload crio.service; no drain, no reboot" in text and "/etc/containers/registries.d/99-mirror.yaml" in text
    assert plan["pools"][0]["irreconcilable"] == {"qsu-worker-03": ["spec.config.storage.disks"]}
    assert "gate irreconcilable/qsu-worker-03 before it" in text
    assert plan["pools"][0]["health_checks"] == [], "nothing reboots: the MachineHealthCheck is no risk"

    cordoned: set[str] = set()
    sub = sim.store.subscribe(["nodes"])

    async def record_cordons() -> None:
        async for ev in sub:
            if (ev.object.get("spec") or {}).get("unschedulable"):
                cordoned.add(ev.object["metadata"]["name"])

    recorder = asyncio.create_task(record_cordons())
    sim.requests.clear()
    result, rows = await watched_rollout((dev_server, task_queue, temporal_client), sim, base, 60)
    sub.close()
    recorder.cancel()
    assert result.outcome == "completed", result.message
    assert result.summary.done == 3
    # qsu-worker-03 reports irreconcilableChanges: a person approved its gate before it started.
    assert [(r.action, r.by) for r in result.gate_history if r.gate_id == "irreconcilable/qsu-worker-03"] == [
        ("opened", "workflow"), ("approved", "e2e-approver")], result.gate_history

    assert sim.requests.count(verb="create", subresource="eviction") == 0
    assert not cordoned, f"no node needed a drain, yet {sorted(cordoned)} were cordoned"
    assert _boot_ids(sim) == boots, "no node rebooted"
    hosts = sim.components["hosts"].hosts
    for name in WORKERS:
        assert hosts[name].boot_count == 1
        ran = [r.argv for r in hosts[name].log if r.via == "machine-config-daemon"]
        assert ran == [["systemctl", "reload", "crio.service"]], (name, ran)
        node = sim.store.get("nodes", name)["metadata"]["annotations"]
        assert node["machineconfiguration.openshift.io/currentConfig"] == REGISTRIES_ONLY

    # kubectl showed every worker's phases moving in the machine-config-daemon's order.
    for name in WORKERS:
        seen = rows[name]
        order = firsts(seen, ("UPDATED", "False"), ("UPDATEPREPARED", "True"), ("UPDATEEXECUTED", "Unknown"),
                       ("UPDATEDFILESANDOS", "True"), ("UPDATEPOSTACTIONCOMPLETE", "True"), ("RESUMED", "True"))
        assert order == sorted(order), (name, order)
        assert seen[-1]["UPDATED"] == "True" and seen[-1]["CURRENTCONFIG"] == REGISTRIES_ONLY
        assert all(r["REBOOTEDNODE"] == "False" and r["CORDONEDNODE"] == "False" for r in seen), name
        # The controller is down: lockkeeper wrote its side, the uncordon answer (no drain: no cordon, no Drained).
        order = firsts(seen, ("UPDATEPOSTACTIONCOMPLETE", "True"), ("UNCORDONEDNODE", "True"), ("UPDATECOMPLETE", "True"))
        assert order == sorted(order), (name, order)
        assert all(r["DRAINEDNODE"] != "True" for r in seen), name


@pytest.mark.timeout(120)
async def test_unlisted_file_rollout_reboots_every_node(
    dev_server: Any, sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str
) -> None:
    sim = await sim_factory("r1-ocp421", time_scale=SCALE)
    await worker_for(sim)
    boots = _boot_ids(sim)
    base = ("start", "machineconfig-rollout", "--pool", "worker", "--cluster", f"mcn-{uuid.uuid4().hex[:6]}",
            "--target", f"worker={UNLISTED_FILE}", "--decide-after", "60")
    plan, text = await _dry_run(dev_server, task_queue, *base)
    [d] = plan["pools"][0]["disruption"]
    assert (d["drain"], d["reboot"], d["actions"]) == (True, True, [{"type": "Reboot", "service": None}])
    assert "no policy for file /etc/sysctl.d/99-qsu-tuning.conf" in text
    # An unpaused MachineHealthCheck covers the workers that will reboot: warned, and gated.
    assert "machinehealthcheck openshift-machine-api/qsu-worker-mhc (not paused)" in text
    assert [g["id"] for g in plan["pools"][0]["gates"]] == ["machinehealthcheck/worker", "irreconcilable/qsu-worker-03"]

    phases: dict[str, set[str]] = {}

    async def on_status(_: Any, st: RolloutStatus) -> None:
        for name, phase in st.mcn_phases.items():
            phases.setdefault(name, set()).add(phase)

    sim.requests.clear()
    result, rows = await watched_rollout((dev_server, task_queue, temporal_client), sim, base, 90, on_status)
    assert result.outcome == "completed", result.message
    assert {r.gate_id for r in result.gate_history if r.action == "approved"} == {
        "machinehealthcheck/worker", "irreconcilable/qsu-worker-03"}

    after = _boot_ids(sim)
    assert all(after[n] != boots[n] for n in WORKERS), "every worker rebooted"
    assert all(sim.components["hosts"].hosts[n].boot_count == 2 for n in WORKERS)
    evicted_from = {e.name for e in sim.requests.entries(verb="create", subresource="eviction") if e.code == 201}
    assert evicted_from, "the workers were drained"
    assert "UpdateExecuted/RebootedNode" in set().union(*phases.values()), phases
    for name in WORKERS:
        seen = rows[name]
        order = firsts(seen, ("UPDATEPREPARED", "True"), ("REBOOTEDNODE", "Unknown"), ("REBOOTEDNODE", "True"),
                       ("RESUMED", "True"))
        assert order == sorted(order), (name, order)
        # The controller is down: lockkeeper wrote its side as it cordoned, drained and uncordoned.
        order = firsts(seen, ("UPDATEPREPARED", "True"), ("CORDONEDNODE", "True"), ("DRAINEDNODE", "True"),
                       ("REBOOTEDNODE", "True"), ("UNCORDONEDNODE", "True"))
        assert order == sorted(order), (name, order)
        assert seen[-1]["UPDATED"] == "True" and seen[-1]["CURRENTCONFIG"] == UNLISTED_FILE


@pytest.mark.timeout(180)
async def test_a_retried_node_is_cordoned_in_the_kit_loop_and_reported(
    dev_server: Any, sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str
) -> None:
    """``retry-node`` of a node whose daemon degraded before it asked for the drain: once the
    fault is gone the daemon asks again, and the retried attempt meets that request outstanding,
    so it cordons in the kit's drain loop (not in ``drain_when_asked``); the controller's
    ``Cordoned`` is written there, before ``Drained``, as on a first attempt."""
    from workflows import MachineConfigRolloutWorkflow
    from workflows.kit.models import NodeControlInput, NodePhase

    sim = await sim_factory("r1-ocp421", time_scale=SCALE)
    await worker_for(sim)
    node = WORKERS[0]
    mco = "machineconfiguration.openshift.io/"
    sim.agents.inject_node_fault(node, "degrade", "unexpected on-disk state validating against rendered-worker: /etc/x")
    base = ("start", "machineconfig-rollout", "--pool", "worker", "--cluster", f"mcn-{uuid.uuid4().hex[:6]}",
            "--target", f"worker={UNLISTED_FILE}", "--decide-after", "60")
    retried: list[int] = []

    async def retry_when_degraded(handle: Any, st: RolloutStatus) -> None:
        if retried or st.nodes.get(node) is None or st.nodes[node].phase != NodePhase.DEGRADED:
            return
        sim.agents.clear_node_fault(node)
        for _ in range(200):  # the daemon asks for the drain again; nobody answers it yet
            ann = sim.store.get("nodes", node)["metadata"]["annotations"]
            if ann.get(mco + "desiredDrain") == f"drain-{UNLISTED_FILE}":
                break
            await asyncio.sleep(0.05)
        assert ann.get(mco + "desiredDrain") == f"drain-{UNLISTED_FILE}", ann
        assert not (sim.store.get("nodes", node).get("spec") or {}).get("unschedulable"), "attempt 1 never cordoned"
        await handle.execute_update(MachineConfigRolloutWorkflow.retry_node, NodeControlInput(node=node, identity="e2e-approver"))
        retried.append(1)

    result, rows = await watched_rollout((dev_server, task_queue, temporal_client), sim, base, 120, retry_when_degraded)
    assert retried and result.outcome == "completed", result.message
    assert result.nodes[node].phase == NodePhase.DONE and result.nodes[node].attempts == 2
    seen = rows[node]
    order = firsts(seen, ("CORDONEDNODE", "True"), ("DRAINEDNODE", "True"), ("UNCORDONEDNODE", "True"))
    assert order == sorted(order), (node, order)
    assert seen[-1]["UPDATED"] == "True" and seen[-1]["CURRENTCONFIG"] == UNLISTED_FILE
