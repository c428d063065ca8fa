"""Issue 39, cases 3 and 4, end to end: the real ``lockkeeper`` console script, a dev server, a
worker process and clustersim ``r5-vxlan-port``; the simulator (its objects, its request log, its
hosts) and real ``kubectl`` judge what happened.

- Case 3: ``--port 53`` (dnsmasq), ``--port 10250`` (the kubelet) and ``--node nosuch-node`` are
  refused with exit 2, one line per problem, and nothing is written (no record ConfigMap, no
  DaemonSet patch, no pod deleted: no mutating API request at all); ``--dry-run`` lists every
  precondition with its result, a refused one too.
- Case 4: an abort in stage C (the DaemonSet patched, its pods being replaced) ends ``aborted,
  restored``: kubectl shows the stock image and the triggers annotation again. An abort past the
  fan-out ends naming what stays changed and ``lockkeeper revert ID --full``; ``revert ID`` says
  to use ``--full``; ``revert ID --full`` starts the reverse run, whose end is read back: the
  DaemonSet as the first run found it (kubectl again), every node and ClusterNetwork on 4789.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from temporalio.client import Client

from clustersim.openshift.kinds import CLUSTERNETWORK
from tests.vxlan_port.test_e2e_cli import args_for, lk, wf_id_of
from tests.vxlan_port.test_e2e_run import CUSTOM, NEW, OLD, STOCK, drive, ds, ready_sim, rule_present
from workflows.kit.models import ControlInput
from workflows.vxlan_port.models import VxlanPortChangeResult, VxlanStatus

pytestmark = pytest.mark.e2e

MUTATING = {"create", "update", "patch", "delete", "deletecollection"}
TRIGGERS = "image.openshift.io/triggers"


def writes(sim: Any) -> list[tuple[str, str, str]]:
    """Every mutating API request the simulator served (the worker is its only HTTP client)."""
    return [(e.verb, e.resource, e.name) for e in sim.requests.entries() if e.verb in MUTATING]


async def kubectl_ds(sim: Any) -> tuple[str, str | None]:
    """``kubectl -n openshift-sdn get ds sdn -o yaml`` (as JSON): the sdn container's image and
    the triggers annotation, as an operator sees them (the simulator serves it from this loop)."""
    proc = await asyncio.create_subprocess_exec("kubectl", "--kubeconfig", str(sim.kubeconfig_path), "-n", "openshift-sdn", "get", "ds",
                                                "sdn", "-o", "json", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    obj = json.loads(out)
    image = next(c["image"] for c in obj["spec"]["template"]["spec"]["containers"] if c["name"] == "sdn")
    return image, (obj["metadata"].get("annotations") or {}).get(TRIGGERS)


def sdn_pods(sim: Any) -> dict[str, tuple[str, str]]:
    return {p["metadata"]["name"]: (p["metadata"]["uid"], p["spec"]["containers"][0]["image"])
            for p in sim.store.list("pods", "openshift-sdn", label_selector="app=sdn") if not p["metadata"].get("deletionTimestamp")}


def line(state: str, kind: str, text: str) -> str:
    """The start of a precondition's line (:meth:`PreconditionResult.line`)."""
    return f"{state:<8} {kind:<18} {text}"


def with_port(args: list[str], port: int) -> list[str]:
    i = args.index("--port")
    return [*args[:i + 1], str(port), *args[i + 2:]]


@pytest.mark.timeout(420)
async def test_case3_ports_in_use_and_unknown_nodes_are_refused_before_any_write(
        dev_server: Any, sim_factory: Any, worker_for: Any, task_queue: str) -> None:
    sim = await ready_sim(sim_factory)
    await worker_for(sim, env=sim.components["hosts"].client_env())
    addr, table = dev_server.address, [a for a in args_for(sim) if a not in ("-o", "json")]
    before_ds, before_pods = ds(sim), sdn_pods(sim)
    sim.requests.clear()

    code, out, err = await lk(addr, task_queue, *with_port(table, 53))
    assert code == 2, out + err
    assert "refused before any change" in err, err
    problems = [ln.strip() for ln in err.splitlines() if ln.startswith("  ")]
    assert len(problems) == 14 and all("a well-known cluster port: 53/tcp+udp (DNS: dnsmasq" in p for p in problems), err
    assert {p.split(":")[0] for p in problems} == {f"port 53/{proto} on {n}" for n in sim.components["sdn"].nodes for proto in ("udp", "tcp")}

    code, out, err = await lk(addr, task_queue, *with_port(table, 10250))
    assert code == 2 and "port 10250/tcp on ocp-node-01: a well-known cluster port: 10250-10259/tcp (Kubernetes reserved: kubelet" in err, err

    code, out, err = await lk(addr, task_queue, *table, "--node", "nosuch-node")
    assert code == 2, out + err
    assert "  node nosuch-node, ocp-master-01, ocp-master-02 and 1 more: no Node named nosuch-node" in err, err
    assert "  every node in the run: left out: ocp-node-01, ocp-node-02, ocp-node-03, ocp-node-04" in err, err

    # Nothing written by any of the three: no record ConfigMap, no DaemonSet patch, no pod deleted.
    assert writes(sim) == []
    assert not [c for c in sim.store.list("configmaps", "openshift-config") if c["metadata"]["name"].startswith("lockkeeper-record-")]
    assert ds(sim) == before_ds and sdn_pods(sim) == before_pods

    # The dry run lists every precondition with its result, a refused one too (exit 2 then).
    code, out, err = await lk(addr, task_queue, *with_port(table, 53), "--dry-run")
    assert code == 2 and line("FAILED", "port-free", "port 53/udp on ocp-node-04") in out, out + err
    assert line("ok", "host-executable", "iptables on ocp-node-04") in out and line("ok", "names-exist", "master") in out, out
    code, out, err = await lk(addr, task_queue, *table, "--dry-run")
    assert code == 0, out + err
    assert line("ok", "port-free", "port 4889/udp on ocp-master-01: free") in out and "FAILED" not in out, out
    assert "vxlan0 on ocp-node-03: dst_port 4789 (exec in the sdn pod)" in out, out
    assert writes(sim) == [] and ds(sim) == before_ds


@pytest.mark.timeout(900)
async def test_case4_abort_before_the_fanout_restores_after_it_revert_full_reads_back(
        dev_server: Any, temporal_client: Client, sim_factory: Any, worker_for: Any, task_queue: str) -> None:
    sim = await ready_sim(sim_factory)
    await worker_for(sim, env=sim.components["hosts"].client_env())
    addr, sdn = dev_server.address, sim.components["sdn"]
    stock = (await kubectl_ds(sim))
    assert stock[0] == STOCK and stock[1]

    # 1. Abort in stage C: the DaemonSet already patched, its pods being replaced.
    code, out, err = await lk(addr, task_queue, *args_for(sim))
    assert code == 0, out + err
    handle = temporal_client.get_workflow_handle(wf_id_of(out), result_type=VxlanPortChangeResult)

    async def in_stage_c(st: VxlanStatus) -> bool:
        return st.step == "C" and st.records.get("daemonset") is not None and st.records["daemonset"].state == "changed" \
            and any(r.sdn_image == CUSTOM for r in st.sdn_nodes.values())

    await drive(handle, on_status=in_stage_c, timeout=180)
    assert (await kubectl_ds(sim)) == (CUSTOM, None)
    await handle.execute_update("abort", ControlInput(identity="e2e-operator", reason="window closed"))
    result = await handle.result()
    assert result.outcome == "aborted" and result.message.startswith("aborted, restored and read back"), result.message
    assert any(r.startswith("DaemonSet openshift-sdn/sdn: restored") for r in result.restored), result.restored
    assert any(f"Ready on {STOCK}" in r for r in result.restored) and not result.left_changed and not result.open_records
    assert (await kubectl_ds(sim)) == stock
    assert {img for _, img in sdn_pods(sim).values()} == {STOCK}
    assert not any(rule_present(sim, n) for n in sdn.nodes) and {sdn.get_port(n) for n in sdn.nodes} == {OLD}

    # 2. Abort past the fan-out (at the ClusterNetwork gate): what stays changed, and how to revert it.
    code, out, err = await lk(addr, task_queue, *args_for(sim))
    assert code == 0, out + err
    handle = temporal_client.get_workflow_handle(wf_id_of(out), result_type=VxlanPortChangeResult)

    async def at_cn_gate(st: VxlanStatus) -> bool:
        return any(g.id == "clusternetwork-delete" and g.state == "waiting" for g in st.gates)

    await drive(handle, on_status=at_cn_gate, timeout=240)
    await handle.execute_update("abort", ControlInput(identity="e2e-operator", reason="out of time"))
    result = await handle.result()
    full = f"lockkeeper revert {handle.id} --full"
    assert result.outcome == "aborted" and "past the point of no return" in result.message, result.message
    assert result.next_commands == [full] and not result.restored
    targets = {i.target for i in result.left_changed}
    assert "DaemonSet openshift-sdn/sdn" in targets and {f"host {n}" for n in sdn.nodes} <= targets, targets
    assert sum("vxlan0 options:dst_port 4889" in i.what for i in result.left_changed) == len(sdn.nodes)
    assert sum("master-config.yaml: networkConfig.vxlanPort 4889" in i.what for i in result.left_changed) == 3
    assert (await kubectl_ds(sim)) == (CUSTOM, None) and {sdn.get_port(n) for n in sdn.nodes} == {NEW}

    code, out, err = await lk(addr, task_queue, "revert", handle.id, "--identity", "bob")
    assert code == 2 and f"lockkeeper revert {handle.id} --full" in err, out + err

    # 3. revert --full: the reverse run, its end read back.
    code, out, err = await lk(addr, task_queue, "revert", handle.id, "--full", "--identity", "bob", "-o", "json")
    assert code == 0, out + err
    reverse = temporal_client.get_workflow_handle(wf_id_of(out), result_type=VxlanPortChangeResult)
    back = await drive(reverse, timeout=300)
    assert isinstance(back, VxlanPortChangeResult) and back.outcome == "completed", back.message
    assert (back.old_port, back.new_port) == (NEW, OLD)
    # It says restored only for what read back equal, and kubectl agrees (the field report's lie).
    assert any(r.startswith("DaemonSet openshift-sdn/sdn: restored") and "read back at the originals" in r for r in back.restored), back.restored
    assert (await kubectl_ds(sim)) == stock
    assert {sdn.get_port(n) for n in sdn.nodes} == {OLD} and sim.store.get(CLUSTERNETWORK, "default")["vxlanPort"] == OLD
    assert {img for _, img in sdn_pods(sim).values()} == {STOCK}
    for m in ("ocp-master-01", "ocp-master-02", "ocp-master-03"):
        assert "vxlanPort" not in sim.components["hosts"].hosts[m].files["/etc/origin/master/master-config.yaml"]
