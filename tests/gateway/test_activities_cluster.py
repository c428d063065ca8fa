"""Activities against clustersim over real HTTP (the real ``kubernetes`` 37 client).

Each activity runs through ``temporalio.testing.ActivityEnvironment`` in a worker thread (as the
worker's ThreadPoolExecutor would run it) while the simulator serves on this event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.cluster.activities import ClusterActivities
from activities.cluster.models import (
    ANN_CORDONED_BY,
    ANN_DESIRED_CONFIG,
    CordonInput,
    DrainInput,
    ReadNodeInput,
    SetNodeAnnotationsInput,
    UncordonInput,
)
from activities.kube.gateway import KubeGateway
from activities.machineconfig.activities import MachineConfigActivities
from activities.machineconfig.models import (
    PreflightInput,
)
from clustersim import ClusterSim
from clustersim.faults import MUTATING_VERBS

pytestmark = pytest.mark.timeout(120)

R1_APP_TARGET = "rendered-app-c2144a20e3d0e37e96785165ba81f4e8"
R1_INFRA_TARGET = "rendered-infra-7b3e9d1f5a2c8e4b6d0f3a7c1e5b9d2f"
R2_WORKER_TARGET = "rendered-worker-5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b"
TIME_SCALE = 0.005


class Harness:
    """A running sim, a gateway to it, the activities, and a way to run them in a thread."""

    def __init__(self, sim: ClusterSim, gateway: KubeGateway) -> None:
        self.sim = sim
        self.gateway = gateway
        self.acts = ClusterActivities(lambda: gateway)
        self.mco = MachineConfigActivities(lambda: gateway)
        self.heartbeats: list[Any] = []

    async def run(self, fn: Callable[..., Any], arg: Any, env: ActivityEnvironment | None = None) -> Any:
        env = env or ActivityEnvironment()
        env.on_heartbeat = lambda *details: self.heartbeats.append(details[0] if details else None)
        return await asyncio.to_thread(env.run, fn, arg)

    def writes(self) -> list[tuple[str, str, str]]:
        return [(e.verb, e.resource, e.name) for e in self.sim.requests.entries() if e.verb in MUTATING_VERBS]

    def set_annotations(self, node: str, **changes: str | None) -> None:
        """Change a node's annotations as the daemon would (through the sim store)."""

        def edit(obj: dict[str, Any]) -> None:
            ann = obj["metadata"].setdefault("annotations", {})
            for key, value in changes.items():
                if value is None:
                    ann.pop(key, None)
                else:
                    ann[key] = value

        self.sim.store.mutate("nodes", node, None, edit)


async def _harness(scenario: str, **kw: Any) -> AsyncIterator[Harness]:
    async with ClusterSim(scenario, time_scale=TIME_SCALE, **kw) as sim:
        gateway = KubeGateway.from_kubeconfig(sim.kubeconfig_path)
        try:
            yield Harness(sim, gateway)
        finally:
            gateway.close()


@pytest.fixture
async def r1() -> AsyncIterator[Harness]:
    async for h in _harness("r1-ovn-interrupted"):
        yield h


@pytest.fixture
async def r1_static() -> AsyncIterator[Harness]:
    """R1 without agents: nothing changes unless the test does it."""
    async for h in _harness("r1-ovn-interrupted", start_agents=False):
        yield h


@pytest.fixture
async def r2() -> AsyncIterator[Harness]:
    async for h in _harness("r2-pdb-blocked"):
        yield h


# --- preflight --------------------------------------------------------------------------------


async def test_preflight_resolves_newest_rendered_configs_read_only(r1_static: Harness) -> None:
    h = r1_static
    result = await h.run(h.mco.preflight_machineconfig_rollout, PreflightInput())
    targets = {p.name: p.target_config for p in result.pools}
    assert targets == {
        "master": "rendered-master-f06a1c3e5b7d9f1a2c4e6b8d0f2a4c6e",
        "infra": R1_INFRA_TARGET,
        "app": R1_APP_TARGET,
    }
    app = next(p for p in result.pools if p.name == "app")
    assert sorted(n.name for n in app.nodes) == ["qsu-app-01", "qsu-app-02", "qsu-app-03", "qsu-app-04"]
    assert all(n.pool == "app" and n.current_config == "rendered-app-412d8b3f0e6a9c1d7b5e2f4a8c0d6e3b" for n in app.nodes)
    assert result.network_type is not None
    assert h.writes() == []


@pytest.mark.parametrize(
    ("preflight", "error_type", "words"),
    [
        (PreflightInput(pools=["app", "gpu"]), "UnknownPool", ["gpu", "known pools: app, infra, master"]),
        (PreflightInput(pools=["app"], target_configs={"app": "rendered-app-doesnotexist"}), "MissingConfig", ["rendered-app-doesnotexist"]),
        (PreflightInput(pools=["app"], target_configs={"app": R1_INFRA_TARGET}), "ConfigOfOtherPool", [R1_INFRA_TARGET, "pool infra"]),
        (PreflightInput(pools=["app"], not_before="2024-05-14T10:00:00Z"), "ConfigTooOld", [R1_APP_TARGET]),
    ],
)
async def test_preflight_errors_are_non_retryable_and_write_nothing(
    r1_static: Harness, preflight: PreflightInput, error_type: str, words: list[str]
) -> None:
    h = r1_static
    with pytest.raises(ApplicationError) as info:
        await h.run(h.mco.preflight_machineconfig_rollout, preflight)
    assert info.value.type == error_type and info.value.non_retryable
    for word in words:
        assert word in info.value.message
    assert h.writes() == []


async def test_preflight_explicit_target_and_no_nodes(r1_static: Harness) -> None:
    h = r1_static
    ok = await h.run(
        h.mco.preflight_machineconfig_rollout,
        PreflightInput(pools=["app"], target_configs={"app": "rendered-app-412d8b3f0e6a9c1d7b5e2f4a8c0d6e3b"}),
    )
    assert [p.target_config for p in ok.pools] == ["rendered-app-412d8b3f0e6a9c1d7b5e2f4a8c0d6e3b"]

    def no_app_nodes(obj: dict[str, Any]) -> None:
        obj["spec"]["nodeSelector"] = {"matchLabels": {"node-role.kubernetes.io/nobody": ""}}

    h.sim.store.mutate("machineconfigpools.machineconfiguration.openshift.io", "app", None, no_app_nodes)
    h.sim.requests.clear()
    with pytest.raises(ApplicationError) as info:
        await h.run(h.mco.preflight_machineconfig_rollout, PreflightInput(pools=["app"]))
    assert info.value.type == "NoNodes" and "matches no node" in info.value.message
    assert h.writes() == []


async def test_malformed_kubeconfig_fails_fast_without_any_request(r1_static: Harness, tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("apiVersion: v1\nkind: Config\ncurrent-context: nope\ncontexts: []\n")
    acts = MachineConfigActivities(lambda: KubeGateway.from_kubeconfig(bad))
    with pytest.raises(ApplicationError) as info:
        await r1_static.run(acts.preflight_machineconfig_rollout, PreflightInput())
    assert info.value.type == "KubeconfigError" and info.value.non_retryable
    assert "no context 'nope'" in info.value.message
    assert len(r1_static.sim.requests) == 0


# --- annotations, cordon, uncordon ------------------------------------------------------------


async def test_set_node_annotations_patches_only_what_differs(r1_static: Harness) -> None:
    h = r1_static
    node = "qsu-app-01"
    info = await h.run(
        h.acts.set_node_annotations,
        SetNodeAnnotationsInput(node=node, annotations={ANN_DESIRED_CONFIG: R1_APP_TARGET, "example.com/gone": None}),
    )
    assert info.desired_config == R1_APP_TARGET
    assert h.writes() == [("patch", "nodes", node)]
    h.sim.requests.clear()
    again = await h.run(h.acts.set_node_annotations, SetNodeAnnotationsInput(node=node, annotations={ANN_DESIRED_CONFIG: R1_APP_TARGET}))
    assert again.desired_config == R1_APP_TARGET and h.writes() == []
    with pytest.raises(ApplicationError) as missing:
        await h.run(h.acts.read_node, ReadNodeInput(node="no-such-node"))
    assert missing.value.type == "NodeNotFound" and missing.value.non_retryable


async def test_cordon_and_uncordon_only_what_we_cordoned(r1_static: Harness) -> None:
    h = r1_static
    node = "qsu-app-02"
    first = await h.run(h.acts.cordon_node, CordonInput(node=node, owner="rollout-a/node/qsu-app-02"))
    assert first.cordoned_by_us and not first.was_unschedulable
    stored = h.sim.store.get("nodes", node)
    assert stored["spec"]["unschedulable"] is True
    assert stored["metadata"]["annotations"][ANN_CORDONED_BY] == "rollout-a/node/qsu-app-02"
    assert h.writes() == [("patch", "nodes", node)]

    retry = await h.run(h.acts.cordon_node, CordonInput(node=node, owner="rollout-a/node/qsu-app-02"))
    assert retry.cordoned_by_us and retry.was_unschedulable
    other = await h.run(h.acts.uncordon_node, UncordonInput(node=node, owner="rollout-b/node/qsu-app-02"))
    assert not other.uncordoned and "rollout-a/node/qsu-app-02" in (other.left_cordoned_reason or "")
    assert h.writes() == [("patch", "nodes", node)]

    done = await h.run(h.acts.uncordon_node, UncordonInput(node=node, owner="rollout-a/node/qsu-app-02"))
    assert done.uncordoned
    stored = h.sim.store.get("nodes", node)
    assert not stored["spec"].get("unschedulable")
    assert ANN_CORDONED_BY not in (stored["metadata"].get("annotations") or {})


async def test_node_cordoned_by_somebody_else_stays_cordoned(r1_static: Harness) -> None:
    h = r1_static
    node = "qsu-app-03"
    h.sim.store.mutate("nodes", node, None, lambda o: o["spec"].update(unschedulable=True))
    h.sim.requests.clear()
    result = await h.run(h.acts.cordon_node, CordonInput(node=node, owner="rollout-a"))
    assert not result.cordoned_by_us and result.was_unschedulable
    left = await h.run(h.acts.uncordon_node, UncordonInput(node=node, owner="rollout-a"))
    assert not left.uncordoned and "somebody else" in (left.left_cordoned_reason or "")
    assert h.writes() == []
    assert h.sim.store.get("nodes", node)["spec"]["unschedulable"] is True


# --- drain ------------------------------------------------------------------------------------


async def test_drain_free_node_evicts_all_but_daemonset_pods(r1: Harness) -> None:
    h = r1
    node = "qsu-app-04"  # billing and shop-frontend: no budget covers them
    await h.run(h.acts.cordon_node, CordonInput(node=node, owner="t"))
    before = h.sim.store.list("pods", field_selector=f"spec.nodeName={node}")
    ds_pods = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        for p in before
        if any(r.get("kind") == "DaemonSet" for r in p["metadata"].get("ownerReferences") or [])
    }
    assert ds_pods, "the scenario runs DaemonSet pods on every node"
    result = await h.run(h.acts.drain_node, DrainInput(node=node, wait_seconds=10))
    assert result.done and result.blocked is None and not result.remaining, result
    assert sorted(result.evicted) == sorted(
        f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in before if f"{p['metadata']['namespace']}/{p['metadata']['name']}" not in ds_pods
    )
    evictions = {e.name for e in h.sim.requests.entries(verb="create", subresource="eviction")}
    assert evictions and not evictions & {k.split("/")[1] for k in ds_pods}
    after = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        for p in h.sim.store.list("pods", field_selector=f"spec.nodeName={node}")
    }
    assert after == ds_pods
    again = await h.run(h.acts.drain_node, DrainInput(node=node, wait_seconds=1))
    assert again.done and again.evicted == []  # idempotent: nothing left to evict


async def test_drain_blocked_by_pdb_reports_pod_budget_and_pending_replacement(r2: Harness) -> None:
    h = r2
    node = "okd-worker-01"
    await h.run(h.acts.cordon_node, CordonInput(node=node, owner="t"))

    def latest_event_message() -> str | None:
        events = [
            e
            for e in h.sim.store.list("events", namespace="openshift-ingress")
            if e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "router-default-796df5847b-h8bm4"
        ]
        events.sort(key=lambda e: int(e["metadata"]["resourceVersion"]))
        return events[-1]["message"] if events else None

    for _ in range(100):  # the scheduler notices the cordon and reports again
        message = latest_event_message()
        if message and "were unschedulable" in message:
            break
        await asyncio.sleep(0.05)
    result = await h.run(h.acts.drain_node, DrainInput(node=node, wait_seconds=0.5))
    assert not result.done and result.blocked is not None
    assert result.remaining == ["openshift-ingress/router-default-796df5847b-9hxzx"]
    (blocked,) = result.blocked.blocked_pods
    assert (blocked.namespace, blocked.name) == ("openshift-ingress", "router-default-796df5847b-9hxzx")
    assert blocked.message == "Cannot evict pod as it would violate the pod's disruption budget."
    assert blocked.causes == ["The disruption budget router-default needs 1 healthy pods and has 1 currently"]
    (pdb,) = blocked.pdbs
    assert (pdb.name, pdb.min_available, pdb.max_unavailable) == ("router-default", 1, None)
    assert (pdb.current_healthy, pdb.desired_healthy, pdb.disruptions_allowed, pdb.expected_pods) == (1, 1, 0, 2)
    (pending,) = result.blocked.pending_replacements
    assert pending.name == "router-default-796df5847b-h8bm4"
    assert pending.replaces == "openshift-ingress/router-default-796df5847b-9hxzx"
    assert pending.message == latest_event_message()
    assert pending.message is not None and pending.message.startswith(
        "0/4 nodes are available: 1 node(s) were unschedulable, 3 node(s) didn't match Pod's node affinity/selector."
    )
    assert all(e.verb != "delete" for e in h.sim.requests.entries(resource="pods"))


# --- wait_for_node ----------------------------------------------------------------------------
