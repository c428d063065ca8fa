"""The node handshake's writes made by the watching activities (issue 16: no workflow task waits
on the API): ``drain_when_asked`` sets desiredConfig first (``set_desired_config``) and
``wait_for_node_done`` writes the drain hand-off (``hand_off_drain``). Against the simulator;
harness and fixtures from test_activities_cluster.py."""

from __future__ import annotations

import pytest

from activities.cluster.models import (
    ANN_CORDONED_BY,
    ANN_DESIRED_CONFIG,
    ANN_DESIRED_DRAIN,
    ANN_LAST_APPLIED_DRAIN,
    ANN_STATE,
    DrainInput,
)
from activities.machineconfig.handshake import HandshakeActivities
from activities.machineconfig.models import DrainWhenAskedInput, WaitForNodeDoneInput, drain_value, uncordon_value
from tests.gateway.test_activities_cluster import Harness, r1_static, r2  # noqa: F401,F811 (fixtures)

pytestmark = pytest.mark.timeout(120)

R1_APP_TARGET = "rendered-app-c2144a20e3d0e37e96785165ba81f4e8"
R2_WORKER_TARGET = "rendered-worker-5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b"


def _node_verbs(h: Harness, node: str) -> list[str]:
    return [e.verb for e in h.sim.requests.entries() if e.resource == "nodes" and e.name in (node, "")]


async def test_the_whole_handshake_in_two_calls_with_the_daemon(r2: Harness) -> None:
    """desiredConfig, the drain request, cordon, drain, hand-off, reboot, uncordon and Done: two
    activity calls and no read of the node but by watching."""
    h = r2
    node, owner, target = "okd-worker-01", "rollout/node/okd-worker-01", R2_WORKER_TARGET
    h.sim.store.mutate(
        "poddisruptionbudgets.policy", "router-default", "openshift-ingress", lambda o: o["spec"].update(minAvailable=0)
    )
    acts = HandshakeActivities(lambda: h.gateway)
    h.sim.requests.clear()

    drained = await h.run(acts.drain_when_asked, DrainWhenAskedInput(
        node=node, target=target, owner=owner, timeout_seconds=30, drain=DrainInput(node=node, wait_seconds=10),
        set_desired_config=True,
    ))

    assert drained.asked and not drained.first_look_only and drained.drain is not None and drained.drain.done, drained
    assert drained.cordon is not None and drained.cordon.cordoned_by_us
    verbs = _node_verbs(h, node)
    # desiredConfig (no read first), the watch from its answer, the cordon on the node as watched.
    assert verbs[0] == "patch" and "get" not in verbs and "list" not in verbs and verbs.count("patch") == 2, verbs
    h.sim.requests.clear()

    done = await h.run(h.mco.wait_for_node_done, WaitForNodeDoneInput(
        node=node, target=target, owner=owner, timeout_seconds=60, hand_off_drain=True,
    ))

    assert done.outcome == "done" and done.drain_handed_off_at is not None and done.uncordon_answered_at is not None, done
    assert done.drain_handed_off_at <= done.uncordon_answered_at
    stored = h.sim.store.get("nodes", node)["metadata"]["annotations"]
    assert stored[ANN_LAST_APPLIED_DRAIN] == uncordon_value(target) and ANN_CORDONED_BY not in stored
    verbs = _node_verbs(h, node)
    assert "get" not in verbs and "list" not in verbs, verbs
    assert verbs.count("patch") == 3, verbs  # the drain hand-off, the uncordon, its hand-off


@pytest.mark.parametrize(
    "state",
    [
        pytest.param({ANN_CORDONED_BY: "rollout/node/qsu-app-04"}, id="cordoned-by-an-earlier-attempt"),
        pytest.param({ANN_STATE: "Degraded"}, id="degraded"),
        pytest.param({ANN_DESIRED_DRAIN: drain_value(R1_APP_TARGET)}, id="drain-already-asked"),
        pytest.param({ANN_LAST_APPLIED_DRAIN: drain_value(R1_APP_TARGET)}, id="already-handed-off"),
    ],
)
async def test_a_node_not_plainly_waiting_comes_back_at_first_look(r1_static: Harness, state: dict[str, str]) -> None:
    """Anything but a node plainly waiting for its daemon goes back to the workflow after the
    desiredConfig write, untouched otherwise: no watch, no cordon, no drain."""
    h, node = r1_static, "qsu-app-04"
    h.set_annotations(node, **state)
    acts = HandshakeActivities(lambda: h.gateway)
    h.sim.requests.clear()

    res = await h.run(acts.drain_when_asked, DrainWhenAskedInput(
        node=node, target=R1_APP_TARGET, owner="rollout/node/qsu-app-04", timeout_seconds=30, drain=DrainInput(node=node),
        set_desired_config=True,
    ))

    assert res.first_look_only and not res.asked and res.cordon is None and res.drain is None, res
    assert res.node.desired_config == R1_APP_TARGET
    assert h.sim.store.get("nodes", node)["metadata"]["annotations"][ANN_DESIRED_CONFIG] == R1_APP_TARGET
    assert [(e.verb, e.resource) for e in h.sim.requests.entries()] == [("patch", "nodes")]


async def test_the_drain_hand_off_is_written_once_and_never_for_a_later_request(r1_static: Harness) -> None:
    """No daemon runs in r1_static. The hand-off is written while the daemon waits for it; a
    retried call finds it there; after the uncordon, a new drain request (the daemon asks again)
    is not answered by a hand-off that was never drained: the call ends ``drain_requested``."""
    h, node, target, owner = r1_static, "qsu-app-04", R1_APP_TARGET, "rollout/node/qsu-app-04"
    h.set_annotations(node, **{
        ANN_DESIRED_CONFIG: target, ANN_DESIRED_DRAIN: drain_value(target), ANN_LAST_APPLIED_DRAIN: "uncordon-rendered-app-old",
        ANN_STATE: "Working",
    })
    call = WaitForNodeDoneInput(node=node, target=target, owner=owner, timeout_seconds=1, hand_off_drain=True)

    first = await h.run(h.mco.wait_for_node_done, call)
    assert first.outcome == "timed_out" and first.drain_handed_off_at is not None, first
    assert h.sim.store.get("nodes", node)["metadata"]["annotations"][ANN_LAST_APPLIED_DRAIN] == drain_value(target)

    writes = len(h.writes())
    again = await h.run(h.mco.wait_for_node_done, call)  # a retry: nothing is missing
    assert again.outcome == "timed_out" and again.drain_handed_off_at is None and len(h.writes()) == writes

    h.set_annotations(node, **{ANN_LAST_APPLIED_DRAIN: uncordon_value(target)})  # uncordoned; then asked again
    later = await h.run(h.mco.wait_for_node_done, call)
    assert later.outcome == "drain_requested" and later.drain_handed_off_at is None, later
    assert h.sim.store.get("nodes", node)["metadata"]["annotations"][ANN_LAST_APPLIED_DRAIN] == uncordon_value(target)
    assert len(h.writes()) == writes
