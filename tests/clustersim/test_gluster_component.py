"""The gluster component in a running simulator: real kubectl exec into a GlusterFS pod, pod
deletion/readiness coupling, admin endpoints (GET /_sim/gluster, POST /_sim/gluster/fault)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from clustersim.agents.objects import make_node
from clustersim.gluster import GlusterComponent
from clustersim.sim import ClusterSim
from tests.support.smallcluster import kubectl_binary
from tests.clustersim.test_gluster_format import P10, P11, P12, REG, join_wrapped, seed_status_block

KUBECTL = kubectl_binary()  # next to the interpreter, else on PATH
NODES = {"master01.example.com": ("10.0.0.10", "glusterfs-storage-dz8qj"),
         "master02.example.com": ("10.0.0.11", "glusterfs-storage-jncsl"),
         "master03.example.com": ("10.0.0.12", "glusterfs-storage-r24wg")}
SECTION: dict[str, Any] = {
    "namespace": "glusterfs", "pod_selector": {"glusterfs": "storage-pod"}, "status_style": "seed",
    "write_rate": 1.0, "heal_rate": 10.0,
    "hosts": [{"node": "master01.example.com", "address": "10.0.0.10", "shd_pid": 215},
              {"node": "master02.example.com", "address": "10.0.0.11", "shd_pid": 163},
              {"node": "master03.example.com", "address": "10.0.0.12", "shd_pid": 172}],
    "volumes": [{"name": REG, "bricks": [{"host": "10.0.0.11", "path": P11, "pid": 204},
                                         {"host": "10.0.0.12", "path": P12},
                                         {"host": "10.0.0.10", "path": P10, "pid": 224}]}],
    "faults": [{"kind": "brick_start_failure", "volume": REG, "brick": "10.0.0.12", "immediate": True}],
}


def gluster_pod(name: str, node: str, ip: str, ready: bool = True) -> dict[str, Any]:
    """A Running GlusterFS DaemonSet pod (hostNetwork: pod IP = node IP)."""
    return {
        "metadata": {"name": name, "namespace": "glusterfs",
                     "labels": {"glusterfs": "storage-pod", "glusterfs-node": "pod"}},
        "spec": {"nodeName": node, "hostNetwork": True,
                 "containers": [{"name": "glusterfs", "image": "gluster/gluster-centos:latest"}]},
        "status": {"phase": "Running", "hostIP": ip, "podIP": ip,
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                   "containerStatuses": [{"name": "glusterfs", "image": "gluster/gluster-centos:latest", "imageID": "",
                                          "ready": ready, "restartCount": 0,
                                          "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}}}]},
    }


def fill(store: Any) -> None:
    store.create("namespaces", {"metadata": {"name": "glusterfs"}})
    for i, (node, (ip, pod)) in enumerate(NODES.items()):
        store.create("nodes", make_node(node, roles=["master"], config="rendered-master-0",
                                        created="2025-01-01T00:00:00Z", index=8 + i))
        store.create("pods", gluster_pod(pod, node, ip))


@pytest.fixture
async def gsim(tmp_path: Path) -> AsyncIterator[ClusterSim]:
    """An agent-less simulator with the seed's three GlusterFS pods and the registry volume."""
    sim = ClusterSim(None, time_scale=0.01, kubeconfig_path=tmp_path / "kubeconfig",
                     component_sections={"gluster": SECTION})
    fill(sim.store)  # before start: the pods the section describes are already running
    async with sim as s:
        assert all(p.pod_ok for p in gcomp(s).state.peers)
        yield s


async def until(pred: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Poll ``pred`` until truthy (generous deadline for a loaded machine)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = pred()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.02)


async def kubectl(sim: ClusterSim, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(sim.kubeconfig_path), *args, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ))
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


async def admin(sim: ClusterSim, method: str = "GET", path: str = "gluster", body: Any = None) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.request(method, f"{sim.url}/_sim/{path}", json=body) as resp:
        return resp.status, await resp.json()


def gcomp(sim: ClusterSim) -> GlusterComponent:
    comp = sim.components["gluster"]
    assert isinstance(comp, GlusterComponent)
    return comp


async def test_kubectl_exec_prints_the_seed_status_table(gsim: ClusterSim) -> None:
    rc, out, err = await kubectl(gsim, "exec", "-n", "glusterfs", "glusterfs-storage-dz8qj", "--",
                                 "gluster", "volume", "status")
    assert rc == 0, err
    assert join_wrapped(out.split("\n")[:-1]) == join_wrapped(seed_status_block() + [" "])
    rc, out, err = await kubectl(gsim, "exec", "-n", "glusterfs", "glusterfs-storage-jncsl", "--",
                                 "gluster", "--mode=script", "volume", "status", REG, "--xml")
    assert rc == 0 and "<status>0</status>" in out and out.count("<status>1</status>") == 5
    # Through a shell too (the exec router re-dispatches each simple command).
    rc, out, err = await kubectl(gsim, "exec", "-n", "glusterfs", "glusterfs-storage-jncsl", "--",
                                 "sh", "-c", "gluster volume list && gluster pool list")
    assert rc == 0 and out.startswith(f"{REG}\nUUID\t\t\t\t\tHostname \tState\n"), err
    assert out.endswith("\tlocalhost\tConnected \n")
    # The exec log records the route.
    assert [e["handler"] for e in gsim.exec_router.log_json()] == ["gluster", "gluster", "builtin"]


async def test_kubectl_exec_failures_have_exit_codes(gsim: ClusterSim) -> None:
    status, body = await admin(gsim, "POST", "gluster/fault", {"kind": "transaction_in_progress", "n": 1})
    assert status == 200 and body["result"] == {"transaction_in_progress": 1}
    rc, out, err = await kubectl(gsim, "exec", "-n", "glusterfs", "glusterfs-storage-dz8qj", "--",
                                 "gluster", "volume", "heal", REG, "info")
    assert rc == 1 and f"Another transaction is in progress for {REG}. Please try again after some time." in err
    await admin(gsim, "POST", "gluster/fault", {"kind": "glusterd_down", "host": "master02.example.com"})
    rc, out, err = await kubectl(gsim, "exec", "-n", "glusterfs", "glusterfs-storage-jncsl", "--",
                                 "gluster", "peer", "status")
    assert rc == 1 and out == "Connection failed. Please check if gluster daemon is operational.\n"
    status, body = await admin(gsim, "POST", "gluster/fault", {"kind": "split_brain"})
    assert status == 400 and "needs volume" in body["error"]


async def test_pod_delete_and_replacement_restart_bricks(gsim: ClusterSim) -> None:
    comp = gcomp(gsim)
    st = comp.state
    assert not st.brick(REG, "10.0.0.12").online  # the seed's Online N (one-shot fault already used)
    # The seed's fix: delete the pod of the brick's host; a replacement becomes Ready.
    gsim.store.delete("pods", "glusterfs-storage-r24wg", "glusterfs", grace_period_seconds=0)
    await until(lambda: not st.peer("10.0.0.12").pod_ok)
    gsim.store.create("pods", gluster_pod("glusterfs-storage-x7k2p", "master03.example.com", "10.0.0.12"))
    await until(lambda: st.brick(REG, "10.0.0.12").online)
    # Deleting another host's pod takes its brick down (status shows N while the pod is away).
    gsim.store.delete("pods", "glusterfs-storage-jncsl", "glusterfs", grace_period_seconds=0)
    await until(lambda: not st.brick(REG, "10.0.0.11").online)
    rc, out, err = await kubectl(gsim, "exec", "-n", "glusterfs", "glusterfs-storage-dz8qj", "--",
                                 "gluster", "volume", "status", REG)
    assert rc == 0, err
    rows = join_wrapped(out.split("\n")[:-1])
    assert any(r.startswith("Brick 10.0.0.11:") and r.endswith("49152     0          N") for r in rows)
    assert any(r.startswith("Brick 10.0.0.12:") and " Y " in r for r in rows)
    # Not Ready is as bad as gone.
    gsim.store.create("pods", gluster_pod("glusterfs-storage-q9w8e", "master02.example.com", "10.0.0.11", ready=False))
    await asyncio.sleep(0.2)
    assert not st.brick(REG, "10.0.0.11").online
    pod = gsim.store.get("pods", "glusterfs-storage-q9w8e", "glusterfs")
    pod["status"]["conditions"][0]["status"] = "True"
    gsim.store.update("pods", pod, subresource="status")
    await until(lambda: st.brick(REG, "10.0.0.11").online)

    status, snap = await admin(gsim)
    assert status == 200
    vol = snap["volumes"][0]
    assert [b["online"] for b in vol["bricks"]] == [True, True, True]
    assert snap["max_hosts_down_at_once"] == 1  # 10.0.0.12 came back before 10.0.0.11 went down
    assert [(e["node"], e["online"]) for e in snap["timeline"] if e["reason"] != "initial state"] == [
        ("master03.example.com", False), ("master03.example.com", True),
        ("master02.example.com", False), ("master02.example.com", True)]
    assert comp.bricks_on_host("master02.example.com")[0]["online"] is True


HOSTS_SECTION: dict[str, Any] = {
    "catalog": {"cri-o": {"version": "1.11.16-0.11.dev.rhaos3.11.gitd6a416d.el7", "units": ["crio"]}},
    "profiles": {"default": {"packages": ["cri-o"], "units": {"crio": {"enabled": True, "active": True}},
                             "runtime": "cri-o"}},
}


async def test_runtime_stop_takes_bricks_down_heal_entries_grow_then_drain(tmp_path: Path) -> None:
    """Issue 10: stopping the runtime on a GlusterFS host shows that brick N in volume status and
    pending heal entries grow; starting it drains them (through the hosts component)."""
    section = {**SECTION, "faults": [], "write_rate": 2.0, "heal_rate": 20.0}
    sim = ClusterSim(None, time_scale=0.01, kubeconfig_path=tmp_path / "kubeconfig",
                     component_sections={"hosts": HOSTS_SECTION, "gluster": section})
    fill(sim.store)
    async with sim:
        hosts = sim.components["hosts"]
        st = gcomp(sim).state
        assert all(b.online for b in st.all_bricks())
        out, err, code = await hosts.run("master03.example.com", ["systemctl", "stop", "crio"])  # type: ignore[attr-defined]
        assert code == 0, err
        assert not st.brick(REG, "10.0.0.12").online

        async def heal_counts() -> list[str]:
            rc, text, stderr = await kubectl(sim, "exec", "-n", "glusterfs", "glusterfs-storage-dz8qj", "--",
                                             "gluster", "volume", "heal", REG, "info")
            assert rc == 0, stderr
            return [x.split(": ", 1)[1] for x in text.split("\n") if x.startswith("Number of entries:")]

        rc, text, _ = await kubectl(sim, "exec", "-n", "glusterfs", "glusterfs-storage-dz8qj", "--",
                                    "gluster", "volume", "status", REG)
        rows = join_wrapped(text.split("\n")[:-1])
        assert any(r.startswith("Brick 10.0.0.12:") and r.endswith("49152     0          N") for r in rows), rows
        await asyncio.sleep(0.3)  # >= 30 simulated seconds of writes
        first = await heal_counts()
        assert first[1] == "-" and int(first[0]) >= 50 and first[0] == first[2]
        await asyncio.sleep(0.1)
        assert int((await heal_counts())[0]) > int(first[0])  # still growing while the brick is down

        out, err, code = await hosts.run("master03.example.com", ["systemctl", "start", "crio"])  # type: ignore[attr-defined]
        assert code == 0, err
        assert st.brick(REG, "10.0.0.12").online
        await until(lambda: st.snapshot(gcomp(sim).now())["volumes"][0]["pending_heal"] == 0, timeout=30)
        assert await heal_counts() == ["0", "0", "0"]
        _, snap = await admin(sim)
        assert snap["max_hosts_down_at_once"] == 1
        reasons = [e["reason"] for e in snap["timeline"] if e["node"] == "master03.example.com"][1:]
        assert reasons == ["host runtime_stopped", "host runtime_started"]


async def test_python_aio_client_exec_prints_the_seed_table(gsim: ClusterSim) -> None:
    from kubernetes.aio import client, config
    from kubernetes.aio.stream import WsApiClient

    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(gsim.kubeconfig_path), client_configuration=cfg)
    async with WsApiClient(configuration=cfg) as api:
        core = client.CoreV1Api(api_client=api)
        out = await core.connect_get_namespaced_pod_exec(
            "glusterfs-storage-dz8qj", "glusterfs", command=["gluster", "volume", "status", REG],
            stderr=True, stdin=False, stdout=True, tty=False)
    assert join_wrapped(out.split("\n")[:-1]) == join_wrapped(seed_status_block() + [" "])


async def test_a_host_whose_runtime_is_down_at_start_runs_no_bricks(tmp_path: Path) -> None:
    hosts_section = {**HOSTS_SECTION, "hosts": {"master02.example.com": {
        "packages": ["cri-o"], "units": {"crio": {"enabled": True, "active": False}}, "runtime": "cri-o"}}}
    sim = ClusterSim(None, time_scale=0.01, kubeconfig_path=tmp_path / "kubeconfig",
                     component_sections={"hosts": hosts_section, "gluster": {**SECTION, "faults": []}})
    fill(sim.store)
    async with sim:
        st = gcomp(sim).state
        assert [b.online for b in st.all_bricks()] == [False, True, True]  # 10.0.0.11 is master02
        hosts: Any = sim.components["hosts"]
        _, err, code = await hosts.run("master02.example.com", ["systemctl", "start", "crio"])
        assert code == 0, err
        assert all(b.online for b in st.all_bricks())


async def test_reboot_with_a_disabled_runtime_keeps_bricks_down(tmp_path: Path) -> None:
    from clustersim.hosts import SessionDropped

    hosts_section = {**HOSTS_SECTION, "options": {"reboot_seconds": 20},
                     "hosts": {"master02.example.com": {"packages": ["cri-o"], "runtime": "cri-o",
                                                        "units": {"crio": {"enabled": False, "active": True}}}}}
    sim = ClusterSim(None, time_scale=0.01, kubeconfig_path=tmp_path / "kubeconfig",
                     component_sections={"hosts": hosts_section, "gluster": {**SECTION, "faults": []}})
    fill(sim.store)
    async with sim:
        st = gcomp(sim).state
        hosts: Any = sim.components["hosts"]
        with pytest.raises(SessionDropped):
            await hosts.run("master02.example.com", ["reboot"])
        await until(lambda: not st.brick(REG, "10.0.0.11").online)
        await until(lambda: hosts.host("master02.example.com").boot_count == 2 and hosts.host("master02.example.com").up)
        await asyncio.sleep(0.1)
        assert not st.brick(REG, "10.0.0.11").online  # crio is not enabled: nothing runs after the boot
        _, err, code = await hosts.run("master02.example.com", ["systemctl", "start", "crio"])
        assert code == 0, err
        assert st.brick(REG, "10.0.0.11").online
