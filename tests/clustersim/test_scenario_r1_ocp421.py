"""Scenario r1-ocp421: R1 on OpenShift 4.21 (MachineConfigNodes, node disruption policies).

Checks the pure rules (clustersim.mco.disruption against MCO release-4.21), what the API serves
(discovery, list/get/watch, the status subresource, kubectl's table), and the simulated daemon:
a registries.d-only change is applied without drain or reboot (crio reloaded on the host), an
unlisted file drains and reboots, and the MachineConfigNode phases move in the daemon's order.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from clustersim.agents.logic import ANN_DESIRED_CONFIG, ANN_DESIRED_DRAIN, ANN_LAST_APPLIED_DRAIN, ANN_STATE
from clustersim.mco import disruption as nd
from clustersim.mco.mcn import MCN
from clustersim.mco.model import MACHINECONFIGURATION
from clustersim.sim import ClusterSim
from tests.clustersim.test_tables_kubectl import kubectl, rows

CURRENT = "rendered-worker-36e34af108e655dda7ba8ea053c7791b"
REGISTRIES_ONLY = "rendered-worker-f545564a866bce772bf3fb8e1a72a29d"
UNLISTED_FILE = "rendered-worker-2d9da3fc5a35ca72698d05d948ad6872"
MC = "machineconfigs.machineconfiguration.openshift.io"
WORKER = "qsu-worker-01"


def _mc(files: list[tuple[str, str]], **spec: Any) -> dict[str, Any]:
    return {"spec": {"config": {"storage": {"files": [
        {"path": p, "contents": {"source": "data:," + c}} for p, c in files]}}, **spec}}


# ------------------------------------------------------------------ the rules (pure)


def test_cluster_policies_are_the_release_421_defaults_merged_with_the_spec() -> None:
    merged = nd.merge_cluster_policies({"files": [
        {"path": "/etc/containers/policy.json", "actions": [{"type": "Reboot"}]},
        {"path": "/etc/chrony.conf", "actions": [{"type": "Restart", "restart": {"serviceName": "chronyd.service"}}]}]})
    paths = [f["path"] for f in merged["files"]]
    assert paths[:8] == ["/var/lib/kubelet/config.json", "/etc/machine-config-daemon/no-reboot/containers-gpg.pub",
                         "/etc/containers/policy.json", "/etc/containers/registries.conf",
                         "/etc/containers/registries.d", "/etc/crio/policies", "/etc/nmstate/openshift",
                         "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"]
    assert merged["files"][2]["actions"] == [{"type": "Reboot"}]  # replaced in place
    assert paths[8] == "/etc/chrony.conf"  # appended
    assert merged["sshkey"] == {"actions": [{"type": "None"}]}
    assert "units" not in merged


@pytest.mark.parametrize(("files", "units", "ssh", "want"), [
    (["/etc/containers/registries.d/99-mirror.yaml"], [], False, [{"type": "Reload", "reload": {"serviceName": "crio.service"}}]),
    (["/etc/containers/registries.dx"], [], False, [{"type": "Reboot"}]),  # a sibling, not below the directory
    (["/var/lib/kubelet/config.json"], [], False, [{"type": "None"}]),
    (["/var/lib/kubelet/config.json", "/etc/containers/policy.json"], [], True,
     [{"type": "Reload", "reload": {"serviceName": "crio.service"}}]),  # None dropped next to others
    (["/etc/containers/policy.json", "/etc/sysctl.d/x.conf"], [], False, [{"type": "Reboot"}]),  # unlisted file
    ([], ["kubelet.service"], False, [{"type": "Reboot"}]),  # no unit policy
    ([], [], True, [{"type": "None"}]),
])
def test_actions_for_changes_follow_the_daemon(files: list[str], units: list[str], ssh: bool,
                                               want: list[dict[str, Any]]) -> None:
    assert nd.actions_for_changes(ssh, files, units, nd.merge_cluster_policies({})) == want


def test_any_reboot_wins_and_os_changes_always_reboot() -> None:
    pol = nd.merge_cluster_policies({"units": [{"name": "a.service", "actions": [{"type": "Reboot"}]}]})
    assert nd.actions_for_changes(False, ["/etc/containers/policy.json"], ["a.service"], pol) == [{"type": "Reboot"}]
    old, new = _mc([("/etc/containers/policy.json", "a")]), _mc([("/etc/containers/policy.json", "b")])
    assert nd.disruption_actions(old, new, pol) == [{"type": "Reload", "reload": {"serviceName": "crio.service"}}]
    assert nd.disruption_actions(old, _mc([("/etc/containers/policy.json", "b")], kernelArguments=["x"]),
                                 pol) == [{"type": "Reboot"}]
    assert nd.disruption_actions(old, old, pol) == [{"type": "None"}]


def test_registries_conf_drains_only_when_the_change_is_not_safe() -> None:
    base = '[[registry]]\nprefix = "r.example"\nlocation = "r.example"\n'
    safe = base + '[[registry.mirror]]\nlocation = "m.example"\npull-from-mirror = "digest-only"\n'
    unsafe = base.replace('location = "r.example"', 'location = "other.example"')
    old = _mc([(nd.REGISTRIES_CONF, base.replace("\n", "%0A"))])
    actions = [{"type": "Special"}]
    assert nd.drain_required(actions, old, _mc([(nd.REGISTRIES_CONF, safe.replace("\n", "%0A"))])) is False
    assert nd.drain_required(actions, old, _mc([(nd.REGISTRIES_CONF, unsafe.replace("\n", "%0A"))])) is True
    assert nd.drain_required([{"type": "Drain"}], old, old) is True
    assert nd.drain_required([{"type": "Restart", "restart": {"serviceName": "x"}}], old, old) is False


# ------------------------------------------------------------------ what the API serves


async def test_discovery_and_kubectl_columns() -> None:
    async with ClusterSim("r1-ocp421", time_scale=0.02) as sim, aiohttp.ClientSession() as http:
        async with http.get(f"{sim.url}/apis/machineconfiguration.openshift.io/v1") as r:
            doc = await r.json()
        mcn = next(x for x in doc["resources"] if x["name"] == "machineconfignodes")
        assert (mcn["kind"], mcn["namespaced"]) == ("MachineConfigNode", False)
        assert any(x["name"] == "machineconfignodes/status" for x in doc["resources"])
        async with http.get(f"{sim.url}/apis/operator.openshift.io/v1") as r:
            assert any(x["name"] == "machineconfigurations" for x in (await r.json())["resources"])

        table = rows(await kubectl(sim, "get", "machineconfignodes"))
        assert table[0] == ["NAME", "POOLNAME", "DESIREDCONFIG", "CURRENTCONFIG", "UPDATED", "AGE"]
        worker = next(r for r in table if r[0] == WORKER)
        assert worker[1:5] == ["worker", CURRENT, CURRENT, "True"]
        wide = rows(await kubectl(sim, "get", "machineconfignodes", "-o", "wide"))
        assert wide[0][6:] == ["UPDATEPREPARED", "UPDATEEXECUTED", "UPDATEPOSTACTIONCOMPLETE", "UPDATECOMPLETE",
                               "RESUMED", "UPDATEDFILESANDOS", "CORDONEDNODE", "DRAINEDNODE", "REBOOTEDNODE",
                               "UNCORDONEDNODE"]
        mc = json.loads(await kubectl(sim, "get", "machineconfigurations.operator.openshift.io", "cluster", "-o", "json"))
        files = mc["status"]["nodeDisruptionPolicyStatus"]["clusterPolicies"]["files"]
        assert {"path": "/etc/containers/registries.d",
                "actions": [{"type": "Reload", "reload": {"serviceName": "crio.service"}}]} in files
        irr = json.loads(await kubectl(sim, "get", "machineconfignode", "qsu-worker-03", "-o", "json"))
        assert irr["status"]["irreconcilableChanges"][0]["fieldPath"] == "spec.config.storage.disks"


async def test_older_scenarios_do_not_serve_the_kinds() -> None:
    async with ClusterSim("r1-sdn-to-ovn", time_scale=0.02) as sim, aiohttp.ClientSession() as http:
        async with http.get(f"{sim.url}/apis/machineconfiguration.openshift.io/v1") as r:
            assert "machineconfignodes" not in {x["name"] for x in (await r.json())["resources"]}
        async with http.get(f"{sim.url}/apis/machineconfiguration.openshift.io/v1/machineconfignodes") as r:
            assert r.status == 404


async def test_status_subresource_and_watch() -> None:
    base = "/apis/machineconfiguration.openshift.io/v1/machineconfignodes"
    async with ClusterSim("r1-ocp421", time_scale=0.02) as sim, aiohttp.ClientSession() as http:
        async with http.get(f"{sim.url}{base}/{WORKER}") as r:
            obj = await r.json()
        async with http.get(f"{sim.url}{base}") as r:
            rv = (await r.json())["metadata"]["resourceVersion"]  # the list's: nothing older is replayed
        gen = obj["metadata"]["generation"]
        watch = await http.get(f"{sim.url}{base}?watch=true&resourceVersion={rv}&timeoutSeconds=5")
        patch = {"status": {"conditions": [dict(c, status="Unknown") if c["type"] == "Cordoned" else c
                                           for c in obj["status"]["conditions"]]},
                 "spec": {"pool": {"name": "ignored"}}}
        async with http.patch(f"{sim.url}{base}/{WORKER}/status", data=json.dumps(patch),
                              headers={"Content-Type": "application/merge-patch+json"}) as r:
            assert r.status == 200, await r.text()
            got = await r.json()
        assert got["spec"]["pool"]["name"] == "worker"  # the status subresource ignores spec
        assert got["metadata"]["generation"] == gen
        line = json.loads(await asyncio.wait_for(watch.content.readline(), 5))
        watch.close()
        assert line["type"] == "MODIFIED" and line["object"]["kind"] == "MachineConfigNode"
        assert {c["type"]: c["status"] for c in line["object"]["status"]["conditions"]}["Cordoned"] == "Unknown"


# ------------------------------------------------------------------ the daemon


async def _until(pred: Callable[[], Any], timeout: float = 30.0) -> Any:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not (got := pred()):
        assert loop.time() < end, "condition not reached in time"
        await asyncio.sleep(0.02)
    return got


async def _roll_one(sim: ClusterSim, node: str, target: str) -> tuple[list[str], list[tuple[str, ...]]]:
    """Stand in for the controller on one node: hand out ``target``, answer every desiredDrain
    (cordon for drain-X, uncordon for uncordon-X), until Done. Returns the desiredDrain values
    the daemon asked for and the MCN phase snapshots (distinct, in order)."""
    asked: list[str] = []
    phases: list[tuple[str, ...]] = []
    order = ("UpdatePrepared", "UpdateExecuted", "Drained", "AppliedFilesAndOS", "RebootedNode",
             "UpdatePostActionComplete", "Resumed", "Updated")
    with sim.store.subscribe([MCN, "nodes"], names=[node]) as sub:
        sim.store.mutate("nodes", node, None,
                         lambda o: o["metadata"]["annotations"].__setitem__(ANN_DESIRED_CONFIG, target))
        loop = asyncio.get_running_loop()
        end = loop.time() + 30
        done = False
        while True:
            ev = await asyncio.wait_for(sub.get(), max(0.1, end - loop.time()))
            if ev.resource == MCN:
                conds = {c["type"]: c["status"] for c in ev.object.get("status", {}).get("conditions") or []}
                snap = tuple(f"{t}={conds.get(t)}" for t in order)
                if not phases or phases[-1] != snap:
                    phases.append(snap)
                if done and snap[-1] == "Updated=True":
                    return asked, phases
                continue
            ann = ev.object["metadata"].get("annotations") or {}
            want = ann.get(ANN_DESIRED_DRAIN, "")
            if want.endswith(target) and (not asked or asked[-1] != want):
                asked.append(want)
            if want.endswith(target) and ann.get(ANN_LAST_APPLIED_DRAIN) != want:
                def answer(o: dict[str, Any], w: str = want) -> None:
                    o["spec"]["unschedulable"] = w.startswith("drain-")
                    o["metadata"]["annotations"][ANN_LAST_APPLIED_DRAIN] = w
                sim.store.mutate("nodes", node, None, answer)
            if ann.get(ANN_STATE) == "Done" and ann.get("machineconfiguration.openshift.io/currentConfig") == target:
                done = True
            if done and phases and phases[-1][-1] == "Updated=True":
                return asked, phases


def _boot_id(sim: ClusterSim, node: str) -> str:
    return str(sim.store.get("nodes", node)["status"]["nodeInfo"]["bootID"])


async def test_registries_d_change_reloads_crio_without_drain_or_reboot() -> None:
    async with ClusterSim("r1-ocp421", time_scale=0.02) as sim:
        boot = _boot_id(sim, WORKER)
        host = sim.components["hosts"].hosts[WORKER]
        asked, phases = await _roll_one(sim, WORKER, REGISTRIES_ONLY)
        assert asked == [f"uncordon-{REGISTRIES_ONLY}"]  # no drain-X: the daemon asked only for the uncordon
        assert _boot_id(sim, WORKER) == boot and host.boot_count == 1
        ran = [r.argv for r in host.log if r.via == "machine-config-daemon"]
        assert ran == [["systemctl", "reload", "crio.service"]]
        assert sim.agents is not None
        rec = sim.agents.mcd_updates[-1]
        assert (rec.drain, rec.reboot, rec.actions) == (
            False, False, [{"type": "Reload", "reload": {"serviceName": "crio.service"}}])
        # The daemon's order: prepared, drain not required, files applied, post action, resumed, updated.
        firsts = [next(i for i, s in enumerate(phases) if f"{t}=True" in s or (t == "Drained" and "Drained=False" in s
                                                                                and "UpdateExecuted=Unknown" in s))
                  for t in ("UpdatePrepared", "Drained", "AppliedFilesAndOS", "UpdatePostActionComplete", "Resumed",
                            "Updated")]
        assert firsts == sorted(firsts), phases
        assert not any("RebootedNode=True" in s or "RebootedNode=Unknown" in s for s in phases)
        mcn = sim.store.get(MCN, WORKER)
        assert mcn["spec"]["configVersion"]["desired"] == REGISTRIES_ONLY
        assert mcn["status"]["configVersion"] == {"current": REGISTRIES_ONLY, "desired": REGISTRIES_ONLY}
        reasons = [e["reason"] for e in sim.store.list("events", "default")
                   if e["involvedObject"]["name"] == WORKER and e["source"]["component"] == "machineconfigdaemon"]
        assert "ServiceReload" in reasons and "Reboot" not in reasons and "Drain" not in reasons


async def test_unlisted_file_drains_and_reboots() -> None:
    async with ClusterSim("r1-ocp421", time_scale=0.02) as sim:
        boot = _boot_id(sim, WORKER)
        asked, phases = await _roll_one(sim, WORKER, UNLISTED_FILE)
        assert asked == [f"drain-{UNLISTED_FILE}", f"uncordon-{UNLISTED_FILE}"]
        assert _boot_id(sim, WORKER) != boot
        host = sim.components["hosts"].hosts[WORKER]
        assert host.boot_id == _boot_id(sim, WORKER) and host.boot_count == 2
        assert not [r for r in host.log if r.via == "machine-config-daemon"]
        assert any("RebootedNode=Unknown" in s for s in phases) and any("RebootedNode=True" in s for s in phases)
        assert phases[-1][-1] == "Updated=True"


async def test_policy_change_is_synced_by_the_operator() -> None:
    async with ClusterSim("r1-ocp421", time_scale=0.02) as sim:
        def fn(o: dict[str, Any]) -> None:
            o["spec"]["nodeDisruptionPolicy"]["files"].append(
                {"path": "/etc/sysctl.d", "actions": [{"type": "Restart", "restart": {"serviceName": "systemd-sysctl.service"}}]})
            o["metadata"]["generation"] = o["metadata"].get("generation", 1) + 1
        sim.store.mutate(MACHINECONFIGURATION, "cluster", None, fn)
        await _until(lambda: sim.store.get(MACHINECONFIGURATION, "cluster")["status"]["observedGeneration"] == 2)
        files = sim.store.get(MACHINECONFIGURATION, "cluster")["status"]["nodeDisruptionPolicyStatus"]["clusterPolicies"]["files"]
        assert files[-1]["path"] == "/etc/sysctl.d"


async def test_the_simulated_controller_writes_its_conditions() -> None:
    """With the controller running (``mcc.running``) it rolls the pool's target and writes its
    side of each MachineConfigNode (MCO ``drain_controller.go``): Uncordoned and UpdateComplete
    True at the uncordon, Cordoned and Drained only when the daemon asked for a drain. The
    daemon's final ``Updated`` resets them to False (``upgrade_monitor.go``), so every status a
    condition took is recorded from the store's events."""
    MCP = "machineconfigpools.machineconfiguration.openshift.io"
    async with ClusterSim("r1-ocp421", time_scale=0.01, component_sections={"mcc": {"running": True}}) as sim:
        workers = [f"qsu-worker-0{i}" for i in (1, 2, 3)]
        seen: dict[str, set[str]] = {n: set() for n in workers}

        async def record() -> None:
            with sim.store.subscribe([MCN], names=workers) as sub:
                async for ev in sub:
                    for c in (ev.object.get("status") or {}).get("conditions") or []:
                        if c["status"] == "True":
                            seen[ev.object["metadata"]["name"]].add(c["type"])

        def at(target: str) -> bool:
            return all(sim.store.get("nodes", n)["metadata"]["annotations"].get(
                "machineconfiguration.openshift.io/currentConfig") == target
                and {c["type"]: c["status"] for c in sim.store.get(MCN, n)["status"]["conditions"]}["Updated"] == "True"
                for n in workers)

        task = asyncio.create_task(record())
        await _until(lambda: at(REGISTRIES_ONLY), 60)
        await asyncio.sleep(0.05)
        for n in workers:
            assert {"Uncordoned", "UpdateComplete", "UpdatePostActionComplete"} <= seen[n], (n, seen[n])
            assert not {"Cordoned", "Drained", "RebootedNode"} & seen[n], (n, seen[n])
            seen[n].clear()
        assert all(w.startswith("uncordon-") for _, w in sim.components["mcc"].drains)

        sim.store.mutate(MCP, "worker", None, lambda o: o["spec"]["configuration"].__setitem__("name", UNLISTED_FILE))
        await _until(lambda: at(UNLISTED_FILE), 60)
        await asyncio.sleep(0.05)
        task.cancel()
        for n in workers:
            assert {"Cordoned", "Drained", "Uncordoned", "UpdateComplete", "RebootedNode"} <= seen[n], (n, seen[n])
