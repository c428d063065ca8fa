"""Masters: per-master API listeners, restarts, the main endpoint, availability and leadership."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from clustersim.openshift.kinds import CLUSTERNETWORK
from clustersim.sim import ClusterSim
from tests.clustersim.test_openshift_dc import SCALE, ocp_scenario, wait_for

MASTERS = ["node-0", "node-1", "node-2"]


def masters_section(**extra: Any) -> dict[str, Any]:
    return {"restart_seconds": 20, "leader": "node-0", "masters": [{"name": n} for n in MASTERS], **extra}


async def fetch(url: str) -> tuple[int, str] | None:
    """(status, body) of a GET, or None when the connection is refused."""
    try:
        async with aiohttp.ClientSession() as s, s.get(url, timeout=aiohttp.ClientTimeout(total=5)) as r:
            return r.status, await r.text()
    except aiohttp.ClientConnectorError:
        return None


@pytest.mark.timeout(120)
async def test_per_master_api_restart_and_main_endpoint_availability() -> None:
    async with ClusterSim(ocp_scenario([], masters=masters_section()), time_scale=SCALE) as sim:
        masters = sim.components["masters"]
        for m in MASTERS:
            assert await fetch(masters.api_url(m) + "/healthz/ready") == (200, "ok")
            # Each master serves the same store.
            status, body = await fetch(masters.api_url(m) + "/api/v1/nodes/node-2") or (0, "")
            assert status == 200 and '"name":"node-2"' in body.replace(" ", "")

        task = masters.restart("node-0", "api")
        await wait_for(lambda: not masters.masters["node-0"].api_up, what="api down")
        assert await fetch(masters.api_url("node-0") + "/healthz/ready") is None  # connection refused
        assert (await fetch(sim.url + "/api/v1/nodes"))[0] == 200  # two masters still up
        await asyncio.wait_for(task, 30)
        assert await fetch(masters.api_url("node-0") + "/healthz/ready") == (200, "ok")
        av = masters.availability()
        states = [i["state"] for i in av["masters"]["node-0"]["intervals"]]
        assert states == ["up", "down", "up"]
        down = av["masters"]["node-0"]["intervals"][1]
        assert down["end"] - down["start"] >= 19.0  # restart_seconds, in simulated seconds
        assert av["zero_masters_up"] == []

        # All three at once: the main endpoint refuses connections meanwhile.
        tasks = [masters.restart(m, "api") for m in MASTERS]
        await wait_for(lambda: not any(s.api_up for s in masters.masters.values()), what="all down")
        await wait_for(lambda: masters.availability()["zero_masters_up"], what="zero interval")
        assert await fetch(sim.url + "/api/v1/nodes") is None
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
        assert (await fetch(sim.url + "/api/v1/nodes"))[0] == 200
        av = masters.availability()
        (zero,) = av["zero_masters_up"]
        assert zero["end"] is not None and zero["end"] > zero["start"]
        # The admin endpoint serves the same document.
        status, body = await fetch(sim.url + "/_sim/api/availability") or (0, "")
        assert status == 200 and '"zero_masters_up"' in body


@pytest.mark.timeout(120)
async def test_api_blocked_until_file_then_started_by_clearing_the_fault() -> None:
    section = masters_section(faults={"node-0": ["api_start_blocked_until_file=/etc/origin/master/ldap_ca.crt"]})
    async with ClusterSim(ocp_scenario([], masters=section), time_scale=SCALE) as sim:
        masters = sim.components["masters"]
        masters.restart("node-0", "api")
        st = masters.masters["node-0"]
        await wait_for(lambda: any("Invalid MasterConfig" in ln for ln in st.api_log), what="log error")
        await asyncio.sleep(SCALE * 40)  # twice restart_seconds: still down
        assert not st.api_up and await fetch(masters.api_url("node-0") + "/healthz/ready") is None
        err = next(ln for ln in st.api_log if "provider.ca" in ln)
        assert err == ('  oauthConfig.identityProviders[0].provider.ca: Invalid value: "/etc/origin/master/ldap_ca.crt": '
                       "could not read file: stat /etc/origin/master/ldap_ca.crt: no such file or directory")
        async with aiohttp.ClientSession() as s:
            async with s.post(sim.url + "/_sim/masters/node-0/fault",
                              json={"remove": ["api_start_blocked_until_file=/etc/origin/master/ldap_ca.crt"]}) as r:
                assert r.status == 200
        await wait_for(lambda: st.api_up, what="api up after the fault is cleared")
        assert await fetch(masters.api_url("node-0") + "/healthz/ready") == (200, "ok")


@pytest.mark.timeout(120)
async def test_leader_change_recreates_clusternetwork_from_the_new_leaders_config() -> None:
    # node-0 (leader) has the edited config (4889); node-1 still the old one (no vxlanPort).
    section = masters_section(masters=[{"name": "node-0", "network_config": {"vxlanPort": 4889}},
                                       {"name": "node-1"}, {"name": "node-2"}])
    async with ClusterSim(ocp_scenario([], masters=section), time_scale=SCALE) as sim:
        masters = sim.components["masters"]
        cn = sim.store.get(CLUSTERNETWORK, "default")  # created at start by the leader
        assert cn["vxlanPort"] == 4889 and cn["clusterNetworks"] == [{"CIDR": "10.128.0.0/14", "hostSubnetLength": 9}]
        cm = sim.store.get("configmaps", "openshift-master-controllers", "kube-system")
        assert '"holderIdentity": "node-0"' in cm["metadata"]["annotations"]["control-plane.alpha.kubernetes.io/leader"]

        # Hazard (spec §7.3 F): delete the object, restart the leader's controllers: the next
        # leader runs the SDN master's start with ITS config and re-creates it with 4789.
        sim.store.delete(CLUSTERNETWORK, "default")
        task = masters.restart("node-0", "controllers")
        await wait_for(lambda: masters.leader == "node-1", what="leadership moved")
        cn = await wait_for(lambda: sim.store.try_get(CLUSTERNETWORK, "default"), what="re-created")
        assert cn["vxlanPort"] == 4789
        await asyncio.wait_for(task, 30)
        assert masters.leader == "node-1"  # a restarted ex-leader does not take the lease back
        # An existing ClusterNetwork is never updated by a new leader.
        masters.restart("node-1", "controllers")
        await wait_for(lambda: masters.leader == "node-2", what="leadership moved again")
        assert sim.store.get(CLUSTERNETWORK, "default")["vxlanPort"] == 4789
        # The OpenShift controllers pause while no master's controllers run.
        ctl = masters.controllers
        assert ctl is not None and ctl.active
        tasks = [masters.restart(m, "controllers") for m in MASTERS]
        await wait_for(lambda: not ctl.active, what="controllers paused")
        assert masters.leader is None
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
        assert ctl.active and masters.leader in MASTERS
