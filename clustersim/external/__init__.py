"""External commands: the simulator side of the ``ansible-playbook`` stand-in (spec §8.7).

``ExternalComponent`` is built from the scenario's ``external:`` section::

    external:
      reapply_gluster_label: true   # false: scale-up forgets the GlusterFS label (R4 symptom c)

Admin routes (outside /api, never faulted):

- ``POST /_sim/external/ansible-playbook`` ``{"playbook": PATH, "inventory": INI TEXT,
  "inventory_path": PATH, "extra_vars": {k: v}, "limit": "h1,h2"}`` runs the playbook model
  (:mod:`clustersim.external.playbooks`) and answers ``{"stdout", "stderr", "exit"}``; the console
  script ``clustersim-ansible-playbook`` (:mod:`clustersim.external.shim`) is its client;
- ``GET /_sim/external`` lists every run: playbook, args, start, end, exit (RFC 3339 times).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict

from clustersim.agents.objects import rfc3339
from clustersim.external.inventory import InventoryError, parse_inventory
from clustersim.external.playbooks import run_playbook

if TYPE_CHECKING:
    from clustersim.components import Handler
    from clustersim.sim import ClusterSim


class ExternalSection(BaseModel):
    """The ``external:`` section (see module docstring)."""

    model_config = ConfigDict(extra="forbid")
    reapply_gluster_label: bool = True


class ExternalComponent:
    """Serves the playbook stand-in's requests and records the runs (``runs``: list of dicts)."""

    name = "external"

    def __init__(self, section: dict[str, Any], sim: ClusterSim) -> None:
        self.section = ExternalSection.model_validate(section or {})
        self.sim = sim
        self.runs: list[dict[str, Any]] = []

    async def start(self, sim: ClusterSim) -> None:
        """Nothing runs in the background."""
        self.sim = sim

    async def stop(self) -> None:
        """Nothing to stop."""

    async def run(self, playbook: str, inventory_text: str, extra_vars: dict[str, str] | None = None,
                  limit: list[str] | None = None, inventory_path: str = "") -> dict[str, Any]:
        """Run ``playbook`` with the INI ``inventory_text``; returns the recorded run
        (playbook, args, start, end, exit, stdout, stderr)."""
        record: dict[str, Any] = {
            "playbook": playbook, "inventory": inventory_path, "extra_vars": dict(extra_vars or {}),
            "limit": list(limit or []), "start": rfc3339(self.sim.clock.now()), "end": None, "exit": None,
        }
        self.runs.append(record)
        try:
            inv = parse_inventory(inventory_text)
        except InventoryError as exc:
            out, err, code = "", f"ERROR! {inventory_path or 'inventory'}: {exc}\n", 1
        else:
            out, err, code = await run_playbook(self.sim, playbook, inv, dict(extra_vars or {}), limit,
                                                self.section.model_dump())
        record.update(end=rfc3339(self.sim.clock.now()), exit=code, stdout=out, stderr=err)
        return record

    def admin_routes(self) -> list[tuple[str, str, Handler]]:
        """POST external/ansible-playbook and GET external (see module docstring)."""

        async def post(request: web.Request) -> web.Response:
            try:
                body = await request.json()
            except ValueError:
                body = None
            if not isinstance(body, dict) or not isinstance(body.get("playbook"), str):
                return web.json_response({"error": 'body must be {"playbook": PATH, "inventory": TEXT, ...}'},
                                         status=400)
            limit = [h for h in str(body.get("limit") or "").split(",") if h]
            rec = await self.run(body["playbook"], str(body.get("inventory") or ""),
                                 {str(k): str(v) for k, v in (body.get("extra_vars") or {}).items()},
                                 limit, str(body.get("inventory_path") or ""))
            return web.json_response({"stdout": rec["stdout"], "stderr": rec["stderr"], "exit": rec["exit"]})

        async def runs(request: web.Request) -> web.Response:
            return web.json_response({"runs": self.runs})

        return [("POST", "external/ansible-playbook", post), ("GET", "external", runs)]
