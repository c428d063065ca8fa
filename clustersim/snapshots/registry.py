"""The snapshots a running simulator holds, and their admin endpoints (outside /api, never
faulted or recorded; mounted by ``ClusterSim`` on every simulator):

- ``POST /_sim/snapshots`` (optional body ``{"name": "before-abort"}``) -> 201 :class:`SnapshotInfo`
  (``{"id": "s1", "name", "taken_at", "resource_version", "objects", "hosts", "capture_ms"}``);
- ``GET /_sim/snapshots`` -> ``{"snapshots": [SnapshotInfo, ...]}`` in the order taken;
- ``GET /_sim/snapshots/{id}`` -> its SnapshotInfo;
- ``GET /_sim/snapshots/{id}/diff`` (also ``POST``) -> :class:`Diff` of the snapshot against the
  world now, or against snapshot ``to``. Options as query parameters (``ignore`` repeated,
  ``pods=owners|each``, ``include_events``, ``include_leases``, ``include_status`` as Go
  ``strconv.ParseBool`` booleans, ``to=ID``) and/or a JSON body with the same names
  (:class:`DiffOptions` fields plus ``to``; ``ignore`` a list); ignore patterns of both are used,
  the body's other values win;
- ``DELETE /_sim/snapshots/{id}`` -> ``{"deleted": id}``; ``DELETE /_sim/snapshots`` deletes all
  (``{"deleted": [ids]}``).

Errors answer ``{"error": message}``: 400 bad options, 404 unknown snapshot, 409 when
:data:`MAX_SNAPSHOTS` are held (delete some first; none is dropped silently).

Cost: taking a snapshot copies the store's dicts (one pointer per object; objects are shared,
clustersim.snapshots.world) and the hosts' small maps, on the event loop; a diff captures the
world the same way on the loop, then compares in a worker thread (``asyncio.to_thread``), so the
loop is blocked only for the capture.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from aiohttp import web
from pydantic import ValidationError

from clustersim.snapshots.compare import diff_worlds
from clustersim.snapshots.models import Diff, DiffOptions, SnapshotInfo
from clustersim.snapshots.world import World, capture

if TYPE_CHECKING:
    from clustersim.components import Handler
    from clustersim.sim import ClusterSim

#: Snapshots one simulator holds at most (each costs one pointer per API object plus host maps).
MAX_SNAPSHOTS = 1000
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


class SnapshotError(ValueError):
    """A snapshot request the registry refuses; ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class SnapshotRegistry:
    """Snapshots of ``sim`` held in memory, by id (``s1``, ``s2``... never reused)."""

    def __init__(self, sim: ClusterSim) -> None:
        self.sim = sim
        self._snaps: dict[str, World] = {}
        self._seq = 0

    def take(self, name: str = "") -> SnapshotInfo:
        """Capture the world now (on the event loop) and keep it. Raises SnapshotError 409 when
        MAX_SNAPSHOTS are held."""
        if len(self._snaps) >= MAX_SNAPSHOTS:
            raise SnapshotError(409, f"{MAX_SNAPSHOTS} snapshots are held; delete some first")
        self._seq += 1
        world = capture(self.sim, f"s{self._seq}", name)
        self._snaps[world.info.id] = world
        return world.info

    def get(self, snapshot_id: str) -> World:
        """The snapshot ``snapshot_id``; SnapshotError 404 when unknown."""
        try:
            return self._snaps[snapshot_id]
        except KeyError:
            raise SnapshotError(404, f"no snapshot {snapshot_id!r}") from None

    def infos(self) -> list[SnapshotInfo]:
        """Every held snapshot's info, in the order taken."""
        return [w.info for w in self._snaps.values()]

    def delete(self, snapshot_id: str) -> None:
        """Drop one snapshot; SnapshotError 404 when unknown."""
        self.get(snapshot_id)
        del self._snaps[snapshot_id]

    def clear(self) -> list[str]:
        """Drop every snapshot; returns their ids."""
        ids = list(self._snaps)
        self._snaps.clear()
        return ids

    async def diff(self, snapshot_id: str, options: DiffOptions | None = None, to: str | None = None) -> Diff:
        """The Diff of ``snapshot_id`` against snapshot ``to``, or against the world now (captured
        on the loop, compared in a worker thread). SnapshotError 404 for an unknown id."""
        before = self.get(snapshot_id)
        after = self.get(to) if to else capture(self.sim, "", "now")
        return await asyncio.to_thread(diff_worlds, before, after, options)

    # ------------------------------------------------------------------ HTTP
    def admin_routes(self) -> list[tuple[str, str, Handler]]:
        """The route triples (see module docstring)."""
        return [
            ("POST", "snapshots", self._h_take),
            ("GET", "snapshots", self._h_list),
            ("DELETE", "snapshots", self._h_clear),
            ("GET", "snapshots/{id}", self._h_get),
            ("DELETE", "snapshots/{id}", self._h_delete),
            ("GET", "snapshots/{id}/diff", self._h_diff),
            ("POST", "snapshots/{id}/diff", self._h_diff),
        ]

    @staticmethod
    def _error(exc: SnapshotError) -> web.Response:
        return web.json_response({"error": str(exc)}, status=exc.status)

    async def _h_take(self, request: web.Request) -> web.Response:
        try:
            body = await _json_body(request)
            name = body.get("name") or ""
            if not isinstance(name, str):
                raise SnapshotError(400, "name must be a string")
            info = self.take(name)
        except SnapshotError as exc:
            return self._error(exc)
        return web.json_response(info.model_dump(mode="json"), status=201)

    async def _h_list(self, request: web.Request) -> web.Response:
        return web.json_response({"snapshots": [i.model_dump(mode="json") for i in self.infos()]})

    async def _h_clear(self, request: web.Request) -> web.Response:
        return web.json_response({"deleted": self.clear()})

    async def _h_get(self, request: web.Request) -> web.Response:
        try:
            info = self.get(request.match_info["id"]).info
        except SnapshotError as exc:
            return self._error(exc)
        return web.json_response(info.model_dump(mode="json"))

    async def _h_delete(self, request: web.Request) -> web.Response:
        try:
            self.delete(request.match_info["id"])
        except SnapshotError as exc:
            return self._error(exc)
        return web.json_response({"deleted": request.match_info["id"]})

    async def _h_diff(self, request: web.Request) -> web.Response:
        try:
            options, to = parse_diff_request(request.query, await _json_body(request))
            diff = await self.diff(request.match_info["id"], options, to)
        except SnapshotError as exc:
            return self._error(exc)
        text = await asyncio.to_thread(diff.model_dump_json)
        return web.Response(text=text, content_type="application/json")


async def _json_body(request: web.Request) -> dict[str, Any]:
    if not request.can_read_body:
        return {}
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise SnapshotError(400, f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise SnapshotError(400, "the body must be a JSON object")
    return body


def _parse_bool(name: str, value: str) -> bool:
    """Go ``strconv.ParseBool`` (what the API server accepts for its own booleans)."""
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise SnapshotError(400, f'{name}: strconv.ParseBool: parsing "{value}": invalid syntax')


def parse_diff_request(query: Any, body: dict[str, Any]) -> tuple[DiffOptions, str | None]:
    """(DiffOptions, ``to`` snapshot id or None) from query parameters (a multidict) and a JSON
    body (module docstring). Raises SnapshotError 400 for unknown or invalid options."""
    fields: dict[str, Any] = {"ignore": list(query.getall("ignore", []))}
    to = query.get("to") or None
    for key in query:
        if key in ("ignore", "to"):
            continue
        if key == "pods":
            fields["pods"] = query[key]
        elif key in ("include_events", "include_leases", "include_status"):
            fields[key] = _parse_bool(key, query[key])
        else:
            raise SnapshotError(400, f"unknown diff option {key!r}")
    body = dict(body)
    if "to" in body:
        to = body.pop("to") or None
    if to is not None and not isinstance(to, str):
        raise SnapshotError(400, "to must be a snapshot id")
    ignore = body.pop("ignore", [])
    if isinstance(ignore, str) or not isinstance(ignore, list):
        raise SnapshotError(400, "ignore must be a list of patterns")
    fields["ignore"] += ignore
    fields.update(body)
    try:
        return DiffOptions.model_validate(fields), to
    except ValidationError as exc:
        raise SnapshotError(400, f"invalid diff options: {exc}") from None
