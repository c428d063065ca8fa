"""benchmarks/cluster_view.py: a rollout's overhead from the cluster's view, on made-up node events."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "cluster_view", Path(__file__).resolve().parents[2] / "benchmarks" / "cluster_view.py"
)
assert _spec is not None and _spec.loader is not None
cluster_view = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("cluster_view", cluster_view)  # dataclasses look their module up there
_spec.loader.exec_module(cluster_view)

from activities.cluster.models import ANN_CURRENT_CONFIG, ANN_DESIRED_CONFIG, ANN_STATE  # noqa: E402


def ann(desired: str, state: str = "Done") -> dict[str, str]:
    return {ANN_DESIRED_CONFIG: desired, ANN_CURRENT_CONFIG: "old", ANN_STATE: state}


def roll(clock: object, node: str, begin: float, done: float) -> None:
    """One node's handshake as the store commits it: the first write, the daemon's states."""
    clock.observe(node, ann("new", "Done"), ann("old", "Done"), begin)  # desiredConfig changes
    clock.observe(node, ann("new", "Working"), ann("new", "Done"), begin + 0.001)
    clock.observe(node, ann("new", "Rebooting"), ann("new", "Working"), begin + 0.5)
    clock.observe(node, ann("new", "Done"), ann("new", "Rebooting"), done)


def test_breakdown_pairs_each_end_with_the_begin_that_took_its_place() -> None:
    clock = cluster_view.ClusterClock()
    clock.observe("a", ann("old"), None, 0.0)  # creation: no begin
    roll(clock, "a", 1.0, 3.1)  # window 2: a and b first, then c after a, d after b
    roll(clock, "b", 1.0, 3.2)
    roll(clock, "c", 3.2, 5.3)
    roll(clock, "d", 3.5, 5.5)
    b = clock.breakdown(started=0.8, finished=5.6, window=2, cluster_seconds=2.0)
    assert b is not None and b.nodes == 4
    assert b.start == pytest.approx(0.2)
    assert b.end == pytest.approx(0.1)
    assert sorted(b.in_node) == pytest.approx([0.0, 0.1, 0.1, 0.2])
    assert b.handovers == pytest.approx([0.1, 0.3])
    lines = cluster_view.describe(b, waves=2)
    assert "start 200 ms, end 100 ms" in lines[0]
    assert "mean 100 ms" in lines[1] and "mean 200 ms" in lines[2]
    # 200 + 2 x 100 + 1 x 200 + 100
    assert "= 700 ms" in lines[3]


def test_a_node_that_never_began_or_never_ended_is_left_out() -> None:
    clock = cluster_view.ClusterClock()
    clock.observe("x", ann("new", "Done"), ann("new", "Working"), 1.0)  # Done without a begin
    assert clock.breakdown(started=0, finished=2, window=1, cluster_seconds=1) is None
    clock.observe("x", ann("newer", "Working"), ann("new", "Done"), 2.0)  # begins, never Done
    assert clock.breakdown(started=0, finished=3, window=1, cluster_seconds=1) is None
    with pytest.raises(ValueError, match="window"):
        clock.breakdown(started=0, finished=3, window=0, cluster_seconds=1)


def test_step_gaps_time_each_step_of_the_handshake_once() -> None:
    """Each step counts at its first commit after the begin; a node that never ended is left out."""
    from activities.cluster.models import ANN_CORDONED_BY, ANN_DESIRED_DRAIN, ANN_LAST_APPLIED_DRAIN

    clock = cluster_view.ClusterClock()
    base = ann("old", "Done") | {ANN_DESIRED_DRAIN: "uncordon-old", ANN_LAST_APPLIED_DRAIN: "uncordon-old"}
    timeline = [  # (seconds, what changed)
        (1.00, {ANN_DESIRED_CONFIG: "new"}),
        (1.01, {ANN_DESIRED_DRAIN: "drain-new", ANN_STATE: "Working"}),
        (1.03, {ANN_CORDONED_BY: "me"}),
        (1.25, {ANN_LAST_APPLIED_DRAIN: "drain-new"}),
        (1.26, {ANN_CORDONED_BY: "me"}),  # an unrelated write: no step twice
        (3.36, {ANN_DESIRED_DRAIN: "uncordon-new"}),
        (3.40, {ANN_CORDONED_BY: None}),
        (3.45, {ANN_LAST_APPLIED_DRAIN: "uncordon-new"}),
        (3.50, {ANN_STATE: "Done"}),
    ]
    old = base
    for at, change in timeline:
        new = {k: v for k, v in (old | change).items() if v is not None}
        clock.observe("a", new, old, at)
        old = new
    clock.observe("b", ann("new", "Done"), ann("old", "Done"), 1.0)  # began, never ended
    gaps = dict(clock.step_gaps())
    assert list(gaps) == ["begin -> drain asked", "drain asked -> cordoned", "cordoned -> drain handed off",
                          "drain handed off -> uncordon asked", "uncordon asked -> uncordoned",
                          "uncordoned -> uncordon handed off", "uncordon handed off -> Done"]
    assert [round(v[0], 3) for v in gaps.values()] == [0.01, 0.02, 0.22, 2.11, 0.04, 0.05, 0.05]
    lines = cluster_view.describe_steps(clock)
    assert "cordoned -> drain handed off 220/220" in lines[3]


def test_a_drain_ask_is_noted_once_at_its_first_sight() -> None:
    from activities.cluster.models import ANN_DESIRED_DRAIN

    asks: dict[tuple[str, str], float] = {}
    cluster_view.note_drain_ask(asks, "w1", {ANN_DESIRED_DRAIN: "drain-rendered-b"}, None, 1.0)
    cluster_view.note_drain_ask(asks, "w1", {ANN_DESIRED_DRAIN: "drain-rendered-b"}, {ANN_DESIRED_DRAIN: ""}, 2.0)
    cluster_view.note_drain_ask(asks, "w1", {ANN_DESIRED_DRAIN: "drain-rendered-b"},
                                {ANN_DESIRED_DRAIN: "drain-rendered-b"}, 3.0)  # unchanged: no ask
    cluster_view.note_drain_ask(asks, "w1", {ANN_DESIRED_DRAIN: "uncordon-rendered-b"},
                                {ANN_DESIRED_DRAIN: "drain-rendered-b"}, 4.0)
    cluster_view.note_drain_ask(asks, "w2", {}, None, 5.0)
    assert asks == {("w1", "drain"): 1.0, ("w1", "uncordon"): 4.0}
