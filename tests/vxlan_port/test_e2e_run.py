"""R5 end to end: VxlanPortChangeWorkflow on a real dev server and worker process against
clustersim ``r5-vxlan-port`` (hosts over SSH, SDN model with the probe mesh, per-master APIs,
the image-trigger controller). The simulator's own counters are the evidence: ports per node,
the ClusterNetwork, rebuild counts, workload restartCounts, probe outages, API availability."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from temporalio.client import Client, WorkflowHandle

from activities.host.models import ExecBackend, HostAccess
from clustersim.openshift.kinds import CLUSTERNETWORK
from workflows.kit.models import ApprovalRules, ApproveInput, GateState, RevertInput
from workflows.vxlan_port.models import MasterAccess, VxlanPortChangeInput, VxlanPortChangeResult, VxlanStatus

pytestmark = pytest.mark.e2e

SCALE = 0.05
NEW, OLD = 4889, 4789
STOCK = "registry.redhat.io/openshift3/ose-node:v3.11"
CUSTOM = "registry.example.com/default/ose-node:v3.11-custom"
MASTERS = ["ocp-master-01", "ocp-master-02", "ocp-master-03"]
APPROVER = "e2e-approver"


# --- helpers --------------------------------------------------------------------------------------


async def wait_for(pred: Callable[[], Any], *, timeout: float = 60, what: str = "condition") -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = pred()
        if got:
            return got
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def ready_sim(sim_factory: Any) -> Any:
    sim = await sim_factory("r5-vxlan-port", time_scale=SCALE)
    sdn = sim.components["sdn"]
    await wait_for(lambda: all(n.sdn == "running" for n in sdn.nodes.values()), what="SDN pods running")
    return sim


def vxlan_input(sim: Any, **kw: Any) -> VxlanPortChangeInput:
    hc, masters = sim.components["hosts"], sim.components["masters"]
    access = {}
    for node, addr in hc.ssh_map.items():
        host, port = addr.split(":")
        access[node] = HostAccess(backend=ExecBackend.SSH, host=host, port=int(port))
    fields: dict[str, Any] = dict(
        new_port=NEW, custom_image=CUSTOM, approvals=ApprovalRules(requested_by="e2e-requester"), host_access=access,
        masters=[MasterAccess(name=m, access=access[m], api_url=masters.api_url(m)) for m in MASTERS],
        pod_ready_timeout_seconds=60, master={"api_ready_timeout_seconds": 60, "cluster_network_timeout_seconds": 60},
        fanout={"heartbeat_seconds": 5}, images={"timeout_seconds": 60},
    )
    fields.update(kw)
    return VxlanPortChangeInput(**fields)


async def start(client: Client, task_queue: str, inp: VxlanPortChangeInput) -> WorkflowHandle[Any, Any]:
    return await client.start_workflow("VxlanPortChangeWorkflow", inp, id=f"vxlan-port-e2e-{uuid.uuid4().hex[:8]}",
                                       task_queue=task_queue, result_type=VxlanPortChangeResult)


async def status(handle: WorkflowHandle[Any, Any]) -> VxlanStatus | None:
    try:
        return await handle.query("status", result_type=VxlanStatus)
    except Exception:  # noqa: BLE001 - the worker may be down right now
        return None


async def drive(handle: WorkflowHandle[Any, Any], *, timeout: float = 150, approve: bool = True,
                on_status: Callable[[VxlanStatus], Awaitable[bool | None]] | None = None) -> VxlanPortChangeResult | VxlanStatus:
    """Approve every waiting gate until the run ends (its result) or ``on_status`` returns True
    (the last status)."""
    end = time.monotonic() + timeout
    result = asyncio.ensure_future(handle.result())
    last = None
    try:
        while not result.done():
            if time.monotonic() > end:
                raise AssertionError(f"{handle.id} not finished; last status: {last and last.model_dump_json(indent=1)}")
            last = await status(handle)
            if last is not None:
                if on_status is not None and await on_status(last):
                    return last
                for gate in last.gates if approve else []:
                    if gate.state == GateState.WAITING:
                        try:
                            await handle.execute_update("approve", ApproveInput(gate_id=gate.id, identity=APPROVER, comment="e2e"))
                        except Exception:  # noqa: BLE001 - raced with another decision
                            pass
            await asyncio.wait({result}, timeout=0.2)
        return result.result()
    finally:
        if not result.done():
            result.cancel()


def workload_restarts(sim: Any) -> dict[str, int]:
    return {p["metadata"]["uid"]: sum(c.get("restartCount", 0) for c in (p.get("status") or {}).get("containerStatuses") or [])
            for p in sim.store.list("pods") if p["metadata"].get("namespace") != "openshift-sdn"
            and not (p.get("spec") or {}).get("hostNetwork")}


async def admin(sim: Any, path: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as s, s.get(f"{sim.url}/_sim/{path}") as r:
        assert r.status == 200
        return json.loads(await r.text())


def ds(sim: Any) -> dict[str, Any]:
    return sim.store.get("daemonsets.apps", "sdn", "openshift-sdn")


def ds_fields(obj: dict[str, Any]) -> tuple[str, str | None]:
    return obj["spec"]["template"]["spec"]["containers"][0]["image"], (obj["metadata"].get("annotations") or {}).get(
        "image.openshift.io/triggers")


def rule_present(sim: Any, node: str) -> bool:
    rule = f"-A OS_FIREWALL_ALLOW -p udp -m state --state NEW -m udp --dport {NEW} -j ACCEPT"
    return rule in sim.components["hosts"].hosts[node].iptables_runtime


# --- tests ---------------------------------------------------------------------------------------------


@pytest.mark.timeout(420)
@pytest.mark.parametrize("switch_via", ["pod-exec", "ssh"])
async def test_full_run_switches_every_node_and_the_cluster_network_without_a_rebuild(
        sim_factory, worker_for, temporal_client, task_queue, switch_via) -> None:
    sim = await ready_sim(sim_factory)
    await worker_for(sim, env=sim.components["hosts"].client_env())
    before_ds = json.dumps(ds_fields(ds(sim)))
    restarts_before = workload_restarts(sim)
    handle = await start(temporal_client, task_queue, vxlan_input(sim, fanout={"heartbeat_seconds": 5, "switch_via": switch_via}))
    result = await drive(handle)
    assert isinstance(result, VxlanPortChangeResult)
    assert result.outcome == "completed", result.message

    sdn = sim.components["sdn"]
    assert {n: sdn.get_port(n) for n in sdn.nodes} == dict.fromkeys(sdn.nodes, NEW)
    assert sim.store.get(CLUSTERNETWORK, "default")["vxlanPort"] == NEW
    # The DaemonSet is back to its recorded image and triggers annotation, byte for byte.
    assert json.dumps(ds_fields(ds(sim))) == before_ds
    assert ds_fields(ds(sim))[0] == STOCK and result.daemonset and result.daemonset.image == STOCK
    assert any(r.startswith("DaemonSet openshift-sdn/sdn: restored") for r in result.restored) and not result.open_records
    # No network rebuilt, no workload pod restarted (the simulator's counters).
    probe = await admin(sim, "network/probe")
    assert set(probe["rebuilds"].values()) == {0}, probe["rebuilds"]
    assert {n["image"] for n in probe["nodes"].values()} == {"stock"}
    after = workload_restarts(sim)
    assert {u: after[u] for u in restarts_before if u in after} == {u: n for u, n in restarts_before.items() if u in after}
    assert result.restarted_workload_pods == []
    # The mesh's outage (simulated seconds) fits in the fan-out window (real seconds, one clock).
    assert result.fanout is not None and not result.fanout.failed and result.outage_window_seconds is not None
    assert probe["failing_now"] == []
    assert probe["total_outage_seconds"] * SCALE <= result.outage_window_seconds + 0.05, (
        probe["total_outage_seconds"], result.outage_window_seconds)
    assert all(r.t_apply_start and r.t_apply_end for r in result.fanout.nodes)
    if switch_via == "ssh":  # docker exec into the sdn container found with docker ps on each host
        for node in sdn.nodes:
            log = (await admin(sim, f"hosts/{node}"))["log"]
            assert any(e["argv"][:2] == ["docker", "exec"] and "options:dst_port=4889" in e["argv"] for e in log), node
    # The API was never down on every master at once; each master restarted once, leader last.
    avail = await admin(sim, "api/availability")
    assert avail["zero_masters_up"] == [] and result.api_all_down == []
    assert [i.master for i in result.api_unavailable] == ["ocp-master-01", "ocp-master-03", "ocp-master-02"]
    assert all(m["api_restarts"] == 1 for m in avail["masters"].values())
    # Every master-config carries the port, recorded before the write.
    for m in MASTERS:
        text = sim.components["hosts"].hosts[m].files["/etc/origin/master/master-config.yaml"]
        assert "vxlanPort: 4889" in text and "vxlanPort" not in result.file_records[m].content_before
    assert result.cluster_network_record and result.cluster_network_record["vxlanPort"] == OLD
    # The records are mirrored to a ConfigMap, readable without Temporal (the seed's sdn_saved.yml).
    cm = sim.store.get("configmaps", f"lockkeeper-record-{handle.id}", "openshift-config")["data"]
    saved = json.loads(cm["daemonset.json"])
    assert list(ds_fields(saved)) == json.loads(before_ds) and "status" not in saved and "uid" not in saved["metadata"]
    assert json.loads(cm["clusternetwork.json"])["vxlanPort"] == OLD and "master-config.ocp-master-01.yaml" in cm
    assert "openshift_sdn_vxlan_port=4889" in result.inventory_reminder
    # Every node saved the firewall rule so it survives a reboot.
    for node in sdn.nodes:
        assert rule_present(sim, node) and "--dport 4889" in sim.components["hosts"].hosts[node].files["/etc/sysconfig/iptables"]


@pytest.mark.timeout(300)
async def test_a_node_refusing_the_firewall_rule_stops_in_d_and_revert_restores_the_daemonset(
        sim_factory, worker_for, temporal_client, task_queue) -> None:
    sim = await ready_sim(sim_factory)
    await worker_for(sim, env=sim.components["hosts"].client_env())
    broken = "ocp-node-03"
    # A host whose firewall has no OS_FIREWALL_ALLOW chain: `iptables -A` fails there
    # ("No chain/target/match by that name"), the other nodes accept the rule.
    host = sim.components["hosts"].hosts[broken]
    host.iptables_runtime[:] = [r for r in host.iptables_runtime if "OS_FIREWALL_ALLOW" not in r]
    before_ds = json.dumps(ds_fields(ds(sim)))
    handle = await start(temporal_client, task_queue, vxlan_input(sim))

    async def stopped(st: VxlanStatus) -> bool:
        return st.step == "D" and st.phase == "paused"

    st = await drive(handle, on_status=stopped, timeout=180)
    assert isinstance(st, VxlanStatus)
    assert broken in (st.paused_reason or "") and "No chain" in (st.paused_reason or "")
    assert st.barriers["firewall"].failed.keys() == {broken}
    assert ds_fields(ds(sim))[0] == CUSTOM  # C happened; nothing after D
    sdn = sim.components["sdn"]
    assert {sdn.get_port(n) for n in sdn.nodes} == {OLD}
    assert not any(g.id == "fanout" for g in st.gates)
    assert sim.store.get(CLUSTERNETWORK, "default")["vxlanPort"] == OLD

    answer = await handle.execute_update("revert", RevertInput(identity="e2e-operator"))
    assert answer["mode"] == "in-run" if isinstance(answer, dict) else answer.mode == "in-run"
    result = await drive(handle, timeout=180)
    assert isinstance(result, VxlanPortChangeResult) and result.outcome == "reverted", result.message
    assert result.message.startswith("reverted, restored and read back"), result.message
    assert json.dumps(ds_fields(ds(sim))) == before_ds
    assert {p["spec"]["containers"][0]["image"] for p in sim.store.list("pods", "openshift-sdn", label_selector="app=sdn")} == {STOCK}
    assert not any(rule_present(sim, n) for n in sdn.nodes)
    probe = await admin(sim, "network/probe")
    assert set(probe["rebuilds"].values()) == {0}
