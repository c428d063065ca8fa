"""R5 variants the procedure avoids, forced through the procedure's own activities against
clustersim ``r5-vxlan-port`` over real HTTP (exec included):

- the DaemonSet patch that keeps the triggers annotation: the image-trigger controller puts the
  stock image back (why stage C drops it in the same patch, through the kit's records);
- a stock SDN pod started on a switched node while ClusterNetwork still says 4789: the full
  rebuild (port back, every pod on the node restarted) that phase G's precondition prevents."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from activities.cluster.models import ObjectRef, PatchObjectInput, SnapshotFieldsInput
from activities.cluster.records import RecordActivities
from activities.kube.gateway import KubeGateway
from activities.vxlan_port.activities import VxlanActivities
from activities.vxlan_port.models import TRIGGERS_POINTER, FanoutInput, PreflightInput, ResolveTargetsInput
from tests.vxlan_port.test_e2e_run import CUSTOM, NEW, OLD, STOCK, ds, ds_fields, ready_sim, wait_for, workload_restarts

pytestmark = pytest.mark.e2e


async def activities_for(sim: Any) -> VxlanActivities:
    gw = await asyncio.to_thread(KubeGateway.from_kubeconfig, sim.kubeconfig_path)
    return VxlanActivities(lambda: gw)


@pytest.mark.timeout(180)
async def test_kept_triggers_annotation_lets_the_trigger_controller_revert_the_custom_image(sim_factory) -> None:
    sim = await ready_sim(sim_factory)
    acts = await activities_for(sim)
    records = RecordActivities(lambda: acts.gateway)
    ref, image = ObjectRef(kind="DaemonSet", name="sdn", namespace="openshift-sdn"), "/spec/template/spec/containers/0/image"
    record = await asyncio.to_thread(records.snapshot_fields, SnapshotFieldsInput(ref=ref, paths=[image, TRIGGERS_POINTER]))
    trig = record.value(TRIGGERS_POINTER).value  # type: ignore[union-attr]
    assert trig
    # The variant: the image changes, the annotation stays.
    res = await asyncio.to_thread(records.patch_object, PatchObjectInput(ref=ref, ops=[{"op": "add", "path": image, "value": CUSTOM}]))
    assert res.changed and ds_fields(ds(sim)) == (CUSTOM, trig)
    await wait_for(lambda: ds_fields(ds(sim))[0] == STOCK, timeout=30, what="the trigger controller puts the stock image back")
    # The procedure's change (the kit's record) drops it in the same patch: the custom image stays.
    await asyncio.to_thread(records.patch_object, PatchObjectInput(
        ref=ref, record=record, ops=[{"op": "add", "path": image, "value": CUSTOM}, {"op": "remove", "path": TRIGGERS_POINTER}]))
    await asyncio.sleep(sim.components["masters"].section.trigger_seconds * 3 * 0.05 + 0.5)
    assert ds_fields(ds(sim)) == (CUSTOM, None)


@pytest.mark.timeout(240)
async def test_stock_sdn_started_on_a_switched_node_rebuilds_it(sim_factory) -> None:
    sim = await ready_sim(sim_factory)
    acts = await activities_for(sim)
    sdn = sim.components["sdn"]
    hosts = sim.components["hosts"]
    pre = await asyncio.to_thread(acts.preflight_vxlan_port, PreflightInput())
    nodes = sorted(pre.nodes)
    for n in nodes:  # the firewall barrier's result, so only the rebuild breaks traffic
        assert (await hosts.run(n, ["iptables", "-A", "OS_FIREWALL_ALLOW", "-p", "udp", "-m", "state", "--state", "NEW",
                                    "-m", "udp", "--dport", str(NEW), "-j", "ACCEPT"]))[2] == 0
    victim = "ocp-node-02"
    # Only the victim is switched (the rest stay as they are), then its stock SDN pod is
    # re-created, as an OnDelete restore before ClusterNetwork says 4889 would do.
    targets = await acts.resolve_sdn_targets(ResolveTargetsInput(nodes=[victim]))
    # Baseline before the switch: on a loaded machine the stock pod's own health check (30
    # simulated s) may rebuild the node even before its pod is re-created; either way once.
    before = workload_restarts(sim)
    res = await acts.switch_vxlan_port(FanoutInput(targets=targets, port=NEW))
    assert res.failed == []
    old = next(p for p in sim.store.list("pods", "openshift-sdn", label_selector="app=sdn",
                                         field_selector=f"spec.nodeName={victim}") if not p["metadata"].get("deletionTimestamp"))
    await asyncio.to_thread(lambda: acts.gateway.delete("Pod", old["metadata"]["name"], "openshift-sdn"))
    await wait_for(lambda: sdn.nodes[victim].rebuilds == 1, timeout=60, what="full SDN setup on the switched node")
    assert sdn.get_port(victim) == OLD  # the rebuild put the ClusterNetwork's port back
    after = workload_restarts(sim)
    on_victim = {p["metadata"]["uid"] for p in sim.store.list("pods", field_selector=f"spec.nodeName={victim}")
                 if not (p.get("spec") or {}).get("hostNetwork") and p["metadata"]["namespace"] != "openshift-sdn"}
    assert on_victim and all(after[u] == before[u] + 1 for u in on_victim if u in before)
    assert all(sdn.nodes[n].rebuilds == 0 for n in nodes if n != victim)


@pytest.mark.timeout(180)
async def test_the_reads_before_the_gate_beat_on_a_slow_api(sim_factory) -> None:
    """Every LIST served late: the preflight and the pod-exec target resolution beat while they
    wait, so their 10 s heartbeat timeout tells a slow API from a dead worker."""
    from temporalio.testing import ActivityEnvironment

    from activities.context import HEARTBEAT_INTERVAL_SECONDS

    sim = await ready_sim(sim_factory)
    acts = await activities_for(sim)
    nodes = sorted((await asyncio.to_thread(acts.preflight_vxlan_port, PreflightInput())).nodes)

    def env(beats: list) -> ActivityEnvironment:
        e = ActivityEnvironment()
        e.on_heartbeat = lambda *details: beats.append(details[0] if details else None)
        return e

    latency = 2.5
    sim.faults.configure(latency_seconds=latency, verbs=["list"])
    sim.requests.clear()
    pre_beats: list = []
    await asyncio.to_thread(env(pre_beats).run, acts.preflight_vxlan_port, PreflightInput())
    slow = sim.requests.count(verb="list") * latency  # the LISTs run one after another: a lower bound
    assert slow > 2 * HEARTBEAT_INTERVAL_SECONDS, slow
    assert len(pre_beats) >= int(slow / HEARTBEAT_INTERVAL_SECONDS) - 1, (pre_beats, slow)
    resolve_beats: list = []
    targets = await env(resolve_beats).run(acts.resolve_sdn_targets, ResolveTargetsInput(nodes=nodes))
    assert [t.node for t in targets] == nodes
    assert len(resolve_beats) >= 2, resolve_beats  # one LIST of 2.5 s: a beat each second
