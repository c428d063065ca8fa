"""Input, status and result of the standalone drain (``lockkeeper start drain``).

The drain's own status and result, extending the kit's :class:`ProcedureStatus` /
:class:`ProcedureResult` (before the kit the drain reported a one-node rollout). Pure pydantic.
Times are UTC datetimes, durations seconds.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from activities.host.models import CommandResult, ExecBackend, HostAccess
from workflows.kit.inputs import DrainPolicy, ProcedureInput, over_defaults
from workflows.kit.models import NodeResult, NodeStatus, ProcedureResult, ProcedureStatus

#: Procedure name (spec name, LockkeeperProcedure set by the starter).
PROCEDURE_DRAIN = "drain"
#: The LockkeeperProcedure value the drain itself upserted before the kit (stored histories).
PROCEDURE_NODE_DRAIN = "node-drain"


def drain_defaults() -> DrainPolicy:
    """The standalone drain's drain policy: the kit's :class:`DrainPolicy` with 30 s per pass and a
    5 s to 60 s backoff while an eviction is refused (its defaults before the kit)."""
    return DrainPolicy(wait_seconds=30.0, backoff_initial_seconds=5.0, backoff_max_seconds=60.0)


class NodeDrainInput(ProcedureInput):
    """Take one node out for maintenance durably (node-maintenance-operator style): cordon
    (recording ``lockkeeper.io/cordoned-by``), drain with the blocked-drain report and decision
    gate, optionally run ``reboot_command`` (argv) and, with ``uncordon_after``, uncordon it again
    (only if we cordoned it).

    The kit's :class:`~workflows.kit.inputs.ProcedureInput` gives ``cluster`` (the lease scope
    ``node/<cluster>/<node>`` and the search attribute), ``approvals`` (requester, four-eyes,
    approvers of the decision and host gates), ``gates`` (``gates.timeout_seconds``: how long the
    gate ``host/reboot-command`` of a reboot command whose outcome is unknown waits, then the
    procedure fails; None: until decided), ``calls`` (activity timeouts), ``search_attributes``,
    ``dry_run`` (check the node and the reboot command's program, take no lease, write nothing;
    the run ends ``dry-run`` with every check's result) and ``alerts`` (the Prometheus alert gate,
    the CLI's ``--alert-gate URL``: the node is not cordoned while a blocking alert fires).

    ``drain``: the kit's :class:`~workflows.kit.inputs.DrainPolicy` (:func:`drain_defaults`; a
    partial ``drain`` keeps these defaults for the rest): pass length, backoff, when a blocked
    drain asks (``decide_after_seconds``) and what an unanswered decision does.
    ``reboot_access``: how ``reboot_command`` reaches the node (default: a privileged debug pod
    pinned to it, as ``oc debug node/NODE -- chroot /host ...``; see
    :class:`activities.host.models.HostAccess`). ``ready_timeout_seconds``: after the reboot
    command, how long the node may take to report Ready again before the procedure fails
    (leaving the node cordoned).

    Raises pydantic's ValidationError for an unknown field, an empty ``reboot_command``, a
    non-positive duration, a ``delete-pod`` decision timeout outcome, or a drain timeout (the
    drain never gives a drain up).
    """

    node: str = Field(min_length=1)
    reboot_command: list[str] | None = None
    reboot_access: HostAccess | None = None
    reboot_timeout_seconds: float = Field(600.0, gt=0)
    ready_timeout_seconds: float = Field(1800.0, gt=0)
    uncordon_after: bool = False
    drain: Annotated[DrainPolicy, over_defaults(drain_defaults)] = Field(default_factory=drain_defaults)

    @field_validator("reboot_command")
    @classmethod
    def _argv(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and (not v or not v[0].strip()):
            raise ValueError("reboot_command must be a non-empty argv list")
        return v

    @model_validator(mode="after")
    def _no_drain_timeout(self) -> NodeDrainInput:
        # The drain's whole point is the empty node: it never gives a drain up (node procedures do).
        if self.drain.timeout_seconds is not None or self.drain.on_timeout != "gate":
            raise ValueError("drain.timeout_seconds / drain.on_timeout: the standalone drain never gives a drain up; a "
                             "blocked drain asks after drain.decide_after_seconds (node-upgrade takes a drain timeout)")
        return self

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
