"""The component mechanism: sections -> factories, start/stop order, admin routes outside /api."""

from __future__ import annotations

import sys
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from clustersim import components
from clustersim.components import ComponentError, build_components
from clustersim.scenario import Scenario, load_scenario
from clustersim.sim import ClusterSim

CALLS: list[str] = []


class FakeComponent:
    """Records its life cycle in CALLS and serves GET /_sim/<name>/{item}."""

    def __init__(self, section: dict[str, Any], sim: ClusterSim) -> None:
        self.name = section.get("name", "fake")
        self.section = section
        self.sim = sim
        CALLS.append(f"init:{self.name}")

    async def start(self, sim: ClusterSim) -> None:
        # The store is populated and the API listens when start runs.
        assert sim.url
        CALLS.append(f"start:{self.name}:{len(sim.store.list('nodes'))}")

    async def stop(self) -> None:
        CALLS.append(f"stop:{self.name}")

    def admin_routes(self) -> list[tuple[str, str, Any]]:
        async def item(request: web.Request) -> web.Response:
            return web.json_response({"component": self.name, "item": request.match_info["item"],
                                      "peer_hosts": self.sim.components.get("hosts") is not None})
        return [("GET", f"{self.name}/{{item}}", item)]


def _factory(section: dict[str, Any], sim: ClusterSim) -> FakeComponent:
    return FakeComponent(section, sim)


@pytest.fixture
def fake_factories(monkeypatch: pytest.MonkeyPatch) -> None:
    CALLS.clear()
    me = sys.modules[__name__].__name__
    for name in components.FACTORIES:
        monkeypatch.setitem(components.FACTORIES, name, f"{me}:_factory")


def test_scenario_keeps_component_sections() -> None:
    sc = Scenario.model_validate({"name": "x", "description": "d", "hosts": {"ssh": True}, "sdn": None})
    assert sc.component_sections() == {"hosts": {"ssh": True}, "sdn": {}}
    # r1/r2 have none, so they load no component module.
    assert load_scenario("r2-pdb-blocked").component_sections() == {}


def test_unknown_section_is_rejected() -> None:
    with pytest.raises(ValueError, match="bogus"):
        Scenario.model_validate({"name": "x", "description": "d", "bogus": {}})
    with pytest.raises(ComponentError, match="unknown scenario section"):
        build_components({"bogus": {}}, None)  # type: ignore[arg-type]


def test_missing_module_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(components.FACTORIES, "external", "clustersim.no_such_module:X")
    with pytest.raises(ComponentError, match="cannot be imported"):
        build_components({"external": {}}, None)  # type: ignore[arg-type]


async def test_start_stop_order_and_admin_routes(fake_factories: None) -> None:
    sections = {n: {"name": n} for n in ("external", "sdn", "gluster", "masters", "hosts")}
    sc = load_scenario("r2-pdb-blocked")
    async with ClusterSim(sc, time_scale=0.01, start_agents=False, component_sections=sections) as sim:
        assert list(sim.components) == ["hosts", "masters", "gluster", "sdn", "external"]
        sim.faults.configure(error_500=1.0)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{sim.url}/_sim/gluster/bricks") as resp:
                assert resp.status == 200
                assert await resp.json() == {"component": "gluster", "item": "bricks", "peer_hosts": True}
            async with http.get(f"{sim.url}/_sim/exec") as resp:
                assert resp.status == 200 and (await resp.json()) == {"execs": []}
            async with http.get(f"{sim.url}/api/v1/nodes") as resp:
                assert resp.status == 500  # the API is faulted, the admin routes are not
        assert not any(e.path.startswith("/_sim/") for e in sim.requests.entries())
    nodes = len(sc.nodes)
    assert CALLS == [f"init:{n}" for n in ("hosts", "masters", "gluster", "sdn", "external")] + \
        [f"start:{n}:{nodes}" for n in ("hosts", "masters", "gluster", "sdn", "external")] + \
        [f"stop:{n}" for n in ("external", "sdn", "gluster", "masters", "hosts")]
