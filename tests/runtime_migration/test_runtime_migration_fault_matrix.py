"""The fault matrix of the runtime migration (R4, ``lockkeeper start runtime-migration``) on
``r4-crio-to-docker``, judged by the simulator's own view (tests/support/faultmatrix.py, issue 39): at
each mutating step an abort while its first request is held, a refusal of that request, and the
worker SIGKILLed while it is held (then an abort).

One node (gluster1.demo) with tests/runtime_migration/test_runtime_migration_e2e.py's commands. Mutating steps,
in the order the node's child takes them (workflows/runtime_migration/node.py):

- ``cordon``: the drain's cordon, the run's first write (the Node's PATCH; its evictions follow);
- ``record``: the record ConfigMap's POST (the node's Node object, labels and packages);
- ``stop-services``: the first destructive host command (``systemctl stop`` of the CRI-O
  units), after the record is saved (past the middle of the node's safe part);
- ``resolv-conf``: the copy of the node's resolv.conf to ``/etc/resolv.conf`` (before dnsmasq goes);
- ``wipe``: ``rm -rf /etc/origin ...`` after the packages are removed;
- ``reboot``: the kit's reboot-by-bootID (``systemctl reboot``, run once); a refused reboot
  fails the node, whose retry (the harness approves the hold gate) reboots again.
- ``remove-packages``: ``yum -y remove`` of the CRI-O packages (a host change in the middle of
  the destructive steps; a refusal stops the node, whose retry removes them);
- ``post-reboot-install``: the post-reboot checks' ``yum -y install`` of the excluders;
- ``delete-node``: the Node's DELETE after the approve-delete gate (the node is then gone until
  the scale-up registers it again: an abort there leaves it deleted, and no external step runs
  after the abort).

The migration has no point of no return: an abort honoured before the destructive steps
uncordons the node (the run ends as it found the cluster, but for the record ConfigMap); after
them the node stays as it was left. So the outcome's ``left_changed`` must name exactly what the simulator sees changed: the
node cordoned by this run (with ``kubectl uncordon`` while no destructive step ran), and the host
once a destructive step finished, with what that takes down until the node's bricks are back:
its GlusterFS pod (the DaemonSet's) and the bricks of the volumes on it. The refused cordon is
retried and passes, so that case runs the destructive steps up to the approve-delete gate; an
abort is honoured at the node's next safe point (after the wipe), so whether an abort at the
cordon lands before the destructive steps depends on how fast it arrives: both end states are
judged the same way.

Documented changes (ignored in the diff): the record ConfigMap
(``<record_namespace>/lockkeeper-record-<id>``, kept: it is the only copy of the node's Node
object, labels and packages).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clustersim import traps
from tests.runtime_migration.test_runtime_migration_e2e import hosts_env, migration_input, start_migration
from tests.support.faultmatrix import Case, Step, World, check_coverage, judge, matrix_params, run_case

pytestmark = pytest.mark.e2e

SCALE = 0.02
NODE = "gluster1.demo"
DOCUMENTED = ["ConfigMap/*/lockkeeper-record-*"]

STEPS = {
    "cordon": Step("cordon", traps.api("patch", "nodes", name=NODE)),
    "record": Step("record", traps.api("create", "configmaps")),
    "stop-services": Step("stop-services", traps.host(r"^systemctl stop ", host=NODE, stderr="Failed to stop: Access denied\n",
                                                      exit_code=1)),
    "resolv-conf": Step("resolv-conf", traps.host(r"^cp .*/etc/resolv\.conf$", host=NODE, stderr="cp: Permission denied\n",
                                                  exit_code=1)),
    "wipe": Step("wipe", traps.host(r"^rm -rf /etc/origin", host=NODE, stderr="rm: Permission denied\n", exit_code=1)),
    "reboot": Step("reboot", traps.host(r"^systemctl reboot", host=NODE, stderr="Failed to reboot: Access denied\n", exit_code=1)),
    "remove-packages": Step("remove-packages", traps.host(r"^yum -y remove ", host=NODE, stderr="Error: rpmdb open failed\n", exit_code=1)),
    "post-reboot-install": Step("post-reboot-install", traps.host(r"^yum -y install ", host=NODE,
                                                                  stderr="Error: rpmdb open failed\n", exit_code=1)),
    "delete-node": Step("delete-node", traps.api("delete", "nodes", name=NODE)),
}

#: (step, case) -> why it does not pass as the procedure is today (what the run showed).
XFAIL: dict[tuple[str, Case], str] = {}



#: Kinds of write that fall inside a step above (kind -> (step, why)).
WITHIN: dict[str, tuple[str, str]] = {
    "create pods/eviction": ("cordon", "the drain's evictions, begun by its cordon"),
    "host: systemctl disable": ("stop-services", "each unit is stopped then disabled in the same step"),
}


async def setup(sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str, tmp_path: Path) -> tuple[Any, World, Any]:
    """The matrix's simulator (``r4-crio-to-docker``), world and start (one node)."""
    sim = await sim_factory("r4-crio-to-docker", time_scale=SCALE)
    worker = await worker_for(sim, env=hosts_env(sim))
    inp = migration_input(sim, tmp_path).model_copy(update={"nodes": [NODE]})

    async def begin() -> Any:
        return await start_migration(temporal_client, inp, task_queue)

    return sim, World(sim=sim, client=temporal_client, worker=worker), begin


@pytest.mark.timeout(420)
async def test_runtime_migration_matrix_covers_every_write(sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str, tmp_path: Path) -> None:
    """Every kind of write a happy runtime migration sends is a step above (tests/support/faultmatrix.py)."""
    _sim, world, begin = await setup(sim_factory, worker_for, temporal_client, task_queue, tmp_path)
    await check_coverage(world, begin, STEPS, WITHIN)


@pytest.mark.timeout(420)
@pytest.mark.parametrize(("step", "case"), matrix_params(STEPS, XFAIL))
async def test_runtime_migration_fault_matrix(step: str, case: Case, sim_factory: Any, worker_for: Any, temporal_client: Any,
                                              task_queue: str, tmp_path: Path) -> None:
    sim, world, begin = await setup(sim_factory, worker_for, temporal_client, task_queue, tmp_path)
    cr = await run_case(world, begin, STEPS[step], case, ignore=DOCUMENTED)
    print("\n".join([f"{step}/{case}: {cr.outcome} {(cr.result or {}).get('message') or cr.failure or ''}", *cr.log]))
    judge(cr)
    if step == "cordon" and cr.outcome == "aborted" and not any(i.target.startswith("host ") for i in cr.left_changed):
        # the abort was honoured before the destructive steps: the node is uncordoned, not merely
        # named (a node that FAILED a destructive step stays cordoned for a person, named)
        assert not sim.store.get("nodes", NODE)["spec"].get("unschedulable"), f"{step}/{case}: left cordoned: {cr.log}"
        assert cr.diff is not None and cr.diff.empty, f"{step}/{case}: not restored: {cr.log}"
