"""``lockkeeper start vxlan-port-change`` and ``lockkeeper revert`` through the real console
script against a dev server, a worker process and clustersim ``r5-vxlan-port``: the dry run
changes nothing and lists every precondition; a revert at the fan-out gate restores the DaemonSet
and removes the new rule; past the fan-out ``revert`` is refused without ``--full``; ``revert
--full`` of a completed change starts the reverse run, which puts every node and the
ClusterNetwork back on 4789."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from clustersim.openshift.kinds import CLUSTERNETWORK
from tests.vxlan_port.test_e2e_run import CUSTOM, MASTERS, NEW, OLD, STOCK, admin, drive, ds, ds_fields, ready_sim, rule_present
from workflows.vxlan_port.models import VxlanPortChangeResult, VxlanStatus

pytestmark = pytest.mark.e2e

LOCKKEEPER = str(Path(sys.executable).parent / "lockkeeper")


async def lk(address: str, task_queue: str, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(LOCKKEEPER, "--address", address, "--task-queue", task_queue, *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    return proc.returncode or 0, out.decode(), err.decode()


async def wait_gate(handle: Any, gate: str, timeout: float = 120) -> VxlanStatus:
    end = time.monotonic() + timeout
    st = None
    while time.monotonic() < end:
        st = await handle.query("status", result_type=VxlanStatus)
        if any(g.id == gate and g.state == "waiting" for g in st.gates):
            return st
        await asyncio.sleep(0.3)
    raise AssertionError(f"gate {gate} never opened; last status {st and st.model_dump_json(indent=1)}")


def args_for(sim: Any) -> list[str]:
    hc, masters = sim.components["hosts"], sim.components["masters"]
    out = ["start", "vxlan-port-change", "--port", str(NEW), "--image", CUSTOM, "--ssh-map", str(hc.ssh_map_path),
           "--ssh-user", "root", "--identity", "alice", "-o", "json"]
    for m in MASTERS:
        out += ["--master", f"{m}={masters.api_url(m)}"]
    return out


def wf_id_of(out: str) -> str:
    return json.loads(out)["workflow_id"]


async def start_past_the_fanout(addr: str, task_queue: str, sim: Any, client: Client, timeout: float) -> Any:
    """Start the change with ``lockkeeper start`` and approve every gate up to the ClusterNetwork
    gate (past ``fanout``, the point of no return); its handle."""
    code, out, err = await lk(addr, task_queue, *args_for(sim))
    assert code == 0, out + err
    handle = client.get_workflow_handle(wf_id_of(out), result_type=VxlanPortChangeResult)

    async def at_cn_gate(st: VxlanStatus) -> bool:
        return any(g.id == "clusternetwork-delete" and g.state == "waiting" for g in st.gates)

    await drive(handle, on_status=at_cn_gate, timeout=timeout)
    return handle


@pytest.mark.timeout(600)
async def test_dry_run_revert_at_the_gate_refusal_after_e_and_full_revert(
        dev_server: Any, temporal_client: Client, sim_factory: Any, worker_for: Any, task_queue: str) -> None:
    sim = await ready_sim(sim_factory)
    await worker_for(sim, env=sim.components["hosts"].client_env())
    addr = dev_server.address
    before_ds = json.dumps(ds_fields(ds(sim)))
    sdn = sim.components["sdn"]

    # Dry run: preflight only, waits for the end, changes nothing, lists every precondition.
    code, out, err = await lk(addr, task_queue, *args_for(sim), "--dry-run")
    assert code == 0, out + err
    dry = json.loads(out)["result"]
    assert dry["outcome"] == "dry-run" and dry["preconditions"] and all(line.startswith("ok") for line in dry["preconditions"])
    assert any("port-free" in line and "port 4889/udp on ocp-node-04" in line for line in dry["preconditions"])
    assert json.dumps(ds_fields(ds(sim))) == before_ds

    # A run reverted at the fan-out gate: DaemonSet restored, the new rule gone.
    code, out, err = await lk(addr, task_queue, *args_for(sim))
    assert code == 0, out + err
    handle = temporal_client.get_workflow_handle(wf_id_of(out), result_type=VxlanPortChangeResult)
    await wait_gate(handle, "fanout")
    assert ds_fields(ds(sim)) == (CUSTOM, None) and all(rule_present(sim, n) for n in sdn.nodes)
    code, out, err = await lk(addr, task_queue, "revert", handle.id, "--identity", "bob", "-m", "not today")
    assert code == 0, out + err
    result = await handle.result()
    assert result.outcome == "reverted", result.message
    assert json.dumps(ds_fields(ds(sim))) == before_ds
    assert not any(rule_present(sim, n) for n in sdn.nodes)
    assert {sdn.get_port(n) for n in sdn.nodes} == {OLD}

    # A run past the fan-out refuses a plain revert; completed, --full reverses it.
    handle = await start_past_the_fanout(addr, task_queue, sim, temporal_client, timeout=180)
    code, out, err = await lk(addr, task_queue, "revert", handle.id, "--identity", "bob")
    assert code != 0 and "--full" in out + err, out + err
    result = await drive(handle, timeout=180)
    assert isinstance(result, VxlanPortChangeResult) and result.outcome == "completed", result.message
    assert {sdn.get_port(n) for n in sdn.nodes} == {NEW}

    code, out, err = await lk(addr, task_queue, "revert", handle.id, "--full", "--identity", "bob", "-o", "json")
    assert code == 0, out + err
    reverse = temporal_client.get_workflow_handle(wf_id_of(out), result_type=VxlanPortChangeResult)
    back = await drive(reverse, timeout=240)
    assert isinstance(back, VxlanPortChangeResult) and back.outcome == "completed", back.message
    assert (back.old_port, back.new_port) == (NEW, OLD)
    assert {sdn.get_port(n) for n in sdn.nodes} == {OLD}
    assert sim.store.get(CLUSTERNETWORK, "default")["vxlanPort"] == OLD
    assert ds_fields(ds(sim))[0] == STOCK and json.dumps(ds_fields(ds(sim))) == before_ds
    probe = await admin(sim, "network/probe")
    assert set(probe["rebuilds"].values()) == {0} and probe["failing_now"] == []
    for m in MASTERS:
        assert "vxlanPort" not in sim.components["hosts"].hosts[m].files["/etc/origin/master/master-config.yaml"]


@pytest.mark.timeout(900)
async def test_revert_full_past_the_fanout_aborts_waits_and_starts_the_reverse_run(
        dev_server: Any, temporal_client: Client, sim_factory: Any, worker_for: Any, task_queue: str) -> None:
    """Issue 39: ``revert ID --full`` on a running change past ``fanout`` (a plain revert is
    refused there only for the point of no return) is one command: it aborts the run (the reason
    names the full revert), waits for its end saying what it waits for, then starts the reverse
    run and prints its ID; the reverse run puts every node, the ClusterNetwork and the DaemonSet
    back."""
    sim = await ready_sim(sim_factory)
    await worker_for(sim, env=sim.components["hosts"].client_env())
    addr, sdn = dev_server.address, sim.components["sdn"]
    before_ds = json.dumps(ds_fields(ds(sim)))
    handle = await start_past_the_fanout(addr, task_queue, sim, temporal_client, timeout=240)
    code, out, err = await lk(addr, task_queue, "revert", handle.id, "--full", "--identity", "bob", "-m", "wrong port", "-o", "json")
    assert code == 0, out + err
    assert "past the point of no return" in err and f"waiting for {handle.id} to end before its full revert" in err, err
    first = await handle.result()
    assert first.outcome == "aborted" and f"lockkeeper revert {handle.id} --full" in first.message, first.message
    reverse_id = wf_id_of(out)
    assert reverse_id != handle.id
    reverse = temporal_client.get_workflow_handle(reverse_id, result_type=VxlanPortChangeResult)
    back = await drive(reverse, timeout=300)
    assert isinstance(back, VxlanPortChangeResult) and back.outcome == "completed", back.message
    assert (back.old_port, back.new_port) == (NEW, OLD)
    assert {sdn.get_port(n) for n in sdn.nodes} == {OLD} and sim.store.get(CLUSTERNETWORK, "default")["vxlanPort"] == OLD
    assert json.dumps(ds_fields(ds(sim))) == before_ds
