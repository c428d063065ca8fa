"""The fault matrix of the VXLAN port change (R5) on ``r5-vxlan-port``, judged by the simulator's
own view (tests/support/faultmatrix.py, issue 39): at each mutating step an abort while its first request
is held, a refusal of that request, and the worker SIGKILLed while it is held (then an abort).

Mutating steps, in the order the procedure takes them (workflows/vxlan_port/workflow.py):

- ``pre-pull``: stage B pulls the custom image on every node (the first ``docker pull``);
- ``record``: stage C mirrors the record to ConfigMap ``openshift-config/lockkeeper-record-<id>``
  before the first change (its first write: the ConfigMap's POST);
- ``daemonset``: stage C changes ``openshift-sdn/sdn`` to the custom image without the triggers
  annotation through the kit's records (the PATCH);
- ``sdn-pods``: stage C replaces the DaemonSet's pods node by node (the first pod DELETE);
- ``firewall``: stage D adds the rule for udp/4889 on every node (the first ``iptables -A``);
- ``clusternetwork``: stage F, past the point of no return (every node already on 4889, the
  master configs edited), deletes ClusterNetwork ``default`` (the DELETE);
- ``master-config``: stage F writes the first master's config (``install -m 0600 /dev/stdin ...``,
  then moved into place);
- ``master-restart``: stage F restarts the first master (``master-restart api``, then
  ``controllers``).

:func:`test_vxlan_matrix_covers_every_write` checks these are every kind of write a happy run
sends (tests/support/faultmatrix.py; what falls inside a step: :data:`WITHIN`).

Before the fan-out every case must end ``aborted`` and restored (the DaemonSet read back, the rule
removed): the diff is empty. Past it the result's ``left_changed`` must name exactly what the
simulator sees changed, and ``next_commands`` the ``lockkeeper revert ID --full`` that undoes it
(a refused ClusterNetwork DELETE is retried and the run completes).

Documented changes (ignored in the diff): the record ConfigMap (kept for a reverse run), and the
custom image that stage B pre-pulls on every host (a pulled image is cache, nothing to undo).
A case that does not pass is ``xfail(strict=True, raises=Mismatch)`` with the reason the run
showed, so it turns into an error (XPASS) once fixed, and any other failure (the step not
reached, no end) still fails.
"""

from __future__ import annotations

from typing import Any

import pytest

from clustersim import traps
from tests.support.faultmatrix import Case, Step, World, check_coverage, judge, matrix_params, run_case
from tests.vxlan_port.test_e2e_run import CUSTOM, NEW, ready_sim, start, vxlan_input

pytestmark = pytest.mark.e2e

DOCUMENTED = ["ConfigMap/openshift-config/lockkeeper-record-*", f"host/*/image/{CUSTOM}"]

STEPS = {
    "pre-pull": Step("pre-pull", traps.host(r"^docker pull ", stderr="Error response from daemon: unauthorized\n", exit_code=1)),
    "record": Step("record", traps.api("create", "configmaps", namespace="openshift-config", name="lockkeeper-record-*")),
    "daemonset": Step("daemonset", traps.api("patch", "daemonsets", namespace="openshift-sdn", name="sdn")),
    "firewall": Step("firewall", traps.host(rf"^iptables -A OS_FIREWALL_ALLOW .*--dport {NEW} ", stderr="iptables: Permission denied\n",
                                            exit_code=4)),
    "sdn-pods": Step("sdn-pods", traps.api("delete", "pods", namespace="openshift-sdn")),
    "master-config": Step("master-config", traps.host(r"^install .*/etc/origin/master/master-config\.yaml", stderr="install: Permission denied\n",
                                                      exit_code=1)),
    "master-restart": Step("master-restart", traps.host(r"master-restart api$", stderr="Failed to restart the api: Access denied\n",
                                                        exit_code=1)),
    "clusternetwork": Step("clusternetwork", traps.api("delete", "clusternetworks", name="default")),
}

#: Steps before the fan-out (the point of no return): every case there must end restored.
BEFORE_FANOUT = {"pre-pull", "record", "daemonset", "sdn-pods", "firewall"}

#: (step, case) -> why it does not pass as the procedure is today (what the run showed).
XFAIL: dict[tuple[str, Case], str] = {}



#: A killed worker's lost host command is judged after its heartbeat timeout (the procedure's
#: default 30 s): short here, so a kill case does not wait on it; the recovery is what is judged.
KILL_RECOVERY = {"heartbeat_seconds": 5, "host_heartbeat_seconds": 5}


#: Kinds of write that fall inside a step above (kind -> (step, why)).
WITHIN: dict[str, tuple[str, str]] = {
    "patch configmaps": ("record", "the record ConfigMap's own updates as each change is recorded (documented: kept for a reverse run)"),
    "host: iptables.init": ("firewall", "``iptables.init save`` persists the rule the same host step just added"),
    "host: mv /etc/origin/master": ("master-config", "the written copy moved into place, in the same host step"),
    "host: master-restart controllers": ("master-restart", "each master's controllers restarted after its API, in the same step"),
}


async def setup(sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str) -> tuple[World, Any]:
    """The matrix's world (``r5-vxlan-port``, ready) and its start."""
    sim = await ready_sim(sim_factory)
    worker = await worker_for(sim, env=sim.components["hosts"].client_env())

    async def begin() -> Any:
        return await start(temporal_client, task_queue, vxlan_input(sim, calls=KILL_RECOVERY))

    return World(sim=sim, client=temporal_client, worker=worker), begin


@pytest.mark.timeout(420)
async def test_vxlan_matrix_covers_every_write(sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str) -> None:
    """Every kind of write a happy VXLAN port change sends is a step above (tests/support/faultmatrix.py)."""
    world, begin = await setup(sim_factory, worker_for, temporal_client, task_queue)
    await check_coverage(world, begin, STEPS, WITHIN)


@pytest.mark.timeout(480)
@pytest.mark.parametrize(("step", "case"), matrix_params(STEPS, XFAIL))
async def test_vxlan_fault_matrix(step: str, case: Case, sim_factory: Any, worker_for: Any, temporal_client: Any,
                                  task_queue: str) -> None:
    world, begin = await setup(sim_factory, worker_for, temporal_client, task_queue)
    cr = await run_case(world, begin, STEPS[step], case, ignore=DOCUMENTED)
    print("\n".join([f"{step}/{case}: {cr.outcome} {(cr.result or {}).get('message') or cr.failure or ''}", *cr.log]))
    judge(cr)
    if step in BEFORE_FANOUT:  # restored and read back, not merely named
        assert cr.outcome == "aborted" and cr.diff is not None and cr.diff.empty and not cr.left_changed, cr.log
    elif cr.outcome == "aborted":  # past it: what stays changed is named, with the command that reverts it
        assert cr.left_changed and cr.result is not None, cr.log
        assert f"lockkeeper revert {cr.workflow_id} --full" in cr.result["next_commands"], cr.result["next_commands"]
