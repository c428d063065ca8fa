"""Issue 39 for the MachineConfig rollout, end to end (dev server, clustersim, the ``lockkeeper``
command): the dry run prints the plan and every precondition with its result through the kit's
preflight; a pool the cluster does not have, or a ``--node-order`` canary that names no node, is
refused before any write: exit 2, one line per problem, and the simulator received no write."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import worker_pool_scenario, write_requests
from tests.cluster_upgrade.test_upgrade_cli_e2e import lk

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(300)
async def test_rollout_dry_run_lists_checks_and_refuses_bad_names(dev_server: Any, sim_factory: Any, worker_for: Any,
                                                                   task_queue: str, tmp_path: Path) -> None:
    sim = await sim_factory(worker_pool_scenario(3, "rollout-preconditions"), time_scale=0.05)
    await worker_for(sim)
    base = ("start", "machineconfig-rollout", "--cluster", f"pre-{uuid.uuid4().hex[:6]}")
    sim.requests.clear()

    # A dry run that a real start would take: the plan, then each check with its result, exit 0.
    code, out, err = await lk(dev_server, task_queue, *base, "--pool", "worker", "--dry-run")
    assert code == 0, (out, err)
    assert "worker-0000" in out and "preconditions (1 checked, 0 failed):" in out, out
    assert "ok       input" in out and "MachineConfigPools (worker)" in out, out

    # A canary (the first node of --node-order, with --approve-each canary) that names no node:
    # the dry run lists the failed check and exits 2; the real start is refused, exit 2.
    order = tmp_path / "order.txt"
    order.write_text("# canary\nnosuch-node\nworker-0001\n")
    canary = (*base, "--pool", "worker", "--approve-each", "canary", "--order", "explicit", "--node-order", str(order))
    code, out, err = await lk(dev_server, task_queue, *canary, "--dry-run")
    assert code == 2, (code, out, err)
    assert "preconditions (2 checked, 1 failed):" in out and "FAILED   names-exist" in out and "nosuch-node" in out, out
    assert "a real start would be refused before any change" in err and "canary" in err, err
    code, out, err = await lk(dev_server, task_queue, *canary)
    assert code == 2, (code, out, err)
    assert "refused before any change" in err and "nosuch-node" in err, err

    # A pool the cluster does not have: the preflight's words, one line, exit 2.
    code, out, err = await lk(dev_server, task_queue, *base, "--pool", "nosuch-pool")
    assert code == 2, (code, out, err)
    problems = [ln for ln in err.splitlines() if ln.startswith("  ")]
    assert len(problems) == 1 and "UnknownPool" in problems[0] and "nosuch-pool" in problems[0], err

    assert write_requests(sim.requests) == [], [(e.verb, e.resource, e.name) for e in write_requests(sim.requests)]
