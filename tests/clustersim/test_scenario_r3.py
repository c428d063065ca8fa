"""Scenario r3-okd310-upgrade: each field-report symptom exists in the running simulator
(procedures-spec §8.9, seed 002)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from clustersim.gluster import GlusterComponent
from clustersim.scenario import load_scenario
from clustersim.sim import ClusterSim
from tests.support.smallcluster import kubectl_binary
from tests.clustersim.test_gluster_format import join_wrapped, seed_status_block

KUBECTL = kubectl_binary()  # next to the interpreter, else on PATH
REG = "glusterfs-registry-volume"
APP = "vol_ec8d838607528268a4e435628ea9f709"


@pytest.fixture
async def r3(tmp_path: Path) -> AsyncIterator[ClusterSim]:
    async with ClusterSim("r3-okd310-upgrade", time_scale=0.01, kubeconfig_path=tmp_path / "kubeconfig") as s:
        yield s


async def until(pred: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Poll ``pred`` until truthy (generous deadline for a loaded machine)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = pred()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.05)


async def kubectl(sim: ClusterSim, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(sim.kubeconfig_path), *args, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ))
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


async def admin(sim: ClusterSim, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.request(method, f"{sim.url}/_sim/{path}", json=body) as resp:
        return resp.status, await resp.json()


def gluster_pod(sim: ClusterSim, node: str) -> str:
    pods = [p for p in sim.store.list_refs("pods", "glusterfs", label_selector="glusterfs=storage-pod")
            if p["spec"].get("nodeName") == node and not p["metadata"].get("deletionTimestamp")]
    assert len(pods) == 1, pods
    return str(pods[0]["metadata"]["name"])


def gcomp(sim: ClusterSim) -> GlusterComponent:
    comp = sim.components["gluster"]
    assert isinstance(comp, GlusterComponent)
    return comp


def test_r3_loads_with_a_gluster_section() -> None:
    scenario = load_scenario("r3-okd310-upgrade")
    sections = scenario.component_sections()
    assert set(sections) == {"external", "gluster", "hosts", "masters"}
    dcs = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in scenario.objects if o["kind"] == "DeploymentConfig"}
    assert dcs == {("default", "docker-registry"), ("default", "router"), ("glusterfs", "heketi-storage")}
    assert sections["gluster"]["enabled_symptoms"] == ["brick_offline"]
    assert {d.name for d in scenario.daemonsets} == {"glusterfs-storage"}
    assert {n.name for n in scenario.nodes if n.labels.get("region") == "infra"} == {"node01.example.com", "node02.example.com"}


async def test_symptom_a_brick_online_n_fixed_by_one_pod_restart(r3: ClusterSim) -> None:
    """Seed 002 step 2-3: `gluster volume status` shows the brick on 10.0.0.12 Online N;
    `oc delete pod` of master03's GlusterFS pod brings it back (one-shot)."""
    pod1 = gluster_pod(r3, "master01.example.com")
    assert pod1 == "glusterfs-storage-dz8qj"  # seed: `oc rsh glusterfs-storage-dz8qj`
    rc, out, err = await kubectl(r3, "exec", "-n", "glusterfs", pod1, "--", "gluster", "volume", "status")
    assert rc == 0, err
    first = out.split("Status of volume: heketidbstorage")[0]
    assert join_wrapped(first.split("\n")[:-1]) == join_wrapped(seed_status_block() + [" "])
    rc, out, _ = await kubectl(r3, "exec", "-n", "glusterfs", pod1, "--", "gluster", "volume", "heal", REG, "info")
    assert "Status: Transport endpoint is not connected\nNumber of entries: -\n" in out

    st = gcomp(r3).state
    pod3 = gluster_pod(r3, "master03.example.com")
    assert pod3 == "glusterfs-storage-r24wg"  # seed: `oc delete pod glusterfs-storage-r24wg`
    rc, out, err = await kubectl(r3, "delete", "pod", "-n", "glusterfs", pod3, "--wait=false")
    assert rc == 0, err
    await until(lambda: st.brick(REG, "10.0.0.12").online)  # the DaemonSet's replacement is Ready
    assert gluster_pod(r3, "master03.example.com") != pod3
    rc, out, _ = await kubectl(r3, "exec", "-n", "glusterfs", pod1, "--", "gluster", "volume", "status", REG)
    rows = join_wrapped(out.split("\n")[:-1])
    assert [r.split()[-2] for r in rows if r.startswith("Brick ")] == ["Y", "Y", "Y"]
    # Entries written while it was down heal once it is back.
    await until(lambda: gcomp(r3).snapshot()["volumes"][0]["pending_heal"] == 0)
    _, snap = await admin(r3, "GET", "gluster")
    assert snap["max_hosts_down_at_once"] == 1


async def test_symptom_b_two_bricks_of_one_volume_down(r3: ClusterSim) -> None:
    """Seed 002: "If multiple bricks of the same volume are down, your entire volume is down"."""
    status, body = await admin(r3, "POST", "gluster/symptom", {"name": "volume_down"})
    assert status == 200, body
    pod1 = gluster_pod(r3, "master01.example.com")
    rc, out, err = await kubectl(r3, "exec", "-n", "glusterfs", pod1, "--", "gluster", "volume", "status", APP)
    assert rc == 0, err
    rows = [r for r in join_wrapped(out.split("\n")[:-1]) if r.startswith("Brick ")]
    assert [r.split(":")[0] for r in rows if r.endswith(" N")] == ["Brick 10.0.0.11", "Brick 10.0.0.12"]
    rc, out, _ = await kubectl(r3, "exec", "-n", "glusterfs", pod1, "--", "gluster", "volume", "heal", APP, "info")
    assert out.count("Number of entries: -") == 2
    await asyncio.sleep(0.2)  # 20 simulated seconds of client writes: no quorum, they fail
    _, snap = await admin(r3, "GET", "gluster")
    app = next(v for v in snap["volumes"] if v["name"] == APP)
    assert app["failed_writes"] > 0 and app["pending_heal"] == 0
    assert snap["max_bricks_down_per_volume"][APP] == 2
    assert snap["max_hosts_down_at_once"] == 2  # 10.0.0.12 (symptom a) and 10.0.0.11
    status, body = await admin(r3, "POST", "gluster/symptom", {"name": "nope"})
    assert status == 400 and "unknown symptom" in body["error"]


async def test_symptom_c_master01_api_waits_for_the_ldap_ca(r3: ClusterSim) -> None:
    """Seed 002 "The Master API cannot find the LDAP CA Certificate": after `master-restart api`
    master01's API stays down, `master-logs api api` names the missing CA, the other masters keep
    serving; renaming the certificate lets it start."""
    hosts: Any = r3.components["hosts"]
    masters: Any = r3.components["masters"]
    m1 = "master01.example.com"
    out, err, code = await hosts.run(m1, ["/usr/local/bin/master-restart", "api"])
    assert code == 0, err
    await asyncio.sleep(r3.clock.real(40))  # twice restart_seconds
    assert masters.availability()["masters"][m1]["api_up"] is False
    assert masters.availability()["masters"]["master02.example.com"]["api_up"] is True
    out, err, code = await hosts.run(m1, ["/usr/local/bin/master-logs", "api", "api"])
    assert code == 0 and "stat /etc/origin/master/freeipa_ldap_ca.crt: no such file or directory" in out
    async with aiohttp.ClientSession() as http:  # the cluster API is still served by the others
        async with http.get(f"{masters.api_url('master02.example.com')}/healthz/ready") as resp:
            assert resp.status == 200
    out, err, code = await hosts.run(m1, ["cp", "/etc/origin/master/ipa-ca.crt",
                                          "/etc/origin/master/freeipa_ldap_ca.crt"])
    assert code == 0, err
    await until(lambda: masters.availability()["masters"][m1]["api_up"])
    assert masters.availability()["zero_masters_up"] == []


async def test_reboot_of_a_gluster_master_takes_its_bricks_down_until_it_is_back(r3: ClusterSim) -> None:
    from clustersim.hosts import SessionDropped

    hosts: Any = r3.components["hosts"]
    st = gcomp(r3).state
    m2 = "master02.example.com"
    with pytest.raises(SessionDropped):
        await hosts.run(m2, ["systemctl", "reboot"])
    await until(lambda: not st.brick("heketidbstorage", "10.0.0.11").online)
    assert not any(b["online"] for b in gcomp(r3).bricks_on_host(m2))
    await until(lambda: all(b["online"] for b in gcomp(r3).bricks_on_host(m2)), timeout=60)
    reasons = [e["reason"] for e in st.timeline if e["node"] == m2 and e["volume"] == "heketidbstorage"]
    assert reasons[1] == "host reboot_started" and reasons[-1] in ("host reboot_done", "GlusterFS pod Ready")
    # The seed's offline brick on master03 plus master02's reboot: two hosts at once.
    assert st.max_hosts_down_at_once() == 2


async def test_symptom_d_registry_pending_when_old_labels_go_before_the_dc_patch(r3: ClusterSim) -> None:
    """Seed 002 / R3e: dc/docker-registry still selects region=infra; removing that label from
    the infra nodes before patching the DC leaves a replacement registry pod Pending."""
    await until(lambda: [p for p in r3.store.list_refs("pods", "default", label_selector="docker-registry=default")
                         if (p.get("status") or {}).get("phase") == "Running"])
    dc = r3.store.get("deploymentconfigs.apps.openshift.io", "docker-registry", "default")
    assert dc["spec"]["template"]["spec"]["nodeSelector"] == {"region": "infra"}
    rc, out, err = await kubectl(r3, "label", "node", "node01.example.com", "node02.example.com", "region-")
    assert rc == 0, err
    old = [p["metadata"]["name"] for p in r3.store.list_refs("pods", "default", label_selector="docker-registry=default")]
    rc, out, err = await kubectl(r3, "delete", "pod", "-n", "default", *old, "--wait=false")
    assert rc == 0, err

    def pending() -> list[dict[str, Any]]:
        return [p for p in r3.store.list_refs("pods", "default", label_selector="docker-registry=default")
                if p["metadata"]["name"] not in old and (p.get("status") or {}).get("phase") == "Pending"]

    await until(pending)
    name = pending()[0]["metadata"]["name"]
    await until(lambda: [e for e in r3.store.list_refs("events", "default")
                         if e.get("reason") == "FailedScheduling" and e["involvedObject"]["name"] == name])
    rc, out, err = await kubectl(r3, "get", "events", "-n", "default", "--field-selector", f"involvedObject.name={name}")
    assert rc == 0, err
    assert "FailedScheduling" in out and "0/7 nodes are available: 7 node(s) didn't match node selector." in out
    rc, out, _ = await kubectl(r3, "get", "pods", "-n", "default")
    assert any(line.startswith(name) and "Pending" in line for line in out.splitlines())


async def test_nodes_and_gluster_pods_carry_the_seed_addresses_and_3_9_versions(r3: ClusterSim) -> None:
    rc, out, err = await kubectl(r3, "get", "pods", "-n", "glusterfs", "-o", "wide")
    assert rc == 0, err
    rows = [line.split() for line in out.splitlines() if line.startswith("glusterfs-storage-")]
    assert sorted((r[0], r[5], r[6]) for r in rows) == [
        ("glusterfs-storage-dz8qj", "10.0.0.10", "master01.example.com"),
        ("glusterfs-storage-jncsl", "10.0.0.11", "master02.example.com"),
        ("glusterfs-storage-r24wg", "10.0.0.12", "master03.example.com")], out  # seed 002's pods
    node = r3.store.get("nodes", "master01.example.com")
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.9.1+a0ce1bc657"
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("docker://1.13.1")
    hosts: Any = r3.components["hosts"]
    assert hosts.host("master03.example.com").ip == "10.0.0.12"



async def _etcd_container(sim: ClusterSim, host: str) -> str:
    """The running etcd container's ID on ``host`` (``docker ps``), waiting for its mirror pod."""
    hc = sim.components["hosts"]
    for _ in range(600):
        out, _, code = await hc.run(host, ["docker", "ps", "-q", "--filter", "name=k8s_etcd_"])
        if code == 0 and out.strip():
            return out.split()[0]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no etcd container on {host}")


async def test_r3_symptom_e_exec_into_etcd_fails_as_in_the_seed(r3: ClusterSim) -> None:
    """(e) With host fault ``exec_broken=etcd``, every exec into the etcd container of that
    master (the backup task's ``docker exec``, the liveness probe) fails with the seed's OCI
    runtime error and exit 126; another master still execs, and clearing the fault heals it."""
    hc = r3.components["hosts"]
    master = next(n for n in hc.hosts if "master01" in n)
    other = next(n for n in hc.hosts if "master02" in n)
    argv = ["etcdctl", "--version"]
    eid, oid = await _etcd_container(r3, master), await _etcd_container(r3, other)
    status, _ = await admin(r3, "POST", f"hosts/{master}/fault", {"fault": "exec_broken=etcd"})
    assert status == 200
    _, err, code = await hc.run(master, ["docker", "exec", eid, *argv])
    assert code == 126
    assert err.startswith("rpc error: code = 2 desc = oci runtime error: exec failed")
    assert "read parent: connection reset by peer" in err
    _, err2, code2 = await hc.run(other, ["docker", "exec", oid, *argv])
    assert code2 != 126 and "oci runtime error" not in err2
    status, _ = await admin(r3, "POST", f"hosts/{master}/fault", {"fault": "exec_broken", "clear": True})
    assert status == 200
    _, err3, code3 = await hc.run(master, ["docker", "exec", eid, *argv])
    assert code3 != 126 and "oci runtime error" not in err3


async def test_node_upgrade_runs_as_the_readme_writes_it_and_labels_the_node_groups(r3: ClusterSim, tmp_path: Path) -> None:
    """R3d nodes: `ansible-playbook upgrade_nodes.yml -l NODE` with only what `sim serve
    --write-files DIR` gives (DIR/bin first on PATH, ANSIBLE_INVENTORY, KUBECONFIG) upgrades the
    node and puts it in its 3.10 node group: node-role.kubernetes.io/infra=true on the infra
    nodes (R3e's new selector), .../compute=true on the compute nodes; old labels stay."""
    written = r3.components["external"].write_files(tmp_path / "files")  # type: ignore[attr-defined]
    assert sorted(written) == ["apiserver.yaml", "bin/ansible-playbook", "inventory"]
    for group, role in (("node-config-infra", "infra"), ("node-config-compute", "compute"), ("node-config-master", "master")):
        cm = r3.store.get("configmaps", group, "openshift-node")  # the 3.10 control plane made them
        assert f"node-role.kubernetes.io/{role}=true" in cm["data"]["node-config.yaml"]
    env = {k: v for k, v in os.environ.items() if k not in ("CLUSTERSIM_URL", "ANSIBLE_INVENTORY")}
    env.update(PATH=f"{written['bin/ansible-playbook'].parent}{os.pathsep}{env.get('PATH', '')}",
               ANSIBLE_INVENTORY=str(written["inventory"]), KUBECONFIG=str(r3.kubeconfig_path))

    async def upgrade(node: str) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec("ansible-playbook", "upgrade_nodes.yml", "-l", node, env=env,
                                                    cwd=tmp_path, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT)
        out, _ = await asyncio.wait_for(proc.communicate(), 120)
        return proc.returncode or 0, out.decode()

    def node(name: str) -> dict[str, Any]:
        return r3.store.get("nodes", name)

    assert "node-role.kubernetes.io/infra" not in node("node01.example.com")["metadata"]["labels"]
    code, out = await upgrade("node01.example.com")
    assert code == 0, out
    n1 = node("node01.example.com")
    assert n1["status"]["nodeInfo"]["kubeletVersion"] == "v1.10.0+b81c8f8"
    assert {k: n1["metadata"]["labels"].get(k) for k in ("node-role.kubernetes.io/infra", "region", "zone")} == {
        "node-role.kubernetes.io/infra": "true", "region": "infra", "zone": "default"}
    host = r3.components["hosts"].hosts["node01.example.com"]  # type: ignore[attr-defined]
    assert "BOOTSTRAP_CONFIG_NAME=node-config-infra\n" in host.files["/etc/sysconfig/origin-node"]
    assert host.files["/etc/origin/node/node-config.yaml"] == r3.store.get(
        "configmaps", "node-config-infra", "openshift-node")["data"]["node-config.yaml"]
    # only the -l node: node02 is still 3.9 and unlabelled
    n2 = node("node02.example.com")
    assert n2["status"]["nodeInfo"]["kubeletVersion"] == "v1.9.1+a0ce1bc657"
    assert "node-role.kubernetes.io/infra" not in n2["metadata"]["labels"]
    code, out = await upgrade("node03.example.com")
    assert code == 0, out
    assert node("node03.example.com")["metadata"]["labels"]["node-role.kubernetes.io/compute"] == "true"
    assert "node-role.kubernetes.io/infra" not in node("node03.example.com")["metadata"]["labels"]
    code, out = await upgrade("node09.example.com")  # -l names no host of the inventory
    assert code == 2 and "No nodes matched openshift_upgrade_nodes_label='' and --limit node09.example.com" in out


async def test_the_api_reports_the_oldest_masters_release(r3: ClusterSim) -> None:
    """``/version`` is the control plane's Kubernetes version (OKD 3.9's before the upgrade); a
    master restarted from a 3.10 API static-pod manifest reports 3.10's, and the API as a whole
    answers the oldest master's until every master is on 3.10 (what a version-skew check reads)."""
    from clustersim.masters.model import API_MANIFEST

    masters = r3.components["masters"]
    hosts = r3.components["hosts"]

    async def version() -> str:
        async with aiohttp.ClientSession() as s, s.get(r3.url + "/version") as r:
            return (await r.json())["gitVersion"]

    assert await version() == "v1.9.1+a0ce1bc657"
    from clustersim.external import shipped_files

    manifest = shipped_files("r3-okd310-upgrade")["apiserver.yaml"]  # what the README's control-plane upgrade writes
    names = list(masters.masters)
    hosts.hosts[names[0]].files["/etc/origin/master/freeipa_ldap_ca.crt"] = "ca\n"  # master01's API starts (symptom c)
    for i, m in enumerate(names):
        hosts.hosts[m].files[API_MANIFEST] = manifest
        await asyncio.wait_for(masters.restart(m, "api"), 60)
        assert await version() == ("v1.10.0+b81c8f8" if i == len(names) - 1 else "v1.9.1+a0ce1bc657"), m
