"""External commands: the simulator side of the ``ansible-playbook`` stand-in (spec §8.7).

``ExternalComponent`` is built from the scenario's ``external:`` section::

    external:
      reapply_gluster_label: true   # false: scale-up forgets the GlusterFS label (R4 symptom c)
      node_group_configmaps: false  # true: the openshift-node/<group> ConfigMaps exist at start
      files:                        # the operator's side of the playbook runs (file name -> text)
        inventory: |
          [OSEv3:children]
          ...

``node_group_configmaps`` creates, at start, the ConfigMap of every node group of the ``hosts``
section as ``playbooks/openshift-master/openshift_node_group.yml`` does (R3: the 3.10
control-plane upgrade creates them before any node is upgraded, and the node upgrade needs
them). ``files`` are what a person running the scenario's procedures keeps beside the cluster
(the openshift-ansible inventory, an inventory hook); ``lockkeeper sim serve --write-files DIR``
writes them with :meth:`ExternalComponent.write_files`, and tests read them with
:func:`shipped_files`, so that both use one definition.

Admin routes (outside /api, never faulted):

- ``POST /_sim/external/ansible-playbook`` ``{"playbook": PATH, "inventory": INI TEXT,
  "inventory_path": PATH, "extra_vars": {k: v}, "limit": "h1,h2"}`` runs the playbook model
  (:mod:`clustersim.external.playbooks`) and answers ``{"stdout", "stderr", "exit"}``; the console
  script ``clustersim-ansible-playbook`` (:mod:`clustersim.external.shim`) is its client;
- ``GET /_sim/external`` lists every run: playbook, args, start, end, exit (RFC 3339 times).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, field_validator

from clustersim.agents.objects import rfc3339
from clustersim.external.inventory import Inventory, InventoryError, parse_inventory
from clustersim.external.playbooks import PlayRun, node_group, run_playbook
from clustersim.external.shim import link_as_ansible_playbook

if TYPE_CHECKING:
    from clustersim.components import Handler
    from clustersim.sim import ClusterSim


#: A shipped file's name: one plain file name, no folder (``inventory``, ``hook.py``).
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: Where :meth:`ExternalComponent.write_files` links the stand-in, below its directory.
STANDIN_LINK = "bin/ansible-playbook"


class ExternalSection(BaseModel):
    """The ``external:`` section (see module docstring). Raises pydantic's ValidationError for
    an unknown key or a file name that is not a plain name."""

    model_config = ConfigDict(extra="forbid")
    reapply_gluster_label: bool = True
    node_group_configmaps: bool = False
    files: dict[str, str] = Field(default_factory=dict)

    @field_validator("files")
    @classmethod
    def _plain_names(cls, files: dict[str, str]) -> dict[str, str]:
        bad = sorted(n for n in files if not FILE_NAME.match(n))
        if bad:
            raise ValueError(f"file names must be plain names without a folder: {bad}")
        return files


def shipped_files(scenario: str | Path) -> dict[str, str]:
    """The ``external.files`` of a bundled scenario (by name) or a scenario file (by path):
    file name -> text; ``{}`` when the scenario has no ``external`` section. Raises
    clustersim.scenario.ScenarioError for an unknown or invalid scenario."""
    from clustersim.scenario import load_scenario

    return dict(ExternalSection.model_validate(load_scenario(scenario).external or {}).files)


class ExternalComponent:
    """Serves the playbook stand-in's requests and records the runs (``runs``: list of dicts)."""

    name = "external"

    def __init__(self, section: dict[str, Any], sim: ClusterSim) -> None:
        self.section = ExternalSection.model_validate(section or {})
        self.sim = sim
        self.runs: list[dict[str, Any]] = []

    async def start(self, sim: ClusterSim) -> None:
        """Create the node-group ConfigMaps when ``node_group_configmaps`` asks for them; nothing
        runs in the background."""
        self.sim = sim
        if self.section.node_group_configmaps:
            await node_group(sim, Inventory(), {}, PlayRun())

    def write_files(self, directory: str | Path) -> dict[str, Path]:
        """Write the section's ``files`` into ``directory`` (created if missing; existing files
        are replaced) and link the stand-in there as ``bin/ansible-playbook`` (so that
        ``PATH=DIRECTORY/bin:$PATH`` makes ``ansible-playbook`` the stand-in). Returns name ->
        path, the link under ``bin/ansible-playbook``. Files whose text starts with ``#!`` are
        made executable. Raises OSError when a file cannot be written and FileNotFoundError when
        the stand-in's console script is not installed next to the interpreter."""
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        written: dict[str, Path] = {}
        for name, text in sorted(self.section.files.items()):
            path = root / name
            path.write_text(text)
            path.chmod(0o755 if text.startswith("#!") else 0o644)
            written[name] = path
        bindir = root / Path(STANDIN_LINK).parent
        bindir.mkdir(exist_ok=True)
        written[STANDIN_LINK] = link_as_ansible_playbook(bindir)
        return written

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
