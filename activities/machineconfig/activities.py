"""Activities of the MachineConfig rollout: lockkeeper standing in for the
machine-config-controller's pool logic (preflight, the daemon handshake watch, pool status,
the network-type switch of R1).

Synchronous (the gateway blocks), read first and write only what differs. Errors: conditions
no retry can fix are non-retryable ``ApplicationError(type=...)`` (``UnknownPool``,
``MissingConfig``, ``ConfigOfOtherPool``, ``ConfigTooOld``, ``NoNodes``, ``NodeNotFound``,
``PoolsNotSettled``, ``NetworkConfigNotFound``); API errors (:mod:`activities.kube.errors`)
propagate and are retried per the caller's policy, except in the read-only preflight, which
reports them as ``Api*`` failure types (:meth:`GatewayActivities.planning_errors`). The generic node, drain and pod activities
the rollout also calls are in :mod:`activities.cluster`.

Sources: MCO ``pkg/controller/node/node_controller.go`` (pools, rendered configs) and
``pkg/daemon/drain.go`` (the desiredDrain/lastAppliedDrain handshake).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from temporalio import activity

from activities.cluster.base import GatewayActivities
from activities.cluster.models import (
    ANN_CURRENT_CONFIG,
    ANN_DESIRED_CONFIG,
    ANN_LAST_APPLIED_DRAIN,
    ANN_STATE,
    DaemonState,
    NodeInfo,
)
from activities.cluster.nodes import list_node, set_annotations, uncordon_seen
from activities.cluster.nodewatch import beating_to_hand_off, can_hand_off, hand_off
from activities.cluster.nodeinfo import node_info, node_summary
from activities.cluster.watch import watch_window
from activities.context import HEARTBEAT_INTERVAL_SECONDS, beating, check_cancelled, fail, heartbeat, log
from activities.kube import objects
from activities.kube.errors import Forbidden, KubeError, NotFound
from activities.machineconfig.mcdiff import config_change
from activities.machineconfig.mcnstatus import report_controller_step
from activities.machineconfig.models import (
    ReportMachineConfigNodeInput,
    DisruptionFacts,
    HealthCheckFact,
    PoolInfo,
    PoolNodesInput,
    PoolNodesPage,
    PoolStatus,
    PoolsStatusInput,
    PoolsStatusResult,
    PreflightInput,
    PreflightResult,
    SetNetworkTypeInput,
    SetNetworkTypeResult,
    WaitForNodeDoneInput,
    WaitForNodeDoneResult,
    WaitForNodeInput,
    WaitForNodeResult,
    drain_value,
    node_page,
    uncordon_value,
)

if TYPE_CHECKING:
    from activities.cluster.models import UncordonResult
    from activities.kube.gateway import KubeGateway

#: A wait's answer (:meth:`MachineConfigActivities._watch_until`).
R = TypeVar("R")


def pool_status(mcp: dict[str, Any]) -> PoolStatus:
    """A MachineConfigPool -> :class:`PoolStatus` (conditions Updated/Updating/Degraded)."""
    status = mcp.get("status") or {}
    return PoolStatus(
        name=objects.meta(mcp).get("name", ""),
        updated=objects.condition(mcp, "Updated") == "True",
        updating=objects.condition(mcp, "Updating") == "True",
        degraded=objects.condition(mcp, "Degraded") == "True",
        machine_count=int(status.get("machineCount") or 0),
        updated_machine_count=int(status.get("updatedMachineCount") or 0),
        ready_machine_count=int(status.get("readyMachineCount") or 0),
        degraded_machine_count=int(status.get("degradedMachineCount") or 0),
    )


def config_pool(mc: dict[str, Any], known_pools: Iterable[str]) -> str | None:
    """The pool a rendered MachineConfig belongs to: its MachineConfigPool ownerReference, else
    the longest pool name ``P`` with ``rendered-P-`` as prefix. None if neither says."""
    for ref in objects.meta(mc).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("kind") == "MachineConfigPool" and ref.get("name"):
            return str(ref["name"])
    name = objects.meta(mc).get("name", "")
    matches = [p for p in known_pools if name.startswith(f"rendered-{p}-")]
    return max(matches, key=len) if matches else None


def newest_rendered_config(pool: str, machineconfigs: Iterable[dict[str, Any]], known_pools: Iterable[str]) -> dict[str, Any] | None:
    """The newest (creationTimestamp, then name) ``rendered-<pool>-*`` MachineConfig of ``pool``."""
    known = list(known_pools)
    mine = [
        mc for mc in machineconfigs if objects.meta(mc).get("name", "").startswith("rendered-") and config_pool(mc, known) == pool
    ]
    if not mine:
        return None
    return max(mine, key=lambda mc: (objects.meta(mc).get("creationTimestamp") or "", objects.meta(mc).get("name", "")))


def _pool_info(mcp: dict[str, Any], target: dict[str, Any], nodes: list[dict[str, Any]]) -> PoolInfo:
    name = objects.meta(mcp).get("name", "")
    spec = mcp.get("spec") or {}
    return PoolInfo(
        name=name,
        target_config=objects.meta(target).get("name", ""),
        target_created=objects.parse_time(objects.meta(target).get("creationTimestamp")),
        spec_max_unavailable=spec.get("maxUnavailable"),
        node_selector=dict((spec.get("nodeSelector") or {}).get("matchLabels") or {}),
        nodes=[node_info(n, pool=name) for n in nodes],
        conditions={
            str(c.get("type")): str(c.get("status"))
            for c in (mcp.get("status") or {}).get("conditions") or []
            if isinstance(c, dict)
        },
    )


def _disruption_facts(policies: tuple[dict[str, Any], bool], info: PoolInfo, target: dict[str, Any],
                      by_name: dict[Any, dict[str, Any]]) -> DisruptionFacts:
    """The pool's :class:`DisruptionFacts`: one :class:`ConfigChange` per distinct currentConfig
    among its nodes not at the target (nodes without a currentConfig are left out)."""
    groups: dict[str, list[str]] = {}
    for n in info.nodes:
        if n.current_config and n.current_config != info.target_config:
            groups.setdefault(n.current_config, []).append(n.name)
    changes = [config_change(by_name.get(cur), target, cur, sorted(names)) for cur, names in sorted(groups.items())]
    return DisruptionFacts(cluster_policies=policies[0], policies_current=policies[1], changes=changes)


def _irreconcilable(info: PoolInfo, mcns: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """The pool's nodes whose MachineConfigNode reports ``status.irreconcilableChanges``, with
    their field paths."""
    out: dict[str, list[str]] = {}
    for n in info.nodes:
        changes = ((mcns.get(n.name) or {}).get("status") or {}).get("irreconcilableChanges") or []
        paths = [str(c.get("fieldPath") or "?") for c in changes if isinstance(c, dict)]
        if paths:
            out[n.name] = paths
    return out


#: machine-api-operator: a MachineHealthCheck with this annotation does not remediate.
MHC_PAUSED = "cluster.x-k8s.io/paused"


def _covering(info: PoolInfo, checks: list[tuple[dict[str, Any], dict[str, dict[str, str]]]]) -> list[HealthCheckFact]:
    """The checks whose selector matches the Machine of some of the pool's nodes (an empty
    selector matches every Machine of its namespace, as the machine-api-operator reads it)."""
    out = []
    for mhc, machine_labels in checks:
        spec = mhc.get("spec") or {}
        selector = spec.get("selector") if spec.get("selector") is not None else {}
        nodes = [n.name for n in info.nodes if n.name in machine_labels and objects.selector_matches(selector, machine_labels[n.name])]
        if not nodes:
            continue
        conds = [f"{c.get('type')}={c.get('status')} for {c.get('timeout')}" for c in spec.get("unhealthyConditions") or []
                 if isinstance(c, dict)]
        mu = spec.get("maxUnhealthy")
        out.append(HealthCheckFact(
            namespace=objects.meta(mhc).get("namespace", ""), name=objects.meta(mhc).get("name", ""),
            paused=MHC_PAUSED in objects.annotations(mhc), nodes=nodes, unhealthy_conditions=conds,
            max_unhealthy=None if mu is None else str(mu),
        ))
    return out


class MachineConfigActivities(GatewayActivities):
    """The MachineConfig rollout's own activities, bound to one cluster (see
    :class:`~activities.cluster.base.GatewayActivities`)."""

    ACTIVITIES = (
        "preflight_machineconfig_rollout", "list_pool_nodes", "wait_for_node", "wait_for_node_done", "get_pools_status",
        "set_network_type", "report_machine_config_node",
    )

    @activity.defn(name="report_machine_config_node", no_thread_cancel_exception=True)
    def report_machine_config_node(self, input: ReportMachineConfigNodeInput) -> bool:
        """Write the controller's side of ``input.node``'s MachineConfigNode for ``input.step``
        (:func:`activities.machineconfig.mcnstatus.report_controller_step`: one list, then a
        status patch conditional on the resourceVersion read; nothing when it already says so).
        Best effort: True when written; never raises for the API (logged), so the handshake it
        follows never fails on it."""
        try:
            ann = objects.annotations(self.gateway.get_node(input.node))
        except KubeError as exc:
            log().warning(f"MachineConfigNode {input.node}: node not read ({exc}); {input.step} not reported")
            return False
        return report_controller_step(self.gateway, input.node, input.step,  # type: ignore[arg-type]
                                      {ANN_DESIRED_CONFIG: ann.get(ANN_DESIRED_CONFIG, ""),
                                       ANN_CURRENT_CONFIG: ann.get(ANN_CURRENT_CONFIG, "")},
                                      drain=input.drain, log=log().warning)

    @activity.defn(name="preflight_machineconfig_rollout", no_thread_cancel_exception=True)
    def preflight_machineconfig_rollout(self, input: PreflightInput) -> PreflightResult:
        """Resolve pools, target rendered configs and nodes; change nothing (GETs and LISTs only).

        Raises non-retryable ApplicationErrors: ``UnknownPool`` (lists the known pools),
        ``MissingConfig`` (explicit config absent, or a pool without any rendered config),
        ``ConfigOfOtherPool`` (explicit config owned by / named for another pool),
        ``ConfigTooOld`` (target created before ``not_before``), ``NoNodes`` (an explicitly
        requested pool whose nodeSelector matches no node). API errors fail fast: non-retryable
        ``ApiUnreachable`` (connection refused, DNS), ``ApiUnauthorized`` (401), ``ApiForbidden``
        (403), ``ApiError``; retryable ``ApiUnavailable`` (5xx, 429, timeouts) for the caller's
        bounded planning retry policy. Messages name the API server and the API's message.
        """
        with self.planning_errors(), beating("preflight"):
            return self._preflight(input)

    def _preflight(self, input: PreflightInput) -> PreflightResult:
        gw = self.gateway
        try:
            mcps = {(objects.meta(p).get("name") or ""): p for p in gw.list_machineconfigpools()}
        except NotFound:
            raise fail("UnknownPool", "this cluster serves no MachineConfigPools (not OpenShift?)") from None
        known = sorted(mcps)
        requested = list(dict.fromkeys(input.pools))
        unknown = [p for p in [*requested, *input.target_configs] if p not in mcps]
        if unknown:
            raise fail(
                "UnknownPool",
                f"unknown MachineConfigPool(s): {', '.join(dict.fromkeys(unknown))}; known pools: {', '.join(known) or 'none'}",
            )
        machineconfigs = gw.list_machineconfigs()
        by_name = {objects.meta(mc).get("name"): mc for mc in machineconfigs}
        policies = self._cluster_policies()
        mcns = self._machine_config_nodes()
        checks = self._health_checks()
        candidates = requested or known
        result: list[PoolInfo] = []
        for pool in candidates:
            explicit = input.target_configs.get(pool)
            if explicit:
                target = by_name.get(explicit)
                if target is None:
                    raise fail("MissingConfig", f"MachineConfig {explicit} (target of pool {pool}) does not exist")
                owner = config_pool(target, known)
                if owner != pool:
                    whose = f"pool {owner}" if owner else "no pool (not a rendered-<pool>- config)"
                    raise fail("ConfigOfOtherPool", f"MachineConfig {explicit} belongs to {whose}, not to pool {pool}")
            else:
                target = newest_rendered_config(pool, machineconfigs, known)
                if target is None:
                    raise fail("MissingConfig", f"pool {pool} has no rendered-{pool}-* MachineConfig")
            created = objects.parse_time(objects.meta(target).get("creationTimestamp"))
            if input.not_before is not None and (created is None or created < input.not_before):
                raise fail(
                    "ConfigTooOld",
                    f"target {objects.meta(target).get('name')} of pool {pool} was created at "
                    f"{objects.meta(target).get('creationTimestamp')}, before not_before {input.not_before.isoformat()}",
                )
            nodes = self._selected_nodes(mcps[pool])
            info = _pool_info(mcps[pool], target, nodes)
            if policies is not None:
                info.disruption = _disruption_facts(policies, info, target, by_name)
            if mcns:
                info.irreconcilable = _irreconcilable(info, mcns)
            info.health_checks = _covering(info, checks)
            if not nodes:
                if requested:
                    selector = objects.label_selector_string((mcps[pool].get("spec") or {}).get("nodeSelector"))
                    raise fail("NoNodes", f"pool {pool}'s nodeSelector ({selector or 'nil'}) matches no node")
                continue
            if not requested and all(
                n.current_config == info.target_config and n.desired_config in (None, info.target_config) for n in info.nodes
            ):
                continue
            if input.page_size is not None and len(info.nodes) > input.page_size:
                first = node_page(info.nodes, after="", limit=input.page_size)
                info = info.model_copy(update={"nodes": first.nodes, "more_after": first.more_after, "node_count": len(info.nodes)})
            result.append(info)
        network_type: str | None = None
        try:
            net = gw.get_network_config()
            network_type = (net.get("status") or {}).get("networkType") or (net.get("spec") or {}).get("networkType")
        except NotFound:
            network_type = None
        log().info(
            "preflight: "
            + (", ".join(f"pool {p.name} -> {p.target_config} ({len(p.nodes)} nodes)" for p in result) or "nothing to roll"),
        )
        return PreflightResult(pools=result, network_type=network_type,
                               machine_config_nodes=mcns is not None)

    def _cluster_policies(self) -> tuple[dict[str, Any], bool] | None:
        """``MachineConfiguration/cluster``'s ``status.nodeDisruptionPolicyStatus.clusterPolicies``
        and whether its status is current (observedGeneration == generation); None where the API
        has no such object (before OpenShift 4.16)."""
        try:
            mcop = self.gateway.get_machine_configuration()
        except NotFound:
            return None
        except Forbidden as exc:  # an older ClusterRole: plan as without policies, and say why
            log().warning(f"preflight: cannot read MachineConfiguration/cluster ({exc}); assuming drain and reboot")
            return None
        status = mcop.get("status") or {}
        policies = dict((status.get("nodeDisruptionPolicyStatus") or {}).get("clusterPolicies") or {})
        return policies, status.get("observedGeneration") == objects.meta(mcop).get("generation")

    def _health_checks(self) -> list[tuple[dict[str, Any], dict[str, dict[str, str]]]]:
        """Each MachineHealthCheck with the labels of the Machines of its namespace by node name
        (``status.nodeRef.name``); empty where the Machine API is not served or not readable."""
        try:
            mhcs = self.gateway.list_machine_health_checks()
            machines = self.gateway.list_machines() if mhcs else []
        except (NotFound, Forbidden):
            return []
        by_ns: dict[str, dict[str, dict[str, str]]] = {}
        for m in machines:
            node = ((m.get("status") or {}).get("nodeRef") or {}).get("name")
            if node:
                by_ns.setdefault(objects.meta(m).get("namespace", ""), {})[str(node)] = objects.labels(m)
        return [(h, by_ns.get(objects.meta(h).get("namespace", ""), {})) for h in mhcs]

    def _machine_config_nodes(self) -> dict[str, dict[str, Any]] | None:
        """Every MachineConfigNode by name, None where the API serves none (before OpenShift
        4.16, or a ClusterRole without them)."""
        try:
            return {objects.meta(m).get("name", ""): m for m in self.gateway.list_machine_config_nodes()}
        except (NotFound, Forbidden):
            return None

    @activity.defn(name="list_pool_nodes", no_thread_cancel_exception=True)
    def list_pool_nodes(self, input: PoolNodesInput) -> PoolNodesPage:
        """The next page of a pool's nodes after a paged preflight: the nodes its nodeSelector
        selects now, by name, after ``input.after``, at most ``input.limit``. Read-only.

        Keyed by name rather than by offset, so a node added or deleted between pages moves no
        other node across a page boundary. Raises non-retryable ``UnknownPool`` when the pool is
        gone, and the planning ``Api*`` failures as the preflight does."""
        with self.planning_errors(), beating("pool nodes"):
            mcps = {(objects.meta(p).get("name") or ""): p for p in self.gateway.list_machineconfigpools()}
            if input.pool not in mcps:
                raise fail("UnknownPool", f"MachineConfigPool {input.pool} is gone (it was there at preflight)")
            nodes = [node_info(n, pool=input.pool) for n in self._selected_nodes(mcps[input.pool])]
            return node_page(nodes, after=input.after, limit=input.limit)

    def _selected_nodes(self, mcp: dict[str, Any]) -> list[dict[str, Any]]:
        """The Nodes a MachineConfigPool's nodeSelector selects (none for a nil selector)."""
        selector = objects.label_selector_string((mcp.get("spec") or {}).get("nodeSelector"))
        return [] if selector is None else self.gateway.list_nodes(label_selector=selector or None)

    @activity.defn(name="wait_for_node", no_thread_cancel_exception=True)
    def wait_for_node(self, input: WaitForNodeInput) -> WaitForNodeResult:
        """Watch the Node until the condition holds, the daemon degrades, or ``timeout_seconds``.

        Condition: ``annotations[annotation] == value`` (``kind='annotation'``) or
        ``currentConfig == value and state == Done`` (``kind='config_done'``), or any
        ``any_of`` pair. ``degraded`` is set whenever the daemon's state is Degraded or
        Unreconcilable (callers check it first: it may coincide with ``matched``).

        One WATCH without resourceVersion (``fieldSelector=metadata.name=NODE``: the node as it
        is first, then its changes; :meth:`_first_sight`), then WATCH windows of
        :data:`HEARTBEAT_INTERVAL_SECONDS` from the last resourceVersion seen, heartbeating the
        last observed node summary between events; an expired resourceVersion (410) or a broken
        stream re-lists.
        A change is seen as soon as the API server sends it. Raises non-retryable
        ``NodeNotFound`` when the node does not exist or is deleted.
        """
        return self.wait_for_node_seen(input)[0]

    def wait_for_node_seen(
        self, input: WaitForNodeInput, seen: dict[str, Any] | None = None
    ) -> tuple[WaitForNodeResult, dict[str, Any]]:
        """Body of :meth:`wait_for_node`; also returns the Node object as last seen (a caller
        that writes next makes its write conditional on it instead of reading the node again).
        ``seen``: the Node as the caller's own write just returned it; the watch then starts
        from its resourceVersion instead of with a first sight."""
        deadline = time.monotonic() + max(0.0, input.timeout_seconds)
        last_beat = time.monotonic()  # the first beat after an interval: a short wait sends none (issue 16)
        ends: Callable[[dict[str, Any], NodeInfo], bool] = lambda o, i: _wait_outcome(input, o, i) is not None  # noqa: E731
        if seen is not None and objects.meta(seen).get("resourceVersion"):
            obj, info, rv = seen, node_info(seen), objects.meta(seen)["resourceVersion"]
        else:
            obj, info, rv, last_beat = self._first_sight(input.node, deadline, last_beat, ends)
        return self._watch_until(
            input.node, deadline, (obj, info, rv, last_beat),
            step=lambda o, i: _wait_outcome(input, o, i),
            timed_out=lambda i: WaitForNodeResult(node=i, matched=False, timed_out=True),
            ends=ends,
        )

    @activity.defn(name="wait_for_node_done", no_thread_cancel_exception=True)
    def wait_for_node_done(self, input: WaitForNodeDoneInput) -> WaitForNodeDoneResult:
        """Watch the Node from the drain hand-off to Done, answering the uncordon on the way.

        The machine-config daemon reboots the node into ``target`` and then asks for the
        uncordon (``desiredDrain=uncordon-<target>``, MCO ``pkg/daemon/drain.go``). This activity
        answers as the MCO drain controller does (``pkg/controller/drain/drain_controller.go``):
        it uncordons the node (only a cordon of ``owner``) and sets
        ``lastAppliedDrain=uncordon-<target>``, with no workflow round trip in between. It keeps
        watching until currentConfig == target with state Done, the daemon asks for a drain again,
        or the daemon is Degraded/Unreconcilable with nothing to answer; a request pending is
        answered first, also while Degraded. With ``hand_off_drain`` the drain request is
        answered first the same way (``lastAppliedDrain=drain-<target>``, see the input). Each
        write is idempotent, so an attempt retried after a crash answers only what is still missing.

        Both writes are conditional on the node as last seen, with no read before them. Returns
        ``timed_out`` after ``timeout_seconds``.

        Holds no activity slot for the wait (issue 40): when the worker wired a completer
        (:mod:`activities.cluster.completion`), one LIST reads the node; unless that already ends
        the call, the wait goes to this cluster's shared node watcher
        (:class:`~activities.cluster.nodewatch.NodeWatchHub`, one WATCH of all Nodes) and the
        activity returns with ``raise_complete_async``; the watcher heartbeats it, runs the same
        step on each newer object and completes it. Otherwise it watches here as
        :meth:`wait_for_node` does (WATCH windows with heartbeats). Raises non-retryable ``NodeNotFound``; API errors
        of the writes propagate and the attempt is retried by its policy.
        """
        wait = _DoneWait(self, input)
        if can_hand_off():
            with beating_to_hand_off():  # its LIST and writes on a slow API server: beats until the hand-off
                obj, info, rv = self._list_node(input.node)
                result = wait.step(obj, info)
                if result is not None:
                    return result
                hand_off(self.gateway, node=input.node, rv=rv, timeout_seconds=input.timeout_seconds, step=wait.step,
                         timed_out=wait.timed_out, details=wait.details, what=f"wait_for_node_done {input.node}")
        return self._wait_done_here(input, wait)

    def _wait_done_here(self, input: WaitForNodeDoneInput, wait: _DoneWait) -> WaitForNodeDoneResult:
        """:meth:`wait_for_node_done` inside its activity (no worker wired a completer): WATCH
        windows with heartbeats until ``wait.step`` ends it or the deadline passes."""
        deadline = time.monotonic() + max(0.0, input.timeout_seconds)
        last_beat = time.monotonic()  # the first beat after an interval: a short wait sends none (issue 16)
        first = self._first_sight(input.node, deadline, last_beat, wait.ends)
        return self._watch_until(
            input.node, deadline, first, step=wait.step, timed_out=lambda _i: wait.timed_out(), ends=wait.ends,
            written=lambda i: wait.info or i,
        )[0]

    def _watch_until(
        self,
        node: str,
        deadline: float,
        first: tuple[dict[str, Any], NodeInfo, str | None, float],
        *,
        step: Callable[[dict[str, Any], NodeInfo], R | None],
        timed_out: Callable[[NodeInfo], R],
        ends: Callable[[dict[str, Any], NodeInfo], bool],
        written: Callable[[NodeInfo], NodeInfo] | None = None,
    ) -> tuple[R, dict[str, Any]]:
        """The waits' loop: from ``first`` (obj, info, rv, last_beat: the node as first seen),
        ``step(obj, info)`` on each sight of the node until it answers, or ``timed_out(info)``
        once ``deadline`` (``time.monotonic()`` seconds) passes; between sights, WATCH windows
        (:meth:`_watch_window`, ending early where ``ends`` holds) of at most
        :data:`HEARTBEAT_INTERVAL_SECONDS`, heartbeating the node summary every interval and
        honouring a cancel. ``written(info)``: the node as the step's own write left it, so the
        watch goes on after that write. Returns the answer and the Node object as last seen.
        Raises non-retryable ``NodeNotFound`` when the node is deleted."""
        obj, info, rv, last_beat = first
        while True:
            result = step(obj, info)
            if result is not None:
                return result, obj
            if written is not None:
                info = written(info)
                rv = info.resource_version or rv  # watch on after our own writes
            now = time.monotonic()
            if now >= deadline:
                return timed_out(info), obj
            if now - last_beat >= HEARTBEAT_INTERVAL_SECONDS:
                heartbeat(node_summary(info))
                last_beat = now
            check_cancelled()
            window = max(1, min(int(HEARTBEAT_INTERVAL_SECONDS), int(deadline - now + 0.999)))
            obj, info, rv, last_beat = self._watch_window(node, rv, window, obj, info, last_beat, ends)

    def _watch_window(
        self, node: str, rv: str | None, seconds: int, obj: dict[str, Any] | None, info: NodeInfo | None,
        last_beat: float, ends: Callable[[dict[str, Any], NodeInfo], bool],
    ) -> tuple[Any, Any, str | None, float]:
        """One WATCH window of ``seconds`` from ``rv`` on ``node`` (:func:`activities.cluster.watch.watch_window`),
        shared by the waits: returns at the first ADDED/MODIFIED object for which ``ends(obj, info)``
        holds, or when the window closes, heartbeating the node summary every
        :data:`HEARTBEAT_INTERVAL_SECONDS`. Returns (obj, info, rv, last_beat) as last observed.
        Raises non-retryable ``NodeNotFound`` when the node is deleted."""
        state: list[Any] = [obj, info, last_beat]

        def seen(type_: str, event_obj: dict[str, Any]) -> bool:
            if type_ == "DELETED":
                raise fail("NodeNotFound", f"node {node} was deleted")
            if type_ in ("ADDED", "MODIFIED"):
                state[0], state[1] = event_obj, node_info(event_obj)
                if ends(state[0], state[1]):
                    return True
            if state[1] is not None and time.monotonic() - state[2] >= HEARTBEAT_INTERVAL_SECONDS:
                heartbeat(node_summary(state[1]))
                state[2] = time.monotonic()
            return False

        def relist() -> str | None:
            state[0], state[1], new_rv = self._list_node(node)
            return new_rv

        rv = watch_window(
            lambda rv, s: self.gateway.watch_node(node, resource_version=rv, timeout_seconds=s), rv, seconds, seen, relist,
            f"node {node}",
        )
        return state[0], state[1], rv, state[2]

    def _first_sight(
        self, node: str, deadline: float, last_beat: float, ends: Callable[[dict[str, Any], NodeInfo], bool]
    ) -> tuple[dict[str, Any], NodeInfo, str | None, float]:
        """The Node as it is, from a WATCH without resourceVersion: the API server sends the
        current object first (a synthetic ADDED, Kubernetes API concepts "Semantics for watch"),
        then its changes, so one request does what a LIST and a WATCH did (issue 16). The window
        ends at the first object for which ``ends`` holds, or as :meth:`_watch_window`'s. When
        no object came (a node that does not exist, a stream cut early), one LIST decides:
        non-retryable ``NodeNotFound``, or the node and the list's resourceVersion.
        Returns (obj, info, rv, last_beat)."""
        left = deadline - time.monotonic()
        if left <= 0:  # no time to watch: read it once
            obj, info, rv = self._list_node(node)
            return obj, info, rv, last_beat
        seconds = max(1, min(int(HEARTBEAT_INTERVAL_SECONDS), int(left + 0.999)))
        obj, info, rv, last_beat = self._watch_window(node, None, seconds, None, None, last_beat, ends)
        if obj is None or info is None:
            obj, info, rv = self._list_node(node)
        return obj, info, rv, last_beat

    def _list_node(self, name: str) -> tuple[dict[str, Any], NodeInfo, str | None]:
        obj, rv = list_node(self, name)
        return obj, node_info(obj), rv

    @activity.defn(name="get_pools_status", no_thread_cancel_exception=True)
    def get_pools_status(self, input: PoolsStatusInput) -> PoolsStatusResult:
        """MachineConfigPool conditions and machine counts (all pools when ``pools`` is empty).
        Raises non-retryable ``UnknownPool`` for a name that does not exist."""
        mcps = {(objects.meta(p).get("name") or ""): p for p in self.gateway.list_machineconfigpools()}
        names = list(dict.fromkeys(input.pools)) or sorted(mcps)
        unknown = [n for n in names if n not in mcps]
        if unknown:
            raise fail("UnknownPool", f"unknown MachineConfigPool(s): {', '.join(unknown)}; known pools: {', '.join(sorted(mcps))}")
        return PoolsStatusResult(pools=[pool_status(mcps[n]) for n in names])

    @activity.defn(name="set_network_type", no_thread_cancel_exception=True)
    def set_network_type(self, input: SetNetworkTypeInput) -> SetNetworkTypeResult:
        """Set ``networks.config.openshift.io/cluster`` spec.networkType (merge patch).

        Guard (R1): raises non-retryable ``PoolsNotSettled`` naming every pool that is not
        Updated=True/Updating=False. No write when the type is already set.
        """
        pools = [pool_status(p) for p in self.gateway.list_machineconfigpools()]
        unsettled = [p for p in pools if not (p.updated and not p.updating)]
        if unsettled:
            names = ", ".join(
                f"{p.name} (updated={p.updated}, updating={p.updating}, degraded={p.degraded})" for p in unsettled
            )
            raise fail("PoolsNotSettled", f"refusing to switch the network type while pools are not settled: {names}")
        try:
            net = self.gateway.get_network_config()
        except NotFound:
            raise fail("NetworkConfigNotFound", "networks.config.openshift.io/cluster does not exist") from None
        previous = (net.get("spec") or {}).get("networkType")
        if previous == input.network_type:
            return SetNetworkTypeResult(changed=False, previous=previous)
        self.gateway.patch_network_config({"spec": {"networkType": input.network_type}})
        log().info(f"network type switched from {previous} to {input.network_type}")
        return SetNetworkTypeResult(changed=True, previous=previous)


def _wait_outcome(input: WaitForNodeInput, obj: dict[str, Any], info: NodeInfo) -> WaitForNodeResult | None:
    """The wait's result if the Node ``obj`` (parsed as ``info``) ends it, else None."""
    matched = wait_condition_holds(input, objects.annotations(obj))
    if matched or info.degraded:
        return WaitForNodeResult(node=info, matched=matched, degraded=info.degraded)
    return None


class _DoneWait:
    """One attempt of ``wait_for_node_done``: what it answered so far, and :meth:`step`, run on
    each Node object seen (in the activity, or on the shared watcher's thread after a hand-off;
    never both at once)."""

    def __init__(self, acts: MachineConfigActivities, input: WaitForNodeDoneInput) -> None:
        self.acts, self.input = acts, input
        self.answered_at: datetime | None = None
        self.handed_off_at: datetime | None = None
        self.uncordon: UncordonResult | None = None
        self.info: NodeInfo | None = None  # the node as last seen or written

    def ends(self, _obj: dict[str, Any], info: NodeInfo) -> bool:
        """Whether an object seen ends a watch window (something to answer, or an outcome)."""
        return _asks_uncordon(self.input, info) or _done_outcome(self.input, info) is not None

    def step(self, obj: dict[str, Any], info: NodeInfo) -> WaitForNodeDoneResult | None:
        """Answer what the daemon asks on ``obj`` (the drain hand-off when asked for, the
        uncordon), then the result when the node reached an outcome, else None. Both writes are
        conditional on ``obj``, with no read before them. Raises non-retryable ``NodeNotFound``;
        API errors of the writes propagate."""
        input, acts = self.input, self.acts
        self.info = info
        if input.hand_off_drain and _awaits_drain_hand_off(input, info):
            if input.machine_config_nodes:  # the controller's side of the MachineConfigNode first; a no-op when it says so
                report_controller_step(acts.gateway, input.node, "drained",
                                       {ANN_DESIRED_CONFIG: info.desired_config or "", ANN_CURRENT_CONFIG: info.current_config or ""},
                                       drain=drain_value(input.target), log=log().warning)
            info = set_annotations(acts, input.node, {ANN_LAST_APPLIED_DRAIN: drain_value(input.target)}, known=obj)
            self.handed_off_at = self.handed_off_at or datetime.now(UTC)
            log().info(f"node {input.node}: drain handed off ({drain_value(input.target)})")
        if _asks_uncordon(input, info):
            self.uncordon, left = uncordon_seen(acts, input.node, input.owner, known=obj)
            if self.uncordon.uncordoned and input.machine_config_nodes:  # the controller's side first; a no-op when it says so
                report_controller_step(acts.gateway, input.node, "uncordoned",
                                       {ANN_DESIRED_CONFIG: info.desired_config or "", ANN_CURRENT_CONFIG: info.current_config or ""},
                                       log=log().warning)
            info = set_annotations(acts, input.node, {ANN_LAST_APPLIED_DRAIN: uncordon_value(input.target)}, known=left)
            self.answered_at = self.answered_at or datetime.now(UTC)
            log().info(f"node {input.node}: uncordon answered ({uncordon_value(input.target)})")
        self.info = info
        outcome = _done_outcome(input, info)
        return None if outcome is None else self._result(info, outcome)

    def timed_out(self) -> WaitForNodeDoneResult:
        assert self.info is not None
        return self._result(self.info, "timed_out")

    def details(self) -> Any:
        return node_summary(self.info) if self.info is not None else None

    def _result(self, info: NodeInfo, outcome: str) -> WaitForNodeDoneResult:
        return WaitForNodeDoneResult(
            node=info, outcome=outcome, uncordon_answered_at=self.answered_at, uncordon=self.uncordon,  # type: ignore[arg-type]
            drain_handed_off_at=self.handed_off_at,
        )


def _awaits_drain_hand_off(input: WaitForNodeDoneInput, info: NodeInfo) -> bool:
    """The daemon asks for the drain of ``input.target`` and has had no answer for this config
    yet (lastAppliedDrain neither ``drain-`` nor ``uncordon-<target>``)."""
    drain, uncordon = drain_value(input.target), uncordon_value(input.target)
    return info.desired_drain == drain and info.last_applied_drain not in (drain, uncordon)


def _asks_uncordon(input: WaitForNodeDoneInput, info: NodeInfo) -> bool:
    """The daemon asks for the uncordon of ``input.target`` and has no answer yet."""
    value = uncordon_value(input.target)
    return info.desired_drain == value and info.last_applied_drain != value


def _done_outcome(input: WaitForNodeDoneInput, info: NodeInfo) -> str | None:
    """``done``, ``drain_requested`` or ``degraded`` when the Node ends the watch (in that
    order: a node at its target is done even if the daemon still shows an old request), else None."""
    if info.current_config == input.target and info.state == DaemonState.DONE:
        return "done"
    drain = drain_value(input.target)
    if info.desired_drain == drain and info.last_applied_drain != drain:
        return "drain_requested"
    return "degraded" if info.degraded else None


def wait_condition_holds(input: WaitForNodeInput, annotations: dict[str, str]) -> bool:
    """True when a Node with these annotations satisfies the wait's main condition
    (``annotation == value``, or for ``config_done`` currentConfig == value and state Done)
    or one of the ``any_of`` pairs."""
    if input.kind == "config_done":
        if annotations.get(ANN_CURRENT_CONFIG) == input.value and annotations.get(ANN_STATE) == DaemonState.DONE:
            return True
    elif annotations.get(input.annotation) == input.value:
        return True
    return any(annotations.get(key) == value for key, value in input.any_of)


def make_machineconfig_activities(gateway: KubeGateway | Callable[[], KubeGateway]) -> list[Callable[..., Any]]:
    """The MachineConfig activities for a Worker, bound to ``gateway`` (or a factory)."""
    factory = (lambda: gateway) if hasattr(gateway, "get_node") else gateway
    return MachineConfigActivities(factory).activities()  # type: ignore[arg-type]
