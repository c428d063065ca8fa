"""GlusterFS activities against clustersim's r3-okd310-upgrade over real HTTP and the exec
WebSocket (the real ``kubernetes`` client): the seed's offline brick is read, the uid-guarded
delete runs once, the replacement is found, the lock error is retried, a pod whose glusterd is
down is skipped, and ``volume start force`` restarts a sticky brick."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.gluster.activities import GlusterActivities
from activities.cluster.models import PodRef
from activities.gluster.models import GlusterReadInput, GlusterTarget, ReplacementInput, VolumeStartInput
from activities.kube.gateway import KubeGateway
from clustersim import ClusterSim
from clustersim.faults import MUTATING_VERBS
from workflows.shared.glusterfs.assess import assess

pytestmark = pytest.mark.timeout(180)

REG = "glusterfs-registry-volume"
REG_12 = "10.0.0.12:/var/lib/heketi/mounts/vg_5ecf67ed85f71cf28090d7db1acc6433/brick_d364694c7034276c22e264eb2576413b/brick"


class Harness:
    def __init__(self, sim: ClusterSim, gateway: KubeGateway) -> None:
        self.sim, self.gateway = sim, gateway
        self.acts = GlusterActivities(lambda: gateway)
        self.gluster: Any = sim.components["gluster"]

    async def run(self, fn: Callable[..., Any], arg: Any) -> Any:
        return await asyncio.to_thread(ActivityEnvironment().run, fn, arg)

    def pod_deletes(self) -> list[str]:
        return [e.name for e in self.sim.requests.entries() if e.verb in MUTATING_VERBS and e.resource == "pods"]


@pytest.fixture
async def r3() -> AsyncIterator[Harness]:
    async with ClusterSim("r3-okd310-upgrade", time_scale=0.05) as sim:
        gateway = KubeGateway.from_kubeconfig(sim.kubeconfig_path)
        try:
            yield Harness(sim, gateway)
        finally:
            gateway.close()


async def _until(pred: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    for _ in range(int(timeout / 0.2)):
        value = pred()
        if value:
            return value
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


async def test_read_sees_the_seed_brick_offline_and_recovery_brings_it_back(r3: Harness) -> None:
    report = await r3.run(r3.acts.read_gluster, GlusterReadInput())
    assert report.exec_pod == "glusterfs-storage-dz8qj"  # the first usable pod by name (master01)
    assert sorted(report.volume_names) == sorted(v.name for v in report.info) and len(report.info) == 4
    a = assess(report)
    assert a.offline == [f"{REG}: {REG_12}"] and a.fatal == []
    (host,) = a.hosts
    assert (host.host, host.node, host.pod, host.safe) == ("10.0.0.12", "master03.example.com", "glusterfs-storage-r24wg", True)
    assert all(h.problems(3) == [] for v, h in report.heal.items() if v != REG)
    assert any("not connected" in p for p in report.heal[REG].problems(3))

    ref = PodRef(namespace="glusterfs", name=host.pod, uid=host.pod_uid)
    first = await r3.run(r3.acts.delete_gluster_pod, ref)
    again = await r3.run(r3.acts.delete_gluster_pod, ref)  # a retried delete: the uid is gone or terminating
    assert first.deleted and not again.deleted and again.already_gone
    assert r3.pod_deletes() == ["glusterfs-storage-r24wg"]

    async def replaced() -> Any:
        st = await r3.run(r3.acts.find_gluster_replacement, ReplacementInput(node="master03.example.com", old_uid=host.pod_uid))
        return st if st.ready else None

    for _ in range(150):
        st = await replaced()
        if st:
            break
        await asyncio.sleep(0.2)
    else:
        raise AssertionError("no replacement")
    assert st.replacement.node == "master03.example.com" and st.replacement.uid != host.pod_uid
    await _until(lambda: all(b["online"] for b in r3.gluster.bricks_on_host("10.0.0.12")), "bricks on 10.0.0.12 online")
    after = assess(await r3.run(r3.acts.read_gluster, GlusterReadInput(heal=False)))
    assert after.offline == [] and after.hosts == []


async def test_transaction_in_progress_is_retried(r3: Harness) -> None:
    r3.gluster.inject({"kind": "transaction_in_progress", "n": 2})
    report = await r3.run(r3.acts.read_gluster, GlusterReadInput(heal=False, backoff_seconds=0.1))
    assert report.calls[0].attempts == 3 and report.calls[0].error is None
    assert len(report.info) == 4


async def test_glusterd_down_moves_to_the_next_pod_and_hides_its_bricks(r3: Harness) -> None:
    r3.gluster.inject({"kind": "glusterd_down", "host": "master01.example.com"})
    report = await r3.run(r3.acts.read_gluster, GlusterReadInput(heal=False))
    assert report.exec_pod == "glusterfs-storage-jncsl"
    assert "Connection failed" in (report.calls[0].error or "")
    a = assess(report)
    down10 = [b for b in a.offline if ": 10.0.0.10:" in b]
    assert len(down10) == 4 and "10.0.0.10" in a.disconnected_peers
    # 10.0.0.10's bricks are missing everywhere and 10.0.0.12's registry brick is N: the registry volume is down
    assert any(REG in f for f in a.fatal)


async def test_excluded_node_is_never_used_and_no_pod_fails_cleanly(r3: Harness) -> None:
    target = GlusterTarget(exclude_node="master01.example.com")
    report = await r3.run(r3.acts.read_gluster, GlusterReadInput(target=target, heal=False))
    assert report.exec_pod == "glusterfs-storage-jncsl"
    with pytest.raises(ApplicationError) as exc:
        await r3.run(r3.acts.read_gluster, GlusterReadInput(target=GlusterTarget(namespace="nowhere"), heal=False))
    assert exc.value.type == "NoGlusterPod" and "no suitable gluster pod" in exc.value.message


async def test_start_force_restarts_a_sticky_brick(r3: Harness) -> None:
    r3.gluster.inject({"kind": "brick_start_failure", "volume": "heketidbstorage", "brick": "10.0.0.11", "sticky": True,
                       "immediate": True})
    a = assess(await r3.run(r3.acts.read_gluster, GlusterReadInput(heal=False)))
    assert any(b.startswith("heketidbstorage: 10.0.0.11:") for b in a.offline)
    res = await r3.run(r3.acts.gluster_volume_start_force, VolumeStartInput(volume="heketidbstorage"))
    assert res.ok and "success" in res.output
    a2 = assess(await r3.run(r3.acts.read_gluster, GlusterReadInput(heal=False)))
    assert not any(b.startswith("heketidbstorage:") for b in a2.offline)
