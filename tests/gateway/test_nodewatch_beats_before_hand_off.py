"""An activity's API calls before its hand-off to the shared node watch heartbeat (issue 40).

At 2,000 nodes on a loaded simulator, ``drain_when_asked`` attempts reached their hand-off 12.6 s
after their start (the desiredConfig PATCH, a LIST, a cordon and evictions answered late), past
the 10 s heartbeat timeout with no beat sent: the server retried them, and the hub's first beat
answered NOT_FOUND. :func:`beating_to_hand_off` beats from a helper thread while those calls run,
when a worker wired a completer (the waits that hand off); unwired, the activity watches and
beats by itself and nothing is added.
"""

from __future__ import annotations

import threading
from typing import Any

from temporalio.testing import ActivityEnvironment

from activities.cluster.completion import unwire, wire
from activities.cluster.nodewatch import beating_to_hand_off
from activities.context import HEARTBEAT_INTERVAL_SECONDS


def run_blocked_call(wired: bool) -> tuple[int, int]:
    """In an activity, a call that blocks until the first heartbeat (or 3 intervals) inside
    :func:`beating_to_hand_off`, then two intervals outside it: (beats inside, beats after)."""
    beats: list[Any] = []
    first = threading.Event()
    env = ActivityEnvironment()

    def on_heartbeat(*details: Any) -> None:
        beats.append(details)
        first.set()

    env.on_heartbeat = on_heartbeat

    def activity_body() -> tuple[int, int]:
        if wired:
            wire(None, None)  # type: ignore[arg-type]  # only "a worker wired one" is read here
        try:
            with beating_to_hand_off():
                first.wait(HEARTBEAT_INTERVAL_SECONDS * 3)  # a PATCH the API server answers late
            inside = len(beats)
            threading.Event().wait(HEARTBEAT_INTERVAL_SECONDS * 2)  # after the block: no beat from it
            return inside, len(beats) - inside
        finally:
            unwire()

    return env.run(activity_body)


def test_the_calls_before_a_hand_off_heartbeat() -> None:
    inside, after = run_blocked_call(wired=True)
    assert inside >= 1
    assert after == 0


def test_an_activity_that_cannot_hand_off_gets_no_extra_beats() -> None:
    assert run_blocked_call(wired=False) == (0, 0)
