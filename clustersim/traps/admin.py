"""Admin endpoints of the step traps (outside /api, never faulted or recorded):

- ``POST /_sim/traps`` with a :class:`~clustersim.traps.model.TrapSpec` JSON body -> 201
  :class:`~clustersim.traps.model.TrapState` (its ``id``: ``t1``, ``t2`` ...);
- ``GET /_sim/traps`` -> ``{"traps": [TrapState, ...]}``;
- ``GET /_sim/traps/{id}`` -> TrapState; with ``?hits=N`` (and optionally ``held=M``,
  ``timeout=SECONDS``, default 30) it answers once the trap has N hits (and M requests held),
  or at the timeout with the state as it is then (a long poll: the client's ``wait_hit``);
- ``POST /_sim/traps/{id}/release`` -> TrapState (held requests go on; the trap passes what
  comes next);
- ``DELETE /_sim/traps/{id}`` -> ``{"deleted": id}`` (held requests go on).

An unknown id answers 404, a bad spec 400, both as a Kubernetes ``Status``.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import ValidationError

from clustersim.apierrors import ApiError
from clustersim.apihttp import json_response, status_response
from clustersim.traps.model import TrapSet, TrapSpec


def trap_routes(traps: TrapSet) -> list[tuple[str, str, Any]]:
    """``(METHOD, path below /_sim/, handler)`` triples for ``traps`` (module docstring)."""

    def missing(tid: str) -> web.Response:
        return status_response(ApiError(404, "NotFound", f'trap "{tid}" not found', {"name": tid, "kind": "traps"}))

    async def add(request: web.Request) -> web.Response:
        try:
            spec = TrapSpec.model_validate(await request.json())
        except (ValidationError, ValueError) as e:
            return status_response(ApiError.bad_request(f"bad trap: {e}"))
        return json_response(traps.add(spec).state.model_dump(), status=201)

    async def list_traps(request: web.Request) -> web.Response:
        return json_response({"traps": [t.state.model_dump() for t in traps.traps.values()]})

    async def get(request: web.Request) -> web.Response:
        tid = request.match_info["id"]
        trap = traps.traps.get(tid)
        if trap is None:
            return missing(tid)
        q = request.query
        if "hits" in q or "held" in q:
            try:
                hits, held = int(q.get("hits", "0")), int(q.get("held", "0"))
                timeout = float(q.get("timeout", "30"))
            except ValueError as e:
                return status_response(ApiError.bad_request(f"bad wait parameters: {e}"))
            await trap.wait(hits=hits, held=held, timeout=timeout)
        return json_response(trap.state.model_dump())

    async def release(request: web.Request) -> web.Response:
        tid = request.match_info["id"]
        if tid not in traps.traps:
            return missing(tid)
        return json_response(traps.release(tid).state.model_dump())

    async def delete(request: web.Request) -> web.Response:
        tid = request.match_info["id"]
        if tid not in traps.traps:
            return missing(tid)
        traps.delete(tid)
        return json_response({"deleted": tid})

    return [("POST", "traps", add), ("GET", "traps", list_traps), ("GET", "traps/{id}", get),
            ("POST", "traps/{id}/release", release), ("DELETE", "traps/{id}", delete)]
