"""Inputs and results of the MachineConfig activities: preflight, the daemon watch, pools,
the network type and the pool diagnosis.

Plain pydantic v2 models (no Kubernetes import), carried in workflow history by the pydantic
data converter. Annotation values follow the machine-config-operator
(``pkg/daemon/constants/constants.go`` and ``pkg/daemon/drain.go``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from activities.cluster.models import (
    ANN_DESIRED_DRAIN,
    CordonResult,
    DrainInput,
    DrainResult,
    NodeInfo,
    NodeMcoState,
    PDBReport,
    PendingPodReport,
    UncordonResult,
)


def drain_value(rendered: str) -> str:
    """``drain-<rendered>``: the desiredDrain/lastAppliedDrain value that asks for a drain."""
    return f"drain-{rendered}"


def uncordon_value(rendered: str) -> str:
    """``uncordon-<rendered>``: the desiredDrain/lastAppliedDrain value that asks for an uncordon."""
    return f"uncordon-{rendered}"


class ConfigChange(BaseModel):
    """What differs between a pool's current rendered MachineConfig and its target, as the
    machine-config-daemon sees it (MCO ``pkg/daemon/update.go`` ``newMachineConfigDiff``;
    ``pkg/controller/common/helpers.go`` ``CalculateConfigFileDiffs`` and
    ``GetChangedConfigUnitsByType``: an Ignition file or unit differs when its JSON differs).

    ``from_config``/``to_config``: rendered config names; ``nodes``: the pool's nodes now at
    ``from_config`` (by name); ``file_paths``/``unit_names``: added, removed or changed (sorted);
    ``passwd``: the Ignition ``passwd`` section differs (SSH keys); ``os_update``, ``kargs``,
    ``fips``, ``kernel_type``, ``extensions``: the MachineConfig fields that always mean a reboot;
    ``registries_conf_old``/``_new``: the text of ``/etc/containers/registries.conf`` in each
    config when that file changed (the daemon's "safe change" test reads them), else None;
    ``missing``: ``from_config`` does not exist (nothing can be said: a reboot is assumed)."""

    from_config: str
    to_config: str
    nodes: list[str] = Field(default_factory=list)
    file_paths: list[str] = Field(default_factory=list)
    unit_names: list[str] = Field(default_factory=list)
    passwd: bool = False
    os_update: bool = False
    kargs: bool = False
    fips: bool = False
    kernel_type: bool = False
    extensions: bool = False
    registries_conf_old: str | None = None
    registries_conf_new: str | None = None
    missing: bool = False


class DisruptionFacts(BaseModel):
    """What the daemon's disruption decision for a pool depends on (OpenShift 4.16+):
    ``cluster_policies`` is ``MachineConfiguration/cluster``
    ``status.nodeDisruptionPolicyStatus.clusterPolicies`` (openshift/api
    ``operator/v1/types_machineconfiguration.go`` JSON: ``files[{path, actions}]``,
    ``units[{name, actions}]``, ``sshkey{actions}``), ``policies_current`` whether its
    ``status.observedGeneration`` equals its ``metadata.generation`` (the daemon waits for that),
    ``changes`` one :class:`ConfigChange` per distinct current config among the pool's nodes not
    at the target."""

    cluster_policies: dict[str, Any] = Field(default_factory=dict)
    policies_current: bool = True
    changes: list[ConfigChange] = Field(default_factory=list)


class HealthCheckFact(BaseModel):
    """A MachineHealthCheck (machine-api-operator, ``machine.openshift.io/v1beta1``) whose
    selector matches the Machine of some of a pool's nodes: it may delete and replace a node that
    stays NotReady during a rolling reboot. ``paused``: it carries the ``cluster.x-k8s.io/paused``
    annotation (no remediation); ``nodes``: the pool's nodes it covers (via ``Machine.status.nodeRef``);
    ``unhealthy_conditions``: ``Ready=False for 300s``...; ``max_unhealthy`` as written."""

    namespace: str
    name: str
    paused: bool = False
    nodes: list[str] = Field(default_factory=list)
    unhealthy_conditions: list[str] = Field(default_factory=list)
    max_unhealthy: str | None = None


class PoolInfo(BaseModel):
    """A MachineConfigPool resolved for a rollout: its target rendered config and its nodes.
    ``disruption``: the facts for the node disruption policies (None where the API serves no
    ``MachineConfiguration/cluster``: a daemon before OpenShift 4.16 drains and reboots)."""

    name: str
    target_config: str
    target_created: datetime | None = None
    spec_max_unavailable: int | str | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)
    nodes: list[NodeInfo] = Field(default_factory=list)
    conditions: dict[str, str] = Field(default_factory=dict)
    #: Set when ``nodes`` is the first page only (:attr:`PreflightInput.page_size`): the name of
    #: its last node, from which :class:`PoolNodesInput` reads on; ``node_count`` is then the
    #: pool's node count at preflight.
    more_after: str | None = None
    node_count: int | None = None
    disruption: DisruptionFacts | None = None
    #: Node -> the ``fieldPath`` of each of its MachineConfigNode's ``status.irreconcilableChanges``
    #: (changes of the target only a new node can take: openshift/api machineconfiguration/v1
    #: ``IrreconcilableChangeDiff``); only nodes that have some.
    irreconcilable: dict[str, list[str]] = Field(default_factory=dict)
    #: The MachineHealthChecks covering some of the pool's nodes (empty without a Machine API).
    health_checks: list[HealthCheckFact] = Field(default_factory=list)


# --- preflight ---------------------------------------------------------------------------------


class PreflightInput(BaseModel):
    """Read-only checks before a MachineConfig rollout.

    ``pools`` empty means: every pool that has a node not at the pool's newest rendered config.
    ``target_configs`` maps pool name to an explicit rendered config; a pool missing from it gets
    the newest ``rendered-<pool>-*`` MachineConfig by creationTimestamp.
    ``not_before``: refuse a target rendered config created before this instant.
    """

    pools: list[str] = Field(default_factory=list)
    target_configs: dict[str, str] = Field(default_factory=dict)
    not_before: datetime | None = None
    #: At most this many nodes per pool in the result, the first by name; the rest are read with
    #: ``list_pool_nodes`` (:class:`PoolNodesInput`). None: every node in the one result, which
    #: Temporal refuses above 2 MB (about 4,400 nodes).
    page_size: int | None = Field(None, ge=1)


class PreflightResult(BaseModel):
    """The pools to roll, each with its target and its nodes (unsorted; planning sorts).

    ``network_type``: ``networks.config.openshift.io/cluster`` status.networkType (what runs),
    else spec.networkType; None on a cluster without that object."""

    pools: list[PoolInfo]
    network_type: str | None = None
    #: The API serves ``machineconfignodes.machineconfiguration.openshift.io`` (OpenShift 4.16+).
    machine_config_nodes: bool = False


class PoolNodesInput(BaseModel):
    """The next page of a pool's nodes: at most ``limit`` nodes, by name, after ``after``
    (exclusive), selected by the pool's nodeSelector as it is now."""

    pool: str
    after: str
    limit: int = Field(ge=1)


class PoolNodesPage(BaseModel):
    """One page of a pool's nodes; ``more_after`` is the name to read on from, None on the last page."""

    nodes: list[NodeInfo] = Field(default_factory=list)
    more_after: str | None = None


def node_page(nodes: list[NodeInfo], *, after: str, limit: int) -> PoolNodesPage:
    """The page of ``nodes`` that follows ``after`` (by name, exclusive; ``""`` for the first):
    at most ``limit`` nodes, and ``more_after`` when nodes remain beyond them."""
    rest = sorted((n for n in nodes if n.name > after), key=lambda n: n.name)
    page = rest[:limit]
    return PoolNodesPage(nodes=page, more_after=page[-1].name if len(rest) > limit else None)


# --- node handshake ----------------------------------------------------------------------------


class WaitForNodeInput(BaseModel):
    """Watch a Node until ``annotation == value`` (or, for ``kind='config_done'``, until
    ``currentConfig == value`` and ``state == Done``).

    Returns early with ``degraded=True`` when the daemon sets Degraded or Unreconcilable.
    ``timeout_seconds`` bounds one activity attempt; the workflow loops, so a long wait shows in
    history as a few short attempts, never one hour-long blocking call.
    ``any_of``: extra (annotation, value) pairs that also end the wait (e.g. resuming after a crash
    when the daemon has moved further than expected).
    """

    node: str
    kind: Literal["annotation", "config_done"] = "annotation"
    annotation: str = ANN_DESIRED_DRAIN
    value: str
    any_of: list[tuple[str, str]] = Field(default_factory=list)
    timeout_seconds: float = 60.0


class WaitForNodeResult(BaseModel):
    """What ended the wait, and the Node as last observed."""

    node: NodeInfo
    matched: bool
    degraded: bool = False
    timed_out: bool = False


class WaitForNodeDoneInput(BaseModel):
    """Watch a Node from the drain hand-off to Done, answering the daemon's uncordon request.

    ``target``: the rendered config the node is moving to; ``owner``: the cordoned-by value of
    the node run (only a cordon of ``owner`` is undone); ``timeout_seconds`` bounds one attempt
    (the workflow loops, as for :class:`WaitForNodeInput`).

    ``hand_off_drain``: the workflow decided to hand the drain off (its node is empty) and leaves
    the write to this call: while the daemon asks for the drain of ``target``
    (``desiredDrain=drain-<target>``) and ``lastAppliedDrain`` is neither ``drain-<target>`` nor
    ``uncordon-<target>``, set ``lastAppliedDrain=drain-<target>`` first. The second condition
    keeps a retried attempt from answering a later drain request (after the uncordon) that was
    never drained: that one ends the call as ``drain_requested``.
    """

    node: str
    target: str
    owner: str
    timeout_seconds: float = 60.0
    hand_off_drain: bool = False
    #: The API serves MachineConfigNodes: with the drain hand-off and the uncordon, write the
    #: controller's side of the node's (:mod:`activities.machineconfig.mcnstatus`).
    machine_config_nodes: bool = False


class WaitForNodeDoneResult(BaseModel):
    """What ended a :class:`WaitForNodeDoneInput` watch, and the Node as last observed.

    ``outcome``: ``done`` (currentConfig == target and state Done), ``drain_requested`` (the
    daemon asks for a drain again: desiredDrain=drain-<target>, lastAppliedDrain differs),
    ``degraded`` (Degraded or Unreconcilable with no request of the daemon pending) or
    ``timed_out``. ``uncordon_answered_at``: when this attempt answered the daemon's uncordon
    request (None when it did not: not asked yet, or answered before); ``uncordon`` the result of
    that uncordon (a node cordoned by somebody else stays cordoned, and says so).
    ``drain_handed_off_at``: when this attempt wrote the drain hand-off of ``hand_off_drain``
    (None when it did not: not asked for, or already there).
    """

    node: NodeInfo
    outcome: Literal["done", "drain_requested", "degraded", "timed_out"]
    uncordon_answered_at: datetime | None = None
    uncordon: UncordonResult | None = None
    drain_handed_off_at: datetime | None = None


class DrainWhenAskedInput(BaseModel):
    """Wait for the daemon's drain request, then cordon for ``owner`` and make one drain pass.

    ``target``: the rendered config asked for; ``timeout_seconds`` bounds the wait for the
    request in one attempt; ``drain``: the pass's options (its ``node`` is ``node``).

    ``set_desired_config``: first set ``desiredConfig=<target>`` (one merge patch, no read: the
    node run's first step), then go on only when the node, as that patch left it, plainly waits
    for the daemon (:func:`activities.machineconfig.handshake.plainly_waiting`); otherwise return
    at once with ``first_look_only`` and let the workflow decide from the node.
    """

    node: str
    target: str
    owner: str
    timeout_seconds: float = 60.0
    drain: DrainInput
    set_desired_config: bool = False
    #: The API serves MachineConfigNodes: with the cordon and the pass, write the controller's
    #: side of the node's (:mod:`activities.machineconfig.mcnstatus`).
    machine_config_nodes: bool = False


class DrainWhenAskedResult(BaseModel):
    """What ended :class:`DrainWhenAskedInput`, and the Node as last observed.

    ``asked``: the daemon asked for the drain (``desiredDrain=drain-<target>`` with
    lastAppliedDrain not yet ``drain-<target>``); then ``cordon`` and ``drain`` are the results of
    the cordon and of the one pass (``drain.done``: the node is empty; otherwise the pass was
    blocked or pods are still terminating) and ``drain_seconds`` the time from the request seen to
    the end of the pass. Not asked: the wait ended as :class:`WaitForNodeResult` does
    (``matched`` another request or Done, ``degraded``, ``timed_out``). ``first_look_only``:
    ``set_desired_config`` was asked and the node was not plainly waiting after it; ``node`` is
    the node as that patch left it and nothing else was done.
    """

    node: NodeInfo
    asked: bool
    first_look_only: bool = False
    matched: bool = False
    degraded: bool = False
    timed_out: bool = False
    cordon: CordonResult | None = None
    drain: DrainResult | None = None
    drain_seconds: float | None = None


# --- pool / cluster health ----------------------------------------------------------------------


class PoolStatus(BaseModel):
    """The MachineConfigPool conditions and counters (status.*MachineCount)."""

    name: str
    updated: bool
    updating: bool
    degraded: bool
    machine_count: int = 0
    updated_machine_count: int = 0
    ready_machine_count: int = 0
    degraded_machine_count: int = 0


class PoolsStatusInput(BaseModel):
    """``pools`` empty: all MachineConfigPools."""

    pools: list[str] = Field(default_factory=list)


class PoolsStatusResult(BaseModel):
    """The pools asked for, in order."""

    pools: list[PoolStatus]

    @property
    def all_settled(self) -> bool:
        """Every pool Updated=True and Updating=False (R1's guard before a network-type switch)."""
        return all(p.updated and not p.updating for p in self.pools)


class SetNetworkTypeInput(BaseModel):
    """Switch ``networks.config.openshift.io/cluster`` spec.networkType.

    Guarded (R1): refused with a non-retryable ``PoolsNotSettled`` ApplicationError while any
    MachineConfigPool is not Updated=True/Updating=False.
    """

    network_type: Literal["OVNKubernetes", "OpenShiftSDN"]


class SetNetworkTypeResult(BaseModel):
    """``changed`` False when the type was already set; ``previous`` spec.networkType."""

    changed: bool
    previous: str | None = None


# --- diagnosis ---------------------------------------------------------------------------------


class PoolConditionReport(BaseModel):
    """One MachineConfigPool condition as the API shows it."""

    type: str
    status: str
    reason: str = ""
    message: str = ""


class NodeDiagnosis(NodeMcoState):
    """A pool node that is not at the pool's target config, or degraded, or cordoned: the
    :class:`NodeMcoState` part of its :class:`NodeInfo`."""


class DrainBlocker(BaseModel):
    """A PodDisruptionBudget that allows no disruption, with its pods on the pool's nodes."""

    pdb: PDBReport
    pods: list[str] = Field(default_factory=list)


class PoolDiagnosis(BaseModel):
    """``lockkeeper diagnose pool NAME``: everything R2's operator needed, read-only from the API.

    ``target_config``: spec.configuration.name (what the pool wants); ``nodes_not_at_target``;
    ``degraded`` (state Degraded/Unreconcilable with their ``reason`` annotation);
    ``drain_blockers`` (budgets with 0 disruptions allowed covering pods on the pool's nodes);
    ``pending_pods`` (cluster-wide, with their latest FailedScheduling message);
    ``conditions`` and machine counts of the pool."""

    pool: str
    target_config: str | None = None
    current_config: str | None = None
    machine_count: int = 0
    updated_machine_count: int = 0
    ready_machine_count: int = 0
    degraded_machine_count: int = 0
    nodes: list[str] = Field(default_factory=list)
    nodes_not_at_target: list[NodeDiagnosis] = Field(default_factory=list)
    degraded: list[NodeDiagnosis] = Field(default_factory=list)
    drain_blockers: list[DrainBlocker] = Field(default_factory=list)
    pending_pods: list[PendingPodReport] = Field(default_factory=list)
    conditions: list[PoolConditionReport] = Field(default_factory=list)


class ReportMachineConfigNodeInput(BaseModel):
    """The controller's side of ``node``'s MachineConfigNode for ``step`` (cordoned, draining,
    drained, uncordoned; :func:`activities.machineconfig.mcnstatus.report_controller_step`);
    ``drain``: the drain request (``drain-<config>``) its Drained messages name."""

    node: str
    step: Literal["cordoned", "draining", "drained", "uncordoned"]
    drain: str = ""
