"""Host commands and admin routes of the masters component.

Host commands (o-a ``roles/openshift_control_plane/files/scripts/docker/master-restart`` and
``master-logs``, installed as ``/usr/local/bin/...`` on masters only):

- ``master-restart api|controllers|etcd [CONTAINER]``: stops that static pod's container (the
  script sends ``docker stop`` output to /dev/null: no output, exit 0) and returns once it is
  down; the kubelet starts it again after ``restart_seconds`` (in the background).
- ``master-logs api|controllers|etcd CONTAINER [--tail=N]``: the container's log lines.

Admin routes (below ``/_sim/``): ``GET api/availability`` and ``GET masters`` (the availability
document), ``POST masters/{name}/restart`` (``{"what": "api"|"controllers"|"etcd"}``),
``POST masters/{name}/fault`` (``{"add": [...], "remove": [...]}``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from clustersim.masters.component import MastersComponent

USAGE = ("A component name like 'api', 'etcd', or 'controllers' must be specified along with the container "
         "name within that component.\n")


async def host_command(comp: MastersComponent, host: Any, argv: list[str]) -> tuple[str, str, int]:
    """Run ``master-restart``/``master-logs`` on ``host`` (a HostState); (stdout, stderr, exit)."""
    cmd = argv[0].rsplit("/", 1)[-1]
    if host.name not in comp.masters:
        return "", f"sh: {argv[0]}: command not found\n", 127
    args = [a for a in argv[1:] if not a.startswith("--")]
    if not args:
        return "", USAGE, 1
    if cmd == "master-restart":
        try:
            task = comp.restart(host.name, args[0])
        except ValueError:
            return "", f"Component {args[0]} is not running on this node\n", 1
        # ``docker stop`` returns once the container is stopped: so does this, never earlier, so a
        # readiness poll right after the command cannot see the old process.
        st = comp.masters[host.name]
        up = {"api": lambda: st.api_up, "controllers": lambda: st.controllers_up}.get(args[0], lambda: False)
        while up() and not task.done():
            await asyncio.sleep(0.001)
        return "", "", 0
    tail = None
    for a in argv[1:]:
        if a.startswith("--tail="):
            with contextlib.suppress(ValueError):
                tail = int(a.split("=", 1)[1])
    st = comp.masters[host.name]
    lines = {"api": st.api_log, "controllers": st.controllers_log}.get(args[0], [])
    if tail is not None:
        lines = lines[-tail:] if tail > 0 else []
    return "".join(f"{ln}\n" for ln in lines), "", 0


def admin_routes(comp: MastersComponent) -> list[tuple[str, str, Any]]:
    """The routes listed in the module docstring."""

    async def availability(request: web.Request) -> web.Response:
        return web.json_response(comp.availability())

    async def restart(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        body = await request.json() if request.can_read_body else {}
        if name not in comp.masters:
            return web.json_response({"error": f"unknown master {name}"}, status=404)
        what = body.get("what", "api")
        try:
            comp.restart(name, what)
        except ValueError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response({"master": name, "restarting": what})

    async def fault(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in comp.masters:
            return web.json_response({"error": f"unknown master {name}"}, status=404)
        body = await request.json()
        st = comp.masters[name]
        st.faults.update(body.get("add") or [])
        st.faults.difference_update(body.get("remove") or [])
        return web.json_response({"master": name, "faults": sorted(st.faults)})

    return [("GET", "api/availability", availability), ("GET", "masters", availability),
            ("POST", "masters/{name}/restart", restart), ("POST", "masters/{name}/fault", fault)]
