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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from temporalio import activity

from activities.cluster.base import GatewayActivities
from activities.cluster.drain import DrainActivities, EvictedPass
from activities.cluster.models import ANN_CURRENT_CONFIG, ANN_DESIRED_CONFIG, ANN_DESIRED_DRAIN, CordonResult, DaemonState, NodeInfo
from activities.cluster.nodeinfo import node_info, node_summary
from activities.cluster.nodes import cordon_for, list_node, write_annotations
from activities.cluster.nodewatch import Then, beating_to_hand_off, can_hand_off, hand_off
from activities.context import log
from activities.kube import objects
from activities.machineconfig.activities import MachineConfigActivities, wait_condition_holds
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
        with beating_to_hand_off():  # the PATCH, a LIST, a cordon and evictions on a slow API server: beats until the hand-off
            if input.set_desired_config:
                first = write_annotations(self, input.node, {ANN_DESIRED_CONFIG: input.target})
                looked = node_info(first)
                if not plainly_waiting(looked, input):
                    return DrainWhenAskedResult(node=looked, asked=False, first_look_only=True)
            wait = WaitForNodeInput(
                node=input.node, value=drain_v, timeout_seconds=input.timeout_seconds,
                any_of=[(ANN_DESIRED_DRAIN, uncordon_v), (ANN_CURRENT_CONFIG, input.target)],
            )
            if can_hand_off():
                ended = self._hand_off(input, wait, first)  # raises the SDK's complete-async signal when handed off
                if ended is not None:
                    return ended
        seen, obj = self._mco.wait_for_node_seen(wait, seen=first)
        node = seen.node
        if node.desired_drain != drain_v or node.last_applied_drain == drain_v:
            return DrainWhenAskedResult(
                node=node, asked=False, matched=seen.matched, degraded=seen.degraded, timed_out=seen.timed_out
            )
        return self._finish(self._evict(input, node, obj, degraded=seen.degraded))

    def _hand_off(
        self, input: DrainWhenAskedInput, wait: WaitForNodeInput, first: dict[str, Any] | None
    ) -> DrainWhenAskedResult | None:
        """:meth:`drain_when_asked` with no activity slot held (issue 40): from the node as
        ``first`` (the desiredConfig patch's answer) or one LIST shows it, the wait for the
        daemon's request goes to this cluster's shared node watcher
        (:func:`activities.cluster.nodewatch.hand_off`), whose step cordons and evicts as soon as
        the request shows and leaves the wait for the evicted pods to its wait threads
        (:class:`~activities.cluster.nodewatch.Then`); the watcher heartbeats the activity all
        along and completes it. A request already there at the first look is answered here
        (cordon, evictions) and only the pods' wait handed off. Returns the result when the first
        look ends the wait without a request, None when the worker is stopping (the caller then
        waits itself); raises the SDK's complete-async signal once handed off."""
        if first is not None and objects.meta(first).get("resourceVersion"):
            obj, rv = first, objects.meta(first).get("resourceVersion")
        else:
            obj, rv = list_node(self, input.node)
        last = [node_info(obj)]
        drain_v = drain_value(input.target)

        def step(o: dict[str, Any], info: NodeInfo) -> DrainWhenAskedResult | Then | None:
            last[0] = info
            matched = wait_condition_holds(wait, objects.annotations(o))
            if not (matched or info.degraded):
                return None
            if info.desired_drain != drain_v or info.last_applied_drain == drain_v:
                return DrainWhenAskedResult(node=info, asked=False, matched=matched, degraded=info.degraded)
            evicted = self._evict(input, info, o, degraded=info.degraded)  # the cordon: the daemon's answer, at once
            return Then(lambda cancelled: self._finish(evicted, cancelled))

        look = step(obj, last[0])
        if isinstance(look, DrainWhenAskedResult):
            return look
        hand_off(
            self.gateway, node=input.node, rv=rv, timeout_seconds=input.timeout_seconds,
            # Asked already (cordoned and evicted just now): the watcher only waits for the pods.
            step=step if look is None else (lambda _o, _i: look), first=None if look is None else obj,
            timed_out=lambda: DrainWhenAskedResult(node=last[0], asked=False, timed_out=True),
            details=lambda: node_summary(last[0]), what=f"drain_when_asked {input.node}",
        )
        return None

    def _evict(self, input: DrainWhenAskedInput, node: NodeInfo, obj: dict[str, Any], *, degraded: bool) -> _Draining:
        """The daemon asked for the drain of ``node`` (the Node ``obj``): cordon for
        ``input.owner`` (conditional on ``obj``: a node somebody else cordoned stays theirs), the
        MachineConfigNode's side where served, and the evictions of one drain pass."""
        started = time.monotonic()
        cordon = cordon_for(self, input.node, input.owner, known=obj)
        ann = {ANN_DESIRED_CONFIG: node.desired_config or "", ANN_CURRENT_CONFIG: node.current_config or ""}
        if cordon.cordoned_by_us and input.machine_config_nodes:
            report_controller_step(self.gateway, input.node, "cordoned", ann, log=log().warning)
        evicted = self._drains.evict_pass(input.drain.model_copy(update={"node": input.node}))
        return _Draining(input, node, degraded, started, cordon, evicted, ann)

    def _finish(self, d: _Draining, cancelled: Callable[[], bool] | None = None) -> DrainWhenAskedResult:
        """The rest of the pass of ``d``: wait for its evicted pods, the MachineConfigNode's
        side where served, the result. ``cancelled``: see :meth:`DrainActivities.finish_pass`."""
        input = d.input
        drain_v = drain_value(input.target)
        drain = self._drains.finish_pass(d.evicted, cancelled)
        if input.machine_config_nodes:
            report_controller_step(self.gateway, input.node, "drained" if drain.done else "draining", d.ann, drain=drain_v,
                                   log=log().warning)
        log().info(f"node {input.node}: drain asked ({drain_v}); cordoned and drained, done={drain.done}")
        return DrainWhenAskedResult(
            node=d.node, asked=True, matched=True, degraded=d.degraded, cordon=d.cordon, drain=drain,
            drain_seconds=time.monotonic() - d.started,
        )


@dataclass(frozen=True)
class _Draining:
    """A drain pass under way: the call, the node as the request showed it, its cordon and
    evictions, and the annotations the MachineConfigNode's report quotes."""

    input: DrainWhenAskedInput
    node: NodeInfo
    degraded: bool
    started: float
    cordon: CordonResult
    evicted: EvictedPass
    ann: dict[str, str]


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
