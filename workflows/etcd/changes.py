"""What an etcd procedure that did not complete leaves changed, named as the fault matrix's view of
the etcd world names it (issue 39: the outcome's ``left_changed`` equals what changed).

Targets: ``etcd member <name>`` (its process running or stopped, its entry in the member list,
its data dir) and ``host <name>`` (files written beside a member: a data dir moved aside, a
snapshot). Pure functions of what the restore read before it began (``etcd_preflight_restore``'s
:class:`ClusterStatus`), what it reads back as it ends, and what it did itself (data dirs moved,
snapshots taken); deterministic, so the workflows call them.

A member "runs" when its client URL answers ``endpoint status`` (a member without quorum answers
too); its member-list entry is compared only when both readings have a member list (``member
list``, or without quorum the survivor's peer ``/members``: etcd ``etcdserver/api/etcdhttp/peer.go``).
"""

from __future__ import annotations

from activities.etcd.models import ClusterStatus, EtcdMember, MemberInfo, SnapshotInfo
from workflows.kit.models import ChangedItem


def answering(status: ClusterStatus | None, member: EtcdMember) -> bool | None:
    """Whether ``member``'s client URL answered ``endpoint status`` in ``status`` (None: not read)."""
    if status is None:
        return None
    return any(e.endpoint == member.client_url and e.member_id is not None for e in status.endpoints)


def listed(status: ClusterStatus | None, member: EtcdMember) -> MemberInfo | None | bool:
    """``member``'s entry in the member list of ``status`` (by name, else by peer URL: an added
    member has no name until it starts); None when absent; False when no list was read."""
    if status is None or status.members is None:
        return False
    return next((m for m in status.members if m.name == member.name), None) or status.member_with_peer(member.peer_url)


def _entry(info: MemberInfo | None) -> str:
    if info is None:
        return "not in the member list"
    return f"member ID {info.id} ({', '.join(info.peer_urls)}{'' if info.started else ', not started'})"


def restore_left_changed(members: list[EtcdMember], before: ClusterStatus | None, after: ClusterStatus | None,
                         moved: dict[str, str], undo: str | None = None) -> list[ChangedItem]:
    """What a restore that stopped short leaves changed, one item per target: for each member
    whose process runs where it did not (or the reverse), whose member-list entry differs, or
    whose data dir was moved aside (``moved``: name → where), an ``etcd member <name>`` item;
    for each moved data dir also a ``host <name>`` item (the old data, kept). ``undo``: the
    command that goes on from there (the restore again), on every item."""
    out: list[ChangedItem] = []
    for m in members:
        what: list[str] = []
        was, now = answering(before, m), answering(after, m)
        if was is not None and now is not None and was != now:
            what.append("running (it was stopped)" if now else "stopped (it was running)")
        old, new = listed(before, m), listed(after, m)
        if old is not False and new is not False:
            assert not isinstance(old, bool) and not isinstance(new, bool)
            if (old.id if old else None, old.peer_urls if old else None, old.started if old else None) != (
                    new.id if new else None, new.peer_urls if new else None, new.started if new else None):
                what.append(f"{_entry(old)} -> {_entry(new)}")
        if m.name in moved:
            what.append(f"data dir {m.data_dir} replaced (the old one moved aside)")
        if what:
            out.append(ChangedItem(target=f"etcd member {m.name}", what="; ".join(what), undo=undo))
        if m.name in moved:
            out.append(ChangedItem(target=f"host {m.name}", what=f"{moved[m.name]} (the old data dir of {m.name}, kept)"))
    return out


def backup_left_changed(snapshots: list[SnapshotInfo], leftovers: dict[str, list[str]]) -> list[ChangedItem]:
    """The snapshot files a backup that did not complete left (``host <member>`` each): the
    checked ``snapshots``, and ``leftovers`` (member → files a failed member's snapshot still
    wrote: a complete but unchecked file, or etcdctl's ``.part``). They stay; remove them by
    hand if unwanted."""
    out = [ChangedItem(target=f"host {s.member}", what=f"snapshot {s.path} written") for s in snapshots]
    out += [ChangedItem(target=f"host {name}", what=f"{', '.join(files)} written by a failed snapshot (not checked)")
            for name, files in leftovers.items() if files]
    return out
