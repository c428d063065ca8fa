"""R4 retry-node end to end (r4-crio-to-docker, real dev server and worker): the inventory was
not edited (its gate approved by mistake), so the scale-up fails with ``Detected no new_nodes in
inventory``; the node holds the run at ``<node>/stopped/1``; after the inventory is fixed by
hand, ``retry-node`` repeats only the scale-up. The simulator's own logs show one reboot, one
package removal, one wipe of /etc/origin, one Node delete and two scale-up runs (the failed one
and the retry); the node rejoins on Docker and the run completes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tests.runtime_migration.test_runtime_migration_e2e import (
    APPROVER,
    SCALE,
    approve_destructive,
    commands,
    drive,
    gate_handle,
    hosts_env,
    migration_input,
    reboots,
    sim_get,
    start_migration,
)
from workflows.kit.models import NodeControlInput, RejectInput

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

NODE = "gluster1.demo"


async def test_retry_node_after_a_failed_scaleup_repeats_only_the_scaleup(
        dev_server: Any, temporal_client: Client, sim_factory: Any, worker_process_factory: Any, task_queue: str, tmp_path: Path) -> None:
    sim = await sim_factory("r4-crio-to-docker", time_scale=SCALE)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue,
                                    env=hosts_env(sim))
    await worker.start()
    old_uid = sim.store.get("nodes", NODE)["metadata"]["uid"]
    inp = migration_input(sim, tmp_path, inventory_hook=False)
    inp.nodes = [NODE]

    def forgetful(gate_id: str) -> str | None:
        if gate_id == f"{NODE}/human/inventory":
            return "done (but the inventory was not edited)"
        return None if gate_id.endswith("/failed/scale-up") else approve_destructive(gate_id)

    handle = await start_migration(temporal_client, inp, task_queue)
    st = await drive(handle, decide=forgetful)
    gate = next(g for g in st.gates if g.state == "waiting")
    assert gate.id == f"{NODE}/failed/scale-up" and "Detected no new_nodes in inventory" in gate.comment, gate
    await gate_handle(handle, gate, st).execute_update("reject", RejectInput(gate_id=gate.id, identity=APPROVER, comment="fix the inventory first"))
    hold = f"{NODE}/stopped/1"
    st = await drive(handle, decide=lambda g: None, until=lambda s: any(g.id == hold and g.state == "waiting" for g in s.gates))
    assert st.nodes[NODE].node_deleted
    # The fix a person makes: the inventory hook run by hand.
    subprocess.run([sys.executable, str(tmp_path / "hook.py"), str(tmp_path / "inventory"), "to-new", NODE], check=True)
    await handle.execute_update("retry_node", NodeControlInput(node=NODE, identity=APPROVER, comment="inventory fixed"))
    await drive(handle)
    result = await handle.result()
    assert result.outcome == "completed", result.message
    assert result.nodes[0].status.attempt == 2
    obj = sim.store.get("nodes", NODE)
    assert obj["metadata"]["uid"] != old_uid and obj["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("docker://")
    cmds = commands(await sim_get(sim, f"hosts/{NODE}"))
    assert reboots(cmds) == 1, [c for c in cmds if "reboot" in c]
    assert sum(1 for c in cmds if c[:3] == ["yum", "-y", "remove"]) == 1
    assert sum(1 for c in cmds if c[:2] == ["rm", "-rf"] and "/etc/origin" in c) == 1
    assert sum(1 for c in cmds if c[:2] == ["cp", "-f"]) == 1
    ext = await sim_get(sim, "external")
    runs = ext if isinstance(ext, list) else ext.get("runs", [])
    scaleups = [r for r in runs if str(r.get("playbook", "")).endswith("openshift-node/scaleup.yml")]
    assert len(scaleups) == 2, scaleups  # the failed run and the retry, nothing else
