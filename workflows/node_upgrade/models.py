"""Inputs, plan, status and results of the node upgrade (R3d nodes, procedures-spec §1.2, §4.2).

Pure pydantic v2 models (no Temporal, no Kubernetes import) shared by the CLI, the worker and the
workflows; the Temporal pydantic converter stores them in history, so field names are a stored
format (add fields with defaults, never rename). Durations are seconds (float); times UTC.
Names follow openshift-ansible (``openshift_upgrade_nodes_label``, ``..._serial``,
``..._max_fail_percentage``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from activities.host.models import HostAccess
from activities.node_upgrade.models import NodeFacts  # noqa: F401 - re-exported: the plan's input model
from workflows.kit.inputs import DrainPolicy, MaintenanceWindows, MaxUnavailable, NodeOrder, ProcedureInput, over_defaults
from workflows.kit.models import NodeResult, NodeStatus, ProcedureResult, ProcedureStatus
from workflows.kit.noderun import NodeRunResult

#: Procedure name (CLI, search attribute, lease holder).
PROCEDURE_NODE_UPGRADE = "node-upgrade"
#: The label that marks a master (openshift-ansible 3.10 node groups).
MASTER_LABEL_SELECTOR = "node-role.kubernetes.io/master=true"
#: The OKD 3.10 kubelet (seed 002 ``oc version``; the simulator's stand-in sets the same).
OKD_310_KUBELET = "v1.10.0+b81c8f8"


class NodeSelection(BaseModel):
    """Which nodes (procedures-spec §1.2): ``label_selector`` (``openshift_upgrade_nodes_label``)
    and/or explicit ``nodes``; masters are excluded by ``exclude_selector`` and by name
    (``masters``)."""

    label_selector: str | None = None
    nodes: list[str] = Field(default_factory=list)
    exclude_selector: str | None = MASTER_LABEL_SELECTOR
    masters: list[str] = Field(default_factory=list)


class BatchPolicy(BaseModel):
    """How (procedures-spec §1.2): ``serial`` (openshift-ansible's name for maxUnavailable: the
    kit's :data:`~workflows.kit.inputs.MaxUnavailable`, an int >= 1 or ``"N%"``, validated here
    and by the CLI's ``--serial`` alike); ``canary`` explicit nodes or the first k still to do;
    ``gate_after_canary``; ``max_fail_percentage`` (o-a default 0); ``skip_done``."""

    serial: MaxUnavailable = 1
    canary: list[str] | int = 0
    gate_after_canary: bool = True
    max_fail_percentage: float = Field(0.0, ge=0, le=100)
    skip_done: bool = True


class UpgradePlan(BaseModel):
    """The plan: ``selected`` (in ``node_order``), ``excluded`` masters with the reason, ``done``
    nodes skipped, ``canary`` batch, ``canary_gate``, ``batches`` after it, the serial and both
    sizes (``batch_size`` over the nodes still to do, ``size_over_selected`` over all selected).
    ``node_order``: the order's name (zone-oldest, oldest-first, newest-first, explicit)."""

    target_version: str
    selector: str | None = None
    selected: list[str] = Field(default_factory=list)
    excluded: dict[str, str] = Field(default_factory=dict)
    done: list[str] = Field(default_factory=list)
    canary: list[str] = Field(default_factory=list)
    canary_gate: bool = False
    batches: list[list[str]] = Field(default_factory=list)
    serial: str = "1"
    batch_size: int = 0
    size_over_selected: int = 0
    max_fail_percentage: float = 0.0
    node_order: str = "zone-oldest"

    def all_batches(self) -> list[tuple[str, list[str]]]:
        """``("canary", nodes)`` (when there is a canary) then ``("batch-<i>", nodes)``, i from 1."""
        out: list[tuple[str, list[str]]] = [("canary", list(self.canary))] if self.canary else []
        return out + [(f"batch-{i}", list(b)) for i, b in enumerate(self.batches, 1)]


class NodeAction(BaseModel):
    """The node action (procedures-spec §4.2 ``node_action``): ``kind`` ``external`` runs
    ``argv`` on the worker (e.g. ``ansible-playbook -i hosts upgrade_nodes.yml -e
    openshift_upgrade_nodes_label=kubernetes.io/hostname={node}``), ``host`` runs it on the node
    through ``host_access``. ``{node}`` in any argument is replaced by the node's name. The
    action runs at most once per attempt (an unknown outcome asks a person)."""

    kind: Literal["external", "host"] = "external"
    argv: list[str] = Field(min_length=1)
    timeout_seconds: float = Field(900.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)

    def argv_for(self, node: str) -> list[str]:
        """``argv`` with ``{node}`` replaced."""
        return [a.replace("{node}", node) for a in self.argv]


def upgrade_drain_policy() -> DrainPolicy:
    """The node upgrade's drain defaults: the kit's :class:`DrainPolicy` with 30 s per drain pass."""
    return DrainPolicy(wait_seconds=30.0)


class NodeUpgradeInput(ProcedureInput):
    """Input of :class:`workflows.node_upgrade.workflow.NodeUpgradeWorkflow`.

    The kit's :class:`~workflows.kit.inputs.ProcedureInput` gives ``cluster``, ``approvals``
    (requester, four-eyes, approvers), ``gates`` (every gate's timeout and its declared outcome),
    ``calls`` (activity timeouts), ``search_attributes``, ``dry_run``, ``report_to`` (the parent
    procedure that gets the child reports, set by the cluster upgrade) and ``alerts`` (the
    Prometheus alert gate, the CLI's ``--alert-gate URL``: no node starts while a blocking alert
    fires; None: no gate).

    ``target_version``: the kubelet version that means done; ``action``: what upgrades a node;
    ``host_access``: per node, for ``action.kind == "host"`` (and the node-config sha256);
    ``gluster_label``: nodes carrying it are GlusterFS hosts and get the GlusterFS gate after
    uncordon.

    ``drain``: the kit's :class:`DrainPolicy`, passed whole to every node run (30 s per pass by
    default; a partial ``drain`` keeps these defaults for the rest). The drain runs until the
    node is empty; blocked for ``drain.decide_after_seconds`` it opens R2's decision gate (wait,
    skip, delete-pod, abort; ``lockkeeper decide``). ``drain.timeout_seconds`` /
    ``drain.on_timeout`` (procedures-spec §4.2): ``"gate"`` (default) is the above (with a
    timeout given, the decision gate opens after it instead of ``decide_after_seconds``);
    ``"proceed"`` is openshift-ansible's ``openshift_upgrade_nodes_drain_timeout`` > 0: a drain
    not finished ``timeout_seconds`` after it began is given up, no decision gate opens, and the
    node is upgraded with the pods still on it (recorded in the node's result
    ``drain="timed-out-proceeded"`` and reason). ``"proceed"`` needs ``timeout_seconds``.

    ``node_order`` (:data:`workflows.kit.inputs.NodeOrder`, the CLI's ``--order``): the order of
    the selected nodes, so of the canary count and the serial batches; ``zone-oldest`` by default
    (a plan read before the Nodes' zone and creationTimestamp were read orders by name, as before).

    Raises pydantic's ValidationError for an unknown field, an action that does not name
    ``{node}``, a bad ``serial``, or ``proceed`` without a drain timeout.
    """

    selection: NodeSelection
    node_order: NodeOrder = "zone-oldest"
    #: Maintenance windows (:data:`workflows.kit.inputs.MaintenanceWindows`, ``--window``): no node
    #: starts outside them; empty: always.
    windows: MaintenanceWindows = Field(default_factory=list)
    policy: BatchPolicy = Field(default_factory=BatchPolicy)
    target_version: str = OKD_310_KUBELET
    action: NodeAction
    host_access: dict[str, HostAccess] = Field(default_factory=dict)
    #: A partial ``drain`` keeps the upgrade's defaults (:func:`upgrade_drain_policy`) for the rest.
    drain: Annotated[DrainPolicy, over_defaults(upgrade_drain_policy)] = Field(default_factory=upgrade_drain_policy)
    ready_timeout_seconds: float = Field(180.0, gt=0)
    ready_poll_seconds: float = Field(2.0, gt=0)
    gluster_label: str = "glusterfs"
    gluster_namespace: str = "glusterfs"
    gluster_timeout_seconds: float = Field(600.0, gt=0)

    @field_validator("action")
    @classmethod
    def _action_per_node(cls, v: NodeAction) -> NodeAction:
        # The action runs once per node: without {node} it would act on every node each time
        # (a playbook without -l {node} upgrades the whole inventory in the canary step).
        if not any("{node}" in a for a in v.argv):
            raise ValueError(f"the action {' '.join(v.argv)!r} does not name the node: it runs once per node, so put "
                             "{node} where the node goes (e.g. ansible-playbook upgrade_nodes.yml -l {node})")
        return v

    @model_validator(mode="after")
    def _drain_timeout(self) -> NodeUpgradeInput:
        if self.drain.on_timeout == "proceed" and self.drain.timeout_seconds is None:
            raise ValueError("drain.on_timeout 'proceed' needs drain.timeout_seconds (after how long the drain is given up)")
        return self


class NodeUpgradeNodeInput(BaseModel):
    """One node's child run: the parent's input fields it needs, plus ``node``, ``batch``,
    ``parent_id``, ``owner`` (the cordoned-by value) and ``attempt``."""

    node: str
    batch: str
    parent_id: str
    owner: str
    attempt: int = 1
    run: NodeUpgradeInput
    gluster_host: bool = False


class NodeUpgradeNodeResult(NodeRunResult):
    """A node run's result: the kit's fields plus the kubelet version seen at the end, whether
    the action ran in this attempt, the drain outcome and the node-config.yaml sha256s."""

    kubelet_version: str | None = None
    action_ran: bool = False
    drain: Literal["drained", "skipped-already-done", "timed-out-proceeded"] | None = None
    node_config_sha256_before: str | None = None
    node_config_sha256_after: str | None = None


class BatchStatus(BaseModel):
    """One batch in ``status``: nodes, state (pending / running / done / stopped) and failures."""

    name: str
    nodes: list[str]
    state: Literal["pending", "running", "done", "stopped"] = "pending"
    failed: list[str] = Field(default_factory=list)


class NodeUpgradeStatus(ProcedureStatus):
    """``status`` of a node upgrade: the plan, its batches, each node's row (kit NodeStatus) and
    ``current_batch``."""

    plan: UpgradePlan | None = None
    plan_lines: list[str] = Field(default_factory=list)
    batches: list[BatchStatus] = Field(default_factory=list)
    current_batch: str | None = None
    nodes: dict[str, NodeStatus] = Field(default_factory=dict)
    in_flight: list[str] = Field(default_factory=list)
    totals: dict[str, int] = Field(default_factory=dict)


class NodeUpgradeResult(ProcedureResult):
    """What a node upgrade returns: ``outcome`` completed / stopped (max_fail_percentage) /
    aborted / dry-run, the plan, per-node results and the message."""

    workflow_id: str = ""
    outcome: str = "completed"
    plan: UpgradePlan | None = None
    nodes: dict[str, NodeResult] = Field(default_factory=dict)
    message: str = ""


def node_owner(parent_id: str, node: str) -> str:
    """The cordoned-by value of this upgrade's node runs (the same for every attempt)."""
    return f"{parent_id}/{node}"


def node_workflow_id(parent_id: str, node: str, attempt: int) -> str:
    """Child workflow ID of one node attempt."""
    return f"{parent_id}/node/{node}/{attempt}"

