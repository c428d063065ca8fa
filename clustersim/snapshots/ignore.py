"""Ignore patterns: entries a caller documents as expected to differ, hidden from a diff but counted.

Every diff entry has one or more keys (slash-separated, most general part first):

- an API object: ``Kind/namespace/name`` (``Kind/name`` cluster-scoped), also
  ``Kind.group/...`` and ``<store resource key>/...`` (``configmaps/app/x``,
  ``networks.config.openshift.io/cluster``);
- a field of an object: ``<object key>#<JSON Pointer>``
  (``Node/node1#/metadata/annotations/machineconfiguration.openshift.io~1state``);
- the pods of one owner: ``pods/<namespace>/<OwnerKind>/<owner>``;
- simulator state: :attr:`clustersim.snapshots.models.StateChange.key`
  (``host/node1/file/etc/hosts``, ``host/node1/unit/crio``, ``master/master-01/api_up``,
  ``gluster/vol1/brick/10.0.0.1:/b``, ``sdn/node1/dst_port``).

A pattern is an ``fnmatch`` glob (case-sensitive; ``*`` also matches ``/``). It matches a key
equal to it or *below* it: ``Event`` hides every Event, ``host/node1`` every state entry of
host node1, ``ConfigMap/*/lockkeeper-record-*`` those ConfigMaps whole, a pattern with ``#``
single fields. An entry is counted under the first pattern that matches it, in the order given
(default patterns after the caller's). Reboots and restarts are information, not changes: no
pattern applies to them.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase

from clustersim.snapshots.models import IGNORED_KEYS_SHOWN, IgnoredCount


class IgnoreSet:
    """Patterns with their hit counts. ``patterns``: the caller's; ``defaults``: the diff's own
    (reported with ``default=True``)."""

    def __init__(self, patterns: Iterable[str], defaults: Iterable[str] = ()) -> None:
        self._entries: list[IgnoredCount] = []
        seen: set[str] = set()
        for p, default in [*((p, False) for p in patterns), *((p, True) for p in defaults)]:
            if p and p not in seen:
                seen.add(p)
                self._entries.append(IgnoredCount(pattern=p, count=0, default=default))

    @staticmethod
    def matches(pattern: str, key: str) -> bool:
        """``pattern`` matches ``key`` itself or a key below it (``/`` or ``#`` follows)."""
        return fnmatchcase(key, pattern) or fnmatchcase(key, pattern + "/*") or fnmatchcase(key, pattern + "#*")

    def hide(self, keys: Iterable[str], shown: str | None = None) -> bool:
        """True (and counted once) if any pattern matches any of ``keys``; ``shown`` is the key
        listed in the count (default: the first of ``keys``)."""
        keys = list(keys)
        for entry in self._entries:
            if any(self.matches(entry.pattern, k) for k in keys):
                entry.count += 1
                if len(entry.keys) < IGNORED_KEYS_SHOWN:
                    entry.keys.append(shown or keys[0])
                return True
        return False

    def counts(self) -> list[IgnoredCount]:
        """Every pattern with its count, in order (zero counts included: a pattern that hid
        nothing is visible too)."""
        return [e.model_copy(deep=True) for e in self._entries]
