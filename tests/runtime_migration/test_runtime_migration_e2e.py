"""R4 end to end: RuntimeMigrationWorkflow on a real dev server, a real worker process and
clustersim ``r4-crio-to-docker`` (SSH hosts, GlusterFS, the ansible-playbook stand-in).

The facts are read from the simulator itself (``/_sim/hosts/<h>`` command logs, the GlusterFS
brick timeline, the external command log), not from lockkeeper's own report.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from activities.host.models import HostAccess
from clustersim import ClusterSim
from clustersim.external import shipped_files
from workflows.kit.inputs import CallTimeouts, DrainPolicy
from workflows.kit.models import ApprovalRules, ApproveInput, Gate, GateState
from workflows.runtime_migration import RuntimeMigrationWorkflow
from workflows.runtime_migration.models import (
    ExternalStep,
    GlusterTargetSpec,
    RuntimeMigrationInput,
    RuntimeMigrationResult,
    RuntimeMigrationStatus,
    Timing,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

NODES = ["gluster1.demo", "gluster2.demo", "gluster3.demo"]
PLAYBOOKS = "/usr/share/ansible/openshift-ansible/playbooks"
SHIM = str(Path(sys.executable).parent / "clustersim-ansible-playbook")
APPROVER = "e2e-approver"
SCALE = 0.02

#: The operator's files of the scenario (its ``external.files``, what ``lockkeeper sim serve
#: --write-files`` writes for the README's R4 run): the openshift-ansible inventory, and the hook
#: ``inventory_hook.py INVENTORY to-new|restore NODE`` that moves the host between [nodes] and
#: [new_nodes] with the Docker variables (seed 003's edit), idempotently.
FILES = shipped_files("r4-crio-to-docker")
INVENTORY = FILES["inventory"]
HOOK = FILES["inventory_hook.py"]


def hosts_env(sim: ClusterSim) -> dict[str, str]:
    return sim.components["hosts"].client_env()  # type: ignore[attr-defined]


def host_access(sim: ClusterSim) -> dict[str, HostAccess]:
    ssh_map = json.loads(Path(hosts_env(sim)["CLUSTERSIM_SSH_MAP"]).read_text())
    return {n: HostAccess(backend="ssh", host=a.split(":")[0], port=int(a.split(":")[1]), user="root", node=n)
            for n, a in ssh_map.items()}


def migration_input(sim: ClusterSim, tmp: Path, *, inventory_hook: bool = True, **timing: float) -> RuntimeMigrationInput:
    inv = tmp / "inventory"
    inv.write_text(INVENTORY)
    hook = tmp / "hook.py"
    hook.write_text(HOOK)
    py = sys.executable
    t = dict(host_command_timeout=30, reboot_timeout=120, reboot_poll=0.5, register_timeout=180, gluster_pod_timeout=120,
             bricks_timeout=120, heal_timeout=300, heal_stall=60, poll=0.5, poll_max=2)
    t.update(timing)
    return RuntimeMigrationInput(
        nodes=list(NODES), host_access=host_access(sim), gluster=GlusterTargetSpec(namespace="app-storage"),
        dns_probe_names=["master.demo"],
        inventory_step=ExternalStep(argv=[py, str(hook), str(inv), "to-new", "{node}"]) if inventory_hook else None,
        node_group_step=ExternalStep(argv=[SHIM, "-i", str(inv), f"{PLAYBOOKS}/openshift-master/openshift_node_group.yml"]),
        scaleup_step=ExternalStep(argv=[SHIM, "-i", str(inv), f"{PLAYBOOKS}/openshift-node/scaleup.yml"], timeout_seconds=300),
        inventory_restore_step=ExternalStep(argv=[py, str(hook), str(inv), "restore", "{node}"]),
        timing=Timing(**t), calls=CallTimeouts(short_call_seconds=15, heartbeat_seconds=5),
        drain=DrainPolicy(wait_seconds=5, backoff_initial_seconds=1, backoff_max_seconds=5), approvals=ApprovalRules(requested_by="e2e"), search_attributes=False,
    )


async def start_migration(client: Client, inp: RuntimeMigrationInput, task_queue: str) -> WorkflowHandle[Any, Any]:
    return await client.start_workflow(RuntimeMigrationWorkflow.run, inp, id=f"rm-{uuid.uuid4().hex[:8]}", task_queue=task_queue,
                                       result_type=RuntimeMigrationResult)


def gate_handle(handle: WorkflowHandle[Any, Any], gate: Gate, st: RuntimeMigrationStatus) -> WorkflowHandle[Any, Any]:
    """Where a decision on ``gate`` goes: the workflow that owns it (a node's gates live in its
    child run: its row in ``st`` names it), as ``lockkeeper approve`` routes it
    (``lockkeeper.cli.operate.owner_of``)."""
    owner = next((g.workflow_id for r in st.nodes.values() for g in r.gates if g.id == gate.id and g.workflow_id), None)
    return handle._client.get_workflow_handle(owner) if owner else handle  # noqa: SLF001 - the handle's client


async def status_of(handle: WorkflowHandle[Any, Any]) -> RuntimeMigrationStatus:
    """The ``status`` query, asked again when it times out (a loaded machine: the worker answers
    queries between workflow tasks, and a crash test may ask while no worker runs)."""
    for attempt in range(10):
        try:
            return await handle.query("status", result_type=RuntimeMigrationStatus)
        except RPCError:
            if attempt == 9:
                raise
            await asyncio.sleep(1.0)
    raise AssertionError("unreachable")


def approve_destructive(gate_id: str) -> str | None:
    """The test's approver: the destructive-step gates, the restore of the labels the scale-up
    did not set (prometheus=true: without it the Prometheus pods of the first nodes never come
    back and the last drain blocks on their budget) and the post-check install."""
    if "/destructive/" in gate_id or gate_id.endswith("/human/labels") or gate_id == "post-check/install":
        return "checked in the e2e test"
    return None


async def drive(handle: WorkflowHandle[Any, Any], *, decide: Callable[[str], str | None] = approve_destructive,
                until: Callable[[RuntimeMigrationStatus], bool] | None = None, timeout: float = 800.0) -> RuntimeMigrationStatus:
    """Poll ``status``; answer waiting gates with ``decide`` (gate id → approval comment, None =
    not ours: return); stop when ``until(status)`` holds or the run closed."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        desc = await handle.describe()
        st = await status_of(handle)
        if desc.status is not None and desc.status.name != "RUNNING":
            return st
        if until is not None and until(st):
            return st
        for g in st.gates:
            if g.state == GateState.WAITING:
                comment = decide(g.id)
                if comment is None:
                    return st
                await gate_handle(handle, g, st).execute_update("approve", ApproveInput(gate_id=g.id, identity=APPROVER, comment=comment))
        await asyncio.sleep(0.5)
    st = await status_of(handle)
    rows = {n: (r.phase, r.step, r.waiting_for, r.reason, r.last_command) for n, r in st.nodes.items()}
    raise AssertionError(f"migration did not finish in {timeout}s: stage {st.stage}, waiting for {st.waiting_for}, "
                         f"preflight {st.preflight}, health {st.health}, nodes {rows}")


async def sim_get(sim: ClusterSim, path: str) -> Any:
    async with aiohttp.ClientSession() as http, http.get(f"{sim.url}/_sim/{path}") as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


def commands(host: dict[str, Any]) -> list[list[str]]:
    return [r["argv"] for r in host["log"] if r.get("via", "ssh") == "ssh"]


def index_of(cmds: list[list[str]], pred: Callable[[list[str]], bool]) -> int:
    return next((i for i, c in enumerate(cmds) if pred(c)), -1)


def reboots(cmds: list[list[str]]) -> int:
    return sum(1 for c in cmds if c in (["systemctl", "reboot"], ["reboot"]))


async def assert_safe_order_and_once(sim: ClusterSim, node: str) -> dict[str, Any]:
    """Per node: cp of the upstream resolv.conf before dnsmasq goes and before the wipe; exactly
    one reboot; returns the host summary."""
    host = await sim_get(sim, f"hosts/{node}")
    cmds = commands(host)
    cp = index_of(cmds, lambda c: c[:2] == ["cp", "-f"] and c[2] == "/etc/origin/node/resolv.conf")
    dnsmasq_off = index_of(cmds, lambda c: c[:3] in (["systemctl", "stop", "dnsmasq"], ["systemctl", "disable", "dnsmasq"]))
    yum = index_of(cmds, lambda c: c[:3] == ["yum", "-y", "remove"])
    wipe = index_of(cmds, lambda c: c[:2] == ["rm", "-rf"] and "/etc/origin" in c)
    assert cp >= 0 and dnsmasq_off > cp and yum > cp and wipe > cp, (node, cmds)
    assert reboots(cmds) == 1, (node, [c for c in cmds if "reboot" in c])
    assert host["boot_count"] >= 2 or len(host["boot_ids"]) == 2, host["boot_ids"]
    assert not any(any(ch in a for ch in "*?") for c in cmds for a in c if a != "{}"), "no shell glob in any host command"
    return host


async def assert_end_state(sim: ClusterSim, result: RuntimeMigrationResult, old_uids: dict[str, str]) -> None:
    for node in NODES:
        obj = sim.store.get("nodes", node)
        assert obj["metadata"]["uid"] != old_uids[node]
        assert obj["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("docker://")
        assert obj["metadata"]["labels"].get("glusterfs") == "storage-host"
        await assert_safe_order_and_once(sim, node)
    g = await sim_get(sim, "gluster")
    assert all(b["online"] for v in g["volumes"] for b in v["bricks"]), "every brick online"
    assert all(v["pending_heal"] == 0 for v in g["volumes"]), "heal clean"
    assert g["max_hosts_down_at_once"] <= 1, "never two hosts' bricks down at once"
    ext = await sim_get(sim, "external")
    runs = ext if isinstance(ext, list) else ext.get("runs", [])
    scaleups = [r for r in runs if str(r.get("playbook", "")).endswith("openshift-node/scaleup.yml")]
    assert len(scaleups) == len(NODES), scaleups  # exactly one scale-up per node
    assert any(f.package == "atomic-openshift-excluder" and f.kind == "missing" for f in result.findings), result.findings


def old_uids_of(sim: ClusterSim) -> dict[str, str]:
    return {n: sim.store.get("nodes", n)["metadata"]["uid"] for n in NODES}


async def test_three_gluster_nodes_migrate_to_docker(dev_server: Any, temporal_client: Client, sim_factory: Any,
                                                     worker_process_factory: Any, task_queue: str, tmp_path: Path) -> None:
    sim = await sim_factory("r4-crio-to-docker", time_scale=SCALE)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue,
                                    env=hosts_env(sim))
    await worker.start()
    old = old_uids_of(sim)
    handle = await start_migration(temporal_client, migration_input(sim, tmp_path), task_queue)
    st = await drive(handle)
    result = await handle.result()
    assert result.outcome == "completed", (result.message, st.model_dump_json(indent=1)[:3000])
    await assert_end_state(sim, result, old)
    # The post-check's gated install put the excluder back on every migrated node, and the
    # outcome says so rather than listing it as missing.
    for node in NODES:
        assert "atomic-openshift-excluder" in result.installed.get(node, []), result.installed
    assert f"atomic-openshift-excluder was missing on {', '.join(NODES)} and is installed again" in result.message, result.message
    assert "atomic-openshift-excluder missing" not in result.message, result.message
    assert all("atomic-openshift-excluder" in result.removed[n] for n in NODES), result.removed
    # Versions are compared within the node group: the scale-up's newer atomic-openshift-node
    # build (3.11.170) against the infra peers (3.11.161), never against masters or compute nodes.
    drift = {(f.node, f.group) for f in result.findings if f.kind == "version" and f.package == "atomic-openshift-node"}
    assert drift == {(n, "infra") for n in NODES}, result.findings
    assert all("of group infra" in f.message for f in result.findings), result.findings
    # Each node's record is in a ConfigMap, readable without Temporal.
    cm = sim.store.get("configmaps", f"lockkeeper-record-{handle.id}", "openshift-config")
    for node in NODES:
        rec = json.loads(cm["data"][f"{node}.json"])
        assert rec["uid"] == old[node] and rec["bootstrap_config"] == "node-config-infra-crio", rec
        assert rec["node_object"]["metadata"]["labels"]["runtime"] == "cri-o" and rec["packages"]["cri-o"]
        assert rec["addresses"] and "before the destructive steps" in cm["data"][f"{node}.state"]
    # status kept each node's last host command (argv, exit code, output tail).
    final = await status_of(handle)
    assert all(final.nodes[n].last_command is not None for n in NODES)
