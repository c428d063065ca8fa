"""The JSON shapes of snapshots and diffs (``/_sim/snapshots`` answers, the client's return values).

A diff lists what differs between a snapshot and the world now (or between two snapshots), in
four groups that count as *changes* and two that are only *information*:

- ``objects``: API objects added, removed, changed or recreated (:class:`ObjectChange`, each
  changed field a JSON Pointer, RFC 6901, with old and new value: :class:`FieldChange`);
- ``pods``: per owner controller, how many pods exist and how many are Ready before and after
  (:class:`PodGroupChange`), when pods are compared by owner (the default);
- ``state``: simulator-owned state outside the API: files, units, packages, iptables of the
  simulated hosts, the masters' processes, GlusterFS volumes, OVS ports (:class:`StateChange`);
- ``ignored``: per ignore pattern, how many entries it hid (:class:`IgnoredCount`);
- ``reboots`` (information): hosts whose boot count went up (:class:`Reboot`);
- ``restarts`` (information): master API/controllers restarts, GlusterFS brick restarts, SDN
  rebuilds (:class:`Restart`).

``Diff.empty`` is True when the four change groups other than ``ignored`` are empty: a reboot
or a restart is not a change left behind. ``Diff.lines()`` renders one change per line, sorted.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

#: Which part of an object a changed field belongs to (:func:`clustersim.snapshots.objects.category`).
Category = Literal["labels", "annotations", "spec", "data", "status", "other"]
#: What happened to an entry between the two sides.
ChangeKind = Literal["added", "removed", "changed", "recreated"]
#: How pods are compared: by owner controller (counts) or one by one as objects.
PodsMode = Literal["owners", "each"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DiffOptions(_Model):
    """What a diff compares and hides.

    ``ignore``: patterns of entries the caller expects to differ (see
    :mod:`clustersim.snapshots.ignore` for the keys they match); every hidden entry is counted in
    ``Diff.ignored``. ``pods``: ``owners`` (default) compares pods per owner controller by counts
    and bare pods one by one; ``each`` compares every pod as an object. ``include_events`` /
    ``include_leases``: compare Events (core/v1 and events.k8s.io) / coordination Leases, hidden
    by default (under the default patterns ``Event`` and ``Lease``, counted). ``include_status``:
    compare every object's ``status`` (by default only the Network objects' network type is).
    """

    ignore: list[str] = Field(default_factory=list)
    pods: PodsMode = "owners"
    include_events: bool = False
    include_leases: bool = False
    include_status: bool = False


class SnapshotInfo(_Model):
    """One snapshot held by the simulator. ``id``: what the diff and delete endpoints take;
    ``name``: the caller's label (may be empty); ``taken_at``: simulated time, RFC 3339;
    ``resource_version``: the store's global resourceVersion then; ``objects``: API objects held;
    ``hosts``: simulated hosts held; ``capture_ms``: wall milliseconds the capture blocked the
    simulator's event loop."""

    id: str
    name: str = ""
    taken_at: str
    resource_version: int
    objects: int
    hosts: int = 0
    capture_ms: float = 0.0


class FieldChange(_Model):
    """One changed field of an object. ``pointer``: JSON Pointer (RFC 6901) from the object's
    root, e.g. ``/metadata/labels/node-role.kubernetes.io~1infra``; ``op``: ``add`` (absent
    before), ``remove`` (absent after) or ``replace``; ``old``/``new``: the values (None when
    absent: see ``op``). Lists of unequal length are reported whole at their pointer; dicts and
    lists of equal length down to the changed leaves."""

    pointer: str
    category: Category
    op: Literal["add", "remove", "replace"]
    old: Any = None
    new: Any = None


class ObjectChange(_Model):
    """An API object that differs. ``key``: ``Kind/namespace/name`` (``Kind/name`` when
    cluster-scoped; ``Kind.group`` when two served resources share the kind, e.g.
    ``Network.config.openshift.io/cluster``); ``resource``: the store key (``configmaps``,
    ``networks.config.openshift.io``). ``change``: ``added``/``removed`` (``fields`` empty,
    ``object`` the object without volatile metadata), ``changed`` (``fields``), ``recreated``
    (deleted and created again under the same name: a new uid; ``fields`` are its field
    changes, ``old_uid``/``new_uid`` set). ``categories``: the sorted categories of ``fields``."""

    key: str
    resource: str
    kind: str
    namespace: str = ""
    name: str
    change: ChangeKind
    fields: list[FieldChange] = Field(default_factory=list)
    categories: list[Category] = Field(default_factory=list)
    object: dict[str, Any] | None = None
    old_uid: str | None = None
    new_uid: str | None = None


class PodCount(_Model):
    """Pods of one owner that exist (not terminating) and how many of them are Ready."""

    pods: int = 0
    ready: int = 0


class PodGroupChange(_Model):
    """Pods of one owner controller whose count or Ready count differs. ``key``:
    ``pods/<namespace>/<OwnerKind>/<owner name>``; ``owner_kind``: the kind of the pods'
    controller ownerReference (ReplicaSet, DaemonSet, StatefulSet, ReplicationController, Job,
    Node for mirror pods...). Pods without any ownerReference are compared one by one in
    ``objects`` instead."""

    key: str
    namespace: str
    owner_kind: str
    owner_name: str
    before: PodCount
    after: PodCount


class StateChange(_Model):
    """Simulator-owned state outside the API that differs.

    ``component``: ``host``, ``master``, ``gluster`` or ``sdn``; ``name``: the host, master,
    volume or node; ``what``/``item``:

    - host: ``host`` (the host itself added/removed, item ""), ``file`` (item: path; old/new
      ``{"sha256", "size"}`` in bytes, ``diff`` a unified diff of at most
      :data:`~clustersim.snapshots.state.DIFF_MAX_LINES` lines when both sides are text up to
      :data:`~clustersim.snapshots.state.DIFF_MAX_BYTES`), ``dir`` (item: path), ``unit`` (item:
      unit; old/new ``{"enabled", "active"}``), ``package`` (item: name; old/new the
      VERSION-RELEASE), ``iptables`` (item: ``runtime``/``saved``; old/new the rule lines,
      ``diff`` the rules added and removed), ``image`` (item: image reference), ``runtime`` /
      ``node_group`` / ``up`` (item "", old/new the value);
    - master: ``api_up`` / ``controllers_up`` (bool), ``api_config`` / ``controllers_config``
      (the networkConfig each process read at its last start), ``leader`` (name "", the
      controllers leader);
    - gluster: ``volume`` (added/removed), ``started``, ``option`` (item: option name),
      ``brick`` (item: ``host:/path``; old/new ``{"online"}``);
    - sdn: ``dst_port`` (OVS vxlan0 options:dst_port), ``port_at_start`` (the ClusterNetwork
      vxlanPort the running SDN pod read at its start).

    ``key``: ``<component>/<name>/<what>[/<item>]`` (a file's and a dir's item is its absolute
    path, so ``host/node-1/file/etc/hosts``); the masters' leader is ``master/leader``.
    """

    key: str
    component: Literal["host", "master", "gluster", "sdn"]
    name: str
    what: str
    item: str = ""
    change: Literal["added", "removed", "changed"]
    old: Any = None
    new: Any = None
    diff: str | None = None


class Reboot(_Model):
    """A host that booted since the snapshot: ``boots`` times (boot count after - before), with
    its boot ids before and after."""

    host: str
    boots: int
    boot_id_before: str
    boot_id_after: str


class Restart(_Model):
    """A process that restarted since the snapshot. ``component``/``name``/``what``: ``master``
    master ``api``/``controllers`` (``count``: restarts); ``gluster`` volume ``brick:<host:/path>``
    (its pid changed: ``count`` 1, at least one restart); ``sdn`` node ``rebuild`` (full SDN
    setups, ``count``)."""

    component: str
    name: str
    what: str
    count: int


class IgnoredCount(_Model):
    """Entries one ignore pattern hid. ``default``: a pattern the diff adds itself (``Event``,
    ``Lease``) unless told to include them; ``keys``: the first :data:`IGNORED_KEYS_SHOWN` keys
    it hid (field keys are ``<object key>#<pointer>``)."""

    pattern: str
    count: int
    default: bool = False
    keys: list[str] = Field(default_factory=list)


#: How many hidden keys an IgnoredCount lists (its count is always complete).
IGNORED_KEYS_SHOWN = 20


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class Diff(_Model):
    """What differs between snapshot ``before`` and ``after`` (the world at the diff, or a second
    snapshot). See the module docstring for the groups; ``options`` echoes what was asked;
    ``compare_ms``: wall milliseconds the comparison took (off the event loop)."""

    before: SnapshotInfo
    after: SnapshotInfo
    options: DiffOptions
    objects: list[ObjectChange] = Field(default_factory=list)
    pods: list[PodGroupChange] = Field(default_factory=list)
    state: list[StateChange] = Field(default_factory=list)
    reboots: list[Reboot] = Field(default_factory=list)
    restarts: list[Restart] = Field(default_factory=list)
    ignored: list[IgnoredCount] = Field(default_factory=list)
    compare_ms: float = 0.0

    @property
    def empty(self) -> bool:
        """Nothing changed (ignored entries, reboots and restarts do not count)."""
        return not (self.objects or self.pods or self.state)

    def ignored_total(self) -> int:
        """How many entries the ignore patterns hid, all patterns together."""
        return sum(i.count for i in self.ignored)

    def lines(self) -> list[str]:
        """One line per change, sorted (so stable between runs), then the reboots, restarts and
        non-zero ignore counts, each group sorted::

            changed ConfigMap/app/cfg /data/k [data] "a" -> "b"
            added ConfigMap/app/new
            pods app/ReplicaSet/web-rs: 2 (2 ready) -> 1 (0 ready)
            changed host/node1/unit/crio {"active":true,"enabled":true} -> {"active":false,...}
            reboot host/node1: 1 boot(s)
            restart master/master-01/api: 1
            ignored Event (default): 12
        """
        changes = [ln for o in self.objects for ln in self.object_lines(o)]
        changes += [self.pod_line(p) for p in self.pods]
        changes += [self.state_line(s) for s in self.state]
        info = sorted(f"reboot host/{r.host}: {r.boots} boot(s)" for r in self.reboots)
        info += sorted(f"restart {r.component}/{r.name}/{r.what}: {r.count}" for r in self.restarts)
        hidden = sorted(f"ignored {i.pattern}{' (default)' if i.default else ''}: {i.count}"
                        for i in self.ignored if i.count)
        return sorted(changes) + info + hidden

    @staticmethod
    def object_lines(o: ObjectChange) -> list[str]:
        """An object entry's lines (:meth:`lines`): one per changed field, in ``fields`` order, or
        one for the whole object (added, removed, recreated without field changes)."""
        if o.change in ("added", "removed") or not o.fields:
            return [f"{o.change} {o.key}"]
        return [f"{o.change} {o.key} {f.pointer} [{f.category}] "
                f"{'(absent)' if f.op == 'add' else _short(f.old)} -> "
                f"{'(absent)' if f.op == 'remove' else _short(f.new)}" for f in o.fields]

    @staticmethod
    def pod_line(p: PodGroupChange) -> str:
        """A pod group's line (:meth:`lines`)."""
        return (f"pods {p.namespace}/{p.owner_kind}/{p.owner_name}: {p.before.pods} "
                f"({p.before.ready} ready) -> {p.after.pods} ({p.after.ready} ready)")

    @staticmethod
    def state_line(s: StateChange) -> str:
        """A state entry's line (:meth:`lines`)."""
        if s.change == "changed":
            return f"changed {s.key} {_short(s.old)} -> {_short(s.new)}"
        return f"{s.change} {s.key} {_short(s.new if s.change == 'added' else s.old)}"
