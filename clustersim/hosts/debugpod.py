"""The debug-pod route: ``chroot /host ARGV...`` exec'd in a pod labelled
``lockkeeper.io/debug-pod`` runs ARGV on the host interpreter of the pod's node (via
``debug-pod``), as ``oc debug node/X -- chroot /host ...`` does on a real node.

While the node's kubelet or container runtime is down (or the host reboots), the exec fails the
way the kubelet reports a container it no longer has: ``container not found ("NAME")`` (kubelet
``pkg/kubelet/server`` when the runtime cannot find the container), exit 126.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clustersim.execsim import ExecRequest, ExecResult, ExecRouter
from clustersim.hosts.ctx import SessionDropped

if TYPE_CHECKING:
    from clustersim.hosts.component import HostsComponent

DEBUG_POD_LABEL = "lockkeeper.io/debug-pod"
ROUTE_NAME = "hosts-debug-pod"


def is_debug_chroot(req: ExecRequest) -> bool:
    """A debug pod (label present) asked to run ``chroot /host ...``."""
    return DEBUG_POD_LABEL in req.labels and req.argv[:2] == ["chroot", "/host"]


def register_debug_route(hosts: HostsComponent, router: ExecRouter) -> None:
    """Register the route on ``router`` (replacing an earlier registration)."""

    async def handle(req: ExecRequest) -> ExecResult:
        host = hosts.hosts.get(req.node_name)
        if host is None:
            return ExecResult(stderr=f"chroot: no simulated host for node {req.node_name!r}\n".encode(), exit_code=125)
        if not (host.up and host.kubelet_up() and host.runtime_up()):
            return ExecResult(stderr=f'container not found ("{req.container}")\n'.encode(), exit_code=126)
        try:
            out, err, code = await hosts.interpreter.run(host, req.argv[2:], stdin=req.stdin or b"", via="debug-pod")
        except SessionDropped:
            # The node went down under the exec: the stream ends with the container gone.
            return ExecResult(stderr=f'container not found ("{req.container}")\n'.encode(), exit_code=137)
        return ExecResult(stdout=out.encode(), stderr=err.encode(), exit_code=code)

    router.register(ROUTE_NAME, is_debug_chroot, handle)
