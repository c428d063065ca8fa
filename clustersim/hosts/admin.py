"""Admin endpoints of the hosts component (procedures-spec §8.8; outside /api, never faulted).

- ``GET /_sim/hosts``: ``{"hosts": {name: brief}, "ssh_map": {...}, "client_key_path": ...,
  "known_hosts_path": ...}`` (brief: ip, ssh address, up, boot id and count, runtime, faults);
- ``GET /_sim/hosts/{name}``: the full state (:meth:`HostsComponent.describe`: SSH port and host
  key, units, packages, iptables runtime/saved, OVS dst_port, boot ids, command log), 404 for an
  unknown host;
- ``POST /_sim/hosts/{name}/fault`` ``{"fault": "ssh_down" | "name=value", "clear": false}``;
- ``POST /_sim/hosts/{name}/scaleup`` ``{"group": ..., "runtime": "docker", "labels": {...}}``;
- ``POST /_sim/hosts/{name}/upgrade`` ``{"version": "v1.10.0+b81c8f8"}``.
Errors answer 400/404/409 with ``{"error": message}``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from clustersim.components import Handler
    from clustersim.hosts.component import HostsComponent


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        data = await request.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def admin_routes(hosts: HostsComponent) -> list[tuple[str, str, Handler]]:
    """The route triples for ``hosts`` (handlers look hosts up at request time)."""
    from clustersim.hosts import join

    async def list_hosts(request: web.Request) -> web.Response:
        brief = {
            n: {"ip": h.ip, "ssh": hosts.ssh_map.get(n, ""), "up": h.up, "boot_id": h.boot_id,
                "boot_count": h.boot_count, "runtime": h.runtime, "kubelet_up": h.kubelet_up(),
                "runtime_up": h.runtime_up(), "faults": sorted(h.faults)}
            for n, h in sorted(hosts.hosts.items())
        }
        return web.json_response({
            "hosts": brief, "ssh_map": hosts.ssh_map,
            "client_key_path": str(hosts.client_key_path or ""),
            "known_hosts_path": str(hosts.known_hosts_path or ""), "env": hosts.client_env(),
        })

    async def get_host(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in hosts.hosts:
            return _error(404, f"no host {name!r}")
        return web.json_response(hosts.describe(name))

    async def fault(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in hosts.hosts:
            return _error(404, f"no host {name!r}")
        body = await _body(request)
        f = body.get("fault")
        if not isinstance(f, str) or not f:
            return _error(400, 'body must be {"fault": "NAME[=VALUE]", "clear": false}')
        try:
            await hosts.set_fault(name, f, clear=bool(body.get("clear")))
        except ValueError as exc:
            return _error(400, str(exc))
        return web.json_response({"host": name, "faults": sorted(hosts.hosts[name].faults)})

    async def scaleup(request: web.Request) -> web.Response:
        body = await _body(request)
        try:
            lines = await join.scaleup(hosts, request.match_info["name"], str(body.get("group", "")),
                                       str(body.get("runtime", "docker")), dict(body.get("labels") or {}))
        except join.JoinError as exc:
            return _error(409, str(exc))
        return web.json_response({"log": lines})

    async def upgrade(request: web.Request) -> web.Response:
        body = await _body(request)
        try:
            lines = await join.upgrade(hosts, request.match_info["name"], str(body.get("version", "")))
        except join.JoinError as exc:
            return _error(409, str(exc))
        return web.json_response({"log": lines})

    return [
        ("GET", "hosts", list_hosts),
        ("GET", "hosts/{name}", get_host),
        ("POST", "hosts/{name}/fault", fault),
        ("POST", "hosts/{name}/scaleup", scaleup),
        ("POST", "hosts/{name}/upgrade", upgrade),
    ]
