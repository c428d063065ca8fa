"""The node handshake follows the daemon (issue 18, item 4), on the time-skipping server with the
fake cluster of wf_fakes.py: a drain the daemon asks for again while we wait for Done is drained
again, a blocked one opens the node's decision gate, and a retry re-drives from the annotations."""

from __future__ import annotations

from tests.machineconfig.test_machineconfig_rollout import phase_of, rollout_input, start, wait_status
from tests.support.wf_fakes import FakeCluster, new_config, r2_block_report, rollout_worker

from activities.machineconfig.models import drain_value, uncordon_value
from workflows import MachineConfigRolloutWorkflow
from workflows.kit.models import DecideInput, DrainDecision, GateState, NodeControlInput, NodePhase


class RedrainCluster(FakeCluster):
    """A daemon that, at the uncordon hand-off of a node in ``redrain``, asks for drain-X again
    instead of going Done (once per entry); with ``block_redrain`` the second drain is refused by
    a PodDisruptionBudget. ``degrade_after_uncordon`` (node -> reason): at the uncordon hand-off
    the daemon goes Degraded instead, and (like the earlier simulator) asks for drain-X again on
    its next reaction once the entry is removed."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.redrain: set[str] = set()
        self.block_redrain: set[str] = set()
        self.degrade_after_uncordon: dict[str, str] = {}

    def _daemon_react(self, name: str, *, on_write: bool = False) -> None:
        n = self.nodes[name]
        target = n.desired_config
        handed_back = n.desired_config != n.current_config and n.last_applied_drain == uncordon_value(target)
        if handed_back and n.desired_drain == uncordon_value(target):
            if name in self.degrade_after_uncordon:
                self.set_node(name, state="Degraded", reason=self.degrade_after_uncordon[name])
                self._track()
                return
            if name in self.redrain:
                self.redrain.discard(name)
                self.set_node(name, state="Working", desired_drain=drain_value(target))
                if name in self.block_redrain:
                    self.drain_blocked[name] = r2_block_report(name)
                self._track()
                return
        super()._daemon_react(name, on_write=on_write)


def drains_of(fake: FakeCluster, node: str) -> int:
    return len([a for a in fake.called("drain_node") if a.node == node])


async def test_drain_asked_again_while_waiting_for_done_is_drained_again(time_skipping_env, wf_task_queue):
    fake = RedrainCluster({"worker": 2})
    fake.redrain.add("worker-0")
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input())
        result = await handle.result()
        status = await handle.query(MachineConfigRolloutWorkflow.status)
    assert result.outcome == "completed"
    assert result.nodes["worker-0"].phase == NodePhase.DONE
    assert all(fake.at_target(n) for n in fake.nodes)
    assert drains_of(fake, "worker-0") == 2 and drains_of(fake, "worker-1") == 1
    target = new_config("worker")
    assert fake.hand_offs("worker-0") == [drain_value(target), uncordon_value(target), drain_value(target), uncordon_value(target)]
    assert not fake.nodes["worker-0"].unschedulable
    assert any("daemon asked for a drain again" in w for w in status.warnings)


async def test_blocked_repeated_drain_opens_the_gate_and_skip_leaves_it_cordoned(time_skipping_env, wf_task_queue):
    fake = RedrainCluster({"worker": 1})
    fake.redrain.add("worker-0")
    fake.block_redrain.add("worker-0")
    # No --decide-after: the repeated drain asks at the deadline warning point (0.5 * 20 s).
    inp = rollout_input(daemon={"drain_deadline_seconds": 20, "warn_fraction": 0.5})
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, inp)
        await wait_status(handle, lambda s: phase_of(s, "worker-0") == NodePhase.BLOCKED)
        await time_skipping_env.sleep(15)
        s = await wait_status(
            handle, lambda s: s.nodes["worker-0"].decision_gate is not None
            and s.nodes["worker-0"].decision_gate.state == GateState.WAITING,
        )
        assert s.nodes["worker-0"].decision_gate.id == "drain/worker-0"
        await handle.execute_update(
            MachineConfigRolloutWorkflow.decide,
            DecideInput(node="worker-0", decision=DrainDecision.SKIP, identity="bob", comment="look later"),
        )
        result = await handle.result()
    n = result.nodes["worker-0"]
    assert n.phase == NodePhase.SKIPPED
    assert "repeated drain" in (n.reason or "") and "left cordoned" in (n.reason or "")
    assert fake.nodes["worker-0"].unschedulable  # nothing to roll back after the reboot: left as the daemon needs it
    assert drains_of(fake, "worker-0") >= 2


async def test_retry_redrives_a_node_degraded_with_a_drain_request_pending(time_skipping_env, wf_task_queue):
    """Issue 18 item 4: the daemon degraded after the uncordon hand-off and then asks for drain-X
    again (desiredDrain=drain-X, lastAppliedDrain=uncordon-X); retry-node drains and completes."""
    fake = RedrainCluster({"worker": 1})
    fake.degrade_after_uncordon["worker-0"] = "failed to drain node: worker-0 after 1 hour"
    inp = rollout_input(daemon={"uncordon_deadline_seconds": 20})  # grace 3 s after our hand-off
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, inp)
        s = await wait_status(handle, lambda s: phase_of(s, "worker-0") == NodePhase.DEGRADED)
        assert "failed to drain node" in (s.nodes["worker-0"].reason or "")
        del fake.degrade_after_uncordon["worker-0"]
        await handle.execute_update(MachineConfigRolloutWorkflow.retry_node, NodeControlInput(node="worker-0", identity="bob"))
        result = await handle.result()
        child = time_skipping_env.client.get_workflow_handle(f"{handle.id}/node/worker-0/2")
        child_history = await child.fetch_history()
    assert result.outcome == "completed"
    assert result.nodes["worker-0"].phase == NodePhase.DONE and result.nodes["worker-0"].attempts == 2
    assert fake.at_target("worker-0") and not fake.nodes["worker-0"].unschedulable
    assert drains_of(fake, "worker-0") == 2
    # The retry recorded no patch marker: the node run has one handshake.
    assert not [e for e in child_history.events
                if e.HasField("marker_recorded_event_attributes") and e.marker_recorded_event_attributes.marker_name == "core_patch"]
