"""Server-side Table printing and node Leases, seen through real kubectl 1.37."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp

from clustersim.agents.logic import ANN_DESIRED_CONFIG, ANN_STATE
from clustersim.printers import human_duration, pod_status_cells
from clustersim.scenario import load_scenario
from clustersim.sim import ClusterSim
from tests.support.smallcluster import kubectl_binary

KUBECTL = kubectl_binary()  # next to the interpreter, else on PATH
MCP = "machineconfigpools.machineconfiguration.openshift.io"
PENDING_ROUTER = "router-default-796df5847b-h8bm4"


async def kubectl(sim: ClusterSim, *args: str) -> str:
    """Real kubectl against ``sim``; returns stdout, fails the test on a non-zero exit."""
    proc = await asyncio.create_subprocess_exec(KUBECTL, "--kubeconfig", str(sim.kubeconfig_path), *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


def rows(text: str) -> list[list[str]]:
    """kubectl's table split into cells (columns separated by 2+ spaces)."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.strip().splitlines()]


async def until(pred: Callable[[], Any], timeout: float = 30) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        got = pred()
        if got:
            return got
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


async def test_r2_symptoms_through_kubectl(tmp_path: Path) -> None:
    sc = load_scenario("r2-pdb-blocked")
    sc.options.drain_deadline_seconds = 60  # 0.6 real seconds at this time scale
    async with ClusterSim(sc, time_scale=0.01, kubeconfig_path=tmp_path / "kubeconfig") as sim:
        node = "okd-worker-01"
        new = sim.store.get(MCP, "worker")["spec"]["configuration"]["name"]
        sim.store.mutate("nodes", node, None,
                         lambda n: n["metadata"]["annotations"].__setitem__(ANN_DESIRED_CONFIG, new))
        assert "cordoned" in await kubectl(sim, "cordon", node)
        table = rows(await kubectl(sim, "get", "nodes"))
        assert table[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
        by_name = {r[0]: r for r in table[1:]}
        assert by_name[node][1:3] == ["Ready,SchedulingDisabled", "worker"]
        assert by_name["okd-master-01"][1:3] == ["Ready", "master"]
        assert by_name[node][4] == "v1.27.8+4fab27b"

        await until(lambda: sim.store.get("nodes", node)["metadata"]["annotations"][ANN_STATE] == "Degraded")
        await until(lambda: sim.store.get(MCP, "worker")["status"].get("degradedMachineCount") == 1)
        mcp = rows(await kubectl(sim, "get", "mcp"))
        assert mcp[0] == ["NAME", "CONFIG", "UPDATED", "UPDATING", "DEGRADED", "MACHINECOUNT", "READYMACHINECOUNT",
                          "UPDATEDMACHINECOUNT", "DEGRADEDMACHINECOUNT", "AGE"]
        worker = next(r for r in mcp[1:] if r[0] == "worker")
        assert worker[2:9] == ["False", "True", "True", "1", "0", "0", "1"]
        assert worker[1].startswith("rendered-worker-")

        pods = rows(await kubectl(sim, "get", "pods", "-A"))
        assert pods[0] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        router = next(r for r in pods if r[1] == PENDING_ROUTER)
        assert router[0] == "openshift-ingress" and router[2:5] == ["0/1", "Pending", "0"]
        assert all(r[3] == "Running" for r in pods[1:] if r[1] != PENDING_ROUTER)

        wide = rows(await kubectl(sim, "get", "pods", "-n", "openshift-ingress", "-o", "wide"))
        assert wide[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE",
                           "READINESS GATES"]
        assert next(r for r in wide if r[0] == PENDING_ROUTER)[5:7] == ["<none>", "<none>"]

        events = rows(await kubectl(sim, "get", "events", "-A"))
        assert events[0] == ["NAMESPACE", "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
        ev = next(r for r in events if r[3] == "FailedScheduling")
        assert ev[0] == "openshift-ingress" and ev[2] == "Warning" and ev[4] == f"pod/{PENDING_ROUTER}"
        assert ev[5].startswith("0/4 nodes are available:")

        pdb = rows(await kubectl(sim, "get", "pdb", "-A"))
        assert pdb[0] == ["NAMESPACE", "NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"]
        assert pdb[1][1:5] == ["router-default", "1", "N/A", "0"]
        deploy = rows(await kubectl(sim, "get", "deploy", "-n", "openshift-ingress"))
        assert deploy[0] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"] and deploy[1][1] == "1/2"
        ds = rows(await kubectl(sim, "get", "ds", "-A"))
        assert ds[0][:8] == ["NAMESPACE", "NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE",
                             "NODE SELECTOR"]
        rs = rows(await kubectl(sim, "get", "rs", "-A"))
        assert rs[0] == ["NAMESPACE", "NAME", "DESIRED", "CURRENT", "READY", "AGE"]
        mc = rows(await kubectl(sim, "get", "mc"))
        assert mc[0] == ["NAME", "GENERATEDBYCONTROLLER", "IGNITIONVERSION", "AGE"]
        assert mc[1][-2] == "3.2.0"
        sim.store.create("networks.config.openshift.io", {"metadata": {"name": "cluster"}, "spec": {}})
        generic = rows(await kubectl(sim, "get", "networks.config.openshift.io"))
        assert generic[0] == ["NAME", "AGE"]

        everything = await kubectl(sim, "get", "all", "-n", "openshift-ingress")
        assert f"pod/{PENDING_ROUTER}" in everything and "deployment.apps/router-default" in everything

        described = await kubectl(sim, "describe", "node", node)
        assert "Failed to get lease" not in described
        assert f"HolderIdentity:  {node}" in described


async def test_table_http_options(tmp_path: Path) -> None:
    async with ClusterSim("r2-pdb-blocked", time_scale=0.01, start_agents=False,
                          kubeconfig_path=tmp_path / "kubeconfig") as sim:
        url = f"{sim.url}/api/v1/nodes"
        v1 = "application/json;as=Table;v=v1;g=meta.k8s.io"
        async with aiohttp.ClientSession() as http:
            async def get(u: str, accept: str) -> Any:
                async with http.get(u, headers={"Accept": accept}) as resp:
                    assert resp.status == 200
                    return await resp.json()
            table = await get(url, f"{v1},application/json")
            assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
            assert [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0] == \
                ["Name", "Status", "Roles", "Age", "Version"]
            assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
            assert "spec" not in table["rows"][0]["object"]
            full = await get(f"{url}?includeObject=Object", v1)
            assert full["rows"][0]["object"]["kind"] == "Node"
            bare = await get(f"{url}?includeObject=None", v1)
            assert "object" not in bare["rows"][0]
            beta = await get(f"{url}/okd-master-01", "application/json;as=Table;v=v1beta1;g=meta.k8s.io")
            assert beta["apiVersion"] == "meta.k8s.io/v1beta1" and len(beta["rows"]) == 1
            plain = await get(url, "application/json")
            assert plain["kind"] == "NodeList"
            async with http.get(f"{url}?includeObject=Bogus", headers={"Accept": v1}) as resp:
                assert resp.status == 400


def test_human_duration_matches_apimachinery() -> None:
    cases = {0: "0s", 119: "119s", 120: "2m", 150: "2m30s", 600: "10m", 10799: "179m", 3 * 3600 + 1200: "3h20m",
             8 * 3600: "8h", 47 * 3600: "47h", 50 * 3600: "2d2h", 30 * 86400: "30d", 800 * 86400: "2y70d",
             9 * 365 * 86400: "9y"}
    assert {s: human_duration(s) for s in cases} == cases


def test_pod_status_cells() -> None:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    earlier = (now - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def pod(statuses: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        p: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
                             "status": {"phase": "Running", "containerStatuses": statuses}}
        p["metadata"].update(extra.get("meta", {}))
        p["spec"].update(extra.get("spec", {}))
        p["status"].update(extra.get("status", {}))
        return p

    running = {"name": "a", "ready": True, "restartCount": 0, "state": {"running": {}}}
    crash = {"name": "b", "ready": False, "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
             "lastState": {"terminated": {"exitCode": 1, "finishedAt": earlier}}}
    assert pod_status_cells(pod([running, crash]), now) == ("1/2", "CrashLoopBackOff", "4 (5m ago)")
    assert pod_status_cells(pod([running, dict(running, name="b")]), now) == ("2/2", "Running", "0")
    assert pod_status_cells(pod([running], meta={"deletionTimestamp": earlier}), now)[1] == "Terminating"
    init = pod([], spec={"initContainers": [{"name": "i"}]},
               status={"phase": "Pending", "initContainerStatuses": [{"name": "i", "state": {"running": {}}}]})
    assert pod_status_cells(init, now) == ("0/2", "Init:0/1", "0")


async def test_kubectl_get_watch_prints_table_rows(tmp_path: Path) -> None:
    """`kubectl get nodes -w` gets one-row Tables per event (columns only in the first event)."""
    async with ClusterSim("r2-pdb-blocked", time_scale=0.01, start_agents=False,
                          kubeconfig_path=tmp_path / "kubeconfig") as sim:
        proc = await asyncio.create_subprocess_exec(
            KUBECTL, "--kubeconfig", str(sim.kubeconfig_path), "get", "nodes", "-w", "--request-timeout=20s",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert proc.stdout is not None
        try:
            lines = [(await asyncio.wait_for(proc.stdout.readline(), 30)).decode() for _ in range(5)]
            assert lines[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
            sim.store.mutate("nodes", "okd-worker-01", None, lambda n: n["spec"].__setitem__("unschedulable", True))
            changed = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().split()
            assert changed[:3] == ["okd-worker-01", "Ready,SchedulingDisabled", "worker"]
        finally:
            proc.kill()
            await proc.wait()
        async with aiohttp.ClientSession() as http, http.get(
                f"{sim.url}/api/v1/nodes?watch=true&resourceVersion=0",
                headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}) as resp:
            first, second = [json.loads(await resp.content.readline()) for _ in range(2)]
        assert first["object"]["kind"] == "Table" and len(first["object"]["columnDefinitions"]) == 10
        assert second["object"]["columnDefinitions"] == [] and len(second["object"]["rows"]) == 1
