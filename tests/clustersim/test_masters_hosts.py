"""Masters with simulated hosts (r5-vxlan-port): master-restart / master-logs on the host, the
host fault api_start_blocked_until_file (seed 002's missing LDAP CA), mirror pods, and the API
re-reading master-config from the host's file."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from clustersim.sim import ClusterSim
from tests.clustersim.test_masters_api import fetch
from tests.clustersim.test_openshift_dc import wait_for

SCALE = 0.05
CA = "/etc/origin/master/ldap_ca.crt"


def mirror(sim: ClusterSim, name: str) -> tuple[bool, int]:
    pod = sim.store.get("pods", name, "kube-system")
    (cs,) = pod["status"]["containerStatuses"]
    return cs["ready"], cs["restartCount"]


@pytest.mark.timeout(120)
async def test_master_restart_on_host_with_missing_ca_then_the_file_appears() -> None:
    async with ClusterSim("r5-vxlan-port", time_scale=SCALE) as sim:
        hosts, masters = sim.components["hosts"], sim.components["masters"]
        m = "ocp-master-01"
        assert mirror(sim, f"master-api-{m}") == (True, 0)
        assert {p["metadata"]["name"] for p in sim.store.list("pods", "kube-system")} >= {
            f"master-{w}-{n}" for w in ("api", "controllers", "etcd") for n in ("ocp-master-01", "ocp-master-02")}
        async with aiohttp.ClientSession() as s, s.post(f"{sim.url}/_sim/hosts/{m}/fault",
                                                          json={"fault": f"api_start_blocked_until_file={CA}"}) as r:
            assert r.status == 200
        out = await hosts.run(m, ["/usr/local/bin/master-restart", "api"])  # type: ignore[attr-defined]
        assert out == ("", "", 0)
        # Returns once the API is down: a readiness poll right after it cannot see the old one.
        assert await fetch(masters.api_url(m) + "/healthz/ready") is None  # type: ignore[attr-defined]
        await wait_for(lambda: mirror(sim, f"master-api-{m}") == (False, 1), what="mirror pod restarted")
        await asyncio.sleep(SCALE * 25)  # past restart_seconds (10): blocked by the missing CA
        assert await fetch(masters.api_url(m) + "/healthz/ready") is None  # type: ignore[attr-defined]
        logs, _, code = await hosts.run(m, ["/usr/local/bin/master-logs", "api", "api", "--tail=2"])  # type: ignore[attr-defined]
        assert code == 0
        assert logs.splitlines() == [
            "Invalid MasterConfig /etc/origin/master/master-config.yaml",
            f'  oauthConfig.identityProviders[0].provider.ca: Invalid value: "{CA}": could not read file: '
            f"stat {CA}: no such file or directory"]
        # The other masters keep the API (and the main endpoint) up.
        assert (await fetch(sim.url + "/api/v1/namespaces"))[0] == 200  # type: ignore[index]
        # Seed 002's fix: put the certificate where 3.10+ expects it.
        assert (await hosts.run(m, ["cp", "/etc/origin/master/master-config.yaml", CA]))[2] == 0  # type: ignore[attr-defined]
        await wait_for(lambda: masters.masters[m].api_up, what="api back")  # type: ignore[attr-defined]
        assert await fetch(masters.api_url(m) + "/healthz/ready") == (200, "ok")  # type: ignore[attr-defined]
        assert mirror(sim, f"master-api-{m}") == (True, 1)
        # The controllers log shows who leads (the scenario's leader, ocp-master-02).
        logs, _, _ = await hosts.run("ocp-master-02", ["master-logs", "controllers", "controllers"])  # type: ignore[attr-defined]
        assert "successfully acquired lease kube-system/openshift-master-controllers" in logs
        logs, _, _ = await hosts.run(m, ["master-logs", "controllers", "controllers", "--tail=5"])  # type: ignore[attr-defined]
        assert "attempting to acquire leader lease" in logs and "successfully acquired" not in logs
        # Not a master: the scripts are not installed.
        assert (await hosts.run("ocp-node-01", ["master-restart", "api"]))[2] == 127  # type: ignore[attr-defined]


@pytest.mark.timeout(120)
async def test_api_rereads_master_config_and_a_broken_file_keeps_it_down() -> None:
    async with ClusterSim("r5-vxlan-port", time_scale=SCALE) as sim:
        hosts, masters = sim.components["hosts"], sim.components["masters"]
        m = "ocp-master-03"
        path = "/etc/origin/master/master-config.yaml"
        h = hosts.host(m)  # type: ignore[attr-defined]
        good = h.files[path]
        h.files[path] = good.replace("  networkPluginName:", "  vxlanPort: 4889\n  networkPluginName:")
        await asyncio.wait_for(masters.restart(m, "api"), 30)  # type: ignore[attr-defined]
        assert masters.masters[m].api_config["vxlanPort"] == 4889  # type: ignore[attr-defined]
        h.files[path] = "networkConfig: [unbalanced\n"
        task = masters.restart(m, "api")  # type: ignore[attr-defined]
        await wait_for(lambda: any("could not load config file" in ln for ln in masters.masters[m].api_log),  # type: ignore[attr-defined]
                       what="config error logged")
        assert not masters.masters[m].api_up  # type: ignore[attr-defined]
        h.files[path] = good
        await asyncio.wait_for(task, 30)
        assert "vxlanPort" not in masters.masters[m].api_config  # type: ignore[attr-defined]


@pytest.mark.timeout(120)
async def test_rebooting_the_leading_master_takes_its_api_down_and_moves_the_lease() -> None:
    async with ClusterSim("r5-vxlan-port", time_scale=SCALE) as sim:
        hosts, masters = sim.components["hosts"], sim.components["masters"]
        m = "ocp-master-02"
        assert masters.leader == m  # type: ignore[attr-defined]
        hosts.request_reboot(hosts.host(m))  # type: ignore[attr-defined]
        await wait_for(lambda: not masters.masters[m].api_up, what="api down with the host")  # type: ignore[attr-defined]
        assert masters.leader == "ocp-master-03"  # type: ignore[attr-defined]
        assert await fetch(masters.api_url(m) + "/healthz/ready") is None  # type: ignore[attr-defined]
        assert (await fetch(sim.url + "/api/v1/nodes"))[0] == 200  # type: ignore[index]
        await wait_for(lambda: masters.masters[m].api_up, timeout=60, what="api back after the reboot")  # type: ignore[attr-defined]
        assert await fetch(masters.api_url(m) + "/healthz/ready") == (200, "ok")  # type: ignore[attr-defined]
        (_, down, up) = masters.availability()["masters"][m]["intervals"]  # type: ignore[attr-defined]
        assert down["state"] == "down" and down["end"] - down["start"] >= 60.0  # reboot_seconds + restart
        assert masters.leader == "ocp-master-03" and masters.masters[m].controllers_up  # type: ignore[attr-defined]
