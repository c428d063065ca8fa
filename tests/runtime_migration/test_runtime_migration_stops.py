"""R4 stops: the procedure refuses or halts where going on would hurt, and the simulator shows
why (r4-crio-to-docker, real dev server and worker).

- a brick already down on another host: preflight stops, nothing is changed on any host;
- the inventory step did not happen (a person approved its gate without editing): the scale-up
  fails with ``Detected no new_nodes in inventory``; the gate shows the output tail, the node
  then holds the run at ``<node>/stopped/1`` (reject ends it), and the Node stays deleted and
  is reported as such;
- the wrong order forced by the test (/etc/origin wiped before the resolv.conf copy): the
  procedure stops at the copy, and a reboot in that state indeed leaves the host without DNS.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from temporalio.client import Client

from activities.host.executors import NodeCommandError, SSHExecutor
from clustersim.apierrors import ApiError
from tests.runtime_migration.test_runtime_migration_e2e import (
    APPROVER,
    NODES,
    SCALE,
    approve_destructive,
    commands,
    drive,
    gate_handle,
    hosts_env,
    migration_input,
    sim_get,
    start_migration,
)
from workflows.kit.models import RejectInput

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

NODE = "gluster1.demo"
READ_ONLY = {"hostname", "true", "command", "cat", "rpm", "grep", "systemctl is-active", "systemctl is-enabled", "test", "getent", "find"}


@pytest.fixture
async def r4_env(dev_server: Any, temporal_client: Client, sim_factory: Any, worker_process_factory: Any, task_queue: str,
                 tmp_path: Path) -> dict[str, Any]:
    sim = await sim_factory("r4-crio-to-docker", time_scale=SCALE)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue,
                                    env=hosts_env(sim))
    await worker.start()
    return {"sim": sim, "client": temporal_client, "queue": task_queue, "tmp": tmp_path}


def ssh(sim: Any, node: str = NODE) -> SSHExecutor:
    env = hosts_env(sim)
    host, port = sim.components["hosts"].ssh_map[node].split(":")
    return SSHExecutor(host, port=int(port), user="root", known_hosts=env["LOCKKEEPER_SSH_KNOWN_HOSTS"],
                       client_keys=[env["LOCKKEEPER_SSH_KEY"]])


async def test_second_brick_down_stops_in_preflight(r4_env: dict[str, Any]) -> None:
    sim = r4_env["sim"]
    async with aiohttp.ClientSession() as http, http.post(f"{sim.url}/_sim/gluster/symptom", json={"name": "second_brick_down"}) as r:
        assert r.status == 200, await r.text()
    before = {n: len((await sim_get(sim, f"hosts/{n}"))["log"]) for n in NODES}
    handle = await start_migration(r4_env["client"], migration_input(sim, r4_env["tmp"]), r4_env["queue"])
    result = await handle.result()
    assert result.outcome == "failed" and result.nodes == []
    assert any("offline" in f for f in result.preflight), result.preflight
    for n in NODES:
        cmds = commands(await sim_get(sim, f"hosts/{n}"))[before[n]:]
        assert all(c[0] in READ_ONLY for c in cmds), (n, cmds)  # nothing but reads
        node = sim.store.get("nodes", n)
        assert not node["spec"].get("unschedulable"), "no cordon"
    runs = await sim_get(sim, "external")
    assert not (runs if isinstance(runs, list) else runs.get("runs", [])), "no playbook ran"


async def test_scaleup_without_inventory_change_fails_and_node_stays_reported(r4_env: dict[str, Any]) -> None:
    sim = r4_env["sim"]
    inp = migration_input(sim, r4_env["tmp"], inventory_hook=False)
    inp.nodes = [NODE]

    def forgetful(gate_id: str) -> str | None:
        if gate_id == f"{NODE}/human/inventory":
            return "done (but the inventory was not edited)"
        return approve_destructive(gate_id)

    handle = await start_migration(r4_env["client"], inp, r4_env["queue"])
    st = await drive(handle, decide=forgetful)
    gate = next(g for g in st.gates if g.state == "waiting")
    assert gate.id == f"{NODE}/failed/scale-up", gate
    assert "Detected no new_nodes in inventory" in gate.comment
    row = st.nodes[NODE]
    assert row.node_deleted and row.step == "scale-up"
    assert row.last_command is not None and row.last_command.exit_code not in (0, None)
    assert "Detected no new_nodes in inventory" in row.last_command.tail
    with pytest.raises(ApiError):
        sim.store.get("nodes", NODE)  # still deleted: the scale-up never registered it
    await gate_handle(handle, gate, st).execute_update("reject", RejectInput(gate_id=gate.id, identity=APPROVER, comment="fix the inventory by hand"))
    st = await drive(handle, decide=lambda g: None, until=lambda s: any(g.id == f"{NODE}/stopped/1" and g.state == "waiting" for g in s.gates))
    hold = next(g for g in st.gates if g.id == f"{NODE}/stopped/1")
    assert "DELETED" in hold.comment and "retry-node" in hold.comment, hold.comment
    await handle.execute_update("reject", RejectInput(gate_id=hold.id, identity=APPROVER, comment="stop: fix it by hand"))
    result = await handle.result()
    assert result.outcome == "failed"
    assert "DELETED" in (result.nodes[0].reason or "") and result.nodes[0].status.node_deleted


async def test_wrong_order_is_refused_and_would_break_dns(r4_env: dict[str, Any]) -> None:
    sim = r4_env["sim"]
    ex = ssh(sim)
    # The wrong order: /etc/origin (with the upstream resolv.conf) wiped before any copy.
    assert (await ex.run(["rm", "-rf", "/etc/origin"], timeout=30)).exit_code == 0
    inp = migration_input(sim, r4_env["tmp"])
    inp.nodes = [NODE]
    handle = await start_migration(r4_env["client"], inp, r4_env["queue"])
    st = await drive(handle)
    assert [g.id for g in st.gates if g.state == "waiting"] == [f"{NODE}/stopped/1"], st.gates
    await handle.execute_update("reject", RejectInput(gate_id=f"{NODE}/stopped/1", identity=APPROVER, comment="restore resolv.conf first"))
    result = await handle.result()
    assert result.outcome == "failed"
    assert "resolv-conf" in (result.nodes[0].reason or "") and "break DNS" in (result.nodes[0].reason or "")
    cmds = commands(await sim_get(sim, f"hosts/{NODE}"))
    assert ["systemctl", "stop", "dnsmasq"] not in cmds and ["systemctl", "reboot"] not in cmds
    # What the stop prevented: dnsmasq gone and a reboot leave no working resolver.
    for argv in (["systemctl", "stop", "dnsmasq"], ["systemctl", "disable", "dnsmasq"], ["yum", "-y", "remove", "dnsmasq"]):
        assert (await ex.run(argv, timeout=30)).exit_code == 0
    host = sim.components["hosts"].host(NODE)
    boots = host.boot_count
    assert (await ex.run(["reboot"], timeout=30)).exit_code is None
    for _ in range(2400):
        if host.up and host.boot_count == boots + 1:
            break
        await asyncio.sleep(0.05)
    assert host.boot_count == boots + 1, "the host did not come back from its reboot within 120 s"
    # The host is up before its sshd listens again (the simulated boot opens it last): a refused
    # connection in between is the boot still finishing, not the answer.
    for attempt in range(100):
        try:
            r = await ex.run(["getent", "hosts", "master.demo"], timeout=30)
            break
        except NodeCommandError:
            if attempt == 99:
                raise
            await asyncio.sleep(0.1)
    assert (r.exit_code, r.stdout) == (2, "")


async def test_missing_gluster_label_at_rejoin_opens_a_gate(dev_server: Any, temporal_client: Client, sim_factory: Any,
                                                            worker_process_factory: Any, task_queue: str, tmp_path: Path) -> None:
    """Symptom (c): the scale-up does not re-apply the GlusterFS label, so the GlusterFS pod would
    never schedule; the gate names the label, and approving it sets the recorded labels."""
    sim = await sim_factory("r4-crio-to-docker", time_scale=SCALE, component_sections={"external": {"reapply_gluster_label": False}})
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue,
                                    env=hosts_env(sim))
    await worker.start()
    inp = migration_input(sim, tmp_path)
    inp.nodes = [NODE]
    handle = await start_migration(temporal_client, inp, task_queue)

    def no_labels(gate_id: str) -> str | None:
        return None if gate_id.endswith("/human/labels") else approve_destructive(gate_id)

    st = await drive(handle, decide=no_labels)
    gate = next(g for g in st.gates if g.state == "waiting")
    assert gate.id == f"{NODE}/human/labels" and "glusterfs=storage-host" in gate.comment and "never schedules" in gate.comment
    assert "glusterfs" not in sim.store.get("nodes", NODE)["metadata"]["labels"]
    st = await drive(handle)
    result = await handle.result()
    assert result.outcome == "completed", result.message
    assert sim.store.get("nodes", NODE)["metadata"]["labels"]["glusterfs"] == "storage-host"
