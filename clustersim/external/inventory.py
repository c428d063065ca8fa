"""Ansible INI inventories, as far as openshift-ansible inventories use them.

Format (Ansible ``plugins/inventory/ini.py``): ``[group]`` sections list hosts, one per line,
optionally followed by ``key=value`` variables (values may be quoted); ``[group:vars]`` holds
group variables; ``[group:children]`` lists child groups. Comments start with ``#`` or ``;``.
Values are kept as strings except that ``True``/``False``/``true``/``false`` read as booleans
through :func:`truthy`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field


class InventoryError(ValueError):
    """The inventory text cannot be parsed (message names the line)."""


@dataclass
class Inventory:
    """``groups``: group -> hosts listed directly; ``children``: group -> child groups;
    ``group_vars``: group -> vars; ``host_vars``: host -> vars (merged from every line naming it)."""

    groups: dict[str, list[str]] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)
    group_vars: dict[str, dict[str, str]] = field(default_factory=dict)
    host_vars: dict[str, dict[str, str]] = field(default_factory=dict)

    def hosts(self, group: str, _seen: frozenset[str] = frozenset()) -> list[str]:
        """Every host of ``group`` including its children's, in inventory order, without
        duplicates ([] for an unknown or empty group)."""
        if group in _seen:
            return []
        out = list(self.groups.get(group, []))
        for child in self.children.get(group, []):
            out.extend(self.hosts(child, _seen | {group}))
        return list(dict.fromkeys(out))

    def groups_of(self, host: str) -> list[str]:
        """Every group ``host`` belongs to, directly or through children."""
        names = set(self.groups) | set(self.children)
        return sorted(g for g in names if host in self.hosts(g))

    def var(self, host: str, name: str, default: str | None = None) -> str | None:
        """``name`` for ``host``: host vars first, then the vars of its groups (child groups win
        over parents as in Ansible; ties broken by name), then ``all``, then ``default``."""
        if name in self.host_vars.get(host, {}):
            return self.host_vars[host][name]
        groups = self.groups_of(host)
        depth = {g: self._depth(g) for g in groups}
        for g in sorted(groups, key=lambda g: (-depth[g], g)):
            if name in self.group_vars.get(g, {}):
                return self.group_vars[g][name]
        return self.group_vars.get("all", {}).get(name, default)

    def _depth(self, group: str) -> int:
        parents = [p for p, kids in self.children.items() if group in kids]
        return 0 if not parents else 1 + max(self._depth(p) for p in parents if p != group)


def truthy(value: str | None, default: bool = False) -> bool:
    """Ansible's boolean reading of an inventory string (``True``, ``yes``, ``1`` ...)."""
    if value is None:
        return default
    return value.strip().lower() in ("true", "yes", "y", "1", "on")


def parse_inventory(text: str) -> Inventory:
    """Parse INI inventory ``text``. Raises InventoryError for a malformed line."""
    inv = Inventory()
    section, kind = "ungrouped", "hosts"
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                raise InventoryError(f"line {lineno}: unterminated section header {line!r}")
            name = line[1:-1].strip()
            section, _, suffix = name.partition(":")
            kind = {"": "hosts", "vars": "vars", "children": "children"}.get(suffix)
            if kind is None:
                raise InventoryError(f"line {lineno}: unknown section type {suffix!r}")
            if kind == "hosts":
                inv.groups.setdefault(section, [])
            elif kind == "children":
                inv.children.setdefault(section, [])
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise InventoryError(f"line {lineno}: {exc}") from None
        if not words:
            continue
        if kind == "vars":
            key, eq, value = line.partition("=")
            if not eq:
                raise InventoryError(f"line {lineno}: expected key=value in [{section}:vars]")
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            inv.group_vars.setdefault(section, {})[key.strip()] = value
        elif kind == "children":
            inv.children[section].append(words[0])
        else:
            host, rest = words[0], words[1:]
            inv.groups.setdefault(section, []).append(host)
            hv = inv.host_vars.setdefault(host, {})
            for w in rest:
                k, eq, v = w.partition("=")
                if not eq:
                    raise InventoryError(f"line {lineno}: expected key=value after host {host}, got {w!r}")
                hv[k] = v
    return inv
