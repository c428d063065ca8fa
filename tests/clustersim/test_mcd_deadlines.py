"""The simulated machine-config-daemon after a missed hand-off deadline, as MCO pkg/daemon does it
(see clustersim/agents/mcd.py): Degraded, retried on the work queue's backoff, never a new drain
request after the reboot, Done as soon as the controller answers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from clustersim.agents.logic import ANN_CURRENT_CONFIG, ANN_DESIRED_DRAIN, ANN_REASON, ANN_STATE
from clustersim.agents.mcd import mcd_requeue_delay
from clustersim.scenario import load_scenario
from tests.clustersim.test_agents_mcd import Cluster, _target


@pytest.fixture
async def r2() -> AsyncIterator[Cluster]:
    c = Cluster(load_scenario("r2-pdb-blocked"))
    await c.agents.start()
    yield c
    await c.agents.stop()


def test_requeue_delay_follows_the_daemon_rate_limiter() -> None:
    assert [mcd_requeue_delay(n) for n in range(8)] == [5, 5, 5, 8, 16, 32, 60, 60]
    assert mcd_requeue_delay(100) == 60
    with pytest.raises(ValueError, match="failures must be >= 0"):
        mcd_requeue_delay(-1)


async def _rebooted(c: Cluster, node: str) -> str:
    new = _target(c, "worker")
    c.annotate(node, desiredConfig=new)
    await c.until(lambda: c.ann(node)[ANN_DESIRED_DRAIN] == f"drain-{new}")
    c.annotate(node, lastAppliedDrain=f"drain-{new}")
    await c.until(lambda: c.ann(node)[ANN_DESIRED_DRAIN] == f"uncordon-{new}")
    return new


async def test_missed_uncordon_deadline_degrades_then_completes_on_the_hand_off(r2: Cluster) -> None:
    c, node = r2, "okd-worker-01"
    old = c.ann(node)[ANN_CURRENT_CONFIG]
    new = await _rebooted(c, node)
    await c.until(lambda: c.ann(node)[ANN_STATE] == "Degraded")
    assert c.ann(node)[ANN_REASON].startswith(f"failed to uncordon node: {node} after 10 minutes")
    # Several uncordon deadlines later the daemon still asks for the uncordon, never a new drain.
    seen: set[str] = set()
    for _ in range(30):
        seen.add(c.ann(node)[ANN_DESIRED_DRAIN])
        await asyncio.sleep(c.clock.real(100))
    assert seen == {f"uncordon-{new}"}
    assert c.ann(node)[ANN_STATE] == "Degraded" and c.ann(node)[ANN_CURRENT_CONFIG] == old
    c.annotate(node, lastAppliedDrain=f"uncordon-{new}")
    await c.until(lambda: c.ann(node)[ANN_STATE] == "Done")
    assert c.ann(node)[ANN_CURRENT_CONFIG] == new and c.ann(node)[ANN_REASON] == ""
    assert c.ann(node)[ANN_DESIRED_DRAIN] == f"uncordon-{new}"


async def test_degrade_after_reboot_is_retried_once_the_fault_clears(r2: Cluster) -> None:
    c, node = r2, "okd-worker-01"
    new = _target(c, "worker")
    c.annotate(node, desiredConfig=new)
    await c.until(lambda: c.ann(node)[ANN_DESIRED_DRAIN] == f"drain-{new}")
    c.agents.inject_node_fault(node, "degrade", "unexpected on-disk state validating against it")
    # Injected after the drain request: the fault stands for the first-run check after the reboot.
    c.annotate(node, lastAppliedDrain=f"drain-{new}")
    await c.until(lambda: c.ann(node)[ANN_STATE] == "Degraded")
    assert c.ann(node)[ANN_REASON] == "unexpected on-disk state validating against it"
    assert c.ann(node)[ANN_DESIRED_DRAIN] == f"drain-{new}"  # no uncordon asked while the check fails
    c.agents.clear_node_fault(node)
    await c.until(lambda: c.ann(node)[ANN_DESIRED_DRAIN] == f"uncordon-{new}")
    c.annotate(node, lastAppliedDrain=f"uncordon-{new}")
    await c.until(lambda: c.ann(node)[ANN_STATE] == "Done")
    assert c.ann(node)[ANN_CURRENT_CONFIG] == new
