"""DeploymentConfig / ReplicationController controllers and the other OpenShift 3.11 kinds.

Through real HTTP: kubectl gets and patches the DC (discovery of apps.openshift.io), the sim's
scheduler places the RC's pods, and a DC patched to a nodeSelector no node has times out with the
real FailedScheduling message, its old RC scaled back.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from clustersim.openshift.kinds import CLUSTERNETWORK, CRONJOB, DC, RC, STS
from clustersim.scenario import Scenario
from clustersim.sim import ClusterSim
from tests.support.smallcluster import kubectl_binary

RENDERED = "rendered-worker-" + "0" * 32
SCALE = 0.05  # real seconds per simulated second


def ocp_scenario(objects: list[dict[str, Any]], **sections: Any) -> Scenario:
    """3 nodes (2 labelled region=infra) and the given raw objects."""
    nodes = [{"name": f"node-{i}", "roles": ["compute"], "config": RENDERED,
              "labels": {"region": "infra"} if i < 2 else {"region": "primary"}} for i in range(3)]
    return Scenario.model_validate({
        "name": "dc-test", "description": "OpenShift 3.11 DC test cluster",
        "options": {"pod_start_seconds": 2},
        "machine_configs": [{"name": "00-worker", "role": "worker", "created": "2024-01-01T00:00:00Z"}],
        "rendered_configs": [{"name": RENDERED, "pool": "worker", "sources": ["00-worker"],
                              "created": "2024-01-01T00:00:00Z"}],
        "nodes": nodes, "objects": objects, **sections})


def registry_dc(timeout: int = 60) -> dict[str, Any]:
    return {"apiVersion": "apps.openshift.io/v1", "kind": "DeploymentConfig",
            "metadata": {"name": "docker-registry", "namespace": "default", "labels": {"docker-registry": "default"}},
            "spec": {"replicas": 1, "selector": {"docker-registry": "default"},
                     "strategy": {"type": "Rolling", "rollingParams": {"timeoutSeconds": timeout}},
                     "triggers": [{"type": "ConfigChange"}],
                     "template": {"metadata": {"labels": {"docker-registry": "default"}},
                                  "spec": {"nodeSelector": {"region": "infra"},
                                           "containers": [{"name": "registry",
                                                           "image": "docker.io/openshift/origin-docker-registry:v3.9.0"}]}}}}


async def wait_for(pred: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        got = pred()
        if got:
            return got
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def ann(obj: dict[str, Any] | None, key: str) -> str | None:
    return ((obj or {}).get("metadata", {}).get("annotations") or {}).get(key)


def cond(obj: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in obj.get("status", {}).get("conditions") or [] if c["type"] == ctype)


async def kubectl(sim: ClusterSim, *args: str) -> subprocess.CompletedProcess[str]:
    """Real kubectl in a thread (the sim serves on this event loop)."""
    return await asyncio.to_thread(subprocess.run, [kubectl_binary(), "--kubeconfig", str(sim.kubeconfig_path), *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.timeout(120)
async def test_dc_rolls_out_then_times_out_on_a_node_selector_no_node_has() -> None:
    sc = ocp_scenario([registry_dc()], masters={"masters": [{"name": "node-0"}]})
    async with ClusterSim(sc, time_scale=SCALE) as sim:
        store = sim.store
        rc1 = await wait_for(lambda: (r := store.try_get(RC, "docker-registry-1", "default"))
                             and ann(r, "openshift.io/deployment.phase") == "Complete" and r, what="rc -1 Complete")
        assert ann(rc1, "openshift.io/deployment-config.name") == "docker-registry"
        assert ann(rc1, "openshift.io/deployment-config.latest-version") == "1"
        assert rc1["spec"]["selector"] == {"docker-registry": "default", "deployment": "docker-registry-1",
                                           "deploymentconfig": "docker-registry"}
        pods = store.list("pods", "default", label_selector="deployment=docker-registry-1")
        assert len(pods) == 1 and pods[0]["spec"]["nodeName"] in ("node-0", "node-1")
        assert pods[0]["metadata"]["labels"]["deploymentconfig"] == "docker-registry"
        dc = await wait_for(lambda: (d := store.get(DC, "docker-registry", "default"))
                            and d["status"].get("availableReplicas") == 1 and d, what="dc available")
        assert dc["status"]["latestVersion"] == 1 and dc["status"]["updatedReplicas"] == 1
        assert cond(dc, "Available")["status"] == "True"
        assert cond(dc, "Progressing")["reason"] == "NewReplicationControllerAvailable"

        # kubectl sees the kind through discovery (short name dc) and patches the template.
        got = await kubectl(sim, "get", "dc", "-n", "default", "-o", "json")
        assert got.returncode == 0, got.stderr
        assert [i["metadata"]["name"] for i in json.loads(got.stdout)["items"]] == ["docker-registry"]
        patch = {"spec": {"template": {"spec": {"nodeSelector": {"node-role.kubernetes.io/infra": "true"}}}}}
        got = await kubectl(sim, "patch", "dc/docker-registry", "-n", "default", "--type=merge", "-p", json.dumps(patch))
        assert got.returncode == 0, got.stderr

        rc2 = await wait_for(lambda: store.try_get(RC, "docker-registry-2", "default"), what="rc -2")
        assert ann(rc2, "openshift.io/deployment-config.latest-version") == "2"
        pending = await wait_for(lambda: [p for p in store.list("pods", "default", label_selector="deployment=docker-registry-2")
                                          if any(c.get("reason") == "Unschedulable"
                                                 for c in p.get("status", {}).get("conditions") or [])],
                                 what="unschedulable pod")
        msg = cond(pending[0], "PodScheduled")["message"]
        assert msg.startswith("0/3 nodes are available: 3 node(s) didn't match")
        events = [e for e in store.list("events", "default") if e["reason"] == "FailedScheduling"]
        assert events and events[0]["message"] == msg
        # While rolling, the old RC keeps serving.
        assert store.get(RC, "docker-registry-1", "default")["spec"]["replicas"] == 1

        failed = await wait_for(lambda: (r := store.try_get(RC, "docker-registry-2", "default"))
                                and ann(r, "openshift.io/deployment.phase") == "Failed" and r,
                                timeout=60, what="rc -2 Failed")
        assert failed["spec"]["replicas"] == 0
        dc = await wait_for(lambda: (d := store.get(DC, "docker-registry", "default"))
                            and cond(d, "Progressing")["status"] == "False" and d, what="dc Progressing False")
        prog = cond(dc, "Progressing")
        assert prog["reason"] == "ProgressDeadlineExceeded"
        assert prog["message"] == 'replication controller "docker-registry-2" has failed progressing'
        assert dc["status"]["latestVersion"] == 2
        assert store.get(RC, "docker-registry-1", "default")["spec"]["replicas"] == 1
        await wait_for(lambda: not store.list("pods", "default", label_selector="deployment=docker-registry-2"),
                       what="new pods gone")
        assert len(store.list("pods", "default", label_selector="deployment=docker-registry-1")) == 1


@pytest.mark.timeout(120)
async def test_scaling_a_dc_scales_its_active_rc_and_rc_keeps_its_pods() -> None:
    async with ClusterSim(ocp_scenario([registry_dc()], masters={"masters": [{"name": "node-0"}]}), time_scale=SCALE) as sim:
        store = sim.store
        await wait_for(lambda: ann(store.try_get(RC, "docker-registry-1", "default"), "openshift.io/deployment.phase")
                       == "Complete", what="rollout")
        got = await kubectl(sim, "scale", "dc/docker-registry", "-n", "default", "--replicas=3")
        assert got.returncode == 0, got.stderr
        await wait_for(lambda: store.get(RC, "docker-registry-1", "default")["status"].get("readyReplicas") == 3,
                       what="3 ready")
        dc = await wait_for(lambda: (d := store.get(DC, "docker-registry", "default"))
                            and d["status"].get("readyReplicas") == 3 and d, what="dc counters")
        assert dc["status"]["replicas"] == 3 and dc["status"]["unavailableReplicas"] == 0
        # No new version for a scale: the template did not change.
        assert dc["status"]["latestVersion"] == 1 and store.try_get(RC, "docker-registry-2", "default") is None
        # A deleted pod is replaced by the RC.
        victim = store.list("pods", "default", label_selector="deployment=docker-registry-1")[0]["metadata"]["name"]
        store.delete("pods", victim, "default", grace_period_seconds=0)
        await wait_for(lambda: len([p for p in store.list("pods", "default", label_selector="deployment=docker-registry-1")
                                    if p["metadata"]["name"] != victim]) == 3, what="replacement")


async def test_statefulsets_cronjobs_clusternetworks_are_served() -> None:
    objects = [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "prometheus-k8s", "namespace": "openshift-monitoring"},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "prometheus"}}, "serviceName": "prometheus-operated",
                  "template": {"metadata": {"labels": {"app": "prometheus"}}, "spec": {"containers": [{"name": "p", "image": "p"}]}}}},
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "prune", "namespace": "default"},
         "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
             "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "i"}]}}}}}},
        {"apiVersion": "network.openshift.io/v1", "kind": "ClusterNetwork", "metadata": {"name": "default"},
         "clusterNetworks": [{"CIDR": "10.128.0.0/14", "hostSubnetLength": 9}], "network": "10.128.0.0/14",
         "hostsubnetlength": 9, "serviceNetwork": "172.30.0.0/16", "pluginName": "redhat/openshift-ovs-subnet"},
    ]
    async with ClusterSim(ocp_scenario(objects), time_scale=SCALE) as sim:
        assert sim.store.get(STS, "prometheus-k8s", "openshift-monitoring")["spec"]["replicas"] == 2
        assert sim.store.get(CRONJOB, "prune", "default")["spec"]["schedule"] == "0 * * * *"
        cn = sim.store.get(CLUSTERNETWORK, "default")
        assert "vxlanPort" not in cn and cn["clusterNetworks"][0]["CIDR"] == "10.128.0.0/14"
        got = await kubectl(sim, "get", "clusternetworks.network.openshift.io", "default", "-o", "json")
        assert got.returncode == 0, got.stderr
        assert json.loads(got.stdout)["pluginName"] == "redhat/openshift-ovs-subnet"
        got = await kubectl(sim, "get", "sts,cronjobs", "-A", "-o", "name")
        assert got.returncode == 0, got.stderr
        assert got.stdout.split() == ["statefulset.apps/prometheus-k8s", "cronjob.batch/prune"]
