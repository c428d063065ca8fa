"""The cluster upgrade's plan file, status and result (R3d + R3e composed, issue 12).

The plan (``lockkeeper start cluster-upgrade --plan upgrade.yaml``) holds each phase's input as
the child procedure's own model, so it is validated by pydantic before anything starts. A phase
left out is skipped (and printed as skipped). Stored in history: add fields, never rename.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from workflows.control_plane.models import ControlPlaneUpgradeInput
from workflows.etcd.models import EtcdBackupInput
from workflows.gluster.models import GlusterRecoveryInput
from workflows.kit.inputs import ProcedureInput
from workflows.kit.models import ChangedItem, ProcedureResult, ProcedureStatus
from workflows.node_selectors.models import NodeSelectorMigrationInput
from workflows.node_upgrade.models import NodeUpgradeInput
from workflows.kit.report import ChildReport

PROCEDURE_CLUSTER_UPGRADE = "cluster-upgrade"

#: R3's order (seed 002; procedures-spec §3, §4, §5). ``master-nodes`` is the node (kubelet) upgrade
#: of the masters, one at a time, that openshift-ansible runs with the control plane (§4.1 step 2).
PHASES = ("gluster", "etcd-backup", "control-plane", "master-nodes", "infra-nodes", "compute-nodes", "node-selectors")
#: The phases the alert gate stands before (``alerts``): those that take nodes or workloads down.
#: Not the GlusterFS check and recovery (it repairs what a brick-down alert reports) nor the etcd
#: backup (it reads).
ALERT_GATED_PHASES = ("control-plane", "master-nodes", "infra-nodes", "compute-nodes", "node-selectors")


class ClusterUpgradePlan(BaseModel):
    """One input per phase (None = skip). ``control_plane`` without its own etcd backup is told
    that the ``etcd-backup`` phase took it, and without its own ``etcd_members`` checks the health
    of that phase's members. The cluster is the upgrade's own (``ClusterUpgradeInput.cluster``),
    given to every phase."""

    gluster: GlusterRecoveryInput | None = None
    etcd_backup: EtcdBackupInput | None = None
    control_plane: ControlPlaneUpgradeInput | None = None
    master_nodes: NodeUpgradeInput | None = None
    infra_nodes: NodeUpgradeInput | None = None
    compute_nodes: NodeUpgradeInput | None = None
    node_selectors: NodeSelectorMigrationInput | None = None

    @model_validator(mode="before")
    @classmethod
    def _etcd_for_control_plane(cls, data: object) -> object:
        # The control plane's own barrier is the etcd-backup phase when the plan has one.
        if isinstance(data, dict) and data.get("etcd_backup") and isinstance(data.get("control_plane"), dict):
            cp = data["control_plane"]
            if not cp.get("etcd_backup") and not cp.get("etcd_backup_skip_reason"):
                cp = {**cp, "etcd_backup_skip_reason": "taken by the etcd-backup phase"}
            eb = data["etcd_backup"]
            members = eb.get("members") if isinstance(eb, dict) else getattr(eb, "members", None)
            if members and not cp.get("etcd_members") and not cp.get("etcd_backup"):
                cp = {**cp, "etcd_members": members}
            data = {**data, "control_plane": cp}
        return data

    @model_validator(mode="after")
    def _something(self) -> ClusterUpgradePlan:
        if not any(getattr(self, f) is not None for f in ("gluster", "etcd_backup", "control_plane", "master_nodes", "infra_nodes", "compute_nodes",
                                                           "node_selectors")):
            raise ValueError("the plan has no phase")
        return self

    def phase_input(self, name: str) -> BaseModel | None:
        """The input of phase ``name`` (see :data:`PHASES`)."""
        return getattr(self, name.replace("-", "_"))


class ClusterUpgradeInput(ProcedureInput):
    """The run's input: the validated plan plus the kit's fields (:class:`workflows.kit.inputs.
    ProcedureInput`): ``cluster`` (every phase's), ``approvals`` (the phase gates' rules; the
    requester is passed to every phase), ``gates`` (the phase retry gates' timeout and its
    outcome), ``dry_run`` (every phase runs dry).

    ``alerts``: the Prometheus alert gate (:class:`workflows.kit.inputs.AlertGatePolicy`, the
    CLI's ``--alert-gate URL``): no phase of :data:`ALERT_GATED_PHASES` starts while a blocking
    alert fires, and a phase's child whose own input has no ``alerts`` (the node upgrades, the
    nodeSelector migration) gets this one, so it gates each node too; None: no gate."""

    plan: ClusterUpgradePlan


class PhaseStatus(BaseModel):
    """One phase: state, the child procedure (type and workflow ID; ``lockkeeper status <child>``
    shows all of its status), its last report (the kit's ``child_report``), attempts, outcome and message."""

    name: str
    state: Literal["pending", "skipped", "running", "failed", "waiting-retry", "done", "aborted"] = "pending"
    child_type: str | None = None
    child_id: str | None = None
    attempts: int = 0
    outcome: str | None = None
    message: str | None = None
    dry_run_lines: list[str] = Field(default_factory=list)
    #: The child's own status as it last reported it (procedures that report: node upgrades,
    #: control plane, nodeSelector migration; the GlusterFS and etcd children show their ID only).
    child_status: ChildReport | None = None
    #: What the phase's children changed and left so (each attempt's ``changed``, or a failed
    #: child's last reported ``left_changed``), summed into the upgrade's ``left_changed``.
    changed: list[ChangedItem] = Field(default_factory=list)


class ClusterUpgradeStatus(ProcedureStatus):
    """``status``: the phases in order and the current one."""

    phases: list[PhaseStatus] = Field(default_factory=list)
    current_phase: str | None = None


class ClusterUpgradeResult(ProcedureResult):
    """``outcome`` completed / aborted / dry-run, with every phase."""

    workflow_id: str = ""
    outcome: str = "completed"
    phases: list[PhaseStatus] = Field(default_factory=list)
    message: str = ""
