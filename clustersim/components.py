"""Optional simulator components built from a scenario's top-level sections.

A scenario YAML may carry ``hosts:``, ``gluster:``, ``sdn:``, ``masters:``, ``external:``,
``cno:`` and ``mcc:`` sections. ``ClusterSim`` builds one component per present section, through ``FACTORIES``
(``"module:Class"`` strings imported lazily, so scenarios without these sections import none
of them). Each factory is called as ``Factory(section: dict, sim: ClusterSim)`` and returns a
``SimComponent``.

Life cycle (driven by ``ClusterSim``):

1. every component is constructed (in ``START_ORDER``) after the scenario is loaded and before
   the store is populated; its ``admin_routes()`` are mounted under ``/_sim/`` then (the
   aiohttp router is frozen once the server listens, so routes cannot be added later);
2. the store is populated, the API server listens and the agents start;
3. ``start(sim)`` is awaited for each component in ``START_ORDER``;
4. on shutdown ``stop()`` is awaited in reverse order, before the agents and the server stop.

Components reach each other with ``sim.components.get("hosts")`` (None when absent) and must
cope with a missing peer.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from clustersim.sim import ClusterSim

#: An aiohttp request handler (``async def h(request: web.Request) -> web.StreamResponse``), as
#: mounted on the admin router. Typed loosely so that importing this module (the scenario loader
#: does) does not import aiohttp.
Handler = Callable[[Any], Awaitable[Any]]

#: Section name -> "module:attribute" of the factory (a class or a callable).
FACTORIES: dict[str, str] = {
    "hosts": "clustersim.hosts:HostsComponent",
    "gluster": "clustersim.gluster:GlusterComponent",
    "sdn": "clustersim.sdn:SdnComponent",
    "masters": "clustersim.masters:MastersComponent",
    "external": "clustersim.external:ExternalComponent",
    "cno": "clustersim.cno:CnoComponent",
    "mcc": "clustersim.mcc:MccComponent",
}

#: Construction and start order; components stop in the reverse order. Hosts come first because
#: every other component places its state on hosts; masters before gluster and sdn because the
#: per-master API listeners must be up before anything restarts an API.
START_ORDER: tuple[str, ...] = ("hosts", "masters", "gluster", "sdn", "external")

SECTIONS: frozenset[str] = frozenset(FACTORIES)


@runtime_checkable
class SimComponent(Protocol):
    """What a component built from a scenario section provides.

    ``name`` is the section name. ``start`` runs once the store is populated and the API
    listens; ``stop`` must release everything ``start`` acquired (servers, tasks) and be safe
    to call after a failed or missing ``start``. ``admin_routes`` returns
    ``(METHOD, path below /_sim/, handler)`` triples, e.g. ``("GET", "hosts/{name}", h)``;
    aiohttp path syntax (``{name}`` placeholders, read with ``request.match_info``) applies.
    """

    name: str

    async def start(self, sim: ClusterSim) -> None:
        """Start background work (the store is populated and the API server listens)."""
        ...

    async def stop(self) -> None:
        """Stop background work; idempotent."""
        ...

    def admin_routes(self) -> list[tuple[str, str, Handler]]:
        """The admin endpoints of this component (mounted outside /api, never faulted)."""
        ...


class ComponentBase:
    """What the section components share: the simulated time since their start and their view
    of the ``hosts`` peer. A subclass sets ``sim`` and calls :meth:`mark_started` in ``start``."""

    sim: ClusterSim
    _t0: float | None = None

    def mark_started(self) -> None:
        """Record now as the component's start (``now()`` counts from here)."""
        self._t0 = self.sim.clock.monotonic()

    def now(self) -> float:
        """Simulated seconds since the component started (0 before ``start``)."""
        if self._t0 is None:
            return 0.0
        return (self.sim.clock.monotonic() - self._t0) / self.sim.clock.time_scale

    def _hosts(self) -> Any:
        """The ``hosts`` component, None when the scenario has none."""
        return self.sim.components.get("hosts")

    def _host(self, name: str) -> Any:
        """Host ``name`` of the ``hosts`` component; None without that component or host."""
        hosts = self._hosts()
        if hosts is None:
            return None
        try:
            return hosts.host(name)
        except (KeyError, ValueError):
            return None


class ComponentError(ValueError):
    """A component's factory cannot be imported or rejected its section (message says which)."""


def resolve_factory(name: str, factories: dict[str, str] | None = None) -> Callable[..., Any]:
    """Import and return the factory for section ``name`` from ``factories`` (default FACTORIES).

    Raises ComponentError when the section is unknown or its module/attribute cannot be imported.
    """
    table = FACTORIES if factories is None else factories
    target = table.get(name)
    if target is None:
        raise ComponentError(f"unknown scenario section {name!r}; known: {sorted(table)}")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ComponentError(f"scenario section {name!r} needs {module_name}, which cannot be imported: {exc}") from exc
    try:
        return getattr(module, attr)  # type: ignore[no-any-return]
    except AttributeError:
        raise ComponentError(f"scenario section {name!r}: {module_name} has no {attr}") from None


def build_components(sections: dict[str, dict[str, Any]], sim: ClusterSim,
                     factories: dict[str, str] | None = None) -> dict[str, SimComponent]:
    """Construct one component per present section, in START_ORDER (dict order = start order).

    ``sections``: section name -> its dict from the scenario YAML (``{}`` for an empty section).
    Sections not in START_ORDER but in ``factories`` are built last, in sorted order.
    Raises ComponentError (unknown section, import failure) and whatever a factory raises for an
    invalid section (typically pydantic's ValidationError, a ValueError).
    """
    order = [n for n in START_ORDER if n in sections] + sorted(n for n in sections if n not in START_ORDER)
    built: dict[str, SimComponent] = {}
    for name in order:
        factory = resolve_factory(name, factories)
        built[name] = factory(sections[name] or {}, sim)
    return built


def normalise_admin_path(path: str) -> str:
    """``"hosts/{name}"`` or ``"/hosts/{name}"`` -> ``"/_sim/hosts/{name}"``.

    Raises ComponentError for a path that tries to leave /_sim/ or is empty."""
    rel = path.lstrip("/")
    if not rel or rel.startswith("_sim/") or ".." in rel.split("/"):
        raise ComponentError(f"admin path {path!r} must be a relative path below /_sim/")
    return "/_sim/" + rel
