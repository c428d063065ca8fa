"""Diff of the simulator-owned state outside the API (hosts, masters, GlusterFS, SDN); pure.

Produces :class:`~clustersim.snapshots.models.StateChange` entries (shapes and keys there), and
the information-only :class:`~clustersim.snapshots.models.Reboot` (a host's boot count went up)
and :class:`~clustersim.snapshots.models.Restart` entries. A component absent from either
capture is not compared. A rebooting host (``up`` False) is a change: it is not back yet.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Iterable
from typing import Any

from clustersim.snapshots.ignore import IgnoreSet
from clustersim.snapshots.models import Reboot, Restart, StateChange
from clustersim.snapshots.world import HostCapture, World

#: Files up to this many bytes (both sides) get a unified diff; bigger ones only sha256 and size.
DIFF_MAX_BYTES = 64 * 1024
#: A unified diff is cut after this many lines (a last line says how many were left out).
DIFF_MAX_LINES = 40


def _file_info(text: str) -> dict[str, Any]:
    data = text.encode()
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def unified(old: Iterable[str], new: Iterable[str], name: str) -> str:
    """A unified diff (``difflib``, 1 line of context) of two line sequences, at most
    DIFF_MAX_LINES lines."""
    lines = list(difflib.unified_diff(list(old), list(new), f"a{name}", f"b{name}", n=1, lineterm=""))
    if len(lines) > DIFF_MAX_LINES:
        cut = len(lines) - DIFF_MAX_LINES
        lines = [*lines[:DIFF_MAX_LINES], f"... {cut} more line(s)"]
    return "\n".join(lines)


def state_key(component: str, name: str, what: str, item: str = "") -> str:
    """The key of a state entry (:class:`~clustersim.snapshots.models.StateChange`)."""
    if component == "master" and what == "leader":
        return "master/leader"
    if what in ("host", "volume"):
        return f"{component}/{name}"
    if what in ("file", "dir"):
        return f"{component}/{name}/{what}{item}"
    return "/".join(p for p in (component, name, what, item) if p)


class _Out:
    """Collects StateChanges, hiding the ignored ones."""

    def __init__(self, ignore: IgnoreSet) -> None:
        self.ignore = ignore
        self.changes: list[StateChange] = []

    def add(self, component: str, name: str, what: str, item: str, change: str, old: Any, new: Any,
            diff: str | None = None) -> None:
        key = state_key(component, name, what, item)
        if self.ignore.hide([key]):
            return
        self.changes.append(StateChange.model_validate(
            {"key": key, "component": component, "name": name, "what": what, "item": item, "change": change,
             "old": old, "new": new, "diff": diff}))

    def mapping(self, component: str, name: str, what: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        """Added/removed/changed items of a dict (values compared with ==)."""
        for item in sorted(old.keys() | new.keys()):
            a, b = old.get(item), new.get(item)
            if item not in new:
                self.add(component, name, what, item, "removed", a, None)
            elif item not in old:
                self.add(component, name, what, item, "added", None, b)
            elif a != b:
                self.add(component, name, what, item, "changed", a, b)

    def members(self, component: str, name: str, what: str, old: Iterable[str], new: Iterable[str]) -> None:
        """Added/removed members of a set."""
        a, b = set(old), set(new)
        for item in sorted(a - b):
            self.add(component, name, what, item, "removed", item, None)
        for item in sorted(b - a):
            self.add(component, name, what, item, "added", None, item)


def _host(out: _Out, name: str, a: HostCapture, b: HostCapture) -> None:
    for path in sorted(a.files.keys() | b.files.keys()):
        old, new = a.files.get(path), b.files.get(path)
        if old == new:
            continue
        if new is None:
            assert old is not None
            out.add("host", name, "file", path, "removed", _file_info(old), None)
        elif old is None:
            out.add("host", name, "file", path, "added", None, _file_info(new))
        else:
            small = max(len(old), len(new)) <= DIFF_MAX_BYTES
            diff = unified(old.splitlines(), new.splitlines(), path) if small else None
            out.add("host", name, "file", path, "changed", _file_info(old), _file_info(new), diff)
    out.members("host", name, "dir", a.dirs, b.dirs)
    units = lambda h: {u: {"enabled": e, "active": x} for u, (e, x) in h.units.items()}  # noqa: E731
    out.mapping("host", name, "unit", units(a), units(b))
    out.mapping("host", name, "package", a.packages, b.packages)
    for item, old_rules, new_rules in (("runtime", a.iptables_runtime, b.iptables_runtime),
                                       ("saved", a.iptables_saved, b.iptables_saved)):
        if old_rules != new_rules:
            out.add("host", name, "iptables", item, "changed", list(old_rules), list(new_rules),
                    unified(old_rules, new_rules, f"/iptables/{item}"))
    out.members("host", name, "image", a.images, b.images)
    for what in ("runtime", "node_group", "up"):
        if getattr(a, what) != getattr(b, what):
            out.add("host", name, what, "", "changed", getattr(a, what), getattr(b, what))


def diff_state(before: World, after: World, ignore: IgnoreSet) -> tuple[list[StateChange], list[Reboot], list[Restart]]:
    """(state changes, reboots, restarts) between two captures, each sorted."""
    out = _Out(ignore)
    reboots: list[Reboot] = []
    restarts: list[Restart] = []
    if before.hosts is not None and after.hosts is not None:
        for name in sorted(before.hosts.keys() | after.hosts.keys()):
            a, b = before.hosts.get(name), after.hosts.get(name)
            if a is None or b is None:
                out.add("host", name, "host", "", "added" if a is None else "removed", None if a is None else name,
                        None if b is None else name)
                continue
            _host(out, name, a, b)
            if b.boot_count != a.boot_count or b.boot_id != a.boot_id:
                reboots.append(Reboot(host=name, boots=max(1, b.boot_count - a.boot_count),
                                      boot_id_before=a.boot_id, boot_id_after=b.boot_id))
    if before.masters is not None and after.masters is not None:
        for name in sorted(before.masters.keys() & after.masters.keys()):
            a, b = before.masters[name], after.masters[name]
            for what in ("api_up", "controllers_up", "api_config", "controllers_config"):
                if a[what] != b[what]:
                    out.add("master", name, what, "", "changed", a[what], b[what])
            for what in ("api", "controllers"):
                n = b[f"{what}_restarts"] - a[f"{what}_restarts"]
                if n:
                    restarts.append(Restart(component="master", name=name, what=what, count=n))
        if before.leader != after.leader:
            out.add("master", "", "leader", "", "changed", before.leader, after.leader)
    if before.gluster is not None and after.gluster is not None:
        for vol in sorted(before.gluster.keys() | after.gluster.keys()):
            a, b = before.gluster.get(vol), after.gluster.get(vol)
            if a is None or b is None:
                out.add("gluster", vol, "volume", "", "added" if a is None else "removed",
                        None if a is None else vol, None if b is None else vol)
                continue
            if a["started"] != b["started"]:
                out.add("gluster", vol, "started", "", "changed", a["started"], b["started"])
            out.mapping("gluster", vol, "option", a["options"], b["options"])
            online = lambda v: {n: {"online": x["online"]} for n, x in v["bricks"].items()}  # noqa: E731
            out.mapping("gluster", vol, "brick", online(a), online(b))
            for brick in sorted(a["bricks"].keys() & b["bricks"].keys()):
                pa, pb = a["bricks"][brick]["pid"], b["bricks"][brick]["pid"]
                if pa != pb and pb != -1:
                    restarts.append(Restart(component="gluster", name=vol, what=f"brick:{brick}", count=1))
    if before.sdn is not None and after.sdn is not None:
        for node in sorted(before.sdn.keys() & after.sdn.keys()):
            a, b = before.sdn[node], after.sdn[node]
            for what in ("dst_port", "port_at_start"):
                if a[what] != b[what]:
                    out.add("sdn", node, what, "", "changed", a[what], b[what])
            if b["rebuilds"] != a["rebuilds"]:
                restarts.append(Restart(component="sdn", name=node, what="rebuild", count=b["rebuilds"] - a["rebuilds"]))
    changes = sorted(out.changes, key=lambda c: c.key)
    return changes, reboots, sorted(restarts, key=lambda r: (r.component, r.name, r.what))
