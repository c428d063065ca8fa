"""The cluster simulator's single source of truth: objects, resourceVersions and events.

Everything that changes cluster state (the HTTP API and the agents) goes through ``Store``, so
every change bumps the global resourceVersion and emits exactly one ``Event``, in commit order.

Stored objects are never mutated in place: a commit replaces the stored dict by a new one. So
``Event.object`` / ``Event.old`` and the ``*_ref`` accessors can hand out the stored dicts without
copying (READ ONLY for callers), while ``get``/``list`` return private deep copies.

Semantics follow kube-apiserver (k8s.io/apiserver registry/generic/registry/store.go):
resourceVersion is a global counter rendered as a string, ``generation`` starts at 1 and is bumped
only when something outside ``metadata``/``status`` changes, stale ``metadata.resourceVersion`` on
update is 409 Conflict, and pods are deleted gracefully (deletionTimestamp first, DELETED later).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

from clustersim.apierrors import ApiError
from clustersim.clock import Clock
from clustersim.eviction import EvictionMixin
from clustersim.loops import KeyedTimers
from clustersim.nodereg import NodeRegistrationMixin
from clustersim.resources import OPTIONAL_RESOURCES, RESOURCES, ResourceType, resource
from clustersim.selectors import matches_fields, parse_field_selector
from kubeshared.labels import matches_labels, parse_label_selector
from clustersim.storeevents import Event, Subscription

# Re-exported: most of clustersim imports these from here.
__all__ = ["EVENT_HISTORY", "RESOURCES", "ApiError", "Event", "ResourceType", "Store", "Subscription", "resource"]

# How many committed events are kept for watch-from-resourceVersion replay (older -> 410 Expired).
EVENT_HISTORY = 50_000


def _copy(obj: Any) -> Any:
    """Deep copy of a JSON-shaped value (a JSON round trip is faster than copy.deepcopy)."""
    return json.loads(json.dumps(obj))


def _timestamp(clock: Clock) -> str:
    return clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")


def _spec_part(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}


def _with_status_of(obj: dict, source: dict) -> dict:
    """A shallow copy of ``obj`` whose ``status`` is ``source``'s (none when ``source`` has none):
    the split of a write between the main resource and its ``/status`` subresource."""
    out = dict(obj)
    if "status" in source:
        out["status"] = source["status"]
    else:
        out.pop("status", None)
    return out


def _unindex(index: dict[str, dict[tuple[str, str], None]], bucket: str, key: tuple[str, str]) -> None:
    """Remove ``key`` from ``index[bucket]``, and the bucket once it is empty (missing is fine)."""
    keys = index.get(bucket)
    if keys is not None:
        keys.pop(key, None)
        if not keys:
            del index[bucket]


class Store(EvictionMixin, NodeRegistrationMixin):
    """In-memory object store with a global resourceVersion, event history and subscriptions.

    Keys: ``resource`` arguments are ResourceType keys (``pods``, ``daemonsets.apps`` ...);
    ``namespace`` is ignored for cluster-scoped resources. Errors are ``ApiError``.
    """

    pod_termination_seconds: float = 2.0

    def __init__(self, clock: Clock | None = None, *, history: int = EVENT_HISTORY) -> None:
        self.clock = clock or Clock()
        self.resource_version = 0
        # Keyed by every served resource, including ones registered after this store was made.
        self._objects: defaultdict[str, dict[tuple[str, str], dict]] = defaultdict(dict)
        self._pods_by_node: dict[str, dict[tuple[str, str], None]] = {}
        #: Owner UID -> keys of the pods whose ownerReferences name it (ReplicaSet, DaemonSet).
        self._pods_by_owner: dict[str, dict[tuple[str, str], None]] = {}
        self._history: deque[Event] = deque(maxlen=history)
        # Replay from rv N is complete iff N >= _replay_floor (events with rv <= floor were dropped).
        self._replay_floor = 0
        self._subs: list[Subscription] = []
        self._timers = KeyedTimers("store")
        #: Optional kinds this store serves (``serve``), key -> row.
        self._optional: dict[str, ResourceType] = {}

    # ----------------------------------------------------------------- served kinds
    def serve(self, *keys: str) -> None:
        """Serve these optional kinds too (keys of ``clustersim.resources.OPTIONAL_RESOURCES``, e.g.
        ``machineconfignodes.machineconfiguration.openshift.io``); idempotent. Raises KeyError for
        a key that is neither always served nor optional."""
        for key in keys:
            if key in RESOURCES:
                continue
            self._optional[key] = OPTIONAL_RESOURCES[key]

    def serves(self, key: str) -> bool:
        """Whether this store serves the resource ``key`` (always-served or enabled optional kind)."""
        return key in RESOURCES or key in self._optional

    @property
    def resource_types(self) -> dict[str, ResourceType]:
        """Every kind this store serves, key -> row: ``RESOURCES`` then the enabled optional kinds
        (the order discovery lists them in)."""
        return {**RESOURCES, **self._optional} if self._optional else RESOURCES

    def resource_type(self, key: str) -> ResourceType | None:
        """The row of a served kind, or None."""
        return RESOURCES.get(key) or self._optional.get(key)

    # ----------------------------------------------------------------- reading
    def _rt(self, resource_key: str) -> ResourceType:
        rt = RESOURCES.get(resource_key) or self._optional.get(resource_key)
        if rt is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return rt

    @staticmethod
    def _k(rt: ResourceType, name: str, namespace: str | None) -> tuple[str, str]:
        return ((namespace or "") if rt.namespaced else "", name)

    def get_ref(self, resource: str, name: str, namespace: str | None = None) -> dict:
        """The stored object itself (READ ONLY, never mutate); ApiError 404 if missing."""
        rt = self._rt(resource)
        obj = self._objects[resource].get(self._k(rt, name, namespace))
        if obj is None:
            raise ApiError.not_found(rt, name)
        return obj

    def get(self, resource: str, name: str, namespace: str | None = None) -> dict:
        """Deep copy of one object; ApiError 404 if missing."""
        return _copy(self.get_ref(resource, name, namespace))

    def try_get(self, resource: str, name: str, namespace: str | None = None) -> dict | None:
        """Deep copy of one object, or None."""
        rt = self._rt(resource)
        obj = self._objects[resource].get(self._k(rt, name, namespace))
        return None if obj is None else _copy(obj)

    def list_refs(self, resource: str, namespace: str | None = None, label_selector: str | None = None,
                  field_selector: str | None = None) -> list[dict]:
        """Stored objects (READ ONLY) matching, sorted by (namespace, name). ValueError on a bad selector."""
        rt = self._rt(resource)
        lsel = parse_label_selector(label_selector)
        fsel = parse_field_selector(field_selector)
        objs = self._objects[resource]
        keys: Iterable[tuple[str, str]]
        node_terms = [v for p, op, v in fsel if p == "spec.nodeName" and op == "="]
        name_terms = [v for p, op, v in fsel if p == "metadata.name" and op == "="]
        if resource == "pods" and node_terms:
            keys = list(self._pods_by_node.get(node_terms[0], {}))
        elif name_terms and (namespace or not rt.namespaced):
            # One object by name (a watch or list of one node): a lookup, not a scan of them all.
            key = self._k(rt, name_terms[0], namespace)
            keys = [key] if key in objs else []
        else:
            keys = objs.keys()
        if rt.namespaced and namespace:
            keys = [k for k in keys if k[0] == namespace]
        out = []
        for k in sorted(keys):
            obj = objs[k]
            if lsel and not matches_labels(lsel, obj["metadata"].get("labels")):
                continue
            if fsel and not matches_fields(fsel, obj):
                continue
            out.append(obj)
        return out

    def list(self, resource: str, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> list[dict]:
        """Deep copies of matching objects, sorted by (namespace, name)."""
        return _copy(self.list_refs(resource, namespace, label_selector, field_selector))

    def snapshot_refs(self) -> dict[str, dict[tuple[str, str], dict]]:
        """Every stored object as ``{resource key: {(namespace, name): object}}`` (resources
        with no objects left out), for clustersim.snapshots.

        Copy-on-snapshot: the dicts returned are new (one pointer copy per object, O(objects)),
        the objects are the stored ones (READ ONLY). They stay valid as a record of this moment
        because a commit replaces a stored object and never mutates it (module doc)."""
        return {key: dict(objs) for key, objs in self._objects.items() if objs}

    def count(self, resource: str) -> int:
        """Number of stored objects of a resource."""
        return len(self._objects[self._rt(resource).key])

    # ----------------------------------------------------------------- events
    def subscribe(self, resources: Iterable[str] | None = None, names: Iterable[str] | None = None,
                  node_names: Iterable[str] | None = None) -> Subscription:
        """Subscribe to committed events (of all resources or these keys; of all objects or those
        with these ``metadata.name`` or ``spec.nodeName`` values: a watch of one node, or of its
        pods, is not woken by all the others)."""
        sub = Subscription(self._unsubscribe, None if resources is None else frozenset(resources),
                           None if names is None else frozenset(names), None if node_names is None else frozenset(node_names))
        self._subs.append(sub)
        return sub

    def _unsubscribe(self, sub: Subscription) -> None:
        if sub in self._subs:
            self._subs.remove(sub)

    def events_since(self, rv: int) -> list[Event] | None:
        """Events with rv > ``rv`` from the history, or None if some were already dropped (-> 410)."""
        if rv < self._replay_floor:
            return None
        if not self._history or rv >= self._history[-1].rv:
            return []
        first = self._history[0].rv
        if rv < first:
            return list(self._history)
        # Events have strictly increasing rv; rv values are dense except for dry runs (none recorded).
        out = []
        for ev in reversed(self._history):
            if ev.rv <= rv:
                break
            out.append(ev)
        out.reverse()
        return out

    @property
    def oldest_replayable_rv(self) -> int:
        """The smallest resourceVersion a watch can resume from without 410 Expired."""
        return self._replay_floor

    def _emit(self, ev: Event) -> None:
        if len(self._history) == self._history.maxlen:
            self._replay_floor = self._history[0].rv
        self._history.append(ev)
        name = (ev.object.get("metadata") or {}).get("name", "")
        for sub in self._subs:
            if sub.wants(ev, name):
                sub.queue.put_nowait(ev)

    def _next_rv(self) -> int:
        self.resource_version += 1
        return self.resource_version

    def pods_owned_by(self, uid: str) -> list[dict]:
        """Stored pods (READ ONLY) with an ownerReference to ``uid``, sorted by (namespace, name)."""
        objs = self._objects["pods"]
        return [objs[k] for k in sorted(self._pods_by_owner.get(uid, {}))]

    @staticmethod
    def _owner_uids(obj: dict | None) -> set[str]:
        refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
        return {r["uid"] for r in refs if r.get("uid")}

    def _index(self, rt: ResourceType, key: tuple[str, str], old: dict | None, new: dict | None) -> None:
        if rt.key != "pods":
            return
        old_owners, new_owners = self._owner_uids(old), self._owner_uids(new)
        for uid in old_owners - new_owners:
            _unindex(self._pods_by_owner, uid, key)
        for uid in new_owners - old_owners:
            self._pods_by_owner.setdefault(uid, {})[key] = None
        old_node = (old or {}).get("spec", {}).get("nodeName") if old else None
        new_node = (new or {}).get("spec", {}).get("nodeName") if new else None
        if old_node == new_node:
            return
        if old_node:
            _unindex(self._pods_by_node, old_node, key)
        if new_node:
            self._pods_by_node.setdefault(new_node, {})[key] = None

    def _commit(self, rt: ResourceType, key: tuple[str, str], ev_type: str, new: dict, old: dict | None) -> Event:
        rv = self._next_rv()
        new["metadata"]["resourceVersion"] = str(rv)
        if ev_type == "DELETED":
            del self._objects[rt.key][key]
            self._index(rt, key, old, None)
        else:
            self._objects[rt.key][key] = new
            self._index(rt, key, old, new)
        ev = Event(ev_type, rt.key, new, old, rv)
        self._emit(ev)
        return ev

    # ----------------------------------------------------------------- writing
    def create(self, resource: str, obj: dict, *, dry_run: bool = False, copy_result: bool = True,
               _owned: bool = False) -> dict:
        """Create an object (see module doc); returns a copy of the stored object.

        Sets kind/apiVersion, uid, resourceVersion, creationTimestamp (unless given), generation=1,
        a name from ``metadata.generateName``. 409 AlreadyExists, 422 Invalid without a name.
        ``copy_result=False`` returns the stored object itself (READ ONLY).
        """
        rt = self._rt(resource)
        new = {"kind": rt.kind, "apiVersion": rt.api_version}
        src = obj if _owned else _copy(obj)
        new.update((k, v) for k, v in src.items() if k not in ("kind", "apiVersion"))
        if _owned:
            new["metadata"] = dict(new.get("metadata") or {})
        meta = new.setdefault("metadata", {})
        if meta is None:
            meta = new["metadata"] = {}
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            else:
                raise ApiError.invalid(rt, "", "metadata.name", "Required value: name or generateName is required")
        if rt.namespaced:
            meta["namespace"] = meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        key = self._k(rt, meta["name"], meta.get("namespace"))
        if key in self._objects[rt.key]:
            raise ApiError.already_exists(rt, meta["name"])
        meta["uid"] = meta.get("uid") or str(uuid.uuid4())
        meta.setdefault("creationTimestamp", _timestamp(self.clock))
        meta["generation"] = 1
        meta.pop("deletionTimestamp", None)
        meta.pop("deletionGracePeriodSeconds", None)
        if dry_run:
            meta["resourceVersion"] = str(self.resource_version)
            return new
        self._commit(rt, key, "ADDED", new, None)
        return _copy(new) if copy_result else new

    def load(self, items: Iterable[tuple[str, dict]]) -> int:
        """Bulk create for scenario loading: ``(resource key, object)`` pairs, create() semantics.

        The store takes ownership of the given dicts (the caller must not use them afterwards),
        which avoids two deep copies per object. Returns how many objects were created.
        """
        n = 0
        for resource_key, obj in items:
            self.create(resource_key, obj, copy_result=False, _owned=True)
            n += 1
        return n

    def _prepare_update(self, rt: ResourceType, old: dict, new: dict, subresource: str | None,
                        from_api: bool) -> dict:
        """Build the object to store from a proposed one (status/spec split, immutable meta)."""
        if subresource == "status":
            merged = _with_status_of(old, new)
            merged["metadata"] = dict(old["metadata"])
            new = merged
        elif from_api and "status" in rt.subresources:
            new = _with_status_of(new, old)
        new["kind"] = rt.kind
        new["apiVersion"] = rt.api_version
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            meta = {}
        meta = dict(meta)
        new["metadata"] = meta
        om = old["metadata"]
        for k in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                  "deletionGracePeriodSeconds", "generation"):
            if k in om:
                meta[k] = om[k]
            else:
                meta.pop(k, None)
        if _spec_part(new) != _spec_part(old):
            meta["generation"] = om.get("generation", 1) + 1
        return new

    def update(self, resource: str, obj: dict, *, subresource: str | None = None, dry_run: bool = False,
               from_api: bool = True) -> dict:
        """PUT semantics: 404 if missing, 409 on stale ``metadata.resourceVersion``; returns a copy.

        ``subresource="status"`` takes only ``.status`` from ``obj``; the main resource ignores
        ``.status`` for kinds that have a status subresource (when ``from_api``).
        """
        rt = self._rt(resource)
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if not name:
            raise ApiError.invalid(rt, "", "metadata.name", "Required value: name is required")
        key = self._k(rt, name, meta.get("namespace"))
        old = self._objects[rt.key].get(key)
        if old is None:
            raise ApiError.not_found(rt, name)
        want_rv = meta.get("resourceVersion")
        if want_rv and want_rv != old["metadata"]["resourceVersion"]:
            raise ApiError.conflict(rt, name)
        new = self._prepare_update(rt, old, _copy(obj), subresource, from_api)
        return self._finish_update(rt, key, old, new, dry_run)

    def _finish_update(self, rt: ResourceType, key: tuple[str, str], old: dict, new: dict, dry_run: bool,
                       copy_result: bool = True) -> dict:
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return _copy(old) if copy_result else old
        if not dry_run:
            self._commit(rt, key, "MODIFIED", new, old)
        return _copy(new) if copy_result else new

    def replace_checked(self, resource: str, name: str, namespace: str | None, new: dict, *,
                        subresource: str | None = None, dry_run: bool = False, copy_result: bool = True) -> dict:
        """Commit ``new`` (a private dict, e.g. a patch result) over the stored object (API rules).

        409 when ``new.metadata.resourceVersion`` differs from the stored one (a patch that carried
        a stale resourceVersion). Used by PATCH; returns a copy of the result (with
        ``copy_result=False`` the stored object itself, READ ONLY, to serialize without copying).
        """
        rt = self._rt(resource)
        key = self._k(rt, name, namespace)
        old = self._objects[rt.key].get(key)
        if old is None:
            raise ApiError.not_found(rt, name)
        want_rv = (new.get("metadata") or {}).get("resourceVersion")
        if want_rv and want_rv != old["metadata"]["resourceVersion"]:
            raise ApiError.conflict(rt, name)
        new = self._prepare_update(rt, old, new, subresource, True)
        return self._finish_update(rt, key, old, new, dry_run, copy_result)

    def mutate(self, resource: str, name: str, namespace: str | None, fn: Callable[[dict], Any], *,
               subresource: str | None = None) -> dict | None:
        """Agents' way to change an object: ``fn`` edits a private copy in place.

        Commits (RV bump, MODIFIED event, generation bump on spec change) only if something changed.
        ``subresource="status"`` keeps only the status edits. Returns a copy of the resulting object,
        or None if the object does not exist.
        """
        rt = self._rt(resource)
        key = self._k(rt, name, namespace)
        old = self._objects[rt.key].get(key)
        if old is None:
            return None
        work = _copy(old)
        fn(work)
        new = self._prepare_update(rt, old, work, subresource, False)
        return self._finish_update(rt, key, old, new, False)

    def delete(self, resource: str, name: str, namespace: str | None = None, *,
               grace_period_seconds: int | None = None, preconditions: dict | None = None,
               dry_run: bool = False) -> dict:
        """Delete; pods are deleted gracefully (see module doc). Returns a copy of the last object.

        404 if missing; 409 Conflict when ``preconditions`` {uid, resourceVersion} do not match.
        """
        rt = self._rt(resource)
        key = self._k(rt, name, namespace)
        old = self._objects[rt.key].get(key)
        if old is None:
            raise ApiError.not_found(rt, name)
        pre = preconditions or {}
        om = old["metadata"]
        if pre.get("uid") and pre["uid"] != om.get("uid"):
            raise ApiError.conflict(rt, name, f"Precondition failed: UID in precondition: {pre['uid']}, "
                                              f"UID in object meta: {om.get('uid')}")
        if pre.get("resourceVersion") and pre["resourceVersion"] != om.get("resourceVersion"):
            raise ApiError.conflict(rt, name, "Precondition failed: ResourceVersion in precondition: "
                                              f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                                              f"{om.get('resourceVersion')}")
        if rt.key == "pods":
            grace = grace_period_seconds
            if grace is None:
                grace = (old.get("spec") or {}).get("terminationGracePeriodSeconds")
                grace = 30 if grace is None else grace
            grace = max(0, int(grace))
            # A pod that never ran (no node) has nothing to terminate (pkg/registry/core/pod/strategy.go).
            if not (old.get("spec") or {}).get("nodeName"):
                grace = 0
            if grace > 0:
                if dry_run:
                    out = _copy(old)
                    out["metadata"].setdefault("deletionTimestamp", _timestamp(self.clock))
                    out["metadata"].setdefault("deletionGracePeriodSeconds", grace)
                    return out
                if om.get("deletionTimestamp") and om.get("deletionGracePeriodSeconds", grace) <= grace:
                    return _copy(old)
                new = dict(old)
                new["metadata"] = dict(om, deletionTimestamp=om.get("deletionTimestamp") or _timestamp(self.clock),
                                       deletionGracePeriodSeconds=grace)
                self._commit(rt, key, "MODIFIED", new, old)
                self._schedule_removal(key, om["uid"], min(float(grace), self.pod_termination_seconds))
                return _copy(new)
        if dry_run:
            return _copy(old)
        return self._remove(rt, key, old)

    def _remove(self, rt: ResourceType, key: tuple[str, str], old: dict) -> dict:
        new = dict(old)
        new["metadata"] = dict(old["metadata"])
        self._commit(rt, key, "DELETED", new, old)
        if rt.key == "pods":
            self._timers.cancel(key)
        return _copy(new)

    def _schedule_removal(self, key: tuple[str, str], uid: str, sim_seconds: float) -> None:
        self._timers.cancel(key)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            # No loop (synchronous use, e.g. scenario tooling): terminate at once.
            self._finish_removal(key, uid)
            return
        self._timers.after(key, self.clock.real(sim_seconds), partial(self._finish_removal, key, uid))

    def _finish_removal(self, key: tuple[str, str], uid: str) -> None:
        obj = self._objects["pods"].get(key)
        if obj is not None and obj["metadata"].get("uid") == uid:
            self._remove(RESOURCES["pods"], key, obj)

    def delete_collection(self, resource: str, namespace: str | None = None, label_selector: str | None = None,
                          field_selector: str | None = None, *, grace_period_seconds: int | None = None,
                          dry_run: bool = False) -> list[dict]:
        """DELETE on a collection: deletes every match; returns the deleted (or terminating) objects."""
        out = []
        for obj in list(self.list_refs(resource, namespace, label_selector, field_selector)):
            m = obj["metadata"]
            try:
                out.append(self.delete(resource, m["name"], m.get("namespace"),
                                       grace_period_seconds=grace_period_seconds, dry_run=dry_run))
            except ApiError:
                continue
        return out

    # ----------------------------------------------------------------- helpers
    def iter_keys(self, resource: str) -> Iterator[tuple[str, str]]:
        """(namespace, name) keys of a resource (namespace "" for cluster-scoped)."""
        return iter(list(self._objects[self._rt(resource).key]))

    def close(self) -> None:
        """Cancel pending graceful-deletion timers and subscriptions."""
        self._timers.cancel_all()
        for sub in list(self._subs):
            sub.close()
