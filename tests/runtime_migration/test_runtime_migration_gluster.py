"""R4 GlusterFS gates during a migration (r4-crio-to-docker, real dev server and worker): the
simulator's own GlusterFS model decides what heal info shows.

- heal stall: with the self-heal daemon healing nothing (``heal_rate: 0``), the entries written
  while the node was away never fall; after ``heal_stall`` seconds without progress the GlusterFS
  health gate ``gluster-health/<node>/heal-clean/1`` opens naming the stall, ``status`` shows the pending entries per volume, and
  the next node would not start (reject stops the node, the run holds, reject ends it);
- split-brain: a split-brain entry appearing during the migration (``POST /_sim/gluster/fault``
  ``split_brain``) aborts the node at the heal step and the run with it; nothing is healed over.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
from temporalio.client import Client

from clustersim.scenario import load_scenario
from tests.runtime_migration.test_runtime_migration_e2e import (
    APPROVER,
    SCALE,
    approve_destructive,
    drive,
    gate_handle,
    hosts_env,
    migration_input,
    sim_get,
    start_migration,
)
from workflows.kit.models import RejectInput

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

NODE = "gluster1.demo"


async def _env(sim_factory: Any, worker_process_factory: Any, dev_server: Any, task_queue: str, **kw: Any) -> Any:
    sim = await sim_factory("r4-crio-to-docker", time_scale=SCALE, **kw)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue,
                                    env=hosts_env(sim))
    await worker.start()
    return sim


async def test_heal_stall_opens_the_health_gate(dev_server: Any, temporal_client: Client, sim_factory: Any,
                                                worker_process_factory: Any, task_queue: str, tmp_path: Path) -> None:
    gluster = dict(load_scenario("r4-crio-to-docker").component_sections()["gluster"])
    gluster["heal_rate"] = 0  # the self-heal daemon makes no progress
    sim = await _env(sim_factory, worker_process_factory, dev_server, task_queue, component_sections={"gluster": gluster})
    inp = migration_input(sim, tmp_path, heal_stall=8, heal_timeout=300)
    inp.nodes = [NODE, "gluster2.demo"]
    handle = await start_migration(temporal_client, inp, task_queue)
    st = await drive(handle)  # returns at the first gate the approver does not answer
    gate = next(g for g in st.gates if g.state == "waiting")
    assert gate.id == f"gluster-health/{NODE}/heal-clean/1", gate  # the GlusterFS package's health gate
    assert "stalled" in gate.comment and "heal made no progress" in gate.comment, gate.comment
    row = st.nodes[NODE]
    assert row.step == "heal-clean" and sum(v or 0 for v in row.heal.values()) > 0, row.heal
    assert st.nodes["gluster2.demo"].phase == "pending"  # the next node waits for a clean heal
    pending = {v["name"]: v["pending_heal"] for v in (await sim_get(sim, "gluster"))["volumes"]}
    assert sum(pending.values()) > 0, pending  # the simulator agrees: entries are still pending
    await gate_handle(handle, gate, st).execute_update("reject", RejectInput(gate_id=gate.id, identity=APPROVER, comment="heal by hand"))
    st = await drive(handle, decide=lambda g: None, until=lambda s: any(g.id == f"{NODE}/stopped/1" and g.state == "waiting" for g in s.gates))
    await handle.execute_update("reject", RejectInput(gate_id=f"{NODE}/stopped/1", identity=APPROVER, comment="stop"))
    result = await handle.result()
    assert result.outcome == "failed" and "heal-clean" in (result.nodes[0].reason or ""), result.message
    assert [r.node for r in result.nodes] == [NODE]
    host2 = await sim_get(sim, "hosts/gluster2.demo")
    assert not any(r["argv"][:2] == ["systemctl", "stop"] for r in host2["log"]), "gluster2 was never touched"


async def test_split_brain_during_the_migration_aborts(dev_server: Any, temporal_client: Client, sim_factory: Any,
                                                       worker_process_factory: Any, task_queue: str, tmp_path: Path) -> None:
    sim = await _env(sim_factory, worker_process_factory, dev_server, task_queue)
    inp = migration_input(sim, tmp_path)
    inp.nodes = [NODE, "gluster2.demo"]
    handle = await start_migration(temporal_client, inp, task_queue)
    injected: list[str] = []

    def approver(gate_id: str) -> str | None:
        if gate_id.endswith("/destructive/approve-delete") and not injected:
            injected.append(gate_id)
            return None  # inject the fault first, then approve
        return approve_destructive(gate_id)

    st = await drive(handle, decide=approver)
    assert injected, st.nodes[NODE]
    async with aiohttp.ClientSession() as http, http.post(f"{sim.url}/_sim/gluster/fault",
                                                        json={"kind": "split_brain", "volume": "heketidbstorage", "n": 2}) as r:
        assert r.status == 200, await r.text()
    await drive(handle)
    result = await handle.result()
    assert result.outcome == "aborted", result.message
    reason = result.nodes[0].reason or ""
    assert "heal-clean" in reason and "split-brain" in reason and "heketidbstorage" in reason, reason
    assert [r.node for r in result.nodes] == [NODE]  # gluster2 never started
    assert not any(r.gate_id.endswith("/stopped/1") for r in result.gate_history), "an abort does not hold for retry"
    vol = next(v for v in (await sim_get(sim, "gluster"))["volumes"] if v["name"] == "heketidbstorage")
    assert vol["split_brain"] == 2, vol  # left for a person to resolve
