"""Inputs, plan, status and result of the nodeSelector migration (R3e, procedures-spec §5.2).

Pure pydantic models (stored in history: add fields with defaults, never rename).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from activities.cluster.models import ObjectRef
from activities.host.models import HostAccess
from workflows.kit.inputs import CallTimeouts, ProcedureInput
from workflows.kit.models import ProcedureResult, ProcedureStatus

PROCEDURE_NODE_SELECTOR_MIGRATION = "node-selector-migration"
#: Where openshift-ansible 3.x writes the master configuration (``openshift.common.config_base``).
MASTER_CONFIG_PATH = "/etc/origin/master/master-config.yaml"


class MasterConfigHost(BaseModel):
    """A master whose ``master-config.yaml`` the scan reads (``cat`` over ``access``, the same
    host executor as the control-plane steps): ``name`` (its Node name) and ``access``."""

    name: str = Field(min_length=1)
    access: HostAccess


class NodeSelectorMigrationInput(ProcedureInput):
    """The kit's :class:`~workflows.kit.inputs.ProcedureInput` (``cluster``, ``approvals``,
    ``gates``: every gate's timeout and declared outcome, ``calls``: activity timeouts, 15 s per
    short call by default, ``search_attributes``, ``dry_run``, ``report_to``: the parent procedure
    this one reports to, set by the cluster upgrade, ``alerts``) plus:

    ``mapping``: ``{"region=infra": {"node-role.kubernetes.io/infra": "true"}}``; ``drop_keys``:
    keys removed from selectors without replacement (``zone=default``); ``remove_labels``: node
    labels removed at the end (after the gate); ``revert_window_seconds``: how long the finished
    migration stays open for ``lockkeeper revert`` (0: it closes at once and cannot be reverted
    by lockkeeper any more). Timeouts in seconds.

    ``masters``: the masters whose ``master_config_path`` is scanned for
    ``projectConfig.defaultNodeSelector`` (procedures-spec §5.2; empty = not scanned, with a
    warning in status). lockkeeper does not edit master-config.yaml: a default selector on an
    old label blocks the plan, naming the new value, until a person changes it on every master
    and restarts the APIs (it restarts the control plane).

    ``ondelete_daemonsets``: a DaemonSet with ``updateStrategy: OnDelete`` keeps its pods (on
    the old template) until they are deleted. ``"report"`` (default): the patch is applied, its
    rollout is not waited for, and status lists the pods that still run the old template;
    ``"delete"``: a gate ``ondelete/<ds>``, then its pods are deleted one node at a time, each
    replacement Ready before the next (GlusterFS pods, for one, must not all go at once).

    ``alerts``: the Prometheus alert gate (:class:`workflows.kit.inputs.AlertGatePolicy`, the
    CLI's ``--alert-gate URL``): no selector patch (it rolls the workload's pods) and no OnDelete
    pod deletion on a node starts while a blocking alert fires; None: no gate.
    """

    calls: CallTimeouts = Field(default_factory=lambda: CallTimeouts(short_call_seconds=15.0))
    mapping: dict[str, dict[str, str]] = Field(min_length=1)
    drop_keys: list[str] = Field(default_factory=lambda: ["zone"])
    remove_labels: list[str] = Field(default_factory=lambda: ["region", "zone"])
    approve_plan: bool = True
    approve_label_removal: bool = True
    rollout_timeout_seconds: float = Field(600.0, gt=0)
    pods_timeout_seconds: float = Field(300.0, gt=0)
    poll_seconds: float = Field(2.0, gt=0)
    revert_window_seconds: float = Field(86400.0, ge=0)
    masters: list[MasterConfigHost] = Field(default_factory=list)
    master_config_path: str = MASTER_CONFIG_PATH
    ondelete_daemonsets: Literal["report", "delete"] = "report"

    @field_validator("mapping")
    @classmethod
    def _pairs(cls, v: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        for old, new in v.items():
            if "=" not in old or not old.split("=", 1)[0]:
                raise ValueError(f"mapping key {old!r} must be KEY=VALUE")
            if not new:
                raise ValueError(f"mapping {old!r} has no new label")
        return v


def selector_text(selector: dict[str, str]) -> str:
    """A nodeSelector as ``oc`` and the Kubernetes label-selector syntax write it:
    ``k1=v1,k2=v2`` (``{}`` → ``(none)``)."""
    return ",".join(f"{k}={v}" for k, v in selector.items()) or "(none)"


class MigrationItem(BaseModel):
    """One object to change: ``old``/``new`` selector (a Namespace's annotation as
    ``{"annotation": "k=v"}``); ``blocked`` reasons (empty = ok); ``state`` as the run goes."""

    ref: ObjectRef
    path: str
    old: dict[str, str]
    new: dict[str, str]
    blocked: list[str] = Field(default_factory=list)
    state: Literal["planned", "patched", "rolled-out", "failed", "reverted", "revert-refused", "old-pods-left"] = "planned"
    detail: str | None = None


class MigrationPlan(BaseModel):
    """The objects to change (in order) and the nodes whose ``remove_labels`` go at the end."""

    items: list[MigrationItem] = Field(default_factory=list)
    remove_labels: list[str] = Field(default_factory=list)
    label_nodes: list[str] = Field(default_factory=list)
    node_labels: dict[str, list[str]] = Field(default_factory=dict)

    def blocked(self) -> list[MigrationItem]:
        """Items the capacity check blocked."""
        return [i for i in self.items if i.blocked]

    def lines(self) -> list[str]:
        """The plan for ``--dry-run`` and ``status``."""
        out = []
        for i in self.items:
            verdict = "BLOCKED: " + "; ".join(i.blocked) if i.blocked else "ok"
            out.append(f"{i.ref.describe()} {i.path}: {selector_text(i.old)} -> {selector_text(i.new)} [{verdict}]")
        out.append(f"then remove labels {', '.join(self.remove_labels)} from: {', '.join(self.label_nodes) or 'no node'}")
        return out


class NodeSelectorMigrationStatus(ProcedureStatus):
    """``status``: the plan, the step, the pod regressions seen, the re-scan findings and the
    revert outcome."""

    plan: MigrationPlan | None = None
    step: str | None = None
    regressions: list[str] = Field(default_factory=list)
    rescan: list[str] = Field(default_factory=list)
    labels_removed: list[str] = Field(default_factory=list)
    reverted: list[str] = Field(default_factory=list)
    revert_refused: list[str] = Field(default_factory=list)
    #: OnDelete DaemonSets' pods still on the old template (``ns/pod on node``), per DaemonSet.
    old_template_pods: dict[str, list[str]] = Field(default_factory=dict)


class NodeSelectorMigrationResult(ProcedureResult):
    """``outcome`` completed / reverted / aborted / dry-run, the plan, the message."""

    workflow_id: str = ""
    outcome: str = "completed"
    plan: MigrationPlan | None = None
    labels_removed: list[str] = Field(default_factory=list)
    reverted: list[str] = Field(default_factory=list)
    revert_refused: list[str] = Field(default_factory=list)
    old_template_pods: dict[str, list[str]] = Field(default_factory=dict)
    message: str = ""

