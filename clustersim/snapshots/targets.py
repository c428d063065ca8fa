"""The *targets* of a diff: what changed, named as lockkeeper's outcomes name it, so that a test can
compare a procedure's ``left_changed`` (``ChangedItem.target``, workflows.kit.models) with the
simulator's own view as two sets of strings.

A diff entry's key (:mod:`clustersim.snapshots.ignore`) is precise (a field, a file, a unit); a
target is coarser, one per thing an operator would undo:

- an API object: ``KIND NAMESPACE/NAME`` when namespaced, ``KIND NAME`` when cluster-scoped
  (``DaemonSet openshift-sdn/sdn``, ``Node node01``, ``ClusterNetwork default``). ``KIND`` is the
  plain kind, qualified as ``KIND.GROUP`` only when another served group has a kind of the same
  name, except for the group the plain kind means (:data:`PLAIN_KIND_GROUP`: ``Network cluster``
  is ``config.openshift.io``'s, ``Network.operator.openshift.io cluster`` the operator's);
- the cluster's network type (the fields of :data:`NETWORK_TYPE_FIELDS` of the two Network
  objects): ``network type``, not the object;
- the pods of one owner: the owner's target (``DaemonSet openshift-sdn/sdn``; a mirror pod's
  ``Node node01``);
- a host's state (files, units, packages, iptables, images, runtime...), the master processes on
  it and its OVS vxlan0 port (the SDN model, by node name): ``host NAME`` (a master and an SDN node
  are named as their host);
- the masters' controllers leader: ``masters leader``;
- a GlusterFS volume: ``gluster volume NAME``.

:func:`by_target` groups a :class:`~clustersim.snapshots.models.Diff`'s change lines (as
``Diff.lines()`` prints them) by target; reboots and restarts are information, never a target.
"""

from __future__ import annotations

from clustersim.resources import RESOURCES
from clustersim.snapshots.models import Diff, ObjectChange, PodGroupChange, StateChange

#: Kinds served by more than one group whose plain name means one group (the group lockkeeper's
#: gateway resolves the plain kind to).
PLAIN_KIND_GROUP: dict[str, str] = {"Network": "config.openshift.io"}
#: The target of the cluster's network type.
NETWORK_TYPE = "network type"
#: Store resource -> JSON Pointers (and what is below them) that make up the network type.
NETWORK_TYPE_FIELDS: dict[str, tuple[str, ...]] = {
    "networks.config.openshift.io": ("/spec/networkType", "/status/networkType", "/status/migration"),
    "networks.operator.openshift.io": ("/spec/defaultNetwork/type", "/spec/migration", "/status/networkType"),
}


def kind_name(kind: str, group: str) -> str:
    """``kind`` as a target names it: plain, or ``Kind.group`` when another served group has the
    same kind and ``group`` is not the one the plain kind means."""
    shared = any(rt.kind == kind and rt.group != group for rt in RESOURCES.values())
    if not shared or PLAIN_KIND_GROUP.get(kind) == group:
        return kind
    return f"{kind}.{group}" if group else kind


def object_target(resource: str, namespace: str, name: str) -> str:
    """``DaemonSet openshift-sdn/sdn`` / ``Node node01`` for an object of store resource ``resource``."""
    rt = RESOURCES.get(resource)
    kind = kind_name(rt.kind, rt.group) if rt is not None else resource
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _network_type_field(resource: str, pointer: str) -> bool:
    return any(pointer == p or pointer.startswith(p + "/") for p in NETWORK_TYPE_FIELDS.get(resource, ()))


def object_targets(o: ObjectChange) -> list[str]:
    """The targets of one object entry: the object's, and/or ``network type`` for its network
    type fields (an added or removed object is the object's only)."""
    own = object_target(o.resource, o.namespace, o.name)
    if o.change in ("added", "removed") or not o.fields:
        return [own]
    out = []
    if any(_network_type_field(o.resource, f.pointer) for f in o.fields):
        out.append(NETWORK_TYPE)
    if o.change == "recreated" or any(not _network_type_field(o.resource, f.pointer) for f in o.fields):
        out.append(own)
    return out


def owner_target(p: PodGroupChange) -> str:
    """The target of an owner's pods: the owner's (namespaced like its pods unless the kind is
    served cluster-scoped, as a mirror pod's Node)."""
    rt = next((r for r in RESOURCES.values() if r.kind == p.owner_kind and r.group == PLAIN_KIND_GROUP.get(r.kind, r.group)), None)
    if rt is None:
        return f"{p.owner_kind} {p.namespace}/{p.owner_name}"
    kind = kind_name(rt.kind, rt.group)
    return f"{kind} {p.namespace}/{p.owner_name}" if rt.namespaced else f"{kind} {p.owner_name}"


def state_target(s: StateChange) -> str:
    """``host NAME`` (host, master and SDN state), ``masters leader``, ``gluster volume NAME``."""
    if s.component == "gluster":
        return f"gluster volume {s.name}"
    if s.component == "master" and not s.name:
        return "masters leader"
    return f"host {s.name}"


def by_target(d: Diff) -> dict[str, list[str]]:
    """Target -> the diff's change lines for it (``Diff.lines()``'s wording, sorted); an empty
    diff gives an empty dict."""
    out: dict[str, list[str]] = {}
    for o in d.objects:
        lines = d.object_lines(o)
        own = object_target(o.resource, o.namespace, o.name)
        for t in object_targets(o):
            if t == NETWORK_TYPE and o.fields:
                picked = [ln for f, ln in zip(o.fields, lines, strict=True) if _network_type_field(o.resource, f.pointer)]
            elif t == own and o.fields:
                picked = [ln for f, ln in zip(o.fields, lines, strict=True) if not _network_type_field(o.resource, f.pointer)]
                picked = picked or [f"{o.change} {o.key}"]
            else:
                picked = lines
            out.setdefault(t, []).extend(picked)
    for p in d.pods:
        out.setdefault(owner_target(p), []).append(d.pod_line(p))
    for s in d.state:
        out.setdefault(state_target(s), []).append(d.state_line(s))
    return {t: sorted(lines) for t, lines in sorted(out.items())}


def targets(d: Diff) -> set[str]:
    """The diff's targets (the keys of :func:`by_target`)."""
    return set(by_target(d))
