"""The HTTP client of the trap endpoints (:mod:`clustersim.traps.admin`), for tests.

Usage::

    from clustersim import traps

    trap = await traps.arm(sim.url, traps.api("patch", "daemonsets", namespace="openshift-sdn", name="sdn"))
    ...  # start the procedure
    await trap.wait_hit(timeout=60)    # the PATCH is held now
    ...  # abort the procedure, kill its worker ...
    await trap.release()

Every call raises :class:`TrapError` (HTTP status and the Status message) when the simulator
answers with an error; ``wait_hit`` raises TimeoutError.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from clustersim.traps.model import TrapSpec, TrapState


class TrapError(RuntimeError):
    """The simulator refused a trap request: ``status`` is the HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


async def _call(method: str, url: str, body: Any = None, timeout: float = 60.0) -> Any:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        async with session.request(method, url, json=body) as resp:
            data = await resp.json(content_type=None)
            if resp.status >= 400:
                raise TrapError(resp.status, (data or {}).get("message", str(data)))
            return data


def api(verb: str | list[str] | None = None, resource: str | None = None, *, namespace: str | None = None,
        name: str | None = None, subresource: str | None = None, group: str | None = None,
        name_regex: str | None = None, action: str = "hold", times: int = 1, **fail: Any) -> TrapSpec:
    """A trap on API requests (``fail`` fields: ``status``, ``reason``, ``message``)."""
    return TrapSpec(on="api", verb=verb, resource=resource, namespace=namespace, name=name, subresource=subresource,
                    group=group, name_regex=name_regex, action=action, times=times, **fail)  # type: ignore[arg-type]


def host(argv: str | None = None, *, host: str | None = None, via: str | None = None, action: str = "hold",
         times: int = 1, **fail: Any) -> TrapSpec:
    """A trap on host commands: ``argv`` a regular expression searched in the command line
    (``fail`` fields: ``exit_code``, ``stderr``)."""
    return TrapSpec(on="host", argv=argv, host=host, via=via, action=action, times=times, **fail)  # type: ignore[arg-type]


class Trap:
    """A trap armed on the simulator at ``base_url``; ``state`` is the last state read."""

    def __init__(self, base_url: str, state: TrapState) -> None:
        self.base_url = base_url.rstrip("/")
        self.state = state

    @property
    def id(self) -> str:
        return self.state.id

    def _url(self, tail: str = "") -> str:
        return f"{self.base_url}/_sim/traps/{self.state.id}{tail}"

    async def refresh(self) -> TrapState:
        """Read the trap's state now."""
        self.state = TrapState.model_validate(await _call("GET", self._url()))
        return self.state

    async def wait_hit(self, timeout: float = 30.0, *, hits: int = 1) -> TrapState:
        """Wait until the trap has ``hits`` matching requests and, for a ``hold`` trap that has not
        been released, until one is held. Raises TimeoutError (naming the state) after ``timeout`` s."""
        held = 1 if self.state.spec.action == "hold" and not self.state.released else 0
        q = f"?hits={hits}&held={held}&timeout={timeout}"
        self.state = TrapState.model_validate(await _call("GET", self._url(q), timeout=timeout + 30))
        if self.state.hits < hits or self.state.held < held:
            raise TimeoutError(f"trap {self.state.id} not hit within {timeout:.0f}s: {self.state.model_dump_json()}")
        return self.state

    async def release(self) -> TrapState:
        """Let held requests go; the trap passes what comes next."""
        self.state = TrapState.model_validate(await _call("POST", self._url("/release")))
        return self.state

    async def delete(self) -> None:
        """Release and remove the trap."""
        await _call("DELETE", self._url())


async def arm(base_url: str, spec: TrapSpec) -> Trap:
    """Set ``spec`` on the simulator at ``base_url``; returns the armed :class:`Trap`."""
    data = await _call("POST", f"{base_url.rstrip('/')}/_sim/traps", spec.model_dump(exclude_none=True))
    return Trap(base_url, TrapState.model_validate(data))


async def list_traps(base_url: str) -> list[TrapState]:
    """Every trap on the simulator."""
    data = await _call("GET", f"{base_url.rstrip('/')}/_sim/traps")
    return [TrapState.model_validate(t) for t in data["traps"]]
