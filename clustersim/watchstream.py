"""The watch stream of the simulated API server (k8s-api-contract.md, "Watch semantics").

One JSON event per line over a chunked 200 response; selectors applied (a MODIFIED that moves
an object into/out of the selection becomes ADDED/DELETED); replay from a resourceVersion;
bookmarks; the watch-list ``k8s.io/initial-events-end`` bookmark; 410 Expired as an ERROR event.
With a ``meta.k8s.io`` Table Accept header (``kubectl get -w``) every event carries a one-row
Table instead of the object; bookmarks and errors stay plain.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from clustersim.apierrors import ApiError
from clustersim.apihttp import ReqInfo, dumps, parse_bool
from clustersim.faults import FaultInjector
from clustersim.selectors import matches_fields, parse_field_selector
from kubeshared.labels import matches_labels, parse_label_selector
from clustersim.store import Event, Store
from clustersim.tables import build_table, table_version

# Real apiservers end a watch without timeoutSeconds after a random 30-60 min.
_DEFAULT_WATCH_SECONDS = 1800.0
# Idle bookmark period (real apiserver: about once a minute; shorter keeps clients' RVs fresh).
_BOOKMARK_EVERY = 5.0


def parse_selectors(request: web.Request) -> tuple[str | None, str | None]:
    """(labelSelector, fieldSelector) of the query, validated; ApiError 400 when unparsable."""
    lsel = request.query.get("labelSelector")
    fsel = request.query.get("fieldSelector")
    try:
        parse_label_selector(lsel)
        parse_field_selector(fsel)
    except ValueError as e:
        raise ApiError.bad_request(f"unable to parse requirement: {e}") from None
    return lsel, fsel


async def serve_watch(store: Store, faults: FaultInjector, request: web.Request,
                      info: ReqInfo) -> web.StreamResponse:
    """Serve ``GET ...?watch=true`` for ``info``; ApiError 400 for bad query values (before streaming)."""
    rt = info.rt
    assert rt is not None
    q = request.query
    lsel_s, fsel_s = parse_selectors(request)
    lsel, fsel = parse_label_selector(lsel_s), parse_field_selector(fsel_s)
    namespace = info.namespace
    bookmarks = parse_bool(q.get("allowWatchBookmarks"))
    initial = parse_bool(q.get("sendInitialEvents"))
    rv_s = q.get("resourceVersion", "")
    try:
        timeout = float(q.get("timeoutSeconds") or _DEFAULT_WATCH_SECONDS)
    except ValueError:
        raise ApiError.bad_request(f"invalid timeoutSeconds {q.get('timeoutSeconds')!r}") from None
    if rv_s not in ("", "0"):
        try:
            rv = int(rv_s)
        except ValueError:
            raise ApiError.bad_request(f'invalid resource version "{rv_s}"') from None
    else:
        rv = None

    def match(obj: dict | None) -> bool:
        if obj is None:
            return False
        meta = obj["metadata"]
        if namespace and meta.get("namespace") != namespace:
            return False
        if lsel and not matches_labels(lsel, meta.get("labels")):
            return False
        return not fsel or matches_fields(fsel, obj)

    table_v = table_version(request.headers.get("Accept"))
    headers_sent = False
    if table_v is not None and q.get("includeObject") not in (None, "", "None", "Object", "PartialObjectMetadata"):
        raise ApiError.bad_request(
            f'includeObject must be one of "Object", "PartialObjectMetadata", "None", not {q.get("includeObject")!r}')

    def encode(ev_type: str, obj: dict, cached: Event | None = None) -> bytes:
        nonlocal headers_sent
        if table_v is None:
            return cached.line() if cached is not None else dumps({"type": ev_type, "object": obj}) + b"\n"
        # As kube-apiserver's watch encoder: each object as a one-row Table; column definitions
        # only in the first event (kubectl reuses the last ones it saw).
        table = build_table(rt, [obj], store.clock.now(), version=table_v,
                            include_object=q.get("includeObject"),
                            resource_version=obj["metadata"].get("resourceVersion", ""))
        if headers_sent:
            table["columnDefinitions"] = []
        headers_sent = True
        return dumps({"type": ev_type, "object": table}) + b"\n"

    def render(ev: Event) -> bytes | None:
        new_m = match(ev.object)
        if ev.type == "MODIFIED":
            old_m = match(ev.old)
            if new_m and old_m:
                return encode(ev.type, ev.object, ev)
            if new_m or old_m:
                return encode("ADDED" if new_m else "DELETED", ev.object)
            return None
        return encode(ev.type, ev.object, ev) if new_m else None

    def bookmark(extra_annotations: dict | None = None) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(store.resource_version)}
        if extra_annotations:
            meta["annotations"] = extra_annotations
        return dumps({"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.api_version,
                                                      "metadata": meta}}) + b"\n"

    def pending_then_bookmark() -> bytes:
        """The events still queued, then a bookmark at the store's resourceVersion, built without
        an await: a bookmark says "everything up to here was sent", so a change committed
        while the stream was in an await (or in the same loop turn as its timeout) must go out
        first, or a client resuming from the bookmark never sees it."""
        lines = []
        while not sub.queue.empty():
            line = render(sub.queue.get_nowait())
            if line is not None:
                lines.append(line)
        return b"".join([*lines, bookmark()])

    # Subscribe before reading the current state: no await in between, so nothing is missed.
    # A watch of one object by name (``fieldSelector=metadata.name=X``, as a node's waits use) or
    # of one node's pods (``spec.nodeName=X``, as a drain's) hears only those objects' events: a
    # rollout's hundred watches are not each woken by every node's change (issue 16).
    names = {v for p, op, v in fsel if p == "metadata.name" and op == "="}
    nodes = {v for p, op, v in fsel if p == "spec.nodeName" and op == "=" and rt.key == "pods"}
    sub = store.subscribe([rt.key], names=names or None, node_names=nodes or None)
    stop = faults.register_watch()
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    resp.enable_chunked_encoding()
    dropped = False
    try:
        # The state is read before the first await (prepare): an event committed meanwhile is
        # then only in the subscription's queue, never sent twice.
        first: list[bytes] = []
        expired_msg = None
        if faults.take_forced_expiry():
            expired_msg = f"too old resource version: {rv or 0} ({store.resource_version})"
        elif initial or rv is None:
            for obj in store.list_refs(rt.key, namespace or None, lsel_s, fsel_s):
                first.append(encode("ADDED", obj))
            if initial and bookmarks:
                first.append(bookmark({"k8s.io/initial-events-end": "true"}))
        else:
            events = store.events_since(rv)
            if events is None:
                expired_msg = f"too old resource version: {rv} ({store.oldest_replayable_rv + 1})"
            else:
                for ev in events:
                    if ev.resource == rt.key:
                        line = render(ev)
                        if line is not None:
                            first.append(line)
        await resp.prepare(request)
        if expired_msg is not None:
            err = ApiError.expired(expired_msg)
            await resp.write(dumps({"type": "ERROR", "object": err.to_status()}) + b"\n")
            await resp.write_eof()
            return resp
        if first:
            await resp.write(b"".join(first))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last_write = loop.time()
        stop_wait = asyncio.ensure_future(stop.wait())
        try:
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    break
                get = asyncio.ensure_future(sub.queue.get())
                done, _ = await asyncio.wait({get, stop_wait}, timeout=min(left, 1.0),
                                             return_when=asyncio.FIRST_COMPLETED)
                if stop_wait in done:
                    get.cancel()
                    dropped = True
                    break
                if get not in done:
                    get.cancel()
                    if request.transport is None or request.transport.is_closing():
                        return resp
                    if bookmarks and loop.time() - last_write >= _BOOKMARK_EVERY:
                        await resp.write(pending_then_bookmark())
                        last_write = loop.time()
                    continue
                batch = [get.result()]
                while not sub.queue.empty():
                    batch.append(sub.queue.get_nowait())
                out = [line for line in map(render, batch) if line is not None]
                if out:
                    await resp.write(b"".join(out))
                    last_write = loop.time()
        finally:
            stop_wait.cancel()
        if dropped:
            if request.transport is not None:
                request.transport.abort()
            return resp
        if bookmarks:
            await resp.write(pending_then_bookmark())
        await resp.write_eof()
        return resp
    except (ConnectionResetError, ConnectionError):
        return resp
    finally:
        sub.close()
        faults.unregister_watch(stop)
