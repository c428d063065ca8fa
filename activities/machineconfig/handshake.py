"""The drain half of the MCO drain controller in one activity (issue 16): wait for the daemon's
drain request, cordon, one drain pass.

The machine-config daemon asks for a drain with ``desiredDrain=drain-<config>``
(``pkg/daemon/drain.go``); the MCO drain controller (``pkg/controller/drain/drain_controller.go``)
then cordons and drains the node. A node run used to wait for the request in one activity and
cordon and drain in the next workflow task; :meth:`HandshakeActivities.drain_when_asked` does it
without that round trip. The workflow still decides everything else: a blocked pass goes on in
the kit's drain loop with its decision gate, and the hand-off (``lastAppliedDrain``) is its call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from temporalio import activity

from activities.cluster.base import GatewayActivities
from activities.cluster.drain import DrainActivities
from activities.cluster.models import ANN_CURRENT_CONFIG, ANN_DESIRED_CONFIG, ANN_DESIRED_DRAIN, DaemonState, NodeInfo
from activities.cluster.nodeinfo import node_info
from activities.cluster.nodes import cordon_for, write_annotations
from activities.context import log
from activities.machineconfig.activities import MachineConfigActivities
from activities.machineconfig.mcnstatus import report_controller_step
from activities.machineconfig.models import (
    DrainWhenAskedInput,
    DrainWhenAskedResult,
    WaitForNodeInput,
    drain_value,
    uncordon_value,
)

if TYPE_CHECKING:
    from activities.kube.gateway import KubeGateway


class HandshakeActivities(GatewayActivities):
    """Handshake steps that save a node run its workflow tasks, bound to one cluster."""

    ACTIVITIES = ("drain_when_asked",)

    def __init__(self, gateway_factory: Callable[[], KubeGateway]) -> None:
        super().__init__(gateway_factory)
        shared = lambda: self.gateway  # noqa: E731 - one gateway (and connection pool) for both
        self._mco = MachineConfigActivities(shared)
        self._drains = DrainActivities(shared)

    @activity.defn(name="drain_when_asked", no_thread_cancel_exception=True)
    def drain_when_asked(self, input: DrainWhenAskedInput) -> DrainWhenAskedResult:
        """Watch the Node (as ``wait_for_node``, up to ``timeout_seconds``) until the daemon asks
        for the drain of ``target``, it asks for the uncordon, the node is at ``target`` or the
        daemon is degraded. On the drain request (lastAppliedDrain not yet answered): cordon for
        ``owner`` (as ``cordon_node``, conditional on the node as the watch showed it: a node
        somebody else cordoned stays theirs) and make one drain
        pass (``drain_node`` with ``input.drain``). Every step is idempotent, so a retried attempt
        re-reads and does only what is missing. With ``set_desired_config`` it first sets
        ``desiredConfig=<target>`` and watches from the answer's resourceVersion, or returns
        ``first_look_only`` when the node does not plainly wait (:func:`plainly_waiting`).
        Raises non-retryable ``NodeNotFound``; API errors propagate for the activity's retry
        policy.
        """
        drain_v, uncordon_v = drain_value(input.target), uncordon_value(input.target)
        first: dict[str, Any] | None = None
        if input.set_desired_config:
            first = write_annotations(self, input.node, {ANN_DESIRED_CONFIG: input.target})
            looked = node_info(first)
            if not plainly_waiting(looked, input):
                return DrainWhenAskedResult(node=looked, asked=False, first_look_only=True)
        wait = WaitForNodeInput(
            node=input.node, value=drain_v, timeout_seconds=input.timeout_seconds,
            any_of=[(ANN_DESIRED_DRAIN, uncordon_v), (ANN_CURRENT_CONFIG, input.target)],
        )
        seen, obj = self._mco.wait_for_node_seen(wait, seen=first)
        node = seen.node
        if node.desired_drain != drain_v or node.last_applied_drain == drain_v:
            return DrainWhenAskedResult(
                node=node, asked=False, matched=seen.matched, degraded=seen.degraded, timed_out=seen.timed_out
            )
        started = time.monotonic()
        cordon = cordon_for(self, input.node, input.owner, known=obj)  # conditional on the node as seen
        ann = {ANN_DESIRED_CONFIG: node.desired_config or "", ANN_CURRENT_CONFIG: node.current_config or ""}
        if cordon.cordoned_by_us and input.machine_config_nodes:
            report_controller_step(self.gateway, input.node, "cordoned", ann, log=log().warning)
        drain = self._drains.drain_node(input.drain.model_copy(update={"node": input.node}))
        if input.machine_config_nodes:
            report_controller_step(self.gateway, input.node, "drained" if drain.done else "draining", ann, drain=drain_v,
                                   log=log().warning)
        log().info(f"node {input.node}: drain asked ({drain_v}); cordoned and drained, done={drain.done}")
        return DrainWhenAskedResult(
            node=node, asked=True, matched=True, degraded=seen.degraded, cordon=cordon, drain=drain,
            drain_seconds=time.monotonic() - started,
        )


def plainly_waiting(node: NodeInfo, input: DrainWhenAskedInput) -> bool:
    """True when ``node``, just asked for ``input.target``, needs nothing but the daemon's next
    move: not at the target (currentConfig with state Done), not cordoned by ``input.owner``
    (an earlier attempt's cordon), not Degraded/Unreconcilable, and with neither a request nor
    an answer of the daemon for the target (``desiredDrain``/``lastAppliedDrain`` other than
    ``drain-``/``uncordon-<target>``). Any other node goes back to the workflow, which decides
    from what it sees (:func:`workflows.machineconfig.node.handshake`)."""
    ours = (drain_value(input.target), uncordon_value(input.target))
    at_target = node.current_config == input.target and node.state == DaemonState.DONE
    return (
        not at_target
        and node.cordoned_by != input.owner
        and not node.degraded
        and node.desired_drain not in ours
        and node.last_applied_drain not in ours
    )


def make_handshake_activities(gateway: KubeGateway | Callable[[], KubeGateway]) -> list[Callable[..., Any]]:
    """The handshake activities for a Worker, bound to ``gateway`` (or a factory)."""
    factory = (lambda: gateway) if hasattr(gateway, "get_node") else gateway
    return HandshakeActivities(factory).activities()  # type: ignore[arg-type]
