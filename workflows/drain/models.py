"""Input, status and result of the standalone drain (``lockkeeper start drain``).

The drain's own status and result, extending the kit's :class:`ProcedureStatus` /
:class:`ProcedureResult` (before the kit the drain reported a one-node rollout). Pure pydantic.
Times are UTC datetimes, durations seconds.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from activities.host.models import CommandResult, ExecBackend, HostAccess
from workflows.kit.inputs import AlertGatePolicy
from workflows.kit.models import DrainDecision, NodeResult, NodeStatus, ProcedureResult, ProcedureStatus, check_timeout_decision

#: Procedure name (spec name, LockkeeperProcedure set by the starter).
PROCEDURE_DRAIN = "drain"
#: The LockkeeperProcedure value the drain itself upserted before the kit (stored histories).
PROCEDURE_NODE_DRAIN = "node-drain"


class NodeDrainInput(BaseModel):
    """Take one node out for maintenance durably (node-maintenance-operator style): cordon
    (recording ``lockkeeper.io/cordoned-by``), drain with the blocked-drain report and decision
    gate, optionally run ``reboot_command`` (argv) and, with ``uncordon_after``, uncordon it again
    (only if we cordoned it). Knobs and decision rules as in the MachineConfig rollout.
    ``cluster``: the lease scope ``node/<cluster>/<node>`` and the search attribute.
    ``alerts``: the Prometheus alert gate (:class:`workflows.kit.inputs.AlertGatePolicy`, the
    CLI's ``--alert-gate URL``): the node is not cordoned while a blocking alert fires; None: no
    gate.
    """

    node: str
    cluster: str = "default"
    requested_by: str = "unknown"
    four_eyes: bool = False
    allowed_approvers: list[str] = Field(default_factory=list)
    reboot_command: list[str] | None = None
    #: How ``reboot_command`` reaches the node (default: a privileged debug pod pinned to it,
    #: as ``oc debug node/NODE -- chroot /host ...``); see :class:`activities.host.models.HostAccess`.
    reboot_access: HostAccess | None = None
    reboot_timeout_seconds: float = Field(600.0, gt=0)
    #: After the reboot command, how long the node may take to report Ready again (seconds)
    #: before the procedure fails (leaving the node cordoned).
    ready_timeout_seconds: float = Field(1800.0, gt=0)
    #: A reboot command whose outcome is unknown (lost worker, command timeout) opens gate
    #: ``host/reboot-command`` (approve runs it again); this long, then the procedure fails.
    unknown_outcome_gate_seconds: float | None = None
    uncordon_after: bool = False
    decide_after_seconds: float | None = 600.0
    decision_timeout_seconds: float | None = None
    decision_timeout_outcome: DrainDecision = DrainDecision.WAIT
    drain_backoff_initial_seconds: float = 5.0
    drain_backoff_max_seconds: float = 60.0
    drain_wait_seconds: float = 30.0
    activity_timeout_seconds: float = 10.0
    activity_heartbeat_timeout_seconds: float = 10.0
    search_attributes: bool = True
    alerts: AlertGatePolicy | None = None
    #: Check the node and the reboot command's program, take no lease, write nothing; the run
    #: ends ``dry-run`` with every check's result.
    dry_run: bool = False

    @field_validator("decision_timeout_outcome")
    @classmethod
    def _no_unapproved_delete(cls, v: DrainDecision) -> DrainDecision:
        return check_timeout_decision(v)

    @field_validator("reboot_command")
    @classmethod
    def _argv(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and (not v or not v[0].strip()):
            raise ValueError("reboot_command must be a non-empty argv list")
        return v

    def command_access(self) -> HostAccess:
        """Where the reboot command runs: ``reboot_access``, or a debug pod on the node."""
        return self.reboot_access or HostAccess(backend=ExecBackend.DEBUG_POD, node=self.node)


class DrainStatus(ProcedureStatus):
    """Answer of the drain's ``status`` query: the node (phase, step, what it waits for, the
    blocked report and the decision gate), the reboot command and its result."""

    procedure: str = PROCEDURE_DRAIN
    node: NodeStatus | None = None
    reboot_command: list[str] | None = None
    uncordon_after: bool = False
    command: CommandResult | None = None


class NodeDrainResult(ProcedureResult):
    """``outcome`` completed (drained, and uncordoned with ``uncordon_after``) or aborted (abort
    or skip decision: the node was uncordoned if this run had cordoned it, and the message says whether it stays cordoned and why); ``node_result`` the node's
    final phase and duration; ``command`` the reboot command's result."""

    procedure: str = PROCEDURE_DRAIN
    outcome: Literal["completed", "aborted", "refused", "dry-run"] = "completed"
    node: str = ""
    drained: bool = False
    uncordoned: bool = False
    node_result: NodeResult | None = None
    command: CommandResult | None = None
