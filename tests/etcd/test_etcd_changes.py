"""What a restore or a backup that stopped short says it left changed (workflows/etcd/changes.py),
from two readings of the cluster: pure, no etcd needed."""

from __future__ import annotations

from activities.etcd.models import ClusterStatus, EndpointState, MemberInfo, SnapshotInfo
from tests.support.etcd_fakes import etcd_members
from workflows.etcd.changes import backup_left_changed, restore_left_changed

MEMBERS = etcd_members(3)


def reading(up: set[str], listed: dict[str, str] | None, started: set[str] | None = None) -> ClusterStatus:
    """``up``: members whose endpoint answers; ``listed``: name → member ID in the list (None: no list)."""
    started = set(listed or {}) if started is None else started
    members = None if listed is None else [
        MemberInfo(id=i, name=n if n in started else "", peer_urls=[next(m.peer_url for m in MEMBERS if m.name == n)],
                   client_urls=[]) for n, i in listed.items()]
    return ClusterStatus(members=members, endpoints=[
        EndpointState(endpoint=m.client_url, member_id="1" if m.name in up else None) for m in MEMBERS])


def targets(items: list) -> list[str]:
    return sorted(i.target for i in items)


def test_nothing_differs_nothing_is_listed() -> None:
    before = reading({"etcd-0"}, {"etcd-0": "a", "etcd-1": "b", "etcd-2": "c"})
    assert restore_left_changed(MEMBERS, before, before, {}) == []


def test_a_stopped_survivor_and_an_unreadable_list() -> None:
    before = reading({"etcd-0"}, {"etcd-0": "a", "etcd-1": "b", "etcd-2": "c"})
    left = restore_left_changed(MEMBERS, before, reading(set(), None), {}, undo="lockkeeper start etcd-restore ...")
    assert targets(left) == ["etcd member etcd-0"] and "stopped (it was running)" in left[0].what
    assert left[0].undo == "lockkeeper start etcd-restore ..."


def test_force_new_cluster_then_an_added_member_with_its_data_moved() -> None:
    before = reading({"etcd-0"}, {"etcd-0": "a", "etcd-1": "b", "etcd-2": "c"})
    after = reading({"etcd-0"}, {"etcd-0": "a", "etcd-1": "d"}, started={"etcd-0"})
    left = restore_left_changed(MEMBERS, before, after, {"etcd-1": "/var/lib/etcd.lockkeeper-x"})
    assert sorted(set(targets(left))) == ["etcd member etcd-1", "etcd member etcd-2", "host etcd-1"]
    by = {i.target: i.what for i in left}
    assert "member ID b" in by["etcd member etcd-1"] and "member ID d" in by["etcd member etcd-1"] and "not started" in by["etcd member etcd-1"]
    assert "data dir" in by["etcd member etcd-1"] and "not in the member list" in by["etcd member etcd-2"]
    assert "/var/lib/etcd.lockkeeper-x" in by["host etcd-1"]


def test_an_incomplete_backup_lists_checked_and_leftover_files() -> None:
    done = [SnapshotInfo(member="etcd-1", host="h1", path="/b/snapshot-etcd-1-x.db")]
    left = backup_left_changed(done, {"etcd-0": ["/b/snapshot-etcd-0-x.db.part"], "etcd-2": []})
    assert targets(left) == ["host etcd-0", "host etcd-1"]
    assert ".part" in next(i.what for i in left if i.target == "host etcd-0")
