"""The node handshake meets a 4.16+ daemon that follows node disruption policies (issue 41), on
the time-skipping server with the fake cluster of wf_fakes.py: for a change that needs no drain
the daemon asks only for the uncordon (no drain-X, no reboot); for a Drain action it asks for the
drain and then the uncordon without rebooting. The rollout answers exactly what is asked, never
cordons or drains a node the daemon did not ask to, and waits for no reboot."""

from __future__ import annotations

from tests.machineconfig.test_machineconfig_rollout import rollout_input, start
from tests.support.wf_fakes import FakeCluster, new_config, rollout_worker

from activities.machineconfig.models import drain_value, uncordon_value
from workflows.kit.models import NodePhase


class PolicyDaemonCluster(FakeCluster):
    """``no_drain``: nodes whose daemon writes the files, reloads a unit and asks for
    ``uncordon-X`` at once (MCO ``update`` without ``performDrain``, then ``finishRebootlessUpdate``);
    ``drain_only``: nodes whose daemon asks for ``drain-X`` and, once handed off, asks for
    ``uncordon-X`` without rebooting (a Drain action). Every other node drains and reboots."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.no_drain: set[str] = set()
        self.drain_only: set[str] = set()
        self.went_not_ready: set[str] = set()

    def set_node(self, name: str, **fields) -> None:
        if fields.get("ready") is False:
            self.went_not_ready.add(name)
        super().set_node(name, **fields)

    def _daemon_react(self, name: str, *, on_write: bool = False) -> None:
        n = self.nodes[name]
        target = n.desired_config
        if target != n.current_config and n.state in ("Done", "Working") and n.last_applied_drain != uncordon_value(target):
            if name in self.no_drain and n.desired_drain != uncordon_value(target):
                self.set_node(name, state="Working", reason="", desired_drain=uncordon_value(target))
                self._track()
                return
            if name in self.drain_only and n.last_applied_drain == drain_value(target) \
                    and n.desired_drain == drain_value(target):
                self.set_node(name, state="Working", desired_drain=uncordon_value(target))
                self._track()
                return
        super()._daemon_react(name, on_write=on_write)


async def test_a_daemon_that_skips_the_drain_and_the_reboot_is_followed(time_skipping_env, wf_task_queue):
    fake = PolicyDaemonCluster({"worker": 3})
    fake.no_drain |= {"worker-0", "worker-2"}
    fake.drain_only.add("worker-1")
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input())
        result = await handle.result()
    assert result.outcome == "completed", result.message
    target = new_config("worker")
    assert all(fake.at_target(n) and not fake.nodes[n].unschedulable for n in fake.nodes)
    assert not fake.went_not_ready, "no node rebooted"
    for name in ("worker-0", "worker-2"):
        assert fake.hand_offs(name) == [uncordon_value(target)], name
        assert not [a for a in fake.called("drain_node") if a.node == name], name
        assert not [a for a in fake.called("cordon_node") if getattr(a, "node", None) == name], name
        assert result.nodes[name].phase == NodePhase.DONE and result.nodes[name].drain_seconds is None
    assert fake.hand_offs("worker-1") == [drain_value(target), uncordon_value(target)]
    assert [a.node for a in fake.called("drain_node")] == ["worker-1"]
