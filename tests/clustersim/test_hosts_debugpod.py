"""The debug-pod route: lockkeeper's DebugPodExecutor (a privileged pod plus exec of
``chroot /host ARGV``) runs commands on the node's simulated host through the real exec API."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from activities.host.debug_pod import DebugPodExecutor
from activities.kube.gateway import KubeGateway
from clustersim.execsim import ExecRequest
from clustersim.hosts import HostsComponent
from clustersim.sim import ClusterSim
from tests.clustersim.test_hosts_interp import SECTION

NODE = "okd-worker-01"


@pytest.fixture
async def sim() -> AsyncIterator[ClusterSim]:
    # R2's nodes, each with the default host profile (the hosts section names no host).
    section = {k: v for k, v in SECTION.items() if k != "hosts"}
    async with ClusterSim("r2-pdb-blocked", time_scale=0.05, component_sections={"hosts": section}) as s:
        if s.store.try_get("namespaces", "default") is None:
            s.store.create("namespaces", {"metadata": {"name": "default"}})
        yield s


@contextmanager
def debug_executor(sim: ClusterSim) -> Iterator[DebugPodExecutor]:
    """A DebugPodExecutor against the sim, through lockkeeper's own Kubernetes gateway."""
    gateways: list[Any] = []

    def factory() -> Any:
        gateways.append(KubeGateway.from_kubeconfig(str(sim.kubeconfig_path), None))
        return gateways[-1]

    try:
        yield DebugPodExecutor(NODE, namespace="default", start_timeout=60, gateway_factory=factory)
    finally:
        for g in gateways:
            close = getattr(g, "close", None)
            if close is not None:
                close()
        gc.collect()


async def test_debug_pod_executor_runs_on_the_host(sim: ClusterSim) -> None:
    hc = sim.components["hosts"]
    assert isinstance(hc, HostsComponent)
    with debug_executor(sim) as ex:
        r = await ex.run(["rpm", "-q", "cri-o", "docker"], timeout=30)
        assert r.exit_code == 1
        assert r.stdout == "cri-o-1.11.16-0.11.dev.rhaos3.11.gitd6a416d.el7.x86_64\npackage docker is not installed\n"
        r = await ex.run(["tee", "/etc/origin/node/marker"], timeout=30, stdin="from the debug pod\n")
        assert r.exit_code == 0
        assert hc.host(NODE).files["/etc/origin/node/marker"] == "from the debug pod\n"
        r = await ex.run(["systemctl", "is-active", "crio"], timeout=30)
        assert (r.exit_code, r.stdout) == (0, "active\n")
    log = [rec for rec in hc.host(NODE).log if rec.via == "debug-pod"]
    assert [rec.argv[0] for rec in log] == ["rpm", "tee", "systemctl"]
    # The debug pods are gone (or going) afterwards.
    left = sim.store.list("pods", "default", label_selector="lockkeeper.io/debug-pod")
    assert all(p["metadata"].get("deletionTimestamp") for p in left)


async def test_debug_route_fails_while_runtime_is_down(sim: ClusterSim) -> None:
    hc = sim.components["hosts"]
    assert isinstance(hc, HostsComponent)
    pod: dict[str, Any] = {"metadata": {"name": "dbg", "namespace": "default",
                                        "labels": {"lockkeeper.io/debug-pod": "true"}},
                           "spec": {"nodeName": NODE, "containers": [{"name": "container-00", "image": "ubi"}]}}
    req = ExecRequest("default", pod, "container-00", ["chroot", "/host", "hostname"])
    result, route = await sim.exec_router.run(req)
    assert (route, result.stdout, result.exit_code) == ("hosts-debug-pod", f"{NODE}\n".encode(), 0)
    await hc.run(NODE, ["systemctl", "stop", "crio"])
    result, _ = await sim.exec_router.run(req)
    assert result.exit_code != 0 and result.stderr == b'container not found ("container-00")\n'
    # A pod without the label is not routed to the host.
    plain = ExecRequest("default", {**pod, "metadata": {"name": "x", "namespace": "default"}}, "c",
                        ["chroot", "/host", "hostname"])
    assert sim.exec_router.route_for(plain) != "hosts-debug-pod"


async def test_a_cancelled_command_never_runs_once_its_call_is_given_up(sim: ClusterSim) -> None:
    """A call given up while its debug pod is still starting (an image pull on a cold node):
    the pod is deleted and the command does not run later, so a step that is not safe to repeat
    cannot run behind an unknown outcome (before, the executor's thread went on and ran it)."""
    hc = sim.components["hosts"]
    assert isinstance(hc, HostsComponent) and sim.agents is not None
    sim.agents.options.pod_start_seconds = 40.0  # 2 s of real time at the fixture's time scale
    with debug_executor(sim) as ex:
        call = asyncio.create_task(ex.run(["tee", "/etc/origin/node/late"], timeout=30, stdin="late\n"))
        while not sim.store.list("pods", "default", label_selector="lockkeeper.io/debug-pod"):
            await asyncio.sleep(0.05)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.sleep(sim.clock.real(40.0) + 1.5)  # past the moment the pod would have run
    assert "/etc/origin/node/late" not in hc.host(NODE).files
    assert [rec.argv for rec in hc.host(NODE).log if rec.via == "debug-pod"] == []
    left = sim.store.list("pods", "default", label_selector="lockkeeper.io/debug-pod")
    assert all(p["metadata"].get("deletionTimestamp") for p in left)
