"""The simulated kube-apiserver: an aiohttp application over a ``Store``.

Serves what /work/shared/k8s-api-contract.md lists: legacy discovery (/api, /apis, /api/v1,
/apis/G, /apis/G/V, /version, trailing slashes), CRUD, list and watch with label and field
selectors, the three PATCH types, eviction, graceful pod deletion, dryRun=All, bookmarks and the
watch-list ``k8s.io/initial-events-end`` bookmark, 410 Expired as a watch ERROR event, protobuf
DeleteOptions bodies, Go ``strconv.ParseBool`` booleans. It always answers JSON (Accept asking for
protobuf or Table gets plain JSON, which kubectl and client-go accept). Every error is a ``Status``.

Admin endpoints (outside /api, never faulted or recorded): ``GET|DELETE /_sim/requests``,
``GET|POST /_sim/faults``, ``POST|DELETE /_sim/nodes/{name}/fault``, ``GET /_sim/healthz``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from clustersim.faults import FaultInjector, RequestEntry, RequestRecord, now
from clustersim.patch import PATCH_TYPES, PatchError, apply_patch
from clustersim.selectors import matches_fields, matches_labels, parse_field_selector, parse_label_selector
from clustersim.store import RESOURCES, ApiError, Event, ResourceType, Store

_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
# Real apiservers end a watch without timeoutSeconds after a random 30-60 min.
_DEFAULT_WATCH_SECONDS = 1800.0
# Idle bookmark period (real apiserver: about once a minute; shorter keeps clients' RVs fresh).
_BOOKMARK_EVERY = 5.0
SERVER_VERSION = {"major": "1", "minor": "37", "gitVersion": "v1.37.0-clustersim", "gitCommit": "clustersim",
                  "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.25.0",
                  "compiler": "gc", "platform": "linux/amd64"}


def parse_bool(value: str | None, default: bool = False) -> bool:
    """Go ``strconv.ParseBool``: 1,t,T,TRUE,true,True / 0,f,F,FALSE,false,False; else 400."""
    if value is None or value == "":
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ApiError.bad_request(f'strconv.ParseBool: parsing "{value}": invalid syntax')


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON response (``Content-Type: application/json``)."""
    return web.Response(body=_dumps(obj), status=status, content_type="application/json", headers=headers)


def status_response(err: ApiError) -> web.Response:
    """The Status body of an ApiError with the matching HTTP status (apiserver's spacing)."""
    return web.Response(body=json.dumps(err.to_status()).encode(), status=err.status,
                        content_type="application/json", headers=err.headers or None)


@dataclass
class ReqInfo:
    """A parsed resource request."""

    verb: str
    rt: ResourceType | None
    group: str
    version: str
    plural: str
    namespace: str
    name: str
    subresource: str


# ----------------------------------------------------------------------------- protobuf DeleteOptions
def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    i = 0
    while i < len(buf):
        tag, i = _varint(buf, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 2:
            n, i = _varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("unsupported wire type")
        out.append((num, v))
    return out


def decode_protobuf_delete_options(body: bytes) -> dict:
    """Decode a ``k8s\\0`` + runtime.Unknown{raw=DeleteOptions} body into the DeleteOptions JSON shape.

    Fields (k8s.io/apimachinery meta/v1 generated.proto): 1 gracePeriodSeconds, 2 preconditions
    {1 uid, 2 resourceVersion}, 3 orphanDependents, 4 propagationPolicy, 5 dryRun.
    Anything undecodable yields ``{}`` (the body is then ignored, never a 415).
    """
    try:
        if body.startswith(b"k8s\x00"):
            body = body[4:]
        raw = next((v for n, v in _fields(body) if n == 2), b"")
        opts: dict[str, Any] = {}
        for n, v in _fields(raw):
            if n == 1:
                opts["gracePeriodSeconds"] = v - (1 << 64) if v >= 1 << 63 else v
            elif n == 2:
                pre = {}
                for pn, pv in _fields(v):
                    pre["uid" if pn == 1 else "resourceVersion"] = pv.decode()
                opts["preconditions"] = pre
            elif n == 3:
                opts["orphanDependents"] = bool(v)
            elif n == 4:
                opts["propagationPolicy"] = v.decode()
            elif n == 5:
                opts.setdefault("dryRun", []).append(v.decode())
        return opts
    except (ValueError, IndexError, TypeError, AttributeError, UnicodeDecodeError):
        return {}


# ----------------------------------------------------------------------------- discovery
def _groups() -> dict[str, list[ResourceType]]:
    out: dict[str, list[ResourceType]] = {}
    for rt in RESOURCES.values():
        out.setdefault(rt.api_version, []).append(rt)
    return out


_SUBRESOURCE_VERBS = {"status": ["get", "patch", "update"], "scale": ["get", "patch", "update"]}


def api_resource_list(group_version: str) -> dict | None:
    """The legacy APIResourceList for one group/version, or None if not served."""
    rts = _groups().get(group_version)
    if group_version == "policy/v1" and rts is None:
        rts = []
    if rts is None:
        return None
    resources: list[dict] = []
    for rt in rts:
        resources.append({"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                          "kind": rt.kind, "verbs": list(rt.verbs), "shortNames": list(rt.short_names)})
        for sub in rt.subresources:
            entry: dict[str, Any] = {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced}
            if sub == "eviction":
                entry.update(group="policy", version="v1", kind="Eviction", verbs=["create"])
            elif sub == "scale":
                entry.update(group="autoscaling", version="v1", kind="Scale", verbs=_SUBRESOURCE_VERBS[sub])
            else:
                entry.update(kind=rt.kind, verbs=_SUBRESOURCE_VERBS[sub])
            resources.append(entry)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def _api_group(name: str, versions: list[str]) -> dict:
    vs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": vs, "preferredVersion": vs[0]}


def api_group_list() -> dict:
    """The APIGroupList served at /apis."""
    groups: dict[str, list[str]] = {}
    for rt in RESOURCES.values():
        if rt.group and rt.version not in groups.setdefault(rt.group, []):
            groups[rt.group].append(rt.version)
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_api_group(g, vs) for g, vs in groups.items()]}


# ----------------------------------------------------------------------------- server
class ApiServer:
    """The aiohttp application (``self.app``) serving a Store.

    ``agents`` is a zero-argument callable returning the running Agents (or None) for the node
    fault admin endpoints; ``advertise`` the host:port shown in /api.
    """

    def __init__(self, store: Store, faults: FaultInjector | None = None, requests: RequestRecord | None = None,
                 agents: Callable[[], Any] | None = None) -> None:
        self.store = store
        self.faults = faults if faults is not None else FaultInjector()
        self.requests = requests if requests is not None else RequestRecord()
        self._agents = agents or (lambda: None)
        self.advertise = "127.0.0.1:0"
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.router.add_route("*", "/{tail:.*}", self._dispatch)

    # ------------------------------------------------------------------ entry
    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path.startswith("/_sim/"):
            try:
                return await self._admin(request, path)
            except (ValueError, TypeError, KeyError) as e:
                return status_response(ApiError.bad_request(str(e)))
        path = path.rstrip("/") or "/"
        started = now()
        info: ReqInfo | None = None
        code = 0
        try:
            info = self._parse(request, path)
            if info.rt is not None or path.startswith(("/api", "/apis")):
                fault = self.faults.decide(info.verb, info.plural)
                if fault.kind == "error":
                    raise self._fault_error(fault.code)
                if fault.kind == "timeout":
                    await asyncio.sleep(self.faults.timeout_seconds)
                    if request.transport is not None:
                        request.transport.close()
                    code = 0
                    return web.Response(status=504)
            resp = await self._handle(request, path, info)
            code = resp.status
            return resp
        except ApiError as e:
            code = e.status
            return status_response(e)
        finally:
            if info is not None:
                self.requests.add(RequestEntry(
                    info.verb, info.plural, info.group, info.subresource, info.namespace, info.name,
                    request.headers.get("User-Agent", ""), code, started, request.method, request.path))

    def _fault_error(self, code: int) -> ApiError:
        if code == 429:
            ra = self.faults.retry_after_seconds
            return ApiError(429, "TooManyRequests", "Too many requests, please try again later.",
                            {"retryAfterSeconds": ra}, headers={"Retry-After": str(ra)})
        if code == 503:
            return ApiError(503, "ServiceUnavailable", "the server is currently unable to handle the request")
        return ApiError.internal("injected fault")

    def _parse(self, request: web.Request, path: str) -> ReqInfo:
        parts = [p for p in path.split("/") if p]
        method = request.method
        nonres = ReqInfo(method.lower(), None, "", "", "", "", "", "")
        if not parts or parts[0] not in ("api", "apis"):
            return nonres
        if parts[0] == "api":
            group, version, rest = "", (parts[1] if len(parts) > 1 else ""), parts[2:]
            if len(parts) <= 2:
                return nonres
        else:
            if len(parts) <= 3:
                return nonres
            group, version, rest = parts[1], parts[2], parts[3:]
        namespace = ""
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        key = f"{plural}.{group}" if group else plural
        rt = RESOURCES.get(key)
        if rt is None or rt.version != version or (sub and sub not in rt.subresources):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if name:
            verb = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "POST": "create"}.get(method)
        else:
            verb = {"POST": "create", "DELETE": "deletecollection"}.get(method)
            if method == "GET":
                verb = "watch" if parse_bool(request.query.get("watch")) else "list"
        if verb is None:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        if rt.namespaced and not namespace and verb not in ("list", "watch"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return ReqInfo(verb, rt, group, version, plural, namespace, name, sub)

    async def _handle(self, request: web.Request, path: str, info: ReqInfo) -> web.StreamResponse:
        if info.rt is None:
            return self._nonresource(request, path)
        verb = info.verb
        if verb == "get":
            return self._get(info)
        if verb == "list":
            return self._list(request, info)
        if verb == "watch":
            return await self._watch(request, info)
        body = await request.read()
        dry_run = "All" in request.query.getall("dryRun", [])
        if verb == "create":
            if info.subresource == "eviction":
                return self._evict(info, body, dry_run)
            if info.subresource:
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
            return self._create(info, body, dry_run)
        if verb == "update":
            return self._update(info, body, dry_run)
        if verb == "patch":
            return self._patch(request, info, body, dry_run)
        if verb == "delete":
            return self._delete(request, info, body, dry_run)
        if verb == "deletecollection":
            return self._delete_collection(request, info, body, dry_run)
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    # ------------------------------------------------------------------ non-resource
    def _nonresource(self, request: web.Request, path: str) -> web.Response:
        if request.method != "GET":
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        if path == "/version":
            return json_response(SERVER_VERSION)
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        if path == "/api":
            return json_response({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": self.advertise}]})
        if path == "/apis":
            return json_response(api_group_list())
        parts = [p for p in path.split("/") if p]
        if parts[0] == "api" and len(parts) == 2:
            doc = api_resource_list(parts[1])
            if doc is not None:
                return json_response(doc)
        if parts[0] == "apis" and len(parts) == 2:
            for g in api_group_list()["groups"]:
                if g["name"] == parts[1]:
                    return json_response({"kind": "APIGroup", "apiVersion": "v1", **g})
        if parts[0] == "apis" and len(parts) == 3:
            doc = api_resource_list(f"{parts[1]}/{parts[2]}")
            if doc is not None:
                return json_response(doc)
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    # ------------------------------------------------------------------ reads
    def _get(self, info: ReqInfo) -> web.Response:
        assert info.rt is not None
        obj = self.store.get_ref(info.rt.key, info.name, info.namespace)
        if info.subresource == "scale":
            return json_response(_scale_of(obj))
        if info.subresource == "eviction":
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        return json_response(obj)

    @staticmethod
    def _selectors(request: web.Request) -> tuple[str | None, str | None]:
        lsel = request.query.get("labelSelector")
        fsel = request.query.get("fieldSelector")
        try:
            parse_label_selector(lsel)
            parse_field_selector(fsel)
        except ValueError as e:
            raise ApiError.bad_request(f"unable to parse requirement: {e}") from None
        return lsel, fsel

    def _list(self, request: web.Request, info: ReqInfo) -> web.Response:
        assert info.rt is not None
        lsel, fsel = self._selectors(request)
        items = self.store.list_refs(info.rt.key, info.namespace or None, lsel, fsel)
        body = {"kind": f"{info.rt.kind}List", "apiVersion": info.rt.api_version,
                "metadata": {"resourceVersion": str(self.store.resource_version)}, "items": items}
        return json_response(body)

    # ------------------------------------------------------------------ watch
    async def _watch(self, request: web.Request, info: ReqInfo) -> web.StreamResponse:
        rt = info.rt
        assert rt is not None
        q = request.query
        lsel_s, fsel_s = self._selectors(request)
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

        def render(ev: Event) -> bytes | None:
            new_m = match(ev.object)
            if ev.type == "MODIFIED":
                old_m = match(ev.old)
                if new_m and old_m:
                    return ev.line()
                if new_m or old_m:
                    t = "ADDED" if new_m else "DELETED"
                    return _dumps({"type": t, "object": ev.object}) + b"\n"
                return None
            return ev.line() if new_m else None

        def bookmark(extra_annotations: dict | None = None) -> bytes:
            meta: dict[str, Any] = {"resourceVersion": str(self.store.resource_version)}
            if extra_annotations:
                meta["annotations"] = extra_annotations
            return _dumps({"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.api_version,
                                                          "metadata": meta}}) + b"\n"

        # Subscribe before reading the current state: no await in between, so nothing is missed.
        sub = self.store.subscribe([rt.key])
        stop = self.faults.register_watch()
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        dropped = False
        try:
            await resp.prepare(request)
            first: list[bytes] = []
            expired_msg = None
            if self.faults.take_forced_expiry():
                expired_msg = f"too old resource version: {rv or 0} ({self.store.resource_version})"
            elif initial or rv is None:
                for obj in self.store.list_refs(rt.key, namespace or None, lsel_s, fsel_s):
                    first.append(_dumps({"type": "ADDED", "object": obj}) + b"\n")
                if initial and bookmarks:
                    first.append(bookmark({"k8s.io/initial-events-end": "true"}))
            else:
                events = self.store.events_since(rv)
                if events is None:
                    expired_msg = f"too old resource version: {rv} ({self.store.oldest_replayable_rv + 1})"
                else:
                    for ev in events:
                        if ev.resource == rt.key:
                            line = render(ev)
                            if line is not None:
                                first.append(line)
            if expired_msg is not None:
                err = ApiError.expired(expired_msg)
                await resp.write(_dumps({"type": "ERROR", "object": err.to_status()}) + b"\n")
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
                            await resp.write(bookmark())
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
                await resp.write(bookmark())
            await resp.write_eof()
            return resp
        except (ConnectionResetError, ConnectionError):
            return resp
        finally:
            sub.close()
            self.faults.unregister_watch(stop)

    # ------------------------------------------------------------------ writes
    @staticmethod
    def _body_json(body: bytes) -> Any:
        if not body:
            raise ApiError.bad_request("the request body is empty")
        try:
            return json.loads(body)
        except ValueError as e:
            raise ApiError.bad_request(f"the body of the request was in an unknown format: {e}") from None

    def _create(self, info: ReqInfo, body: bytes, dry_run: bool) -> web.Response:
        rt = info.rt
        assert rt is not None
        obj = self._body_json(body)
        if not isinstance(obj, dict):
            raise ApiError.bad_request("the body of the request must be a JSON object")
        meta = obj.setdefault("metadata", {}) or {}
        obj["metadata"] = meta
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != info.namespace:
                raise ApiError.bad_request("the namespace of the provided object does not match the namespace "
                                           "sent on the request")
            meta["namespace"] = info.namespace
        return json_response(self.store.create(rt.key, obj, dry_run=dry_run), status=201)

    def _check_identity(self, info: ReqInfo, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("name") and meta["name"] != info.name:
            raise ApiError.bad_request("the name of the object does not match the name on the URL")
        if info.namespace and meta.get("namespace") and meta["namespace"] != info.namespace:
            raise ApiError.bad_request("the namespace of the provided object does not match the namespace "
                                       "sent on the request")

    def _update(self, info: ReqInfo, body: bytes, dry_run: bool) -> web.Response:
        rt = info.rt
        assert rt is not None
        obj = self._body_json(body)
        if not isinstance(obj, dict):
            raise ApiError.bad_request("the body of the request must be a JSON object")
        self._check_identity(info, obj)
        if info.subresource == "scale":
            return self._put_scale(info, obj, dry_run)
        meta = obj.setdefault("metadata", {})
        meta["name"] = info.name
        if rt.namespaced:
            meta["namespace"] = info.namespace
        sub = "status" if info.subresource == "status" else None
        return json_response(self.store.update(rt.key, obj, subresource=sub, dry_run=dry_run))

    def _patch(self, request: web.Request, info: ReqInfo, body: bytes, dry_run: bool) -> web.Response:
        rt = info.rt
        assert rt is not None
        ctype = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype not in PATCH_TYPES or ctype == "application/apply-patch+yaml":
            raise ApiError(415, "UnsupportedMediaType",
                           f'the body of the request was in an unknown format - accepted media types include: '
                           f'{", ".join(PATCH_TYPES)}')
        cur = self.store.get_ref(rt.key, info.name, info.namespace)
        target = _scale_of(cur) if info.subresource == "scale" else cur
        try:
            new = apply_patch(ctype, target, body, target.get("apiVersion", rt.api_version),
                              target.get("kind", rt.kind))
        except PatchError as e:
            if e.status == 400:
                raise ApiError.bad_request(str(e)) from None
            raise ApiError.invalid(rt, info.name, "patch", str(e)) from None
        if not isinstance(new, dict):
            raise ApiError.invalid(rt, info.name, "patch", "the patch result is not an object")
        if info.subresource == "scale":
            return self._put_scale(info, new, dry_run)
        self._check_identity(info, new)
        sub = "status" if info.subresource == "status" else None
        res = self.store.replace_checked(rt.key, info.name, info.namespace or None, new, subresource=sub,
                                         dry_run=dry_run, copy_result=False)
        return json_response(res)

    def _put_scale(self, info: ReqInfo, scale: dict, dry_run: bool) -> web.Response:
        rt = info.rt
        assert rt is not None
        cur = self.store.get_ref(rt.key, info.name, info.namespace)
        want_rv = (scale.get("metadata") or {}).get("resourceVersion")
        if want_rv and want_rv != cur["metadata"]["resourceVersion"]:
            raise ApiError.conflict(rt, info.name)
        replicas = (scale.get("spec") or {}).get("replicas", 0)
        new = json.loads(json.dumps(cur))
        new.setdefault("spec", {})["replicas"] = replicas
        res = self.store.replace_checked(rt.key, info.name, info.namespace, new, dry_run=dry_run, copy_result=False)
        return json_response(_scale_of(res))

    def _delete_options(self, request: web.Request, body: bytes) -> dict:
        opts: dict[str, Any] = {}
        ctype = request.headers.get("Content-Type", "")
        if body:
            if "protobuf" in ctype or body.startswith(b"k8s\x00"):
                opts = decode_protobuf_delete_options(body)
            else:
                try:
                    parsed = json.loads(body)
                    opts = parsed if isinstance(parsed, dict) else {}
                except ValueError:
                    opts = {}
        q = request.query
        if "gracePeriodSeconds" in q:
            try:
                opts["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
            except ValueError:
                raise ApiError.bad_request("invalid gracePeriodSeconds") from None
        if "All" in q.getall("dryRun", []):
            opts["dryRun"] = ["All"]
        return opts

    def _delete(self, request: web.Request, info: ReqInfo, body: bytes, dry_run: bool) -> web.Response:
        rt = info.rt
        assert rt is not None
        opts = self._delete_options(request, body)
        dry_run = dry_run or "All" in (opts.get("dryRun") or [])
        obj = self.store.delete(rt.key, info.name, info.namespace or None,
                                grace_period_seconds=opts.get("gracePeriodSeconds"),
                                preconditions=opts.get("preconditions"), dry_run=dry_run)
        if rt.key == "pods":
            return json_response(obj)
        details: dict[str, Any] = {"name": info.name}
        if rt.group:
            details["group"] = rt.group
        details.update(kind=rt.plural, uid=obj["metadata"].get("uid"))
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                              "details": details})

    def _delete_collection(self, request: web.Request, info: ReqInfo, body: bytes, dry_run: bool) -> web.Response:
        rt = info.rt
        assert rt is not None
        opts = self._delete_options(request, body)
        lsel, fsel = self._selectors(request)
        items = self.store.delete_collection(rt.key, info.namespace or None, lsel, fsel,
                                             grace_period_seconds=opts.get("gracePeriodSeconds"),
                                             dry_run=dry_run or "All" in (opts.get("dryRun") or []))
        return json_response({"kind": f"{rt.kind}List", "apiVersion": rt.api_version,
                              "metadata": {"resourceVersion": str(self.store.resource_version)}, "items": items})

    def _evict(self, info: ReqInfo, body: bytes, dry_run: bool) -> web.Response:
        ev: Any = {}
        if body:
            try:
                ev = json.loads(body)
            except ValueError:
                raise ApiError.bad_request("the body of the request was in an unknown format") from None
        if not isinstance(ev, dict):
            raise ApiError.bad_request("an Eviction must be a JSON object")
        opts = ev.get("deleteOptions") or {}
        result = self.store.evict(info.name, info.namespace, opts, dry_run=dry_run)
        return json_response(result, status=201)

    # ------------------------------------------------------------------ admin
    async def _admin(self, request: web.Request, path: str) -> web.Response:
        method = request.method
        parts = [p for p in path.split("/") if p][1:]
        if parts == ["healthz"]:
            return json_response({"ok": True, "resourceVersion": self.store.resource_version})
        if parts == ["requests"]:
            if method == "DELETE":
                self.requests.clear()
                return json_response({"cleared": True})
            return json_response(self.requests.to_json())
        if parts == ["faults"]:
            if method == "POST":
                self.faults.configure_from_json(await request.json())
            return json_response(self.faults.to_json())
        if len(parts) == 3 and parts[0] == "nodes" and parts[2] == "fault":
            agents = self._agents()
            if agents is None:
                return status_response(ApiError(503, "ServiceUnavailable", "no agents are running"))
            if method == "POST":
                body = await request.json()
                agents.inject_node_fault(parts[1], body["kind"], body.get("reason"))
            elif method == "DELETE":
                agents.clear_node_fault(parts[1])
            return json_response({"node": parts[1], "ok": True})
        return status_response(ApiError(404, "NotFound", "the server could not find the requested resource"))


def _scale_of(obj: dict) -> dict:
    """The autoscaling/v1 Scale view of a Deployment/ReplicaSet."""
    meta = obj["metadata"]
    sel = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in meta},
            "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
            "status": {"replicas": (obj.get("status") or {}).get("replicas", 0),
                       "selector": ",".join(f"{k}={v}" for k, v in sorted(sel.items()))}}

