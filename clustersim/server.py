"""The simulated kube-apiserver: an aiohttp application over a ``Store``.

Serves what the project's API contract (``k8s-api-contract.md`` of the design notes) lists:
legacy discovery (/api, /apis, /api/v1, /apis/G, /apis/G/V, /version, trailing slashes), CRUD,
list and watch with label and field selectors, the three PATCH types, eviction, graceful pod
deletion, dryRun=All, bookmarks and the watch-list ``k8s.io/initial-events-end`` bookmark, 410
Expired as a watch ERROR event, protobuf DeleteOptions bodies, Go ``strconv.ParseBool``
booleans, and ``pods/exec`` over WebSocket (clustersim.execws). Gets and lists asking for a
``meta.k8s.io`` Table get one (clustersim.tables); otherwise it answers plain JSON (also when
Accept prefers protobuf, which kubectl and client-go accept); watches stay plain objects. Every
error is a ``Status``.

Admin endpoints (outside /api, never faulted or recorded): ``GET|DELETE /_sim/requests``,
``GET|POST /_sim/faults``, ``POST|DELETE /_sim/nodes/{name}/fault``, ``GET /_sim/healthz``, and
the step traps' ``/_sim/traps`` (clustersim.traps.admin). A trap acts on a resource request
before the fault injector: it holds it, answers it with a Status, or counts it
(clustersim.traps.model); a trapped request is recorded like any other.
``ClusterSim`` mounts more the same way (``/_sim/exec``, ``/_sim/snapshots``: clustersim.snapshots.registry;
``GET /metrics``: clustersim.metrics).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from clustersim.apihttp import (
    ReqInfo,
    json_response,
    parse_bool,
    status_response,
)
from clustersim.discovery import SERVER_VERSION, api_group_list, api_resource_list
from clustersim.execsim import ExecRouter
from clustersim.execws import ExecServer
from clustersim.faults import FaultInjector, RequestEntry, RequestRecord, now
from clustersim.patch import PATCH_TYPES, PatchError, apply_patch
from clustersim.protobuf import decode_protobuf_delete_options
from clustersim.store import ApiError, Store
from clustersim.tables import build_table, table_version
from clustersim.traps.admin import trap_routes
from clustersim.traps.model import TrapClosed, TrapSet
from clustersim.watchstream import parse_selectors, serve_watch

# Re-exported for callers that imported them from here before the split.
__all__ = ["SERVER_VERSION", "ApiServer", "ReqInfo", "api_group_list", "api_resource_list",
           "decode_protobuf_delete_options", "json_response", "parse_bool", "status_response"]


class ApiServer:
    """The aiohttp application (``self.app``) serving a Store.

    ``agents`` is a zero-argument callable returning the running Agents (or None) for the node
    fault admin endpoints; ``advertise`` the host:port shown in /api; ``exec_router`` runs
    ``pods/exec`` commands (clustersim.execws serves the WebSocket protocol); ``traps`` the step
    traps (a TrapSet of its own by default), whose endpoints it mounts.
    """

    def __init__(self, store: Store, faults: FaultInjector | None = None, requests: RequestRecord | None = None,
                 agents: Callable[[], Any] | None = None, exec_router: ExecRouter | None = None,
                 traps: TrapSet | None = None) -> None:
        self.store = store
        self.exec_router = exec_router if exec_router is not None else ExecRouter()
        self.exec = ExecServer(store, self.exec_router)
        #: What ``/version`` reports (a Kubernetes gitVersion), e.g. the masters' (clustersim.masters); None: the simulator's own.
        self.version_provider: Callable[[], str | None] | None = None
        self.faults = faults if faults is not None else FaultInjector()
        self.requests = requests if requests is not None else RequestRecord()
        self._agents = agents or (lambda: None)
        self.advertise = "127.0.0.1:0"
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self.traps = traps if traps is not None else TrapSet()
        for method, route, handler in trap_routes(self.traps):
            self.add_admin_route(method, route, handler)

    def add_admin_route(self, method: str, path: str, handler: Callable[[web.Request], Any]) -> None:
        """Mount ``handler`` at ``/_sim/<path>`` (aiohttp path syntax, e.g. ``hosts/{name}``).

        These routes bypass the fault injector and the request record. aiohttp resolves the
        longest static prefix first, so they take precedence over the catch-all API route.
        Must be called before the server starts (the router is frozen then): RuntimeError after.
        Raises clustersim.components.ComponentError for a path outside /_sim/."""
        from clustersim.components import normalise_admin_path

        self.app.router.add_route(method, normalise_admin_path(path), handler)

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
            if info.rt is not None:
                await self._trap(request, info)
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
                if fault.delay:
                    await asyncio.sleep(fault.delay)
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

    async def _trap(self, request: web.Request, info: ReqInfo) -> None:
        """Let a step trap act on the request (clustersim.traps.model): return to go on, raise
        the ApiError a ``fail`` trap answers (or 503 when the simulator stops while it is held).
        A create names its object in the body (``metadata.name``, else ``generateName``): that
        name is matched (the body is read here; aiohttp keeps it for the handler)."""
        if not self.traps.traps:
            return
        name = info.name
        if info.verb == "create" and not name and not info.subresource:
            try:
                meta = (json.loads(await request.read()) or {}).get("metadata") or {}
                name = str(meta.get("name") or meta.get("generateName") or "")
            except (ValueError, AttributeError):
                name = ""
        action, trap = self.traps.check_api(info.verb, info.plural, info.group, info.namespace, name,
                                            info.subresource)
        if trap is None:
            return
        if action == "hold":
            try:
                await trap.hold()
            except TrapClosed:
                raise ApiError(503, "ServiceUnavailable", "the simulator is shutting down") from None
        elif action == "fail":
            code, reason, message = trap.spec.api_failure(info.verb, info.plural, info.group, info.namespace, name)
            details: dict[str, Any] = {"name": name} if name else {}
            if info.group:
                details["group"] = info.group
            details["kind"] = info.plural
            raise ApiError(code, reason, message, details)

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
        rt = self.store.resource_type(key)
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
        if info.subresource == "exec":
            return await self.exec.serve(request, info.namespace, info.name)
        verb = info.verb
        if verb == "get":
            return self._get(request, info)
        if verb == "list":
            return self._list(request, info)
        if verb == "watch":
            return await serve_watch(self.store, self.faults, request, info)
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
            git = self.version_provider() if self.version_provider is not None else None
            if git is None:
                return json_response(SERVER_VERSION)
            major, minor = git.lstrip("v").split(".")[:2]
            return json_response({**SERVER_VERSION, "major": major, "minor": minor, "gitVersion": git})
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        if path == "/api":
            return json_response({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": self.advertise}]})
        if path == "/apis":
            return json_response(api_group_list(self.store.resource_types))
        parts = [p for p in path.split("/") if p]
        if parts[0] == "api" and len(parts) == 2:
            doc = api_resource_list(parts[1], self.store.resource_types)
            if doc is not None:
                return json_response(doc)
        if parts[0] == "apis" and len(parts) == 2:
            for g in api_group_list(self.store.resource_types)["groups"]:
                if g["name"] == parts[1]:
                    return json_response({"kind": "APIGroup", "apiVersion": "v1", **g})
        if parts[0] == "apis" and len(parts) == 3:
            doc = api_resource_list(f"{parts[1]}/{parts[2]}", self.store.resource_types)
            if doc is not None:
                return json_response(doc)
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    # ------------------------------------------------------------------ reads
    def _get(self, request: web.Request, info: ReqInfo) -> web.Response:
        assert info.rt is not None
        obj = self.store.get_ref(info.rt.key, info.name, info.namespace)
        if info.subresource == "scale":
            return json_response(_scale_of(obj))
        if info.subresource == "eviction":
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        if not info.subresource:
            table = self._table(request, info, [obj], obj["metadata"].get("resourceVersion", ""))
            if table is not None:
                return table
        return json_response(obj)

    def _table(self, request: web.Request, info: ReqInfo, objs: list[dict],
               rv: str) -> web.Response | None:
        """The Table response when the client asked for one (kubectl get), else None."""
        version = table_version(request.headers.get("Accept"))
        if version is None or info.rt is None:
            return None
        try:
            table = build_table(info.rt, objs, self.store.clock.now(), version=version,
                                include_object=request.query.get("includeObject"), resource_version=rv)
        except ValueError as e:
            raise ApiError.bad_request(str(e)) from None
        return json_response(table)

    def _list(self, request: web.Request, info: ReqInfo) -> web.Response:
        assert info.rt is not None
        lsel, fsel = parse_selectors(request)
        items = self.store.list_refs(info.rt.key, info.namespace or None, lsel, fsel)
        table = self._table(request, info, items, str(self.store.resource_version))
        if table is not None:
            return table
        body = {"kind": f"{info.rt.kind}List", "apiVersion": info.rt.api_version,
                "metadata": {"resourceVersion": str(self.store.resource_version)}, "items": items}
        return json_response(body)

    # ------------------------------------------------------------------ writes
    @staticmethod
    def _body_object(body: bytes) -> dict[str, Any]:
        """The request body as a JSON object; ApiError 400 (BadRequest) for an empty body, one that
        is not JSON, or JSON that is not an object."""
        if not body:
            raise ApiError.bad_request("the request body is empty")
        try:
            obj = json.loads(body)
        except ValueError as e:
            raise ApiError.bad_request(f"the body of the request was in an unknown format: {e}") from None
        if not isinstance(obj, dict):
            raise ApiError.bad_request("the body of the request must be a JSON object")
        return obj

    def _create(self, info: ReqInfo, body: bytes, dry_run: bool) -> web.Response:
        rt = info.rt
        assert rt is not None
        obj = self._body_object(body)
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
        obj = self._body_object(body)
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
        lsel, fsel = parse_selectors(request)
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
    """The autoscaling/v1 Scale view of a Deployment/ReplicaSet/StatefulSet/ReplicationController/DC."""
    meta = obj["metadata"]
    sel = (obj.get("spec") or {}).get("selector") or {}
    if "matchLabels" in sel or "matchExpressions" in sel:
        sel = sel.get("matchLabels") or {}
    # else a plain map selector (ReplicationController, DeploymentConfig)
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in meta},
            "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
            "status": {"replicas": (obj.get("status") or {}).get("replicas", 0),
                       "selector": ",".join(f"{k}={v}" for k, v in sorted(sel.items()))}}
