"""The pure GlusterFS assessment: offline bricks, fatal volumes, hosts to restart, restart safety."""

from __future__ import annotations

import pytest

from activities.gluster.models import (
    Brick,
    BrickStatus,
    GlusterPod,
    GlusterReport,
    HealBrick,
    HealEntry,
    HealInfo,
    NodeAddresses,
    Peer,
    VolumeInfo,
    VolumeStatus,
)
from workflows.shared.glusterfs.assess import assess, map_host

HOSTS = {"10.0.0.10": "master01", "10.0.0.11": "master02", "10.0.0.12": "master03"}


def _report(volumes: dict[str, list[str]], down: dict[str, list[str]] | None = None, *, missing: dict[str, list[str]] | None = None,
            replica: int = 3, arbiter: bool = False, disconnected: list[str] = (), heal: dict[str, HealInfo] | None = None) -> GlusterReport:
    """``volumes``: name -> brick hosts in Brick1..N order; ``down``: name -> hosts with Online N;
    ``missing``: name -> hosts absent from volume status."""
    down, missing = down or {}, missing or {}
    info, status = [], []
    for name, hosts in volumes.items():
        bricks = [Brick(host=h, path=f"/b/{name}/{i}", arbiter=arbiter and (i % replica == replica - 1)) for i, h in enumerate(hosts)]
        info.append(VolumeInfo(name=name, type="Replicate", status="Started", replica_count=replica, brick_count=len(bricks),
                               arbiter_count=int(arbiter), bricks=bricks))
        status.append(VolumeStatus(name=name, bricks=[
            BrickStatus(host=b.host, path=b.path, online=b.host not in down.get(name, []), port=49152)
            for b in bricks if b.host not in missing.get(name, [])]))
    pods = [GlusterPod(name=f"glusterfs-storage-{n}", uid=f"uid-{n}", node=n, pod_ip=ip, host_ip=ip, phase="Running", ready=True)
            for ip, n in HOSTS.items()]
    nodes = [NodeAddresses(name=n, addresses=[ip], ready=True) for ip, n in HOSTS.items()]
    peers = [Peer(hostname=h, uuid=f"u-{h}", connected=h not in disconnected) for h in HOSTS if h != "10.0.0.10"]
    return GlusterReport(exec_pod="glusterfs-storage-master01", pods=pods, nodes=nodes, info=info, status=status, peers=peers,
                         heal=heal or {})


THREE = ["10.0.0.11", "10.0.0.12", "10.0.0.10"]


@pytest.mark.parametrize(
    ("name", "report", "rule", "offline", "fatal", "hosts"),
    [
        ("healthy", _report({"reg": THREE, "heketi": THREE}), "per-volume", [], 0, []),
        ("seed 002: one brick Online N", _report({"reg": THREE, "heketi": THREE}, {"reg": ["10.0.0.12"]}), "per-volume",
         ["reg: 10.0.0.12:/b/reg/1"], 0, [("10.0.0.12", "master03", True)]),
        ("missing from status counts as offline", _report({"reg": THREE}, missing={"reg": ["10.0.0.11"]}), "per-volume",
         ["reg: 10.0.0.11:/b/reg/0"], 0, [("10.0.0.11", "master02", True)]),
        ("two bricks of one volume: fatal", _report({"app": THREE, "reg": THREE}, {"app": ["10.0.0.11", "10.0.0.12"]}), "per-volume",
         ["app: 10.0.0.11:/b/app/0", "app: 10.0.0.12:/b/app/1"], 1,
         [("10.0.0.11", "master02", False), ("10.0.0.12", "master03", False)]),
        ("restarting one host would take a second brick down", _report({"reg": THREE, "app": THREE},
                                                                        {"reg": ["10.0.0.12"], "app": ["10.0.0.10"]}), "per-volume",
         ["reg: 10.0.0.12:/b/reg/1", "app: 10.0.0.10:/b/app/2"], 0,
         [("10.0.0.12", "master03", False), ("10.0.0.10", "master01", False)]),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_assess_table(name: str, report: GlusterReport, rule: str, offline: list[str], fatal: int, hosts: list[tuple]) -> None:
    a = assess(report, rule)  # type: ignore[arg-type]
    assert a.offline == offline
    assert len(a.fatal) == fatal
    assert [(h.host, h.node, h.safe) for h in a.hosts] == hosts
    assert a.bricks_online == (not offline)


def test_fatal_message_names_every_brick() -> None:
    a = assess(_report({"app": THREE}, {"app": ["10.0.0.11", "10.0.0.12"]}))
    (msg,) = a.fatal
    assert "10.0.0.11:/b/app/0" in msg and "10.0.0.12:/b/app/1" in msg and "do not continue" in msg


def test_unsafe_reason_names_the_volume_and_the_brick_already_down() -> None:
    a = assess(_report({"reg": THREE, "app": THREE}, {"reg": ["10.0.0.12"], "app": ["10.0.0.10"]}))
    h = a.hosts[0]
    assert h.host == "10.0.0.12" and not h.safe
    assert "volume app" in h.unsafe_reason and "10.0.0.10:/b/app/2 is already down" in h.unsafe_reason


def test_per_replica_set_rule_on_a_distributed_replicate_volume() -> None:
    # 2 x 3: Brick1-3 and Brick4-6; one brick down in each set is fine per replica set, fatal per volume
    six = THREE + ["10.0.0.12", "10.0.0.10", "10.0.0.11"]
    r = _report({"dr": six}, {"dr": ["10.0.0.11"]})
    per_set = assess(r, "per-replica-set")
    assert per_set.fatal == [] and per_set.volumes[0].replica_sets[1] == [f"10.0.0.{h}:/b/dr/{i}" for i, h in ((3, 12), (4, 10), (5, 11))]
    per_volume = assess(r, "per-volume")
    assert len(per_volume.fatal) == 1  # 10.0.0.11 has a brick in both sets
    # restarting 10.0.0.12 with 10.0.0.11 down: per set, each set then has two down -> unsafe
    assert [(h.host, h.safe) for h in per_set.hosts] == [("10.0.0.11", True)]
    r2 = _report({"dr": six}, {"dr": ["10.0.0.10"]}, missing={})
    # 10.0.0.10 holds Brick3 and Brick5: restarting it keeps one per set down -> safe per set
    assert [(h.host, h.safe) for h in assess(r2, "per-replica-set").hosts] == [("10.0.0.10", True)]


def test_disconnected_peer_bricks_are_offline() -> None:
    a = assess(_report({"reg": THREE}, missing={"reg": ["10.0.0.12"]}, disconnected=["10.0.0.12"]))
    (b,) = [b for b in a.volumes[0].bricks if not b.online]
    assert b.reason.startswith("peer disconnected") and a.disconnected_peers == ["10.0.0.12"]


def test_arbiter_bricks_are_marked_and_count() -> None:
    a = assess(_report({"arb": THREE}, {"arb": ["10.0.0.10"]}, arbiter=True))
    assert [b.arbiter for b in a.volumes[0].bricks] == [False, False, True]
    assert a.offline == ["arb: 10.0.0.10:/b/arb/2"] and a.hosts[0].safe


def test_heal_problems_and_split_brain_are_reported() -> None:
    heal = {"reg": HealInfo(volume="reg", bricks=[
        HealBrick(host=h, path=f"/b/reg/{i}", entries=2 if i == 0 else 0,
                  files=[HealEntry(path="/f", state="split-brain"), HealEntry(path="/g")] if i == 0 else [])
        for i, h in enumerate(THREE)])}
    a = assess(_report({"reg": THREE}, heal=heal))
    assert a.volumes[0].heal_entries == 2 and not a.heal_clean and not a.healthy
    assert any("split-brain" in f for f in a.fatal)


def test_map_host_by_ip_then_node_address_else_unmapped() -> None:
    pods = [GlusterPod(name="p1", uid="u1", node="n1", pod_ip="10.1.0.1", host_ip="10.1.0.1", phase="Running", ready=True),
            GlusterPod(name="p2", uid="u2", node="n2", pod_ip="10.128.0.5", host_ip="10.1.0.2", phase="Running", ready=True)]
    nodes = [NodeAddresses(name="n1", addresses=["10.1.0.1"]), NodeAddresses(name="n3", addresses=["192.168.9.3", "n3.example.com"])]
    assert map_host("10.1.0.1", pods, nodes)[0] == "n1"
    assert map_host("10.1.0.2", pods, nodes)[1].name == "p2"  # host IP
    assert map_host("n3.example.com", pods, nodes) == ("n3", None)  # node found, no pod there
    assert map_host("172.16.0.9", pods, nodes) == (None, None)
    a = assess(_report({"reg": ["10.0.0.11", "10.0.0.12", "172.16.0.9"]}, {"reg": ["172.16.0.9"]}))
    assert a.unmapped == ["brick host 172.16.0.9 maps to no node"]


def test_stopped_volume_is_neither_fatal_nor_a_restart() -> None:
    r = _report({"reg": THREE})
    r.info[0].status = "Stopped"
    r.status = []
    a = assess(r)
    assert a.fatal == [] and a.hosts == [] and a.offline == [] and all(b.reason == "volume Stopped" for b in a.volumes[0].bricks)


def test_storage_network_brick_host_maps_by_glusterd_uuid() -> None:
    r = _report({"reg": ["192.168.50.11", "10.0.0.12", "10.0.0.10"]}, {"reg": ["192.168.50.11"]})
    r.info[0].bricks[0].host_uuid = "u-master02"
    assert assess(r).unmapped == ["brick host 192.168.50.11 maps to no node"]
    r.pod_uuids = {"glusterfs-storage-master02": "u-master02"}
    a = assess(r)
    assert a.unmapped == [] and [(h.host, h.node, h.pod) for h in a.hosts] == [("192.168.50.11", "master02", "glusterfs-storage-master02")]
