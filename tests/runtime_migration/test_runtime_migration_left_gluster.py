"""What a node whose runtime is gone leaves changed in GlusterFS (workflows.shared.glusterfs.left,
issue 39): its pods' DaemonSets and its volumes, narrowed by the last read."""

from __future__ import annotations

from activities.gluster.models import GlusterPod
from workflows.shared.glusterfs.left import node_down_left, volume_items
from workflows.shared.glusterfs.models import Assessment, BrickState, VolumeAssessment

BRICK_HOSTS = {"vol1": {"10.0.0.1", "10.0.0.2"}, "vol2": {"10.0.0.2", "10.0.0.3"}, "vol3": {"g1"}}


def brick(vol: str, host: str, online: bool) -> BrickState:
    return BrickState(volume=vol, name=f"{host}:/b/{vol}", host=host, path=f"/b/{vol}", online=online)


def left(last: Assessment | None, pod_ready_counts: bool = True) -> list[tuple[str, str]]:
    items = node_down_left("g1", ["10.0.0.1"], namespace="glusterfs", pods=["glusterfs-storage-x1z9"], brick_hosts=BRICK_HOSTS,
                           last=last, pod_ready_counts=pod_ready_counts)
    return [(i.target, i.what) for i in items]


def test_without_a_last_read_the_pod_and_every_volume_with_a_brick_on_the_node_are_named():
    assert left(None) == [
        ("DaemonSet glusterfs/glusterfs-storage", "its pod on g1 not Ready (the node's runtime is gone)"),
        ("gluster volume vol1", "brick on g1 offline until the node is back"),
        ("gluster volume vol3", "brick on g1 offline until the node is back"),
    ]


def test_the_last_read_names_only_what_it_still_saw_down():
    last = Assessment(volumes=[VolumeAssessment(name="vol1", bricks=[brick("vol1", "10.0.0.1", False)]),
                               VolumeAssessment(name="vol3", bricks=[brick("vol3", "g1", True)])],
                      pods=[GlusterPod(name="glusterfs-storage-x1z9", uid="u", node="g1", phase="Running", ready=True)])
    assert left(last) == [("gluster volume vol1", "brick on g1 offline until the node is back")]
    # Before the node registered again a Ready pod is stale: the DaemonSet stays named.
    assert left(last, pod_ready_counts=False)[0][0] == "DaemonSet glusterfs/glusterfs-storage"


def test_volume_items_join_each_volumes_lines():
    items = volume_items({"vol2": ["a", "b"], "vol1": ["c"]})
    assert [(i.target, i.what) for i in items] == [("gluster volume vol2", "a; b"), ("gluster volume vol1", "c")]
