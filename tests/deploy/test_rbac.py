"""Least-privilege RBAC, proven by recording.

A worker subprocess runs the shipped procedures against clustersim: the full R1 repair (all
pools, network repair, the gated delete of all pods), a rollout on OpenShift 4.21 (node
disruption policies, MachineConfigNodes) and an R2 drain blocked by the
router-default PodDisruptionBudget (blocked-drain report: budgets, Pending pods, their events,
the DrainBlocked event) that is then aborted (rollback: uncordon, desiredConfig back). Clustersim
records every request it served; the test asserts that the ClusterRole in deploy/ allows each
one and that every verb it grants was used. The skip/retry/degraded paths of tests/machineconfig use the
same calls (read/patch nodes, uncordon) and add no verb.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.conftest import DEPLOY
from tests.support.rbac import Access, Grant, grants, role_allows, rule_allows, unused_grants
from tests.support.harness import drive, start_rollout, status
from workflows.kit.models import ControlInput, NodePhase

pytestmark = pytest.mark.e2e

CLUSTERROLE = DEPLOY / "k8s" / "base" / "clusterrole.yaml"
SCALE = 0.02
FAST = dict(
    network_poll_initial_seconds=1,
    network_poll_max_seconds=3,
    drain={"backoff_initial_seconds": 1, "backoff_max_seconds": 3, "wait_seconds": 3},
    daemon={"drain_deadline_seconds": 3600 * SCALE, "uncordon_deadline_seconds": 600 * SCALE},
)


def load_role(path: Path = CLUSTERROLE) -> dict[str, Any]:
    role = yaml.safe_load(path.read_text())
    assert role["kind"] == "ClusterRole"
    return role


def worker_accesses(sim: Any) -> set[Access]:
    """What the worker asked of the API server (its requests carry the python client's
    User-Agent; clustersim's own agents do not go through HTTP)."""
    entries = [e for e in sim.requests.entries() if e.user_agent.startswith("OpenAPI-Generator/")]
    assert entries, "the worker sent no request to clustersim"
    nonresource = sorted({e.path for e in entries if not e.resource})
    assert not nonresource, f"the worker called non-resource URLs: {nonresource}"
    return {Access.from_request(e) for e in entries}


async def _stop_and_collect(worker: Any, sim: Any) -> set[Access]:
    # A watch is recorded when its stream ends: stop the worker so open watches close.
    assert await worker.stop() == 0
    await asyncio.sleep(0.5)
    return worker_accesses(sim)


async def _r1_repair(sim_factory, worker_process_factory, dev_server, temporal_client, task_queue) -> set[Access]:
    sim = await sim_factory("r1-ovn-interrupted", time_scale=SCALE)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue)
    await worker.start()
    handle = await start_rollout(
        temporal_client, task_queue, cluster="rbac-r1", approval="none", repair_network=True, max_unavailable=2, **FAST
    )
    result = await drive(handle, timeout=240)  # approves the always-gated delete-all-pods step
    assert result.outcome == "completed", result.message
    assert result.network_repair is not None and result.network_repair.pods_deleted
    return await _stop_and_collect(worker, sim)


async def _r2_blocked_then_abort(sim_factory, worker_process_factory, dev_server, temporal_client, task_queue) -> set[Access]:
    sim = await sim_factory("r2-pdb-blocked", time_scale=SCALE)
    queue = task_queue + "-r2"
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=queue)
    await worker.start()
    handle = await start_rollout(temporal_client, queue, cluster="rbac-r2", pools=["worker"], max_unavailable=1, **FAST)
    deadline = time.monotonic() + 60
    while True:
        st = await status(handle)
        node = st.nodes.get("okd-worker-01")
        blocked_event = sim.requests.count(verb="create", resource="events") > 0
        if node is not None and node.phase == NodePhase.BLOCKED and node.drain_report and blocked_event:
            break
        assert time.monotonic() < deadline, f"drain never reported blocked: {st.model_dump_json(indent=1)}"
        await asyncio.sleep(0.2)
    assert node.drain_report.blocked_pods, "the blocked-drain report names the router pod"
    await handle.execute_update("abort", ControlInput(identity="rbac-test", comment="enough recorded"))
    result = await drive(handle, auto_approve=False, timeout=60)
    assert result.outcome == "aborted", result.message
    return await _stop_and_collect(worker, sim)


async def _ocp421_rollout(sim_factory, worker_process_factory, dev_server, temporal_client, task_queue) -> set[Access]:
    """OpenShift 4.21 (issue 41): the preflight reads the node disruption policies and asks
    whether MachineConfigNodes are served; a registries.d-only rollout (no drain, no reboot)."""
    sim = await sim_factory("r1-ocp421", time_scale=SCALE)
    queue = task_queue + "-ocp421"
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=queue)
    await worker.start()
    handle = await start_rollout(temporal_client, queue, cluster="rbac-ocp421", pools=["worker"], approval="none",
                                 target_configs={"worker": "rendered-worker-f545564a866bce772bf3fb8e1a72a29d"}, **FAST)
    result = await drive(handle, timeout=120)
    assert result.outcome == "completed", result.message
    return await _stop_and_collect(worker, sim)


async def test_clusterrole_allows_exactly_what_the_procedures_use(
    sim_factory, worker_process_factory, dev_server, temporal_client, task_queue
) -> None:
    role = load_role()
    used = await _r1_repair(sim_factory, worker_process_factory, dev_server, temporal_client, task_queue)
    used |= await _r2_blocked_then_abort(sim_factory, worker_process_factory, dev_server, temporal_client, task_queue)
    used |= await _ocp421_rollout(sim_factory, worker_process_factory, dev_server, temporal_client, task_queue)
    print("recorded accesses:\n  " + "\n  ".join(f"{a.verb} {a.group or 'core'}/{a.resource} {a.name}" for a in sorted(used)))

    denied = sorted(a for a in used if not role_allows(role, a))
    assert not denied, f"the ClusterRole denies requests the worker made: {denied}"
    unused = sorted(unused_grants(role, used))
    assert not unused, f"the ClusterRole grants what no procedure used: {unused}"
    # The paths that matter for R1/R2 were really exercised (not vacuous).
    verbs = {(a.resource, a.verb) for a in used}
    for needed in (("nodes", "watch"), ("pods/eviction", "create"), ("events", "create"),
                   ("poddisruptionbudgets", "list"), ("networks", "get"), ("pods", "delete"),
                   ("machineconfigurations", "get"), ("machineconfignodes", "list"), ("machinehealthchecks", "list"),
                   ("machines", "list")):
        assert needed in verbs, needed


def test_clusterrole_has_no_wildcards_or_escalation() -> None:
    role = load_role()
    for g in grants(role):
        assert "*" not in (g.group, g.resource, g.verb), g
        assert g.verb not in ("escalate", "bind", "impersonate"), g
        assert g.resource not in ("secrets", "clusterroles", "clusterrolebindings", "roles", "rolebindings"), g


def test_shipped_overlay_keeps_the_base_clusterrole(rendered_example) -> None:
    rendered = [o for o in rendered_example if o["kind"] == "ClusterRole"]
    assert len(rendered) == 1
    assert grants(rendered[0]) == grants(load_role())
    binding = next(o for o in rendered_example if o["kind"] == "ClusterRoleBinding")
    sa = next(o for o in rendered_example if o["kind"] == "ServiceAccount")
    assert binding["roleRef"]["name"] == rendered[0]["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                    "namespace": sa["metadata"]["namespace"]}]


@pytest.mark.parametrize(
    ("rule", "access", "allowed"),
    [
        ({"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}, Access("", "pods", "list"), True),
        ({"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}, Access("", "pods/eviction", "create"), False),
        ({"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}, Access("", "pods/eviction", "create", "p"), True),
        ({"apiGroups": ["policy"], "resources": ["pods"], "verbs": ["list"]}, Access("", "pods", "list"), False),
        ({"apiGroups": ["x"], "resources": ["n"], "resourceNames": ["cluster"], "verbs": ["get"]}, Access("x", "n", "get", "cluster"), True),
        ({"apiGroups": ["x"], "resources": ["n"], "resourceNames": ["cluster"], "verbs": ["get"]}, Access("x", "n", "get", "other"), False),
        ({"apiGroups": ["x"], "resources": ["n"], "resourceNames": ["cluster"], "verbs": ["list"]}, Access("x", "n", "list"), False),
        ({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, Access("a", "b", "c"), True),
    ],
)
def test_rule_evaluation_follows_the_rbac_authorizer(rule, access, allowed) -> None:
    assert rule_allows(rule, access) is allowed


def test_unused_grants_are_reported() -> None:
    role = {"rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "delete"]}]}
    assert unused_grants(role, {Access("", "nodes", "get", "n1")}) == {Grant("", "nodes", "delete")}
