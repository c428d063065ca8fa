"""``lockkeeper hold`` / ``release`` end to end (issue 40): a rollout of R1's app pool on clustersim,
a real worker process and the dev server; the node is held and released from the CLI, refusals
exit 1 with the validator's words, ``status`` shows the wait and the hold, ``history`` the records."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import drive, fast_timings, start_rollout, status
from workflows.kit.plan import ApprovalPolicy

pytestmark = pytest.mark.e2e

LOCKKEEPER = str(Path(sys.executable).parent / "lockkeeper")
SCALE = 0.05


async def lk(dev_server: Any, task_queue: str, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(LOCKKEEPER, "--address", dev_server.address, "--task-queue", task_queue, *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                env={**os.environ, "COLUMNS": "250"})
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_hold_status_release_history_from_the_cli(dev_server: Any, sim_factory: Any, worker_for: Any, task_queue: str,
                                                        temporal_client: Any) -> None:
    sim = await sim_factory("r1-ovn-interrupted", time_scale=SCALE)
    await worker_for(sim)
    # The pool's gate keeps every node pending while the holds are placed (no race with the window).
    handle = await start_rollout(temporal_client, task_queue, cluster="r1-holds", pools=["app"], max_unavailable=1,
                                 approval=ApprovalPolicy.POOL, **fast_timings(SCALE))
    for _ in range(600):
        st = await status(handle)
        if any(g.id == "pool/app" and g.state == "waiting" for g in st.gates):
            break
        await asyncio.sleep(0.05)
    nodes = st.plan.pools[0].nodes
    held = nodes[1]
    code, out, err = await lk(dev_server, task_queue, "hold", handle.id, held, "-m", "firmware check", "--identity", "bob")
    assert code == 0 and f"node {held} held by bob until released: firmware check" in err, (code, out, err)
    code, out, err = await lk(dev_server, task_queue, "hold", handle.id, "no-such-node", "-m", "x")
    assert code == 3 and "unknown node 'no-such-node'" in err, (code, out, err)  # not found, as for skip-node
    code, out, err = await lk(dev_server, task_queue, "hold", handle.id, held, "--until", "2001-01-01T00:00:00Z", "-m", "x")
    assert code == 1 and "is in the past" in err, (code, out, err)
    code, out, err = await lk(dev_server, task_queue, "hold", handle.id, held, "--until", "2099-01-01T00:00:00Z", "--for", "1h",
                              "-m", "x")
    assert code == 1 and "give --until or --for, not both" in err, (code, out, err)
    code, out, err = await lk(dev_server, task_queue, "approve", handle.id, "pool/app", "-m", "go", "--identity", "carol")
    assert code == 0, (code, out, err)
    for _ in range(1200):  # every other node of the pool finishes; the held one waits
        st = await status(handle)
        if all(st.nodes[n].phase == "done" for n in nodes if n != held):
            break
        await asyncio.sleep(0.1)
    assert st.nodes[held].phase == "pending" and st.phase == "running"
    code, out, err = await lk(dev_server, task_queue, "status", handle.id)
    assert code == 0 and f"waiting for hold on {held} until released (by bob: firmware check)" in out, (code, out, err)
    assert "Holds" in out and "until released" in out
    assert any(held in ln and "pending" in ln and "held until released" in ln for ln in out.splitlines()), out
    code, out, err = await lk(dev_server, task_queue, "release", handle.id, held, "-m", "checked", "--identity", "carol")
    assert code == 0 and f"node {held} released by carol: checked" in err, (code, out, err)
    result = await drive(handle, timeout=300)
    assert result.outcome == "completed" and result.summary.done == len(nodes), result.message
    code, out, err = await lk(dev_server, task_queue, "history", handle.id)
    assert code == 0 and f"hold on {held} held" in out and f"hold on {held} released" in out, out
    assert "hold_node" in out and "release_node" in out
