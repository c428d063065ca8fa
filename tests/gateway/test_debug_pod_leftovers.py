"""Debug pods a dead worker leaves (issue 39): stable names per activity command, a retry that
deletes its predecessor's pod, a pod of another run never touched, and the end-of-run sweep that
deletes exactly one run's pods. Against the simulator, through lockkeeper's own gateway and the
real activities (``run_node_command``, ``sweep_debug_pods``) run in Temporal's
ActivityEnvironment with the activity info a retried attempt has."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.host.activities import HostActivities
from activities.host.debug_pod import (
    ATTEMPT_LABEL,
    RUN_LABEL,
    PodOwner,
    debug_pod_manifest,
    debug_pod_name,
    pod_token,
)
from activities.host.factory import ExecutorFactory
from activities.host.models import ExecBackend, HostAccess, RunCommandInput, SweepDebugPodsInput
from activities.kube.gateway import KubeGateway
from clustersim.sim import ClusterSim
from tests.clustersim.test_hosts_debugpod import sim  # noqa: F401 - the fixture: R2's nodes with default hosts

NODE = "okd-worker-01"
OTHER = "okd-worker-02"
RUN = "0f6c2b1e-6a51-4f4e-9d55-6a0e7f7b1c01"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@pytest.fixture
def gateway(sim: ClusterSim) -> Any:
    gw = KubeGateway.from_kubeconfig(str(sim.kubeconfig_path), None)
    yield gw
    gw.close()


def env_for(attempt: int, *, run_id: str = RUN, activity_id: str = "7") -> ActivityEnvironment:
    """An activity environment whose info is attempt ``attempt`` of activity ``activity_id`` of
    workflow ``wf`` run ``run_id``."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id="wf", workflow_run_id=run_id, activity_id=activity_id, attempt=attempt)
    return env


def owner(attempt: int, run_id: str = RUN, activity_id: str = "7") -> PodOwner:
    return PodOwner(workflow_id="wf", run_id=run_id, activity_id=activity_id, attempt=attempt)


def pods(sim: ClusterSim) -> dict[str, dict[str, Any]]:
    """Debug pods in namespace default not being deleted, by name."""
    return {p["metadata"]["name"]: p for p in sim.store.list("pods", "default", label_selector="lockkeeper.io/debug-pod")
            if not p["metadata"].get("deletionTimestamp")}


async def leftover(gw: Any, who: PodOwner, argv: list[str], node: str = NODE) -> dict[str, Any]:
    """The pod attempt ``who`` created for ``argv`` on ``node`` before its worker died (the
    gateway is synchronous and the simulator serves on this loop: the call runs in a thread)."""
    name = debug_pod_name(node, pod_token(who, node, argv, None, 0))
    manifest = debug_pod_manifest(node, namespace="default", image="ubi", name=name, lifetime_seconds=600, owner=who)
    return await asyncio.to_thread(gw.create, "Pod", manifest, "default")


async def relabel(gw: Any, name: str, labels: dict[str, str]) -> None:
    await asyncio.to_thread(gw.patch, "Pod", name, {"metadata": {"labels": labels}}, "default")


def test_debug_pod_names_are_stable_per_command_and_valid_dns_labels() -> None:
    argv = ["systemctl", "reboot"]
    first = pod_token(owner(1), NODE, argv, None, 0)
    assert first == pod_token(owner(5), NODE, argv, None, 0)  # every attempt: the same name
    others = {pod_token(owner(1, activity_id="8"), NODE, argv, None, 0), pod_token(owner(1, run_id="r2"), NODE, argv, None, 0),
              pod_token(owner(1), OTHER, argv, None, 0), pod_token(owner(1), NODE, ["true"], None, 0),
              pod_token(owner(1), NODE, argv, {"K": "v"}, 0), pod_token(owner(1), NODE, argv, None, 1)}
    assert first not in others and len(others) == 6
    for node in (NODE, "Master-0.Example.COM", "n" * 80, "a_b.c"):
        name = debug_pod_name(node, first)
        assert len(name) <= 63 and DNS_LABEL.match(name), name
        assert name.endswith(f"-lockkeeper-debug-{first}")


async def test_a_retry_deletes_its_predecessors_pod_then_runs(sim: ClusterSim, gateway: Any) -> None:
    old = await leftover(gateway, owner(1), ["hostname"])
    name = old["metadata"]["name"]
    assert pods(sim)[name]["metadata"]["labels"][RUN_LABEL] == RUN
    acts = HostActivities(ExecutorFactory({}, gateway_factory=lambda: gateway))
    cmd = RunCommandInput(access=HostAccess(backend=ExecBackend.DEBUG_POD, node=NODE), argv=["hostname"], timeout_seconds=30)
    result = await env_for(2).run(acts.run_node_command, cmd)
    assert (result.exit_code, result.stdout) == (0, f"{NODE}\n")
    # attempt 2 used the same name: the request log shows the predecessor deleted before the create
    assert name not in pods(sim)
    seen = [(e.verb, e.name, e.code) for e in sim.requests.entries() if e.resource == "pods" and not e.subresource]
    # the leftover; attempt 2's create refused (409), the pod read (its labels: this run's attempt
    # 1), deleted, read back gone (404), created again; then the command's own read and delete
    assert seen[:6] == [("create", "", 201), ("create", "", 409), ("get", name, 200), ("delete", name, 200), ("get", name, 404),
                        ("create", "", 201)], seen
    assert {n for _, n, _ in seen} == {"", name} and seen[-1] == ("delete", name, 200)


async def test_a_pod_of_another_run_or_a_later_attempt_is_never_touched(sim: ClusterSim, gateway: Any) -> None:
    acts = HostActivities(ExecutorFactory({}, gateway_factory=lambda: gateway))
    cmd = RunCommandInput(access=HostAccess(backend=ExecBackend.DEBUG_POD, node=NODE), argv=["hostname"], timeout_seconds=30)
    # same name by construction (the token of this run's command), labelled with another run
    theirs = await leftover(gateway, owner(1, activity_id="11"), ["hostname"])
    await relabel(gateway, theirs["metadata"]["name"], {RUN_LABEL: "another-run"})
    with pytest.raises(ApplicationError, match="not an earlier attempt of this command: not touched"):
        await env_for(2, activity_id="11").run(acts.run_node_command, cmd)
    assert pods(sim)[theirs["metadata"]["name"]]["metadata"]["uid"] == theirs["metadata"]["uid"]
    # a pod of this attempt (the same command twice at once) or a later one is not deleted either
    await relabel(gateway, theirs["metadata"]["name"], {RUN_LABEL: RUN, ATTEMPT_LABEL: "3"})
    with pytest.raises(ApplicationError, match="not touched"):
        await env_for(3, activity_id="11").run(acts.run_node_command, cmd)
    assert pods(sim)[theirs["metadata"]["name"]]["metadata"]["uid"] == theirs["metadata"]["uid"]


async def test_the_sweep_deletes_exactly_this_runs_pods_and_reads_back(sim: ClusterSim, gateway: Any) -> None:
    mine = [(await leftover(gateway, owner(1), ["true"], node))["metadata"]["name"] for node in (NODE, OTHER)]
    mine.append((await leftover(gateway, owner(2, activity_id="9"), ["systemctl", "reboot"]))["metadata"]["name"])
    other_run = (await leftover(gateway, owner(1, run_id="another-run"), ["true"]))["metadata"]["name"]
    unlabelled = debug_pod_name(NODE, "abc123")  # a pod from before run labels, or a person's `oc debug`
    await asyncio.to_thread(gateway.create, "Pod", debug_pod_manifest(NODE, namespace="default", image="ubi", name=unlabelled,
                                                                      lifetime_seconds=600), "default")
    acts = HostActivities(ExecutorFactory({}, gateway_factory=lambda: gateway))
    res = await env_for(1, activity_id="sweep").run(acts.sweep_debug_pods, SweepDebugPodsInput(run_id=RUN, namespaces=["default"]))
    assert sorted(res.deleted) == sorted(f"default/{n}" for n in mine)
    assert res.remaining == [] and res.errors == []
    assert set(pods(sim)) == {other_run, unlabelled}
    again = await env_for(1, activity_id="sweep").run(acts.sweep_debug_pods, SweepDebugPodsInput(run_id=RUN, namespaces=["default"]))
    assert (again.deleted, again.remaining) == ([], [])
