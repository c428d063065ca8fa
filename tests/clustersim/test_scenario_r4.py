"""r4-crio-to-docker: the seed 003 migration of a GlusterFS node from CRI-O to Docker runs on the
simulator end to end (SSH host commands, reboot, Node delete, ansible-playbook stand-in), and
each field-report symptom of procedures-spec §8.9 shows:

(a) scale-up leaves atomic-openshift-excluder out; (b) the wrong order breaks DNS after the
reboot; (c) without the GlusterFS label at rejoin the GlusterFS pod never schedules; (d) heal
entries pile up while the node is away and drain once its bricks are back; (e) a brick already
down elsewhere means migrating the node would leave a replica set with two bricks down; (f)
scale-up fails with "Detected no new_nodes in inventory" when the inventory hook did not run.
"""

from __future__ import annotations

import asyncio
import copy
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from activities.host.executors import NodeCommandError, SSHExecutor
from clustersim.external import ExternalComponent
from clustersim.hosts import HostsComponent
from clustersim.scenario import load_scenario
from clustersim.sim import ClusterSim
from tests.clustersim.test_external_shim import INVENTORY, PLAYBOOKS

SCALE = 0.02
NODE = "gluster1.demo"
SHIM = Path(sys.executable).parent / "clustersim-ansible-playbook"
REMOVE = ["criu", "docker", "atomic-openshift-excluder", "atomic-openshift-docker-excluder", "cri-tools",
          "atomic-openshift-hyperkube", "atomic-openshift-node", "docker-client", "cri-o", "atomic-openshift-clients",
          "dnsmasq"]
STOP_DISABLE = [["systemctl", verb, unit] for verb in ("stop", "disable")
                for unit in ("atomic-openshift-node", "crio", "docker")]
CP_RESOLV = ["cp", "-f", "/etc/origin/node/resolv.conf", "/etc/"]
DNSMASQ_OFF = [["systemctl", "stop", "dnsmasq"], ["systemctl", "disable", "dnsmasq"]]
WIPE = [["yum", "-y", "remove", *REMOVE], ["rm", "-fr", "/etc/origin", "/etc/sysconfig/atomic-openshift-node.rpmsave"],
        ["find", "/etc/dnsmasq.d", "-mindepth", "1", "-maxdepth", "1", "-exec", "rm", "-rf", "{}", "+"]]
NEW_NODE = f"{NODE} openshift_use_crio=False openshift_node_group_name=node-config-infra"


async def start(sections: dict[str, dict[str, Any]] | None = None) -> ClusterSim:
    sim = ClusterSim("r4-crio-to-docker", time_scale=SCALE, component_sections=sections)
    await sim.start()
    return sim


@pytest.fixture
async def r4() -> AsyncIterator[ClusterSim]:
    sim = await start()
    try:
        yield sim
    finally:
        await sim.stop()


def hosts_of(sim: ClusterSim) -> HostsComponent:
    hc = sim.components["hosts"]
    assert isinstance(hc, HostsComponent)
    return hc


def ssh(sim: ClusterSim, node: str = NODE) -> SSHExecutor:
    hc = hosts_of(sim)
    host, port = hc.ssh_map[node].split(":")
    assert hc.known_hosts_path and hc.client_key_path
    return SSHExecutor(host, port=int(port), user="root", known_hosts=hc.known_hosts_path,
                       client_keys=[str(hc.client_key_path)])


async def wait_for(pred: Callable[[], Any], timeout: float = 30.0) -> Any:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        got = pred()
        if got:
            return got
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached in time")


async def run_all(ex: SSHExecutor, steps: list[list[str]]) -> list[int | None]:
    return [(await ex.run(s, timeout=30)).exit_code for s in steps]


async def reboot_and_wait(sim: ClusterSim, ex: SSHExecutor, node: str = NODE) -> None:
    host = hosts_of(sim).host(node)
    boots = host.boot_count
    assert (await ex.run(["reboot"], timeout=30)).exit_code is None
    await wait_for(lambda: host.up and host.boot_count == boots + 1)
    # The host is up a moment before its SSH server reopens (clustersim/hosts/component.py): the
    # boot is over once a command runs again.
    loop = asyncio.get_running_loop()
    end = loop.time() + 10
    last: object = None
    while loop.time() < end:
        try:
            last = await ex.run(["true"], timeout=10)
            if last.exit_code == 0:  # type: ignore[attr-defined]
                return
        except NodeCommandError as exc:
            last = exc
        await asyncio.sleep(0.05)
    raise AssertionError(f"{node} never ran a command after its reboot: {last}")


def gluster_pods_on(sim: ClusterSim, node: str) -> list[dict[str, Any]]:
    return [p for p in sim.store.list("pods", "app-storage") if p["spec"].get("nodeName") == node
            and not p["metadata"].get("deletionTimestamp")]


def pending_heal(sim: ClusterSim) -> int:
    gluster = sim.components["gluster"]
    return sum(v["pending_heal"] for v in gluster.snapshot()["volumes"])  # type: ignore[attr-defined]


async def delete_node(sim: ClusterSim, node: str = NODE) -> None:
    async with aiohttp.ClientSession() as http, http.delete(f"{sim.url}/api/v1/nodes/{node}") as resp:
        assert resp.status == 200


async def playbook(sim: ClusterSim, inventory: Path, name: str) -> tuple[int, str]:
    """The stand-in as a real subprocess, found through KUBECONFIG as a test PATH would."""
    env = {**os.environ, "KUBECONFIG": str(sim.kubeconfig_path)}
    env.pop("CLUSTERSIM_URL", None)
    proc = await asyncio.create_subprocess_exec(str(SHIM), "-i", str(inventory), f"{PLAYBOOKS}/{name}", env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_migration_end_to_end_shows_missing_excluder_and_heal(r4: ClusterSim, tmp_path: Path) -> None:
    """Seed 003 in the right order; symptoms (a) and (d)."""
    hc, ex = hosts_of(r4), ssh(r4)
    old_uid = r4.store.get("nodes", NODE)["metadata"]["uid"]
    await wait_for(lambda: gluster_pods_on(r4, NODE) and all(
        b["online"] for b in r4.components["gluster"].bricks_on_host(NODE)))  # type: ignore[attr-defined]
    grep = await ex.run(["grep", "BOOTSTRAP_CONFIG", "/etc/sysconfig/atomic-openshift-node"], timeout=30)
    assert grep.stdout == "BOOTSTRAP_CONFIG_NAME=node-config-infra-crio\n"
    assert await run_all(ex, STOP_DISABLE) == [0] * 6
    assert not any(b["online"] for b in r4.components["gluster"].bricks_on_host(NODE))  # type: ignore[attr-defined]
    assert await run_all(ex, [CP_RESOLV, *DNSMASQ_OFF, *WIPE]) == [0] * 6
    await reboot_and_wait(r4, ex)
    # Post-reboot checks of spec §6.3 step 11.
    assert (await ex.run(["getent", "hosts", "master.demo"], timeout=30)).exit_code == 0
    r = await ex.run(["rpm", "-q", "docker", "cri-o", "atomic-openshift-node"], timeout=30)
    assert r.exit_code == 3 and r.stdout.count("is not installed") == 3
    assert (await ex.run(["test", "!", "-S", "/var/run/crio/crio.sock"], timeout=30)).exit_code == 0
    assert (await ex.run(["test", "-e", "/etc/origin"], timeout=30)).exit_code == 1
    # (d) while the node is away, writes pile up heal entries.
    await wait_for(lambda: pending_heal(r4) > 20)
    await delete_node(r4)
    inv = tmp_path / "inventory"
    inv.write_text(INVENTORY.format(new_nodes=NEW_NODE))
    assert (await playbook(r4, inv, "openshift-master/openshift_node_group.yml"))[0] == 0
    code, out = await playbook(r4, inv, "openshift-node/scaleup.yml")
    assert code == 0, out
    node = r4.store.get("nodes", NODE)
    labels = node["metadata"]["labels"]
    assert node["metadata"]["uid"] != old_uid
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("docker://")
    assert labels["glusterfs"] == "storage-host" and labels["node-role.kubernetes.io/infra"] == "true"
    assert "runtime" not in labels
    # (a) the excluder is gone on the migrated node and still on its peers.
    r = await ex.run(["rpm", "-q", "atomic-openshift-excluder"], timeout=30)
    assert (r.exit_code, r.stdout) == (1, "package atomic-openshift-excluder is not installed\n")
    peer = await ssh(r4, "gluster2.demo").run(["rpm", "-q", "atomic-openshift-excluder"], timeout=30)
    assert peer.exit_code == 0
    assert (await ex.run(["rpm", "-q", "docker", "atomic-openshift-docker-excluder"], timeout=30)).exit_code == 0
    # The GlusterFS pod comes back on Docker, its bricks start, the heal entries drain.
    await wait_for(lambda: any(p["status"].get("phase") == "Running" for p in gluster_pods_on(r4, NODE)))
    await wait_for(lambda: all(b["online"] for b in r4.components["gluster"].bricks_on_host(NODE)))  # type: ignore[attr-defined]
    await wait_for(lambda: pending_heal(r4) == 0)
    assert "k8s_glusterfs_glusterfs-storage" in (await ex.run(["docker", "ps"], timeout=30)).stdout
    assert hc.host(NODE).boot_count == 2


async def test_wrong_order_breaks_dns_after_reboot(r4: ClusterSim) -> None:
    """(b) /etc/origin wiped before the cp: resolv.conf still names the node (dnsmasq), which is gone."""
    ex = ssh(r4)
    codes = await run_all(ex, [*STOP_DISABLE, *DNSMASQ_OFF, *WIPE, CP_RESOLV])
    assert codes[-1] == 1  # cp: cannot stat '/etc/origin/node/resolv.conf'
    await wait_for(lambda: all(p["status"].get("containerStatuses") for p in gluster_pods_on(r4, NODE)))
    before = {p["metadata"]["name"]: p["status"]["containerStatuses"][0]["restartCount"]
              for p in gluster_pods_on(r4, NODE)}
    await reboot_and_wait(r4, ex)
    # The pods still bound to the node ran again after the boot. The host is up (and its SSH
    # server opens) a moment before the restarts are counted, as a kubelet reports them after
    # the node is back: wait for the counts rather than read them at once.
    assert before

    def after() -> dict[str, int]:
        return {p["metadata"]["name"]: p["status"]["containerStatuses"][0]["restartCount"] for p in gluster_pods_on(r4, NODE)}

    try:
        await wait_for(lambda: after() == {n: c + 1 for n, c in before.items()}, timeout=10)
    except AssertionError:
        raise AssertionError(f"restart counts after the boot: {after()}, before: {before}") from None
    r = await ex.run(["getent", "hosts", "master.demo"], timeout=30)
    assert (r.exit_code, r.stdout) == (2, "")
    resolv = (await ex.run(["cat", "/etc/resolv.conf"], timeout=30)).stdout
    assert "99-origin-dns.sh" in resolv and "nameserver 10.0.0.5" in resolv


async def test_scaleup_without_new_nodes_fails(r4: ClusterSim) -> None:
    """(f) the inventory hook did not run: [new_nodes] is empty."""
    ext = r4.components["external"]
    assert isinstance(ext, ExternalComponent)
    rec = await ext.run(f"{PLAYBOOKS}/openshift-node/scaleup.yml", INVENTORY.format(new_nodes=""))
    assert rec["exit"] == 2 and "Detected no new_nodes in inventory" in rec["stdout"]


async def test_gluster_label_not_reapplied_means_no_gluster_pod() -> None:
    """(c) external.reapply_gluster_label false: the node rejoins without glusterfs=storage-host."""
    sim = await start({"external": {"reapply_gluster_label": False}})
    try:
        hc = hosts_of(sim)
        for unit in ("atomic-openshift-node", "crio"):
            await hc.run(NODE, ["systemctl", "stop", unit])
        await delete_node(sim)
        await wait_for(lambda: not gluster_pods_on(sim, NODE))
        ext = sim.components["external"]
        assert isinstance(ext, ExternalComponent)
        await ext.run(f"{PLAYBOOKS}/openshift-master/openshift_node_group.yml", INVENTORY.format(new_nodes=""))
        rec = await ext.run(f"{PLAYBOOKS}/openshift-node/scaleup.yml", INVENTORY.format(new_nodes=NEW_NODE))
        assert rec["exit"] == 0, rec["stdout"]
        assert "glusterfs" not in sim.store.get("nodes", NODE)["metadata"]["labels"]
        await sim.clock.sleep(30)  # many pod start times
        assert not gluster_pods_on(sim, NODE)
        assert not any(b["online"] for b in sim.components["gluster"].bricks_on_host(NODE))  # type: ignore[attr-defined]
    finally:
        await sim.stop()


async def test_second_brick_down_elsewhere_before_migration(r4: ClusterSim) -> None:
    """(e) a brick of a volume is down on gluster2: gluster1 holds a brick of the same replica
    set, so taking gluster1 down now would leave two of three bricks down."""
    gluster = r4.components["gluster"]
    gluster.enable_symptom("second_brick_down")  # type: ignore[attr-defined]
    down = [b for b in gluster.bricks_on_host("gluster2.demo") if not b["online"]]  # type: ignore[attr-defined]
    assert [b["volume"] for b in down] == ["vol_5b7f1e0c9a2d4b6e8f0a1c3e5d7b9f11"]
    mine = [b["volume"] for b in gluster.bricks_on_host(NODE)]  # type: ignore[attr-defined]
    assert down[0]["volume"] in mine
    await hosts_of(r4).run(NODE, ["systemctl", "stop", "crio"])
    vol = next(v for v in gluster.snapshot()["volumes"] if v["name"] == down[0]["volume"])  # type: ignore[attr-defined]
    assert sum(not b["online"] for b in vol["bricks"]) == 2


async def test_deleting_the_node_while_its_kubelet_runs_brings_it_back_without_the_gluster_label(
        r4: ClusterSim) -> None:
    """Step order matters: a Node deleted before its node service is stopped re-registers
    (new uid) with only its node group's labels, so the GlusterFS label added at install is gone."""
    old = r4.store.get("nodes", NODE)
    await delete_node(r4)
    node = await wait_for(lambda: r4.store.try_get("nodes", NODE))
    assert node["metadata"]["uid"] != old["metadata"]["uid"]
    assert node["metadata"]["labels"].get("runtime") == "cri-o"  # from node-config-infra-crio
    assert "glusterfs" not in node["metadata"]["labels"]
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"] == "cri-o://1.11.16"


async def test_symptom_a_switched_off_installs_the_excluder() -> None:
    """(a) is a switch: with ``hosts.scaleup.omit`` empty the scale-up installs the excluder too."""
    section = copy.deepcopy(load_scenario("r4-crio-to-docker").hosts)
    assert section is not None
    section["scaleup"]["omit"] = []
    sim = await start({"hosts": section})
    try:
        hc = hosts_of(sim)
        await hc.run(NODE, ["systemctl", "stop", "atomic-openshift-node"])
        await hc.run(NODE, ["yum", "-y", "remove", "atomic-openshift-excluder"])
        await delete_node(sim)
        ext = sim.components["external"]
        assert isinstance(ext, ExternalComponent)
        await ext.run(f"{PLAYBOOKS}/openshift-master/openshift_node_group.yml", INVENTORY.format(new_nodes=""))
        rec = await ext.run(f"{PLAYBOOKS}/openshift-node/scaleup.yml", INVENTORY.format(new_nodes=NEW_NODE))
        assert rec["exit"] == 0, rec["stdout"]
        assert (await hc.run(NODE, ["rpm", "-q", "atomic-openshift-excluder"]))[2] == 0
    finally:
        await sim.stop()


async def test_unpinned_scaleup_installs_newer_openshift_packages(r4: ClusterSim) -> None:
    """Without openshift_pkg_version the scale-up takes the repositories' latest build; pinned, it
    matches the peers (spec §6.3 post-check, second form: version differences)."""
    hc = hosts_of(r4)
    for node in (NODE, "gluster2.demo"):
        await hc.run(node, ["systemctl", "stop", "atomic-openshift-node"])
        await hc.run(node, ["yum", "-y", "remove", "atomic-openshift-node", "atomic-openshift-clients"])
        await delete_node(r4, node)
    new = f"{NEW_NODE}\ngluster2.demo openshift_use_crio=False openshift_node_group_name=node-config-infra " \
          "openshift_pkg_version=-3.11.161"
    ext = r4.components["external"]
    assert isinstance(ext, ExternalComponent)
    await ext.run(f"{PLAYBOOKS}/openshift-master/openshift_node_group.yml", INVENTORY.format(new_nodes=""))
    rec = await ext.run(f"{PLAYBOOKS}/openshift-node/scaleup.yml", INVENTORY.format(new_nodes=new))
    assert rec["exit"] == 0, rec["stdout"]
    qf = ["rpm", "-q", "--qf", "%{NAME}-%{VERSION}\\n", "atomic-openshift-node", "atomic-openshift-clients"]
    assert (await hc.run(NODE, qf))[0] == "atomic-openshift-node-3.11.170\natomic-openshift-clients-3.11.170\n"
    assert (await hc.run("gluster2.demo", qf))[0] == "atomic-openshift-node-3.11.161\natomic-openshift-clients-3.11.161\n"
    assert (await hc.run("gluster3.demo", qf))[0] == "atomic-openshift-node-3.11.161\natomic-openshift-clients-3.11.161\n"
    bad = INVENTORY.format(new_nodes=f"{NEW_NODE} openshift_pkg_version=-3.11.999")
    await hc.run(NODE, ["yum", "-y", "remove", "atomic-openshift-node"])
    await hc.run(NODE, ["systemctl", "stop", "atomic-openshift-node"])
    await delete_node(r4, NODE)
    rec = await ext.run(f"{PLAYBOOKS}/openshift-node/scaleup.yml", bad)
    assert rec["exit"] == 2 and "No package atomic-openshift-node-3.11.999 available." in rec["stdout"]
