"""The rollout preflight reads what the daemon's disruption decision depends on (OpenShift 4.16+),
against clustersim over real HTTP: MachineConfiguration/cluster's clusterPolicies, the rendered
config diff per current config, whether the API serves MachineConfigNodes, which nodes report
irreconcilableChanges, and the MachineHealthChecks covering the pool's nodes."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.testing import ActivityEnvironment

from activities.kube.gateway import KubeGateway
from activities.machineconfig.activities import MachineConfigActivities
from activities.machineconfig.models import PreflightInput, PreflightResult
from clustersim import ClusterSim

pytestmark = pytest.mark.timeout(120)

CURRENT = "rendered-worker-36e34af108e655dda7ba8ea053c7791b"
REGISTRIES_ONLY = "rendered-worker-f545564a866bce772bf3fb8e1a72a29d"
UNLISTED_FILE = "rendered-worker-2d9da3fc5a35ca72698d05d948ad6872"


async def _preflight(scenario: str, inp: PreflightInput) -> PreflightResult:
    async with ClusterSim(scenario, time_scale=0.01, start_agents=False) as sim:
        gw = KubeGateway.from_kubeconfig(sim.kubeconfig_path)
        try:
            acts = MachineConfigActivities(lambda: gw)
            res: PreflightResult = await asyncio.to_thread(ActivityEnvironment().run, acts.preflight_machineconfig_rollout, inp)
            return res
        finally:
            gw.close()


async def test_ocp421_preflight_carries_policies_and_the_diff() -> None:
    res = await _preflight("r1-ocp421", PreflightInput(pools=["worker"], target_configs={"worker": REGISTRIES_ONLY}))
    assert res.machine_config_nodes is True
    facts = res.pools[0].disruption
    assert facts is not None and facts.policies_current
    assert {"path": "/etc/chrony.conf", "actions": [{"type": "Restart", "restart": {"serviceName": "chronyd.service"}}]} \
        in facts.cluster_policies["files"]
    [change] = facts.changes
    assert (change.from_config, change.to_config, change.nodes) == (
        CURRENT, REGISTRIES_ONLY, ["qsu-worker-01", "qsu-worker-02", "qsu-worker-03"])
    assert change.file_paths == ["/etc/containers/registries.d/99-mirror.yaml"]
    assert not (change.unit_names or change.passwd or change.os_update or change.kargs or change.missing)

    assert res.pools[0].irreconcilable == {"qsu-worker-03": ["spec.config.storage.disks"]}
    [mhc] = res.pools[0].health_checks
    assert (mhc.namespace, mhc.name, mhc.paused, mhc.nodes, mhc.unhealthy_conditions, mhc.max_unhealthy) == (
        "openshift-machine-api", "qsu-worker-mhc", False, ["qsu-worker-01", "qsu-worker-02", "qsu-worker-03"],
        ["Ready=False for 300s", "Ready=Unknown for 300s"], "40%")

    res = await _preflight("r1-ocp421", PreflightInput(pools=["worker"], target_configs={"worker": UNLISTED_FILE}))
    assert res.pools[0].disruption is not None
    assert res.pools[0].disruption.changes[0].file_paths == ["/etc/sysctl.d/99-qsu-tuning.conf"]


async def test_an_older_cluster_has_no_facts() -> None:
    res = await _preflight("r1-ovn-interrupted", PreflightInput())
    assert res.machine_config_nodes is False
    assert all(p.disruption is None and not p.irreconcilable and not p.health_checks for p in res.pools)


async def test_the_network_migration_reads_the_pools_cert_expirys() -> None:
    """r1-ocp421's pools carry status.certExpirys; the kubelet signer expires in 73.5 days."""
    from datetime import UTC, datetime, timedelta

    from activities.network_migration.activities import NetworkMigrationActivities
    from activities.network_migration.models import MigrationStateInput

    async with ClusterSim("r1-ocp421", time_scale=0.01, start_agents=False) as sim:
        gw = KubeGateway.from_kubeconfig(sim.kubeconfig_path)
        try:
            acts = NetworkMigrationActivities(lambda: gw)
            state = await asyncio.to_thread(ActivityEnvironment().run, acts.read_migration_state, MigrationStateInput())
        finally:
            gw.close()
    worker = next(p for p in state.pools if p.name == "worker")
    signer = next(c for c in worker.cert_expirys if "kube-apiserver-to-kubelet-signer" in c.subject)
    assert signer.expiry is not None
    assert abs(signer.expiry - (datetime.now(UTC) + timedelta(hours=1764))) < timedelta(minutes=5)
    assert len(worker.cert_expirys) == 4


async def test_update_step_reads_openshift_4_from_cluster_version() -> None:
    """Issue 41 on OpenShift 4: the cluster's version is ClusterVersion version's newest Completed
    history entry (4.21.3, what `oc get clusterversion` shows), not /version's Kubernetes."""
    from activities.preflight.activities import PreflightActivities
    from activities.preflight.models import CheckPreconditionsInput, UpdateStep

    async with ClusterSim("r1-ocp421", time_scale=0.01, start_agents=False) as sim:
        gw = KubeGateway.from_kubeconfig(sim.kubeconfig_path)
        try:
            acts = PreflightActivities(lambda: gw)
            out = await ActivityEnvironment().run(acts.check_preconditions, CheckPreconditionsInput(preconditions=[
                UpdateStep(target_version="4.21.5"), UpdateStep(target_version="4.22.1"), UpdateStep(target_version="4.23.0"),
                UpdateStep(target_version="4.20.12")]))
        finally:
            gw.close()
    patch, minor, two, back = out.results
    assert [str(r.state) for r in out.results] == ["ok", "ok", "failed", "failed"]
    assert patch.detail == "4.21 -> 4.21: the same minor version (now 4.21.3, ClusterVersion version)"
    assert minor.detail == "4.21 -> 4.22: one minor version (now 4.21.3, ClusterVersion version)"
    assert two.detail.startswith("4.21 -> 4.23 is 2 minor versions at once: one minor version at a time (upgrade to 4.22 first")
    assert back.detail.startswith("4.21 -> 4.20 is a downgrade")
