"""R3e scan gaps end to end (real dev server, real worker process with SSH to the simulator's
hosts, clustersim ``r3-okd310-upgrade``):

- ``projectConfig.defaultNodeSelector: region=primary`` in every master's master-config.yaml is
  read over SSH and blocks the plan (naming the master and the value it should get) before any
  write; once a person changed it on every master the migration runs;
- a CronJob on ``region=infra`` is patched at its Job template;
- an OnDelete DaemonSet on ``region=infra``: ``report`` leaves its pods (named in status and the
  result) and the run completes; ``delete`` opens gate ``ondelete/...`` and replaces its pods one
  node at a time (the second replacement is created after the first is Ready, simulator clock).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from activities.host.models import HostAccess
from clustersim import ClusterSim
from tests.control_plane.test_upgrade_control_plane_e2e import hosts_env
from tests.node_selectors.test_upgrade_node_selectors_e2e import INFRA_NODES, NEW, add_new_labels, labels, migration_input, selector, start
from workflows.kit.models import ApproveInput, GateState
from workflows.node_selectors.models import MasterConfigHost, NodeSelectorMigrationResult, NodeSelectorMigrationStatus

pytestmark = pytest.mark.e2e

SCALE = 0.02
MASTERS = ["master01.example.com", "master02.example.com", "master03.example.com"]
MASTER_CONFIG = "/etc/origin/master/master-config.yaml"
CRONJOB = {
    "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "registry-prune", "namespace": "default"},
    "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": {
        "nodeSelector": {"region": "infra"}, "restartPolicy": "Never",
        "containers": [{"name": "prune", "image": "docker.io/openshift/origin-cli:v3.9.0"}]}}}}},
}
DS = {
    "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "logging-fluentd", "namespace": "default", "generation": 1},
    "spec": {"selector": {"matchLabels": {"app": "fluentd"}}, "updateStrategy": {"type": "OnDelete"},
             "template": {"metadata": {"labels": {"app": "fluentd"}},
                          "spec": {"nodeSelector": {"region": "infra"},
                                   "containers": [{"name": "fluentd", "image": "docker.io/openshift/origin-logging-fluentd:v3.9"}]}}},
}


def masters(sim: ClusterSim) -> list[MasterConfigHost]:
    ssh_map = json.loads(Path(hosts_env(sim)["CLUSTERSIM_SSH_MAP"]).read_text())
    return [MasterConfigHost(name=m, access=HostAccess(backend="ssh", host=ssh_map[m].split(":")[0], port=int(ssh_map[m].split(":")[1]),
                                                       user="root", node=m)) for m in MASTERS]


def fluentd_pods(sim: ClusterSim) -> dict[str, tuple[str, str]]:
    """node -> (pod name, pod-template-generation) of the DaemonSet's live pods."""
    return {p["spec"]["nodeName"]: (p["metadata"]["name"], p["metadata"]["labels"].get("pod-template-generation", ""))
            for p in sim.store.list("pods", "default")
            if p["metadata"]["labels"].get("app") == "fluentd" and not p["metadata"].get("deletionTimestamp")}


async def world(sim_factory: Any, worker_process_factory: Any, dev_server: Any, task_queue: str) -> ClusterSim:
    sim = await sim_factory("r3-okd310-upgrade", time_scale=SCALE)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue,
                                    env=hosts_env(sim))
    await worker.start()
    sim.store.create("cronjobs.batch", json.loads(json.dumps(CRONJOB)))
    sim.store.create("daemonsets.apps", json.loads(json.dumps(DS)))
    for _ in range(200):
        if len(fluentd_pods(sim)) == 2:
            break
        await asyncio.sleep(0.1)
    assert sorted(fluentd_pods(sim)) == INFRA_NODES
    add_new_labels(sim)
    return sim


def set_default_selector(sim: ClusterSim, value: str) -> None:
    for m in MASTERS:
        host = sim.components["hosts"].hosts[m]  # type: ignore[attr-defined]
        host.files[MASTER_CONFIG] = host.files[MASTER_CONFIG].replace("defaultNodeSelector: region=primary",
                                                                      f"defaultNodeSelector: {value}")


async def test_master_config_blocks_then_cronjob_and_ondelete_report(dev_server: Any, temporal_client: Client, sim_factory: Any,
                                                                     worker_process_factory: Any, task_queue: str) -> None:
    sim = await world(sim_factory, worker_process_factory, dev_server, task_queue)
    pods_before = fluentd_pods(sim)
    handle = await start(temporal_client, migration_input(masters=masters(sim)), task_queue)
    result = await handle.result()  # refused before any write, one problem per master
    assert result.outcome == "refused", result.message
    text = "\n".join(result.problems)
    for m in MASTERS:
        assert f"{MASTER_CONFIG} on {m}: projectConfig.defaultNodeSelector is 'region=primary'" in text, text
    assert "set it to 'node-role.kubernetes.io/compute=true'" in text
    assert selector(sim, "docker-registry") == {"region": "infra"} and all(labels(sim, n)["region"] == "infra" for n in INFRA_NODES)
    # a person changes it on every master (and restarts the APIs); now the migration runs
    set_default_selector(sim, "node-role.kubernetes.io/compute=true")
    handle = await start(temporal_client, migration_input(masters=masters(sim), revert_window_seconds=0), task_queue)
    result: NodeSelectorMigrationResult = await handle.result()
    assert result.outcome == "completed", result.message
    assert selector(sim, "docker-registry") == NEW
    cj = sim.store.get("cronjobs.batch", "registry-prune", "default")
    assert cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["nodeSelector"] == NEW
    ds = sim.store.get("daemonsets.apps", "logging-fluentd", "default")
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == NEW
    # OnDelete, report mode: the pods were left alone and are named
    assert fluentd_pods(sim) == pods_before
    old = result.old_template_pods["DaemonSet default/logging-fluentd"]
    assert sorted(e.split("@")[1] for e in old) == INFRA_NODES
    item = next(i for i in result.plan.items if i.ref.name == "logging-fluentd")  # type: ignore[union-attr]
    assert item.state == "old-pods-left" and "keep the old nodeSelector until deleted" in (item.detail or "")
    assert all("region" not in labels(sim, n) for n in INFRA_NODES)


async def test_ondelete_delete_mode_replaces_pods_one_node_at_a_time(dev_server: Any, temporal_client: Client, sim_factory: Any,
                                                                     worker_process_factory: Any, task_queue: str) -> None:
    sim = await world(sim_factory, worker_process_factory, dev_server, task_queue)
    set_default_selector(sim, "node-role.kubernetes.io/compute=true")
    pods_before = fluentd_pods(sim)
    handle = await start(temporal_client, migration_input(masters=masters(sim), ondelete_daemonsets="delete",
                                                          revert_window_seconds=0), task_queue)
    gate_id = None
    for _ in range(600):
        st = await handle.query("status", result_type=NodeSelectorMigrationStatus)
        gate_id = next((g.id for g in st.gates if g.id.startswith("ondelete/") and g.state == GateState.WAITING), None)
        if gate_id:
            break
        await asyncio.sleep(0.2)
    assert gate_id == "ondelete/DaemonSet default/logging-fluentd", st.model_dump_json(indent=1)[:2000]
    assert fluentd_pods(sim) == pods_before  # nothing deleted before the gate
    await handle.execute_update("approve", ApproveInput(gate_id=gate_id, identity="e2e-approver"))
    result: NodeSelectorMigrationResult = await handle.result()
    assert result.outcome == "completed", result.message
    after = fluentd_pods(sim)
    gen = str(sim.store.get("daemonsets.apps", "logging-fluentd", "default")["metadata"]["generation"])
    assert sorted(after) == INFRA_NODES and all(after[n][0] != pods_before[n][0] and after[n][1] == gen for n in INFRA_NODES)
    # one node at a time: node02's replacement was created only after node01's replacement was Ready
    pods = {p["spec"]["nodeName"]: p for p in sim.store.list("pods", "default") if p["metadata"]["name"] in {v[0] for v in after.values()}}
    ready01 = next(c["lastTransitionTime"] for c in pods[INFRA_NODES[0]]["status"]["conditions"] if c["type"] == "Ready")
    assert pods[INFRA_NODES[1]]["metadata"]["creationTimestamp"] >= ready01, (pods[INFRA_NODES[1]]["metadata"], ready01)
    assert result.old_template_pods == {}
    item = next(i for i in result.plan.items if i.ref.name == "logging-fluentd")  # type: ignore[union-attr]
    assert item.state == "rolled-out", item
