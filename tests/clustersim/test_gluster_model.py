"""The GlusterFS model (pure, simulated time passed explicitly): heal model, brick start faults,
split-brain, quorum and the brick timeline (procedures-spec §8.4)."""

from __future__ import annotations

import pytest

from clustersim.gluster.cli import run_gluster
from clustersim.gluster.config import FaultCfg, parse_section
from clustersim.gluster.model import GlusterError, GlusterState

HOSTS = [{"node": f"node{i}", "address": f"10.0.0.{i}"} for i in (1, 2, 3)]


def state(write_rate: float = 2.0, heal_rate: float = 4.0, **extra: object) -> GlusterState:
    sec = {"write_rate": write_rate, "heal_rate": heal_rate, "hosts": HOSTS,
           "volumes": [{"name": "vol_a", "bricks": ["10.0.0.1", "10.0.0.2", "10.0.0.3"]},
                       {"name": "vol_b", "bricks": ["node1", "node2", "node3", "node2", "node3", "node1"]}], **extra}
    return GlusterState(parse_section(sec))


def pending(st: GlusterState, volume: str) -> list[int]:
    snap = st.snapshot(st.now)
    vol = next(v for v in snap["volumes"] if v["name"] == volume)
    return [b["pending_heal"] for b in vol["bricks"]]


def heal_count(st: GlusterState, volume: str, local: str = "node1") -> list[str]:
    out, _, code = run_gluster(st, st.peer(local), ["gluster", "volume", "heal", volume, "info"], st.now)
    assert code == 0
    return [line.split(": ", 1)[1] for line in out.split("\n") if line.startswith("Number of entries:")]


def test_writes_while_a_brick_is_down_pile_up_and_drain_at_heal_rate() -> None:
    st = state()
    st.advance(10)
    assert pending(st, "vol_a") == [0, 0, 0]  # all online: nothing to heal
    st.set_host_blocked("node3", True, "runtime_stopped", 10)
    st.advance(20)  # 10 s x 2 writes/s, all to vol_a's only replica set
    assert pending(st, "vol_a") == [20, 20, 0]
    assert heal_count(st, "vol_a") == ["20", "20", "-"]
    # vol_b has two sets; writes alternate, and node3 holds a brick of each set.
    assert pending(st, "vol_b") == [10, 10, 0, 10, 0, 10]
    st.set_host_blocked("node3", False, "runtime_started", 20)
    assert st.snapshot(20)["volumes"][0]["bricks"][2]["online"] is True
    st.advance(22.5)  # 2.5 s x 4 entries/s
    assert pending(st, "vol_a") == [10, 10, 0]
    out, _, _ = run_gluster(st, st.peer("node1"), ["gluster", "volume", "heal", "vol_a", "info"], 22.5)
    assert out.count(" - Possibly undergoing heal\n") == 2  # the oldest entry, on both holders
    st.advance(30)
    assert pending(st, "vol_a") == [0, 0, 0]
    assert heal_count(st, "vol_a") == ["0", "0", "0"]


def test_no_client_quorum_means_failed_writes_not_entries() -> None:
    st = state()
    st.set_host_blocked("node2", True, "reboot_started", 0)
    st.set_host_blocked("node3", True, "reboot_started", 0)
    st.advance(5)
    assert pending(st, "vol_a") == [0, 0, 0]
    assert st.snapshot(5)["volumes"][0]["failed_writes"] == 10


def test_one_shot_brick_start_failure_fails_one_pod_restart() -> None:
    st = state()
    st.set_pod("node2", True, "uid-1", 0)
    st.apply_fault(FaultCfg(kind="brick_start_failure", volume="vol_a", brick="10.0.0.2"), 1)
    assert st.brick("vol_a", "10.0.0.2").online  # armed, not yet used
    st.set_pod("node2", False, None, 2)  # pod deleted
    st.set_pod("node2", True, "uid-2", 3)  # replacement Ready: this start fails
    assert not st.brick("vol_a", "10.0.0.2").online
    assert st.brick("vol_b", "2").online  # only the faulted brick
    st.set_pod("node2", True, "uid-3", 4)  # another replacement (uid change while Ready): works
    b = st.brick("vol_a", "10.0.0.2")
    assert b.online and b.pid > 0
    reasons = [e["reason"] for e in st.timeline if e["brick"] == b.name]
    assert reasons[1:] == ["GlusterFS pod gone or not Ready", "GlusterFS pod Ready: brick failed to start (fault)",
                           "GlusterFS pod Ready"]


def test_immediate_one_shot_is_fixed_by_the_next_restart() -> None:
    st = state()
    st.apply_fault(FaultCfg(kind="brick_start_failure", volume="vol_a", brick="node3", immediate=True), 0)
    assert not st.brick("vol_a", "node3").online
    st.set_pod("node3", False, None, 1)
    st.set_pod("node3", True, "new", 2)
    assert st.brick("vol_a", "node3").online


def test_sticky_failure_needs_volume_start_force() -> None:
    st = state()
    st.apply_fault(FaultCfg(kind="brick_start_failure", volume="vol_a", brick="10.0.0.1:" +
                            st.brick("vol_a", "1").path, sticky=True, immediate=True), 0)
    for t in (1, 3, 5):
        st.set_pod("node1", False, None, t)
        st.set_pod("node1", True, f"u{t}", t + 1)
        assert not st.brick("vol_a", "1").online
    out, err, code = run_gluster(st, st.peer("node2"), ["gluster", "volume", "start", "vol_a", "force"], 7)
    assert (out, err, code) == ("volume start: vol_a: success\n", "", 0)
    assert st.brick("vol_a", "1").online
    st.set_pod("node1", False, None, 8)
    st.set_pod("node1", True, "u9", 9)
    assert st.brick("vol_a", "1").online  # force cleared the fault


def test_split_brain_entries_never_heal() -> None:
    st = state(write_rate=0)
    st.apply_fault(FaultCfg(kind="split_brain", volume="vol_a", n=2), 0)
    st.advance(100)
    assert pending(st, "vol_a") == [2, 2, 2]
    out, _, _ = run_gluster(st, st.peer("node1"), ["gluster", "volume", "heal", "vol_a", "info", "split-brain"], 100)
    assert out.count("Number of entries in split-brain: 2") == 3
    assert "/split-brain/file-0001\n/split-brain/file-0002\nStatus: Connected" in out
    out, _, _ = run_gluster(st, st.peer("node1"), ["gluster", "volume", "heal", "vol_a", "info"], 100)
    assert "/split-brain/file-0001 - Is in split-brain\n" in out


def test_timeline_counts_hosts_down_at_once() -> None:
    st = state()
    st.set_host_blocked("node1", True, "runtime_stopped", 1)
    st.set_host_blocked("node1", False, "runtime_started", 2)
    st.set_host_blocked("node2", True, "runtime_stopped", 3)
    assert st.max_hosts_down_at_once() == 1
    assert st.max_bricks_down_per_volume() == {"vol_a": 1, "vol_b": 2}
    st.set_host_blocked("node3", True, "runtime_stopped", 4)
    assert st.max_hosts_down_at_once() == 2
    assert {e["node"] for e in st.timeline if not e["online"]} == {"node1", "node2", "node3"}


def test_glusterd_down_and_bad_references() -> None:
    st = state()
    st.apply_fault(FaultCfg(kind="glusterd_down", host="node2"), 0)
    assert st.snapshot(0)["peers"][1]["connected"] is False
    assert st.brick("vol_a", "node2").online  # the brick process keeps running
    st.apply_fault(FaultCfg(kind="glusterd_down", host="node2", up=True), 0)
    assert st.snapshot(0)["peers"][1]["connected"] is True
    with pytest.raises(GlusterError, match="matches 0 bricks"):
        st.apply_fault(FaultCfg(kind="brick_start_failure", volume="vol_a", brick="10.9.9.9"), 0)
    with pytest.raises(GlusterError, match="Volume nope does not exist"):
        st.apply_fault(FaultCfg(kind="split_brain", volume="nope"), 0)
    with pytest.raises(ValueError, match="needs volume, brick"):
        FaultCfg(kind="brick_start_failure")


def test_absent_when_pod_down_makes_the_peer_disconnected() -> None:
    st = state(absent_when_pod_down=True)
    st.set_pod("node3", False, None, 1)
    out, _, _ = run_gluster(st, st.peer("node1"), ["gluster", "volume", "status", "vol_a"], 1)
    assert "Brick 10.0.0.3" not in out and "Brick 10.0.0.2" in out
    plain = state()
    plain.set_pod("node3", False, None, 1)
    out, _, _ = run_gluster(plain, plain.peer("node1"), ["gluster", "volume", "status", "vol_a"], 1)
    assert "N/A       N/A        N       N/A" in out


def test_section_validation() -> None:
    with pytest.raises(ValueError, match="not a multiple of replica 3"):
        parse_section({"hosts": HOSTS, "volumes": [{"name": "v", "bricks": ["node1", "node2"]}]})
    with pytest.raises(ValueError, match="is not a gluster host"):
        parse_section({"hosts": HOSTS, "volumes": [{"name": "v", "bricks": ["node1", "node2", "x"]}]})
