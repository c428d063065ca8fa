"""The ``check_preconditions`` activity against clustersim ``r3-okd310-upgrade`` over real HTTP and
real SSH (lockkeeper's own gateway and executors, the hosts' keys and known_hosts), and through
debug pods on the simulator's exec API: every kind with a case that holds and one that does not,
the R3 field findings among them (an action's executable missing on the worker, ``region`` still
selected by master-config's ``defaultNodeSelector: region=primary``, kubelets newer than the
masters), and a check that errors, or outlives its bound, failing alone without crashing the
activity, which heartbeats while it runs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from activities.host.factory import ExecutorFactory
from activities.host.models import ExecBackend, HostAccess
from activities.kube.errors import KubeconfigError
from activities.kube.gateway import KubeGateway
from activities.preflight.activities import PreflightActivities
from activities.preflight.models import (
    CheckPreconditionsInput,
    HostExecutable,
    InputCheck,
    LabelUnreferenced,
    NamedAccess,
    NamesExist,
    PortFree,
    Precondition,
    PreconditionResult,
    RebootAccess,
    SelectorMatches,
    UpdateStep,
    VersionSkew,
    WorkerExecutable,
)
from clustersim import ClusterSim
from clustersim.hosts import HostsComponent

pytestmark = pytest.mark.timeout(180)

M1, M2 = "master01.example.com", "master02.example.com"
N1, N3, N4 = "node01.example.com", "node03.example.com", "node04.example.com"


class World:
    def __init__(self, sim: ClusterSim, gw: KubeGateway) -> None:
        self.sim, self.gw = sim, gw
        hc = sim.components["hosts"]
        assert isinstance(hc, HostsComponent)
        self.hosts = hc
        self.executors = ExecutorFactory(hc.client_env(), gateway_factory=lambda: gw)
        self.acts = PreflightActivities(lambda: gw, self.executors)
        self.beats: list[Any] = []

    def ssh(self, node: str) -> HostAccess:
        host, port = self.hosts.ssh_map[node].split(":")
        return HostAccess(backend=ExecBackend.SSH, host=host, port=int(port))

    @staticmethod
    def debug(node: str) -> HostAccess:
        return HostAccess(backend=ExecBackend.DEBUG_POD, node=node, namespace="default")

    async def check(self, *preconditions: Precondition, acts: PreflightActivities | None = None,
                    **kw: Any) -> list[PreconditionResult]:
        env = ActivityEnvironment()
        env.on_heartbeat = lambda *details: self.beats.append(details)
        out = await env.run((acts or self.acts).check_preconditions,
                            CheckPreconditionsInput(preconditions=list(preconditions), **kw))
        assert [r.precondition for r in out.results] == list(preconditions)  # one each, in order
        assert all(r.checked_at is not None and r.checked_at.tzinfo is not None for r in out.results)
        return out.results

    def log(self, node: str) -> list[list[str]]:
        return [rec.argv for rec in self.hosts.host(node).log]


@pytest.fixture
async def world() -> AsyncIterator[World]:
    async with ClusterSim("r3-okd310-upgrade", time_scale=0.05) as sim:
        gw = KubeGateway.from_kubeconfig(str(sim.kubeconfig_path))
        try:
            yield World(sim, gw)
        finally:
            gw.close()


def states(results: list[PreconditionResult]) -> list[str]:
    return [str(r.state) for r in results]


async def test_executables_on_the_worker_and_on_hosts(world: World) -> None:
    """node-upgrade's field finding: ansible-playbook was missing on the worker (exit 127 after
    the drain); the preflight names it before anything is touched."""
    w = world
    found, missing, bad_path, on_host, not_on_host, by_pod, local = await w.check(
        WorkerExecutable(program="sh", why="the action runs it"),
        WorkerExecutable(program="lockkeeper-no-such-ansible-playbook", why="the upgrade action runs it for each node"),
        WorkerExecutable(program="/nonexistent/bin/ansible-playbook"),
        HostExecutable(program="docker", node=N1, access=w.ssh(N1)),
        HostExecutable(program="ansible-playbook", node=N1, access=w.ssh(N1)),
        HostExecutable(program="docker", node=N4, access=w.debug(N4)),
        HostExecutable(program="sh", node="localhost", access=HostAccess()),
    )
    assert states([found, missing, bad_path, on_host, not_on_host, by_pod, local]) == [
        "ok", "failed", "failed", "ok", "failed", "ok", "ok"]
    assert local.resolved == found.resolved and local.detail.endswith("(local)")
    assert found.resolved is not None and found.resolved.endswith("/sh") and found.detail == f"found at {found.resolved}"
    assert missing.problem() == ("lockkeeper-no-such-ansible-playbook on the worker: not found on the worker's PATH "
                                 "(needed: the upgrade action runs it for each node)")
    assert missing.findings[0].startswith("PATH=")
    assert bad_path.detail == "no executable file at that path on the worker"
    assert on_host.resolved == "/usr/bin/docker"
    assert not_on_host.detail.startswith("not found on the host's PATH (command -v exited 1, ssh ")
    assert by_pod.resolved == "/usr/bin/docker" and "debug-pod node/node04.example.com" in by_pod.detail
    assert ["command", "-v", "ansible-playbook"] in w.log(N1)
    assert [rec.via for rec in w.hosts.host(N4).log if rec.argv[:1] == ["command"]] == ["debug-pod"]


async def test_reboot_access_by_ssh_and_debug_pod(world: World) -> None:
    """network-migration's field finding: it switched the network before it knew it could reach
    the nodes. SSH must connect and run; a debug pod must start on the node and run (and is
    deleted again)."""
    w = world
    await w.hosts.set_fault(N3, "ssh_down")
    assert (await w.hosts.run(N4, ["systemctl", "stop", "docker"]))[2] == 0  # its debug pod's container is gone
    results = await w.check(
        RebootAccess(node=N1, access=w.ssh(N1)), RebootAccess(node=N3, access=w.ssh(N3), why="it reboots the node"),
        RebootAccess(node=N1, access=w.debug(N1)), RebootAccess(node=N4, access=w.debug(N4)),
        RebootAccess(node=N1, access=HostAccess()),
    )
    ssh_ok, ssh_down, pod_ok, pod_down, local = results
    assert states(results) == ["ok", "failed", "ok", "failed", "ok"]
    assert ssh_ok.detail.startswith("ran true there in ")
    assert ssh_down.detail.startswith("cannot run commands there: ssh root@127.0.0.1:") and "(needed: it reboots" in ssh_down.problem()
    assert pod_down.detail == 'true did not run: true exit 126: container not found ("container-00")'
    assert local.detail == "local commands need no access"
    assert [rec.via for rec in w.hosts.host(N1).log if rec.argv == ["true"]] == ["ssh", "debug-pod"]
    left = w.sim.store.list("pods", "default", label_selector="lockkeeper.io/debug-pod")
    assert all(p["metadata"].get("deletionTimestamp") for p in left)  # the probe pods are gone or going


async def test_ports_well_known_in_use_and_free(world: World) -> None:
    """vxlan-port-change's field finding: --port 53 (dnsmasq) and --port 10250 (the kubelet) were
    accepted. The table refuses them before the host is asked; a port the procedure takes back on
    purpose is still refused while something listens on it."""
    w = world
    access = w.ssh(N1)
    results = await w.check(
        PortFree(port=4889, node=N1, access=access, why="the new VXLAN port"),
        PortFree(port=53, node=N1, access=access, why="the new VXLAN port"),
        PortFree(port=10250, protocol="tcp", node=N1, access=access),
        PortFree(port=4789, node=N1, access=access, allow_well_known=True),
        PortFree(port=10250, protocol="tcp", node=N1, access=access, allow_well_known=True),
        PortFree(port=24007, protocol="tcp", node=M1, access=w.ssh(M1), glusterfs=True),
        PortFree(port=4889, node=N1),
    )
    free, dns, kubelet, vxlan, kubelet_taken, gluster, blind = results
    assert states(results) == ["ok", "failed", "failed", "failed", "failed", "failed", "not-run"]
    assert free.detail == "free (2 udp sockets listen, none on 4889)"
    assert dns.problem() == ("port 53/udp on node01.example.com: a well-known cluster port: 53/tcp+udp (DNS: dnsmasq on "
                             "every OpenShift 3.x node, CoreDNS on 4.x) (needed: the new VXLAN port)")
    assert "kubelet 10250" in kubelet.detail
    assert vxlan.detail == "in use on the host: 0.0.0.0:4789" and vxlan.findings[0].startswith("UNCONN")
    assert kubelet_taken.detail == "in use on the host: *:10250"
    assert "GlusterFS glusterd" in gluster.detail
    assert blind.why_not_run == "no host access given: the host's sockets were not listed"
    assert blind.detail == "not a well-known port"
    # Only the checks that got past the table listed the sockets: 4889, 4789/udp, 10250/tcp.
    assert sorted(a for a in w.log(N1) if a[0] == "ss") == [["ss", "-Htln"], ["ss", "-Huln"], ["ss", "-Huln"]]


async def test_label_references_that_remain(world: World) -> None:
    """node-selector-migration's field finding: it removed region while master-config's
    defaultNodeSelector still said region=primary, a value its mapping did not cover."""
    w = world
    create = w.gw.create  # blocking: in a thread, while the simulator serves on this loop
    await asyncio.to_thread(create, "Namespace", {"metadata": {"name": "team-a",
                                                               "annotations": {"openshift.io/node-selector": "region=primary"}}})
    await asyncio.to_thread(create, "Deployment", {
        "metadata": {"name": "spread", "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "spread"}},
                 "template": {"metadata": {"labels": {"app": "spread"}}, "spec": {
                     "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                         {"matchExpressions": [{"key": "region", "operator": "In", "values": ["infra", "primary"]}]}]}}},
                     "containers": [{"name": "c", "image": "registry.example.com/app:1"}]}}}}, "default")
    masters = [NamedAccess(name=M1, access=w.ssh(M1)), NamedAccess(name=M2, access=w.debug(M2))]
    results = await w.check(
        LabelUnreferenced(label="region", covered=["region=infra"], masters=masters, why="the migration removes it"),
        LabelUnreferenced(label="region=infra", covered=["region=infra"], masters=masters),
        LabelUnreferenced(label="zone", covered=["zone"], masters=masters),
        LabelUnreferenced(label="zone", covered=["zone"]),
        LabelUnreferenced(label="region", covered=["region"], masters=[NamedAccess(name=N1, access=w.ssh(N1))]),
    )
    region, infra_only, zone, zone_blind, unreadable = results
    assert states(results) == ["failed", "ok", "ok", "not-run", "failed"]
    assert region.detail == (
        "still selected by Deployment default/spread (region In (infra, primary)); Namespace team-a (region=primary); "
        f"MasterConfig {M1} (region=primary) and 1 more; values no mapping covers: region=primary")
    lines = region.findings
    assert "DeploymentConfig default/router (/spec/template/spec/nodeSelector: region=infra): rewritten by the procedure" in lines
    assert (f"MasterConfig {M2} (/etc/origin/master/master-config.yaml#projectConfig.defaultNodeSelector: region=primary): "
            "no mapping covers it") in lines
    assert "Job: not served by this API server, not scanned" in lines
    assert infra_only.detail == ("nothing else selects it on 2 master(s), the workloads and namespaces "
                                 "(3 reference(s) rewritten by the procedure)")
    assert zone.detail == "nothing else selects it on 2 master(s), the workloads and namespaces"
    assert zone_blind.why_not_run == "no master access given: /etc/origin/master/master-config.yaml's " \
                                     "projectConfig.defaultNodeSelector was not read"
    assert zone_blind.detail == "no workload or namespace selects it"
    assert unreadable.detail.endswith("master-config.yaml not read on 1 master(s)")
    assert any(f.startswith(f"MasterConfig {N1}: cat exit 1") for f in unreadable.findings)


async def test_names_selectors_and_version_skew(world: World) -> None:
    """vxlan-port-change ignored --node nosuch-node; an unknown --canary and an empty --selector
    failed the workflow; node-upgrade upgraded kubelets past the control plane's version."""
    w = world
    results = await w.check(
        NamesExist(names=[N1, "node02.example.com"], role="canary", label="region=infra"),
        NamesExist(names=[N1, "nosuch-node"], why="--node"),
        NamesExist(names=[N3], role="canary", label="region=infra"),
        SelectorMatches(selector="region=infra"),
        SelectorMatches(selector="region=nowhere", why="--selector"),
        SelectorMatches(selector="region=infra", at_least=3),
        VersionSkew(node=N1, target_version="v1.9.1+a0ce1bc657"),
        VersionSkew(node=N1, target_version="v1.10.0+b81c8f8"),
        VersionSkew(node=N1, target_version="v1.10.0+b81c8f8", control_plane_version="v1.9.1+a0ce1bc657"),
        VersionSkew(node=N1, target_version="latest"),
        InputCheck(about="--action-command", ok=True, detail="{node} is in the command"),
        InputCheck(about="--action-command", ok=False, detail="no {node} in the command: it would run on every node at once"),
    )
    assert states(results) == ["ok", "failed", "failed", "ok", "failed", "failed", "ok", "failed", "failed", "failed", "ok",
                               "failed"]
    names, nosuch, unlabelled, infra, nowhere, too_few, skew_ok, skew_api, skew_r3, skew_bad, inp_ok, inp_bad = results
    assert names.detail == "all 2 exist, labelled region=infra"
    assert nosuch.problem() == f"node {N1}, nosuch-node: no Node named nosuch-node (needed: --node)"
    assert unlabelled.detail == f"{N3} not labelled region=infra"
    assert infra.detail == f"matches 2 node(s): {N1}, node02.example.com"
    assert nowhere.detail == "matches 0 node(s)"
    assert too_few.detail.endswith(", at least 3 needed")
    # The r3 API answers OKD 3.9's Kubernetes until its masters run 3.10 (clustersim /version).
    assert skew_ok.detail == "not newer than the control plane's v1.9.1+a0ce1bc657 (the API server's /version)"
    assert skew_api.detail.startswith("newer than the control plane's v1.9.1+a0ce1bc657 (the API server's /version)")
    assert skew_r3.detail == ("newer than the control plane's v1.9.1+a0ce1bc657 (given): a kubelet must not be newer than "
                              "kube-apiserver (Kubernetes version-skew policy)")
    assert "not a Kubernetes version" in skew_bad.detail
    assert (inp_ok.detail, inp_bad.problem()) == ("{node} is in the command",
                                                  "--action-command: no {node} in the command: it would run on every node at once")


async def test_a_check_that_errors_or_hangs_fails_alone_and_the_activity_heartbeats(world: World) -> None:
    w = world

    def no_cluster() -> KubeGateway:
        raise KubeconfigError("no kubeconfig at /nonexistent")

    release, finished = threading.Event(), threading.Event()

    def slow_which(program: str) -> str | None:  # hangs until the test lets it go
        release.wait(60)
        finished.set()
        return None

    broken = PreflightActivities(no_cluster, ExecutorFactory(w.hosts.client_env(), gateway_factory=no_cluster), which=slow_which)
    try:
        results = await w.check(
            NamesExist(names=[N1]), VersionSkew(node=N1, target_version="v1.10.0"), RebootAccess(node=N1, access=w.debug(N1)),
            RebootAccess(node=N1, access=w.ssh(N1)), WorkerExecutable(program="sh"),
            acts=broken, check_timeout_seconds=1.5,
        )
        assert not finished.is_set()  # the activity answered while the hanging lookup still hung
    finally:
        release.set()
    names, skew, pod, ssh, slow = results
    assert states(results) == ["failed", "failed", "failed", "ok", "failed"]
    assert names.detail == skew.detail == "the check could not be made: no kubeconfig at /nonexistent"
    assert pod.detail.startswith("cannot run commands there: debug pod on node node01.example.com: no cluster access")
    assert slow.detail == "the check did not finish within 1.5 s"
    assert w.beats and w.beats[0][0]["of"] == 5
    assert await asyncio.to_thread(finished.wait, 10)  # the released lookup's thread ends with the test


async def test_update_step_reads_openshift_3_from_version(world: World) -> None:
    """Issue 41: an update of the cluster's version goes one minor version at a time and never
    back. r3 serves no ClusterVersion (OKD 3.9): its /version v1.9.1 is OpenShift 3.9."""
    w = world
    nxt, same, skip, down, major, unknown, bad = await w.check(
        UpdateStep(target_version="3.10"), UpdateStep(target_version="v3.9.0"), UpdateStep(target_version="3.11", why="--to-version"),
        UpdateStep(target_version="3.8"), UpdateStep(target_version="4.1"), UpdateStep(), UpdateStep(target_version="latest"))
    assert states([nxt, same, skip, down, major, unknown, bad]) == ["ok", "ok", "failed", "failed", "failed", "not-run", "failed"]
    assert nxt.detail == "3.9 -> 3.10: one minor version (now 3.9, the API server's /version v1.9.1+a0ce1bc657)"
    assert same.detail.startswith("3.9 -> 3.9: the same minor version")
    assert skip.problem() == ("update of the cluster's version to 3.11: 3.9 -> 3.11 is 2 minor versions at once: one minor "
                              "version at a time (upgrade to 3.10 first; skipped: 3.10) (now 3.9, the API server's /version "
                              "v1.9.1+a0ce1bc657) (needed: --to-version)")
    assert "is a downgrade" in down.detail and "changes the major version" in major.detail
    assert unknown.why_not_run is not None and "--to-version" in unknown.why_not_run
    assert "not a release version" in bad.detail
