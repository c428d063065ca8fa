"""Pure controller logic (table tests) and the DaemonSet/ReplicaSet agents."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time

import pytest

from clustersim.agents import logic
from clustersim.agents.objects import make_node
from clustersim.scenario import generate_scenario, load_scenario
from clustersim.store import Store
from tests.support.smallcluster import kubectl_binary
from tests.clustersim.test_agents_mcd import Cluster

T = "2024-01-01T00:00:00Z"


def _node(name: str, *, roles=("worker",), unschedulable=False, taints=(), ready=True, **ann: str) -> dict:
    n = make_node(name, roles=list(roles), config="rendered-worker-a", created=T, unschedulable=unschedulable,
                  taints=list(taints))
    n["metadata"]["annotations"].update({logic.MCO_PREFIX + k: v for k, v in ann.items()})
    if not ready:
        logic.condition(n, "Ready")["status"] = "False"
    return n


MASTER_TAINT = {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}
POD = {"spec": {"nodeSelector": {"node-role.kubernetes.io/worker": ""}, "containers": [{"name": "c"}]}}


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        (logic.FILTERS_LEGACY, "0/4 nodes are available: 1 node(s) were unschedulable, 3 node(s) didn't match Pod's "
         "node affinity/selector. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."),
        (logic.FILTERS_CURRENT, "0/4 nodes are available: 1 node(s) were unschedulable, 3 node(s) had untolerated "
         "taint {node-role.kubernetes.io/master: }. preemption: 0/4 nodes are available: 4 Preemption is not "
         "helpful for scheduling."),
    ],
)
def test_fit_error_message(order, expected) -> None:
    nodes = [_node(f"m{i}", roles=("master",), taints=[MASTER_TAINT]) for i in range(3)]
    nodes.append(_node("w1", unschedulable=True))
    assert logic.schedule(POD, nodes, {}, order) == (None, expected)


def test_scheduler_spreads_and_tolerates() -> None:
    nodes = [_node("w1"), _node("w2"), _node("m1", roles=("master", "worker"), taints=[MASTER_TAINT])]
    assert logic.schedule(POD, nodes, {"w1": 3, "w2": 1}) == ("w2", "")
    tolerant = {"spec": {**POD["spec"], "tolerations": [{"operator": "Exists"}]}}
    assert logic.schedule(tolerant, nodes, {"w1": 3, "w2": 1}) == ("m1", "")


@pytest.mark.parametrize(
    ("nodes", "counts", "conds"),
    [
        # all at target, Done, Ready -> Updated
        ([_node("a", currentConfig="r2", desiredConfig="r2")], (1, 1, 1, 0, 0), ("True", "False", "False")),
        # one working towards the target -> Updating, unavailable
        ([_node("a", currentConfig="r1", desiredConfig="r2", state="Working"), _node("b", currentConfig="r2",
          desiredConfig="r2")], (2, 1, 1, 1, 0), ("False", "True", "False")),
        # degraded: counted degraded, not unavailable (MCD failing)
        ([_node("a", currentConfig="r1", desiredConfig="r2", state="Degraded", reason="boom")], (1, 0, 0, 0, 1),
         ("False", "True", "True")),
        # cordoned but updated: updated, not ready, unavailable
        ([_node("a", currentConfig="r2", desiredConfig="r2", unschedulable=True)], (1, 1, 0, 1, 0),
         ("False", "True", "False")),
    ],
)
def test_pool_status(nodes, counts, conds) -> None:
    pool = {"metadata": {"name": "worker", "generation": 3}, "spec": {"configuration": {"name": "r2"}},
            "status": {"configuration": {"name": "r1"}}}
    st = logic.compute_pool_status(pool, nodes, T)
    got = tuple(st[k] for k in ("machineCount", "updatedMachineCount", "readyMachineCount",
                                "unavailableMachineCount", "degradedMachineCount"))
    assert got == counts and st["observedGeneration"] == 3
    assert tuple(logic.condition({"status": st}, t)["status"] for t in ("Updated", "Updating", "Degraded")) == conds


def _pod(name: str, ready: bool = True, terminating: bool = False) -> dict:
    p = {"metadata": {"name": name, "labels": {"app": "x"}},
         "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}
    if terminating:
        p["metadata"]["deletionTimestamp"] = T
    return p


@pytest.mark.parametrize(
    ("spec", "pods", "expected"),
    [
        ({"minAvailable": 1}, [_pod("a"), _pod("b", ready=False)], (1, 1, 2, 0)),
        ({"minAvailable": 1}, [_pod("a"), _pod("b")], (2, 1, 2, 1)),
        ({"maxUnavailable": 1}, [_pod("a"), _pod("b"), _pod("c", terminating=True)], (2, 2, 3, 0)),
        ({"minAvailable": "50%"}, [_pod("a"), _pod("b"), _pod("c")], (3, 2, 3, 1)),
    ],
)
def test_pdb_status(spec, pods, expected) -> None:
    pdb = {"metadata": {"generation": 1}, "spec": {"selector": {"matchLabels": {"app": "x"}}, **spec}}
    st = logic.compute_pdb_status(pdb, pods, T)
    assert (st["currentHealthy"], st["desiredHealthy"], st["expectedPods"], st["disruptionsAllowed"]) == expected
    assert logic.condition({"status": st}, "DisruptionAllowed")["status"] == ("True" if expected[3] else "False")


async def test_daemonset_rollout_and_replicaset_keeps_replicas() -> None:
    c = Cluster(load_scenario("r2-pdb-blocked"), scale=0.001)
    await c.agents.start()
    try:
        ns, name = "openshift-dns", "dns-default"

        def set_image(o: dict) -> None:
            o["spec"]["template"]["spec"]["containers"][0]["image"] = "quay.io/openshift/okd-content@sha256:coredns2"

        c.store.mutate("daemonsets.apps", name, ns, set_image)

        def rolled_out() -> bool:
            ds = c.store.get("daemonsets.apps", name, ns)
            s = ds["status"]
            return (s["observedGeneration"] >= ds["metadata"]["generation"] and s["desiredNumberScheduled"] == 4
                    and s["updatedNumberScheduled"] == 4 and s["numberAvailable"] == 4)

        await c.until(rolled_out)
        images = {p["spec"]["containers"][0]["image"] for p in c.store.list("pods", ns) if
                  not p["metadata"].get("deletionTimestamp")}
        assert images == {"quay.io/openshift/okd-content@sha256:coredns2"}
        # Deleting a router pod: the ReplicaSet replaces it; it can only go back to the worker.
        c.store.delete("pods", "router-default-796df5847b-9hxzx", "openshift-ingress", grace_period_seconds=0)
        await c.until(lambda: any(p["spec"].get("nodeName") == "okd-worker-01" and logic.pod_ready(p)
                                  for p in c.store.list("pods", "openshift-ingress")))
    finally:
        await c.agents.stop()


async def test_kubectl_rollout_status_after_image_patch() -> None:
    kubectl = kubectl_binary()  # next to the interpreter, else on PATH; fails the test when absent
    from clustersim import ClusterSim

    async with ClusterSim("r2-pdb-blocked", time_scale=0.001) as sim:
        env = {**os.environ, "KUBECONFIG": str(sim.kubeconfig_path)}

        def run(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([kubectl, *args], env=env, capture_output=True, text=True, timeout=60)

        out = await asyncio.to_thread(run, "-n", "openshift-dns", "set", "image", "ds/dns-default",
                                      "dns=quay.io/openshift/okd-content@sha256:coredns3")
        assert out.returncode == 0, out.stderr
        out = await asyncio.to_thread(run, "-n", "openshift-dns", "rollout", "status", "ds/dns-default",
                                      "--timeout=30s")
        assert out.returncode == 0, out.stderr
        assert "successfully rolled out" in out.stdout


def test_generated_cluster_loads_fast() -> None:
    """Benchmark (prints figures, asserts only correctness): 1,000 nodes, 20,000 pods."""
    t0 = time.perf_counter()
    sc = generate_scenario(1000, 20000)
    t1 = time.perf_counter()
    store = Store()
    sc.populate(store)
    t2 = time.perf_counter()
    print(f"\ngenerate_scenario: {t1 - t0:.2f}s, populate: {t2 - t1:.2f}s "
          f"({store.count('nodes')} nodes, {store.count('pods')} pods)")
    assert store.count("nodes") == 1000 and store.count("pods") == 20000


def test_pods_by_owner_index_follows_creates_changes_and_deletes() -> None:
    """``Store.pods_owned_by``: the ReplicaSet controller's view of its pods, kept as an index
    (a scan of every pod per ReplicaSet sync cost the simulator 7% of its CPU at 600 nodes)."""
    store = Store()

    def pod(name: str, *uids: str) -> dict:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "app", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"rs-{u}", "uid": u} for u in uids]},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}

    store.create("pods", pod("b", "u1"))
    store.create("pods", pod("a", "u1", "u2"))
    store.create("pods", pod("c"))
    names = lambda uid: [p["metadata"]["name"] for p in store.pods_owned_by(uid)]  # noqa: E731
    assert (names("u1"), names("u2"), names("nobody")) == (["a", "b"], ["a"], [])
    store.mutate("pods", "a", "app", lambda o: o["metadata"].__setitem__("ownerReferences", o["metadata"]["ownerReferences"][1:]))
    assert (names("u1"), names("u2")) == (["b"], ["a"])  # orphaned from u1, still u2's
    store.delete("pods", "b", "app", grace_period_seconds=0)
    assert (names("u1"), names("u2")) == ([], ["a"])
