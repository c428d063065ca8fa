"""``wait_for_node_done`` against the simulator: from the drain hand-off to Done in one activity,
answering the daemon's uncordon request on the way (issue 16: the workflow task between the
reboot and the uncordon is gone). Harness and fixtures from test_activities_cluster.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from activities.cluster.models import (
    ANN_CORDONED_BY,
    ANN_CURRENT_CONFIG,
    ANN_DESIRED_CONFIG,
    ANN_DESIRED_DRAIN,
    ANN_LAST_APPLIED_DRAIN,
    ANN_STATE,
    CordonInput,
    DrainInput,
    SetNodeAnnotationsInput,
)
from activities.machineconfig.models import WaitForNodeDoneInput, WaitForNodeInput, drain_value, uncordon_value
from tests.gateway.test_activities_cluster import Harness, r1_static, r2  # noqa: F401,F811 (fixtures)

pytestmark = pytest.mark.timeout(120)

R1_APP_TARGET = "rendered-app-c2144a20e3d0e37e96785165ba81f4e8"
R2_WORKER_TARGET = "rendered-worker-5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b"


async def test_reboot_uncordon_and_done_in_one_call_with_the_daemon(r2: Harness) -> None:
    """The simulated daemon reboots the node after our drain hand-off and asks for the uncordon;
    the activity answers (uncordon, then lastAppliedDrain=uncordon-X) and returns at Done."""
    h = r2
    node, owner, target = "okd-worker-01", "rollout/node/okd-worker-01", R2_WORKER_TARGET
    h.sim.store.mutate(
        "poddisruptionbudgets.policy", "router-default", "openshift-ingress", lambda o: o["spec"].update(minAvailable=0)
    )
    await h.run(h.acts.set_node_annotations, SetNodeAnnotationsInput(node=node, annotations={ANN_DESIRED_CONFIG: target}))
    asked = await h.run(h.mco.wait_for_node, WaitForNodeInput(node=node, value=drain_value(target), timeout_seconds=30))
    assert asked.matched
    assert (await h.run(h.acts.cordon_node, CordonInput(node=node, owner=owner))).cordoned_by_us
    for _ in range(20):
        if (await h.run(h.acts.drain_node, DrainInput(node=node, wait_seconds=5))).done:
            break
        await asyncio.sleep(0.1)
    await h.run(h.acts.set_node_annotations, SetNodeAnnotationsInput(node=node, annotations={ANN_LAST_APPLIED_DRAIN: drain_value(target)}))
    h.sim.requests.clear()

    done = await h.run(h.mco.wait_for_node_done, WaitForNodeDoneInput(node=node, target=target, owner=owner, timeout_seconds=60))

    assert done.outcome == "done", done
    assert done.uncordon_answered_at is not None and done.uncordon is not None and done.uncordon.uncordoned
    assert done.node.current_config == target and done.node.state == "Done" and not done.node.unschedulable
    stored = h.sim.store.get("nodes", node)["metadata"]["annotations"]
    assert stored[ANN_LAST_APPLIED_DRAIN] == uncordon_value(target) and ANN_CORDONED_BY not in stored
    patches = [e for e in h.sim.requests.entries() if e.verb == "patch" and e.resource == "nodes" and e.name == node]
    assert len(patches) == 2, [e.verb for e in patches]  # the uncordon, then the hand-off: nothing twice


async def _answers(h: Harness, node: str, owner: str, timeout: float = 1) -> Any:
    return await h.run(
        h.mco.wait_for_node_done, WaitForNodeDoneInput(node=node, target=R1_APP_TARGET, owner=owner, timeout_seconds=timeout)
    )


async def test_answers_only_what_is_missing_and_leaves_a_foreign_cordon(r1_static: Harness) -> None:
    """No daemon runs in r1_static: each call sees the node as set here."""
    h, node, target = r1_static, "qsu-app-04", R1_APP_TARGET
    h.set_annotations(node, **{
        ANN_DESIRED_CONFIG: target, ANN_DESIRED_DRAIN: uncordon_value(target), ANN_LAST_APPLIED_DRAIN: drain_value(target),
        ANN_STATE: "Working", ANN_CORDONED_BY: "admin",
    })
    h.sim.store.mutate("nodes", node, None, lambda o: o["spec"].update(unschedulable=True))

    first = await _answers(h, node, owner="rollout/node/qsu-app-04")
    # Somebody else's cordon stays; the daemon still gets its answer; no Done yet: timed out.
    assert first.outcome == "timed_out" and first.uncordon_answered_at is not None
    assert first.uncordon is not None and not first.uncordon.uncordoned and "admin" in (first.uncordon.left_cordoned_reason or "")
    stored = h.sim.store.get("nodes", node)
    assert stored["spec"]["unschedulable"] is True and stored["metadata"]["annotations"][ANN_CORDONED_BY] == "admin"
    assert stored["metadata"]["annotations"][ANN_LAST_APPLIED_DRAIN] == uncordon_value(target)

    writes = len(h.writes())
    again = await _answers(h, node, owner="rollout/node/qsu-app-04")
    assert again.outcome == "timed_out" and again.uncordon_answered_at is None and len(h.writes()) == writes

    h.set_annotations(node, **{ANN_DESIRED_DRAIN: drain_value(target)})
    assert (await _answers(h, node, owner="x")).outcome == "drain_requested"

    h.set_annotations(node, **{ANN_DESIRED_DRAIN: uncordon_value(target), ANN_STATE: "Degraded"})
    assert (await _answers(h, node, owner="x")).outcome == "degraded"

    h.set_annotations(node, **{ANN_CURRENT_CONFIG: target, ANN_STATE: "Done"})
    assert (await _answers(h, node, owner="x")).outcome == "done"


async def test_a_change_during_the_watch_ends_it(r1_static: Harness) -> None:
    h, node, target = r1_static, "qsu-app-03", R1_APP_TARGET
    h.set_annotations(node, **{
        ANN_DESIRED_CONFIG: target, ANN_DESIRED_DRAIN: drain_value(target), ANN_LAST_APPLIED_DRAIN: drain_value(target),
        ANN_STATE: "Working",
    })
    listed = h.sim.requests.count(verb="list", resource="nodes")
    task = asyncio.ensure_future(_answers(h, node, owner="o", timeout=30))
    for _ in range(200):
        if h.sim.requests.count(verb="list", resource="nodes") > listed:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)
    assert not task.done()
    h.set_annotations(node, **{ANN_DESIRED_DRAIN: uncordon_value(target)})  # the daemon rebooted
    await asyncio.sleep(0.5)
    assert h.sim.store.get("nodes", node)["metadata"]["annotations"][ANN_LAST_APPLIED_DRAIN] == uncordon_value(target)
    assert not task.done()  # answered, now waiting for Done
    h.set_annotations(node, **{ANN_CURRENT_CONFIG: target, ANN_STATE: "Done"})
    result = await asyncio.wait_for(task, 10)
    assert result.outcome == "done" and result.uncordon_answered_at is not None


async def test_the_handshake_waits_read_the_node_only_by_watching(r2: Harness) -> None:
    """Issue 16: a node's waits open with a WATCH without resourceVersion (the node first, as a
    synthetic ADDED) instead of LIST + WATCH, and the cordon, uncordon and hand-offs they answer
    are conditional on the node as the watch showed it, with no GET before them. The node run's
    API requests fall from 19 to 14 per node."""
    h = r2
    node, owner, target = "okd-worker-01", "rollout/node/okd-worker-01", R2_WORKER_TARGET
    h.sim.store.mutate(
        "poddisruptionbudgets.policy", "router-default", "openshift-ingress", lambda o: o["spec"].update(minAvailable=0)
    )
    await h.run(h.acts.set_node_annotations, SetNodeAnnotationsInput(node=node, annotations={ANN_DESIRED_CONFIG: target}))
    h.sim.requests.clear()
    asked = await h.run(h.mco.wait_for_node, WaitForNodeInput(node=node, value=drain_value(target), timeout_seconds=30))
    assert asked.matched and asked.node.desired_drain == drain_value(target)
    await h.run(h.acts.set_node_annotations, SetNodeAnnotationsInput(node=node, annotations={ANN_CORDONED_BY: owner}))
    h.sim.store.mutate("nodes", node, None, lambda o: o["spec"].update(unschedulable=True))
    await h.run(h.acts.set_node_annotations, SetNodeAnnotationsInput(node=node, annotations={ANN_LAST_APPLIED_DRAIN: drain_value(target)}))
    waits = [e for e in h.sim.requests.entries() if e.resource == "nodes" and e.verb in ("list", "watch")]
    assert [e.verb for e in waits][:1] == ["watch"] and all(e.verb == "watch" for e in waits), waits
    h.sim.requests.clear()

    done = await h.run(h.mco.wait_for_node_done, WaitForNodeDoneInput(node=node, target=target, owner=owner, timeout_seconds=60))

    assert done.outcome == "done" and done.uncordon is not None and done.uncordon.uncordoned, done
    verbs = [e.verb for e in h.sim.requests.entries() if e.resource == "nodes" and e.name in (node, "")]
    assert "get" not in verbs and "list" not in verbs, verbs
    assert verbs.count("patch") == 2, verbs  # the uncordon, then lastAppliedDrain=uncordon-X


async def test_a_stale_node_falls_back_to_read_then_write(r1_static: Harness) -> None:
    """The cordon and the uncordon made on the node as last seen are conditional on its
    resourceVersion: when the node changed since, the API answers 409 and the write reads the
    node and decides again, so no cordon is taken or removed on a stale view. The annotations'
    merge patch needs no such guard (issue 40): it sets only the keys that differ from the node
    as seen, with no read and no 409, and keeps what changed since (nothing is lost)."""
    from activities.cluster.nodes import cordon_for, set_annotations, uncordon_seen
    from activities.machineconfig.activities import MachineConfigActivities

    h, node, owner = r1_static, "qsu-app-04", "rollout/node/qsu-app-04"
    acts = MachineConfigActivities(lambda: h.gateway)
    stale = h.sim.store.get("nodes", node)
    h.set_annotations(node, **{ANN_STATE: "Working"})  # moves the resourceVersion on
    h.sim.requests.clear()

    info = await asyncio.to_thread(set_annotations, acts, node, {ANN_LAST_APPLIED_DRAIN: "drain-x"}, stale)
    assert info.last_applied_drain == "drain-x" and info.state == "Working"
    codes = [(e.verb, e.code) for e in h.sim.requests.entries() if e.resource == "nodes"]
    assert codes == [("patch", 200)], codes

    # Nothing to change on the node as seen: no request at all.
    fresh = h.sim.store.get("nodes", node)
    h.sim.requests.clear()
    same = await asyncio.to_thread(set_annotations, acts, node, {ANN_LAST_APPLIED_DRAIN: "drain-x"}, fresh)
    assert same.last_applied_drain == "drain-x" and h.sim.requests.entries() == []

    cordon = await asyncio.to_thread(cordon_for, acts, node, owner, stale)  # 409, then read, then cordon
    assert cordon.cordoned_by_us and h.sim.store.get("nodes", node)["spec"]["unschedulable"] is True
    cordoned = h.sim.store.get("nodes", node)
    h.set_annotations(node, **{ANN_STATE: "Done"})
    h.sim.requests.clear()
    result, left = await asyncio.to_thread(uncordon_seen, acts, node, owner, cordoned)  # 409, read, uncordon
    assert result.uncordoned and left is not None and not left["spec"].get("unschedulable")
    codes = [(e.verb, e.code) for e in h.sim.requests.entries() if e.resource == "nodes"]
    assert codes == [("patch", 409), ("get", 200), ("patch", 200)], codes
    assert ANN_CORDONED_BY not in h.sim.store.get("nodes", node)["metadata"]["annotations"]


async def test_a_wait_on_a_missing_node_says_so(r1_static: Harness) -> None:
    """The WATCH without resourceVersion shows nothing for a node that does not exist; one LIST
    then raises the non-retryable ``NodeNotFound`` (as the LIST-first wait did)."""
    from temporalio.exceptions import ApplicationError

    h = r1_static
    with pytest.raises(ApplicationError) as missing:
        await h.run(h.mco.wait_for_node, WaitForNodeInput(node="no-such-node", value="x", timeout_seconds=5))
    assert missing.value.type == "NodeNotFound" and missing.value.non_retryable
    with pytest.raises(ApplicationError) as missing_done:
        await _answers(h, "no-such-node", owner="o", timeout=5)
    assert missing_done.value.type == "NodeNotFound"
