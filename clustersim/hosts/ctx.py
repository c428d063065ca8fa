"""What a host command handler gets: the host, the argv, stdin and the world around the host.

The world (:class:`HostWorld`, implemented by ``HostsComponent``) is how commands reach beyond
the host's own state: unit changes that the cluster sees (Node readiness, bricks, SDN), the
reboot sequence, the pods bound to the node (``docker ps``), the package catalog for
``yum install`` and the simulated clock (``docker pull`` takes ``pull_seconds``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from clustersim.hosts.model import HostState, PackageDef


class SessionDropped(Exception):
    """The command took the host down (reboot): the SSH session ends without an exit status."""


class HostWorld(Protocol):
    """The host's surroundings; see module docstring."""

    def unit_changed(self, host: HostState, unit: str, was_active: bool) -> None:
        """``unit`` on ``host`` was started/stopped/removed (compare ``was_active`` with now)."""
        ...

    def request_reboot(self, host: HostState) -> None:
        """Start ``host``'s reboot sequence (asynchronously; the caller then drops its session)."""
        ...

    def catalog(self) -> dict[str, PackageDef]:
        """Every package ``yum install`` can find, by name."""
        ...

    def registry_images(self) -> set[str]:
        """Images ``docker pull`` / ``crictl pull`` can fetch."""
        ...

    def pods_on(self, host: HostState) -> list[dict[str, Any]]:
        """Pods bound to the host's node (store objects, read-only)."""
        ...

    async def sim_sleep(self, sim_seconds: float) -> None:
        """Sleep ``sim_seconds`` of simulated time."""
        ...

    def pull_seconds(self, host: HostState) -> float:
        """Simulated seconds a pull takes on ``host`` now (faults may stretch it)."""
        ...


@dataclass
class Ctx:
    """One command invocation: ``argv[0]`` is the command name; ``via`` is ``ssh``/``debug-pod``."""

    host: HostState
    argv: list[str]
    stdin: bytes
    world: HostWorld
    via: str = "ssh"
    dispatch: Callable[[list[str]], Awaitable[tuple[str, str, int]]] | None = None

    @property
    def args(self) -> list[str]:
        """``argv`` without the command name."""
        return self.argv[1:]
