"""R1 and R2 symptoms reproduced by the scenarios with the agents running."""

from __future__ import annotations

import pytest

from clustersim.agents.logic import ANN_DESIRED_DRAIN, ANN_REASON, ANN_STATE, condition
from clustersim.scenario import ScenarioError, list_scenarios, load_scenario
from clustersim.store import ApiError
from tests.clustersim.test_agents_mcd import MCP, Cluster

R2_MESSAGE = ("0/4 nodes are available: 1 node(s) were unschedulable, 3 node(s) didn't match Pod's node "
              "affinity/selector. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.")


async def test_r2_blocked_drain_degrades_pool_and_replacement_is_pending() -> None:
    c = Cluster(load_scenario("r2-pdb-blocked"))
    await c.agents.start()
    try:
        node, ns = "okd-worker-01", "openshift-ingress"
        new = c.store.get(MCP, "worker")["spec"]["configuration"]["name"]
        c.annotate(node, desiredConfig=new)
        await c.until(lambda: c.ann(node)[ANN_DESIRED_DRAIN] == f"drain-{new}")
        c.cordon(node)
        with pytest.raises(ApiError) as err:
            c.store.evict("router-default-796df5847b-9hxzx", ns)
        assert err.value.status == 429
        pending = "router-default-796df5847b-h8bm4"
        pod = await c.until(lambda: (p := c.store.get("pods", pending, ns)) and
                            condition(p, "PodScheduled")["message"] == R2_MESSAGE and p)
        assert pod["status"]["phase"] == "Pending"
        events = await c.until(lambda: [e for e in c.store.list("events", ns)
                                        if e["involvedObject"]["name"] == pending and e["message"] == R2_MESSAGE])
        ev = events[0]
        assert (ev["type"], ev["reason"], ev["source"]["component"]) == ("Warning", "FailedScheduling",
                                                                        "default-scheduler")
        await c.until(lambda: c.ann(node)[ANN_STATE] == "Degraded", timeout=20)
        assert c.ann(node)[ANN_REASON].startswith("failed to drain node: okd-worker-01 after 1 hour")
        st = (await c.until(lambda: (p := c.store.get(MCP, "worker"))["status"]["degradedMachineCount"] == 1 and p))
        s = st["status"]
        assert (s["machineCount"], s["readyMachineCount"], s["updatedMachineCount"]) == (1, 0, 0)
        assert [condition(st, t)["status"] for t in ("Updated", "Updating", "Degraded")] == ["False", "True", "True"]
        pdb = c.store.get("poddisruptionbudgets.policy", "router-default", ns)["status"]
        assert (pdb["disruptionsAllowed"], pdb["currentHealthy"], pdb["expectedPods"]) == (0, 1, 2)
    finally:
        await c.agents.stop()


async def test_r1_ovnkube_crashloops_until_node_updated_and_stale_pods_until_recreated() -> None:
    c = Cluster(load_scenario("r1-ovn-interrupted"))
    await c.agents.start()
    try:
        node = "qsu-app-01"
        ovn_ns = "openshift-ovn-kubernetes"

        def ovn_pod() -> dict:
            return c.store.list("pods", ovn_ns, field_selector=f"spec.nodeName={node}")[0]

        first = ovn_pod()["status"]["containerStatuses"][0]
        assert first["state"]["waiting"]["reason"] == "CrashLoopBackOff" and not first["ready"]
        await c.until(lambda: ovn_pod()["status"]["containerStatuses"][0]["restartCount"] > first["restartCount"])
        stale = [p for p in c.store.list("pods", "shop", field_selector=f"spec.nodeName={node}")]
        assert stale and not any(condition(p, "Ready")["status"] == "True" for p in stale)

        new = c.store.get(MCP, "app")["spec"]["configuration"]["name"]
        c.annotate(node, desiredConfig=new)
        await c.until(lambda: c.ann(node)[ANN_DESIRED_DRAIN] == f"drain-{new}")
        c.annotate(node, lastAppliedDrain=f"drain-{new}")
        await c.until(lambda: c.ann(node)[ANN_DESIRED_DRAIN] == f"uncordon-{new}")
        c.annotate(node, lastAppliedDrain=f"uncordon-{new}")
        await c.until(lambda: c.ann(node)[ANN_STATE] == "Done" and condition(ovn_pod(), "Ready")["status"] == "True")
        # Stale pods stay not Ready after the node got OVN; a recreated pod is Ready.
        p = stale[0]
        app = p["metadata"]["labels"]["app"]
        assert condition(c.store.get("pods", p["metadata"]["name"], "shop"), "Ready")["status"] == "False"
        for other in ("qsu-app-02", "qsu-app-03", "qsu-app-04"):
            c.cordon(other)  # so the replacement can only land on the updated node
        c.store.delete("pods", p["metadata"]["name"], "shop", grace_period_seconds=0)
        await c.until(lambda: any(
            q["metadata"]["uid"] != p["metadata"]["uid"] and q["spec"].get("nodeName") == node
            and condition(q, "Ready") is not None and condition(q, "Ready")["status"] == "True"
            for q in c.store.list("pods", "shop", label_selector=f"app={app}")))
    finally:
        await c.agents.stop()


def test_scenarios_listed_and_unknown_name_is_clear() -> None:
    names = [n for n, _ in list_scenarios()]
    assert {"r1-ovn-interrupted", "r2-pdb-blocked"} <= set(names)
    with pytest.raises(ScenarioError, match="unknown scenario 'nope'; known scenarios: .*r2-pdb-blocked"):
        load_scenario("nope")


def test_invalid_scenario_file_is_explained(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ndescription: y\nnodes:\n  - {name: n1, roles: [worker], config: rendered-worker-"
                   + "0" * 32 + "}\n")
    with pytest.raises(ScenarioError, match="unknown rendered config"):
        load_scenario(str(bad))
    bad.write_text("name: x\ndescription: y\nbogus: 1\n")
    with pytest.raises(ScenarioError, match="bogus"):
        load_scenario(str(bad))
