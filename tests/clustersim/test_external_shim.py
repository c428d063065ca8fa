"""The ansible-playbook stand-in: INI inventories, and the console script run as a real
subprocess against a running simulator (runs recorded at GET /_sim/external)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from clustersim.external.inventory import InventoryError, parse_inventory, truthy
from clustersim.external.shim import inventory_source, link_as_ansible_playbook, parse_extra_vars, sim_url
from clustersim.sim import ClusterSim

SHIM = Path(sys.executable).parent / "clustersim-ansible-playbook"
PLAYBOOKS = "/usr/share/ansible/openshift-ansible/playbooks"

INVENTORY = """\
[OSEv3:children]
masters
nodes
new_nodes
glusterfs

[OSEv3:vars]
ansible_user=root
openshift_deployment_type=openshift-enterprise
openshift_release="3.11"
openshift_use_crio=True

[masters]
master1.demo

[nodes]
master1.demo openshift_node_group_name=node-config-master-crio
gluster2.demo openshift_node_group_name=node-config-infra-crio
gluster3.demo openshift_node_group_name=node-config-infra-crio

[new_nodes]
{new_nodes}

[glusterfs]
gluster1.demo glusterfs_devices='["/dev/vdb"]'
gluster2.demo glusterfs_devices='["/dev/vdb"]'
gluster3.demo glusterfs_devices='["/dev/vdb"]'
"""


def test_inventory_groups_children_and_vars() -> None:
    inv = parse_inventory(INVENTORY.format(
        new_nodes="gluster1.demo openshift_use_crio=False openshift_node_group_name=node-config-infra"))
    assert inv.hosts("new_nodes") == ["gluster1.demo"]
    assert set(inv.hosts("OSEv3")) == {"master1.demo", "gluster1.demo", "gluster2.demo", "gluster3.demo"}
    assert inv.var("gluster1.demo", "openshift_use_crio") == "False"  # host var beats [OSEv3:vars]
    assert inv.var("gluster2.demo", "openshift_use_crio") == "True"
    assert inv.var("gluster2.demo", "openshift_release") == "3.11"
    assert inv.host_vars["gluster1.demo"]["glusterfs_devices"] == '["/dev/vdb"]'
    assert not truthy(inv.var("gluster1.demo", "openshift_use_crio")) and truthy("yes")
    assert parse_inventory(INVENTORY.format(new_nodes="")).hosts("new_nodes") == []
    with pytest.raises(InventoryError):
        parse_inventory("[nodes\nx\n")
    assert parse_extra_vars(["openshift_upgrade_nodes_label=region=infra a=1", '{"b": 2}']) == {
        "openshift_upgrade_nodes_label": "region=infra", "a": "1", "b": "2"}
    assert inventory_source("hosts", {"ANSIBLE_INVENTORY": "other"}) == "hosts"
    assert inventory_source("", {"ANSIBLE_INVENTORY": "a,,b"}) == "a,b"
    with pytest.raises(ValueError):
        inventory_source("", {})


@pytest.fixture
async def sim() -> AsyncIterator[ClusterSim]:
    async with ClusterSim("r4-crio-to-docker", time_scale=0.02) as s:
        yield s


async def shim(sim: ClusterSim, inventory: Path, *args: str, via_kubeconfig: bool = False) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CLUSTERSIM_URL", "KUBECONFIG")}
    if via_kubeconfig:
        env["KUBECONFIG"] = str(sim.kubeconfig_path)
    else:
        env["CLUSTERSIM_URL"] = sim.url
    proc = await asyncio.create_subprocess_exec(str(SHIM), "-i", str(inventory), *args, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_scaleup_without_new_nodes_fails_like_openshift_ansible(sim: ClusterSim, tmp_path: Path) -> None:
    """R4 symptom (f): the inventory hook did not run, [new_nodes] is empty."""
    inv = tmp_path / "inventory"
    inv.write_text(INVENTORY.format(new_nodes=""))
    code, out, _ = await shim(sim, inv, f"{PLAYBOOKS}/openshift-node/scaleup.yml", via_kubeconfig=True)
    assert code == 2
    assert "fatal: [localhost]: FAILED!" in out
    assert "Detected no new_nodes in inventory. Please add hosts to the new_nodes host group to add nodes." in out
    code, _, err = await shim(sim, inv, f"{PLAYBOOKS}/nope.yml")
    assert code == 1 and "could not be found" in err
    async with aiohttp.ClientSession() as http, http.get(f"{sim.url}/_sim/external") as resp:
        runs = (await resp.json())["runs"]
    assert [(r["playbook"].rsplit("/", 1)[-1], r["exit"]) for r in runs] == [("scaleup.yml", 2), ("nope.yml", 1)]
    assert runs[0]["inventory"] == str(inv) and runs[0]["start"] and runs[0]["end"]


async def test_node_group_playbook_creates_configmaps(sim: ClusterSim, tmp_path: Path) -> None:
    inv = tmp_path / "inventory"
    inv.write_text(INVENTORY.format(new_nodes=""))
    code, out, _ = await shim(sim, inv, f"{PLAYBOOKS}/openshift-master/openshift_node_group.yml")
    assert code == 0 and "PLAY RECAP" in out
    cm = sim.store.get("configmaps", "node-config-infra", "openshift-node")
    assert "node-role.kubernetes.io/infra=true" in cm["data"]["node-config.yaml"]
    assert "runtime=cri-o" in sim.store.get("configmaps", "node-config-infra-crio", "openshift-node")["data"][
        "node-config.yaml"]


def test_sim_url_from_environment(tmp_path: Path) -> None:
    kc = tmp_path / "kubeconfig"
    kc.write_text("apiVersion: v1\nkind: Config\ncurrent-context: sim\ncontexts:\n- name: sim\n  context: {cluster: c}\n"
                  "clusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:1234/'}\n")
    assert sim_url({"KUBECONFIG": str(kc)}) == "http://127.0.0.1:1234"
    assert sim_url({"CLUSTERSIM_URL": "http://x:1/", "KUBECONFIG": str(kc)}) == "http://x:1"
    with pytest.raises(ValueError):
        sim_url({})


async def test_upgrade_nodes_playbook_restarts_matching_kubelets(sim: ClusterSim, tmp_path: Path) -> None:
    inv = tmp_path / "inventory"
    inv.write_text(INVENTORY.format(new_nodes="").replace(
        "gluster3.demo openshift_node_group_name=node-config-infra-crio",
        "gluster3.demo openshift_node_group_name=node-config-infra-crio\n"
        "compute1.demo openshift_node_group_name=node-config-compute-crio\n"
        "compute2.demo openshift_node_group_name=node-config-compute-crio"))
    upgrade = f"{PLAYBOOKS}/byo/openshift-cluster/upgrades/v3_10/upgrade_nodes.yml"
    # 3.10 blocks until the node groups' ConfigMaps exist (o-a README, release-3.10)
    code, out, _ = await shim(sim, inv, "-e", "openshift_upgrade_nodes_label=node-role.kubernetes.io/compute=true", upgrade)
    assert code == 2 and "has no ConfigMap openshift-node/node-config-compute-crio" in out, out
    assert sim.store.get("nodes", "compute1.demo")["status"]["nodeInfo"]["kubeletVersion"] == "v1.11.0+d4cacc0"
    assert (await shim(sim, inv, f"{PLAYBOOKS}/openshift-master/openshift_node_group.yml"))[0] == 0
    seen: list[str] = []
    sub = sim.store.subscribe(["nodes"])

    async def watch() -> None:
        async for ev in sub:
            if ev.object["metadata"]["name"] == "compute1.demo":
                seen.extend(c["status"] for c in ev.object["status"]["conditions"] if c["type"] == "Ready")

    task = asyncio.create_task(watch())
    try:
        code, out, _ = await shim(sim, inv, "-e", "openshift_upgrade_nodes_label=node-role.kubernetes.io/compute=true",
                                  "-e", "openshift_release=3.10", upgrade)
    finally:
        task.cancel()
        sub.close()
    assert code == 0, out
    for name in ("compute1.demo", "compute2.demo"):
        node = sim.store.get("nodes", name)
        assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.10.0+b81c8f8"
        # the group's labels (sync pod relabel), the md5sum of the config it got
        assert {k: node["metadata"]["labels"].get(k) for k in ("node-role.kubernetes.io/compute", "runtime")} == {
            "node-role.kubernetes.io/compute": "true", "runtime": "cri-o"}
        assert len(node["metadata"]["annotations"]["node.openshift.io/md5sum"]) == 32
    assert sim.store.get("nodes", "gluster2.demo")["status"]["nodeInfo"]["kubeletVersion"] == "v1.11.0+d4cacc0"
    assert "False" in seen and seen[-1] == "True"  # NotReady while the node service restarted
    code, out, _ = await shim(sim, inv, "-e", "openshift_upgrade_nodes_label=region=nowhere", upgrade)
    assert code == 2 and "No nodes matched" in out


async def test_upgrade_nodes_needs_a_node_group_for_every_node(sim: ClusterSim, tmp_path: Path) -> None:
    inv = tmp_path / "inventory"
    inv.write_text(INVENTORY.format(new_nodes="").replace("[masters]", "[nodes]\ncompute1.demo\n\n[masters]"))
    assert (await shim(sim, inv, f"{PLAYBOOKS}/openshift-master/openshift_node_group.yml"))[0] == 0
    code, out, _ = await shim(sim, inv, "-l", "compute1.demo", f"{PLAYBOOKS}/byo/openshift-cluster/upgrades/v3_10/upgrade_nodes.yml")
    assert code == 2 and "fatal: [compute1.demo]: FAILED!" in out
    assert "openshift_node_group_name must be defined for all nodes" in out
    assert sim.store.get("nodes", "compute1.demo")["status"]["nodeInfo"]["kubeletVersion"] == "v1.11.0+d4cacc0"


async def test_inventory_from_ansible_inventory_when_no_i(sim: ClusterSim, tmp_path: Path) -> None:
    """Like ansible-playbook, the stand-in reads $ANSIBLE_INVENTORY without -i; with neither it fails."""
    inv = tmp_path / "inventory"
    inv.write_text(INVENTORY.format(new_nodes=""))
    env = {k: v for k, v in os.environ.items() if k not in ("ANSIBLE_INVENTORY", "KUBECONFIG")}
    env["CLUSTERSIM_URL"] = sim.url

    async def run(extra_env: dict[str, str]) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(str(SHIM), f"{PLAYBOOKS}/openshift-master/openshift_node_group.yml",
                                                    env={**env, **extra_env}, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT)
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode is not None
        return proc.returncode, out.decode()

    code, out = await run({})
    assert code == 250 and "no inventory: give -i INVENTORY or set ANSIBLE_INVENTORY" in out
    assert sim.store.try_get("configmaps", "node-config-infra", "openshift-node") is None
    code, out = await run({"ANSIBLE_INVENTORY": str(inv)})
    assert code == 0 and "PLAY RECAP" in out
    assert sim.store.try_get("configmaps", "node-config-infra", "openshift-node") is not None
    async with aiohttp.ClientSession() as http, http.get(f"{sim.url}/_sim/external") as resp:
        assert [r["inventory"] for r in (await resp.json())["runs"]] == [str(inv)]


async def test_scaleup_admin_route_refuses_a_registered_node(sim: ClusterSim) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{sim.url}/_sim/hosts/gluster1.demo/scaleup",
                             json={"group": "node-config-infra", "runtime": "docker"}) as resp:
            assert resp.status == 409
            assert "still registered" in (await resp.json())["error"]
        async with http.post(f"{sim.url}/_sim/hosts/gluster1.demo/scaleup",
                             json={"group": "no-such-group"}) as resp:
            assert resp.status == 409


async def test_found_on_path_as_ansible_playbook(sim: ClusterSim, tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    link_as_ansible_playbook(bindir)
    inv = tmp_path / "inventory"
    inv.write_text(INVENTORY.format(new_nodes=""))
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "CLUSTERSIM_URL": sim.url}
    proc = await asyncio.create_subprocess_exec("ansible-playbook", "-i", str(inv),
                                                f"{PLAYBOOKS}/openshift-master/openshift_node_group.yml", env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0 and b"PLAY RECAP" in out


def test_shipped_file_names_are_plain_names() -> None:
    from pydantic import ValidationError

    from clustersim.external import ExternalSection, shipped_files

    assert sorted(shipped_files("r4-crio-to-docker")) == ["inventory", "inventory_hook.py"]
    assert shipped_files("r2-pdb-blocked") == {}
    with pytest.raises(ValidationError, match="plain names"):
        ExternalSection.model_validate({"files": {"../escape": "x"}})
