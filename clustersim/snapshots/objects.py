"""Diff of API objects between two captures (pure; runs off the event loop).

Rules:

- Objects are matched by (resource, namespace, name). One present on one side only is
  ``added``/``removed``; one whose ``metadata.uid`` differs was deleted and created again:
  ``recreated``, with its field changes.
- Volatile metadata is never compared: ``resourceVersion``, ``managedFields``, ``generation``,
  ``creationTimestamp``, ``uid`` (a new uid makes the object ``recreated`` instead), ``selfLink``.
- ``status`` is not compared (it follows from spec and the agents), except the network type of
  ``Network.config.openshift.io`` and ``Network.operator.openshift.io`` (``status.networkType``
  and ``status.migration``, R1's "network type"); ``include_status`` compares all of it.
- ``null``, an empty list, an empty map and absent are the same (the API's Go types drop unset
  ``omitempty`` fields; removing a node's last taint may leave ``taints: []``), and so are
  ``false`` and absent for the booleans in :data:`FALSE_IS_ABSENT` (``spec.unschedulable`` of a
  Node, ``spec.paused`` of a MachineConfigPool or Deployment).
- Field pointers are JSON Pointers (RFC 6901, escaped with ``jsonpointer.escape``). Dicts are
  compared key by key down to the changed leaves (a dict absent on one side counts as empty, so
  a first label is ``/metadata/labels/<key>``); lists of equal length item by item; a list whose
  length changed is one change at its pointer (old and new list).
- Categories: ``/metadata/labels/...`` labels, ``/metadata/annotations/...`` annotations,
  ``/data``, ``/binaryData``, ``/stringData`` data, ``/status/...`` status, other
  ``/metadata/...`` fields (ownerReferences, finalizers, deletionTimestamp...) and ``/kind``,
  ``/apiVersion`` other, every other top-level field spec (``/spec/...``, and the desired state
  that some kinds keep at the top level, e.g. ClusterNetwork ``vxlanPort``).
- Pods (``pods="owners"``): pods with an ownerReference are not compared one by one (a drain or a
  restart legitimately replaces them under new names); per owner (its namespace, kind and name:
  the controller reference, else the first one) the number of pods that are not terminating and
  how many of those are Ready are compared. Pods without ownerReferences (bare pods, mirror pods)
  are compared one by one like any object. ``pods="each"`` compares every pod as an object.
"""

from __future__ import annotations

from typing import Any

from jsonpointer import escape

from clustersim.agents.logic import is_terminating, pod_ready
from clustersim.resources import RESOURCES
from clustersim.snapshots.ignore import IgnoreSet
from clustersim.snapshots.models import (
    Category,
    DiffOptions,
    FieldChange,
    ObjectChange,
    PodCount,
    PodGroupChange,
)
from clustersim.snapshots.world import World

VOLATILE_METADATA = frozenset({"resourceVersion", "managedFields", "generation", "creationTimestamp", "uid",
                               "selfLink"})
#: Resources whose ``status`` keys listed here are compared although status is not (the network type).
STATUS_KEPT: dict[str, tuple[str, ...]] = {
    "networks.config.openshift.io": ("networkType", "migration"),
    "networks.operator.openshift.io": ("networkType", "migration"),
}
#: Boolean fields whose ``false`` the API treats as unset: ``false`` and absent are the same state
#: (an uncordon that writes ``unschedulable: false`` restores a node that had no such field).
FALSE_IS_ABSENT: dict[str, frozenset[str]] = {
    "nodes": frozenset({"/spec/unschedulable"}),
    "machineconfigpools.machineconfiguration.openshift.io": frozenset({"/spec/paused"}),
    "deployments.apps": frozenset({"/spec/paused"}),
}
_FALSE_OR_ABSENT = {(None, False), (False, None)}
_DATA_FIELDS = frozenset({"data", "binaryData", "stringData"})
_MISSING: Any = object()


def category(pointer: str) -> Category:
    """The category of a field pointer (module docstring)."""
    parts = pointer.split("/")
    top = parts[1] if len(parts) > 1 else ""
    if top == "metadata":
        sub = parts[2] if len(parts) > 2 else ""
        return "labels" if sub == "labels" else "annotations" if sub == "annotations" else "other"
    if top == "status":
        return "status"
    if top in _DATA_FIELDS:
        return "data"
    if top in ("kind", "apiVersion"):
        return "other"
    return "spec"


def _walk(pointer: str, old: Any, new: Any, out: list[FieldChange]) -> None:
    old = _MISSING if old is None or old == [] else old
    new = _MISSING if new is None or new == [] else new
    if old is new or (old is not _MISSING and new is not _MISSING and old == new):
        return
    if isinstance(old, dict) or isinstance(new, dict):
        a = old if isinstance(old, dict) else ({} if old is _MISSING else None)
        b = new if isinstance(new, dict) else ({} if new is _MISSING else None)
        if a is not None and b is not None:
            for k in sorted(a.keys() | b.keys()):
                _walk(f"{pointer}/{escape(str(k))}", a.get(k, _MISSING), b.get(k, _MISSING), out)
            return
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (x, y) in enumerate(zip(old, new, strict=True)):
            _walk(f"{pointer}/{i}", x, y, out)
        return
    op = "add" if old is _MISSING else "remove" if new is _MISSING else "replace"
    out.append(FieldChange(pointer=pointer, category=category(pointer), op=op,
                           old=None if old is _MISSING else old, new=None if new is _MISSING else new))


def field_changes(resource: str, old: dict[str, Any], new: dict[str, Any], include_status: bool = False) -> list[FieldChange]:
    """The changed fields of one object (rules in the module docstring), sorted by pointer."""
    out: list[FieldChange] = []
    for top in sorted(old.keys() | new.keys()):
        a, b = old.get(top, _MISSING), new.get(top, _MISSING)
        if a is b:
            continue
        if top == "metadata":
            am = a if isinstance(a, dict) else {}
            bm = b if isinstance(b, dict) else {}
            for k in sorted((am.keys() | bm.keys()) - VOLATILE_METADATA):
                _walk(f"/metadata/{escape(k)}", am.get(k, _MISSING), bm.get(k, _MISSING), out)
        elif top == "status" and not include_status:
            kept = STATUS_KEPT.get(resource, ())
            sa = a if isinstance(a, dict) else {}
            sb = b if isinstance(b, dict) else {}
            for k in kept:
                _walk(f"/status/{escape(k)}", sa.get(k, _MISSING), sb.get(k, _MISSING), out)
        else:
            _walk(f"/{escape(top)}", a, b, out)
    zero = FALSE_IS_ABSENT.get(resource)
    if zero:
        out = [f for f in out if not (f.pointer in zero and f.op != "replace" and (f.old, f.new) in _FALSE_OR_ABSENT)]
    return sorted(out, key=lambda f: f.pointer)


def _display_kind(resource: str) -> str:
    """``Kind``, or ``Kind.group`` when another served resource has the same kind."""
    rt = RESOURCES.get(resource)
    if rt is None:
        return resource
    if rt.group and sum(1 for o in RESOURCES.values() if o.kind == rt.kind) > 1:
        return f"{rt.kind}.{rt.group}"
    return rt.kind


def object_keys(resource: str, namespace: str, name: str) -> list[str]:
    """The keys an ignore pattern may name this object by: ``Kind/...`` (or ``Kind.group/...``
    when the kind is ambiguous) first, then ``Kind.group/...`` and ``<resource>/...``."""
    rt = RESOURCES.get(resource)
    tail = f"{namespace}/{name}" if namespace else name
    kinds = [_display_kind(resource)]
    if rt is not None:
        kinds += [rt.kind] + ([f"{rt.kind}.{rt.group}"] if rt.group else [])
    kinds.append(resource)
    return [f"{k}/{tail}" for k in dict.fromkeys(kinds)]


def _clean(obj: dict[str, Any], include_status: bool) -> dict[str, Any]:
    """The object as an added/removed entry shows it: without volatile metadata (and status)."""
    out = {k: v for k, v in obj.items() if include_status or k != "status"}
    out["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in VOLATILE_METADATA}
    return out


def _owner(pod: dict[str, Any]) -> tuple[str, str] | None:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    if not refs:
        return None
    ref = refs[0] if len(refs) == 1 else next((r for r in refs if r.get("controller")), refs[0])
    return str(ref.get("kind", "")), str(ref.get("name", ""))


#: (namespace, owner kind, owner name) -> [pods, ready]; (namespace, name) -> bare pod.
PodIndex = tuple[dict[tuple[str, str, str], list[int]], dict[tuple[str, str], dict[str, Any]]]


def pod_index(pods: dict[tuple[str, str], dict[str, Any]]) -> PodIndex:
    """One pass over the pods: per owner the number of pods not terminating and how many of those
    are Ready (an owner whose pods all terminate has zero counts), and the bare pods by key."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    bare: dict[tuple[str, str], dict[str, Any]] = {}
    for key, pod in pods.items():
        owner = _owner(pod)
        if owner is None:
            bare[key] = pod
            continue
        count = groups.get((key[0], *owner))
        if count is None:
            count = groups[(key[0], *owner)] = [0, 0]
        if is_terminating(pod):
            continue
        count[0] += 1
        count[1] += pod_ready(pod)
    return groups, bare


def pod_groups(pods: dict[tuple[str, str], dict[str, Any]]) -> dict[tuple[str, str, str], PodCount]:
    """(namespace, owner kind, owner name) -> PodCount over the owned pods (see ``pod_index``)."""
    return {k: PodCount(pods=n, ready=r) for k, (n, r) in pod_index(pods)[0].items()}


def _index_of(world: World) -> PodIndex:
    if world.pod_index is None:
        world.pod_index = pod_index(world.objects.get("pods", {}))
    return world.pod_index  # type: ignore[no-any-return]


def diff_pod_groups(before: World, after: World, ignore: IgnoreSet) -> list[PodGroupChange]:
    """Per-owner pod counts that differ (module docstring), sorted by key."""
    a, b = _index_of(before)[0], _index_of(after)[0]
    out = []
    for ns, kind, name in sorted(a.keys() | b.keys()):
        ca, cb = a.get((ns, kind, name), [0, 0]), b.get((ns, kind, name), [0, 0])
        if ca == cb:
            continue
        key = f"pods/{ns}/{kind}/{name}"
        if ignore.hide([key]):
            continue
        out.append(PodGroupChange(key=key, namespace=ns, owner_kind=kind, owner_name=name,
                                  before=PodCount(pods=ca[0], ready=ca[1]), after=PodCount(pods=cb[0], ready=cb[1])))
    return out


def _compared(world: World, resource: str, options: DiffOptions) -> dict[tuple[str, str], dict[str, Any]]:
    if resource == "pods" and options.pods == "owners":
        return _index_of(world)[1]
    return world.objects.get(resource, {})


def diff_objects(before: World, after: World, options: DiffOptions, ignore: IgnoreSet) -> list[ObjectChange]:
    """API objects that differ (module docstring), sorted by key; hidden ones counted in ``ignore``."""
    out: list[ObjectChange] = []
    for resource in sorted(before.objects.keys() | after.objects.keys()):
        a = _compared(before, resource, options)
        b = _compared(after, resource, options)
        kind = RESOURCES[resource].kind if resource in RESOURCES else resource
        for key in sorted(a.keys() | b.keys()):
            old, new = a.get(key), b.get(key)
            if old is new:
                continue
            ns, name = key
            keys = object_keys(resource, ns, name)
            if old is None or new is None:
                if ignore.hide(keys):
                    continue
                gone = old if new is None else new
                assert gone is not None
                out.append(ObjectChange(key=keys[0], resource=resource, kind=kind, namespace=ns, name=name,
                                        change="added" if old is None else "removed",
                                        object=_clean(gone, options.include_status)))
                continue
            old_uid = (old.get("metadata") or {}).get("uid")
            new_uid = (new.get("metadata") or {}).get("uid")
            recreated = old_uid != new_uid
            fields = field_changes(resource, old, new, options.include_status)
            if (not fields and not recreated) or ignore.hide(keys):
                continue
            kept = [f for f in fields if not ignore.hide([f"{k}#{f.pointer}" for k in keys], f"{keys[0]}#{f.pointer}")]
            if not kept and not recreated:
                continue
            out.append(ObjectChange(key=keys[0], resource=resource, kind=kind, namespace=ns, name=name,
                                    change="recreated" if recreated else "changed", fields=kept,
                                    categories=sorted({f.category for f in kept}),
                                    old_uid=old_uid if recreated else None, new_uid=new_uid if recreated else None))
    return sorted(out, key=lambda o: (o.key, o.resource))
