"""Input, status and result of the SDN→OVN-Kubernetes network migration (issue 15, R1).

Pure pydantic models (the CLI, the worker and the workflow share them; field names are a stored
format). Durations are seconds.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator

from workflows.kit.inputs import CallTimeouts, MaxUnavailable, ProcedureInput, over_defaults
from workflows.kit.models import ProcedureResult, ProcedureStatus, RecordEntry

PROCEDURE_NETWORK_MIGRATION = "network-migration"
NETWORK_TYPES = ("OVNKubernetes", "OpenShiftSDN")


def migration_calls() -> CallTimeouts:
    """The migration's activity timeouts: the kit's :class:`CallTimeouts` with 30 s per short call."""
    return CallTimeouts(short_call_seconds=30.0)


class NetworkMigrationInput(ProcedureInput):
    """Start a network migration (OpenShift 4.14 offline migration, driven step by step).

    The kit's :class:`~workflows.kit.inputs.ProcedureInput` gives ``cluster``, ``approvals``
    (requester, four-eyes, approvers of every gate), ``gates`` (every gate's timeout and what a
    timeout does: by default it rejects), ``calls`` (activity timeouts, :func:`migration_calls`),
    ``search_attributes``, ``dry_run`` and ``alerts`` (the Prometheus alert gate, the CLI's
    ``--alert-gate URL``: no batch of the migration's reboots starts while a blocking alert
    fires, and the takeover rollout gates each node with it; the rollback's reboots are never
    held, they are the way back. None: no gate).

    - ``to``: the target plugin (``OVNKubernetes``).
    - ``reboot_via``: how the reboot command reaches a node (``debug-pod`` or ``ssh``);
      ``reboot_command``: the argv run on the node (once per node).
    - ``max_unavailable``: the kit's :data:`~workflows.kit.inputs.MaxUnavailable` (an int >= 1
      or ``"N%"`` of the nodes outside the master pool): nodes rebooted at once outside the
      master pool (masters: one at a time); also the child rollout's maxUnavailable when
      lockkeeper takes over from the controller.
    - ``stall_seconds``: no progress in the pools for this long opens gate ``takeover``.
    - ``poll_seconds``: between reads while waiting.
    - ``ready_timeout_seconds``: how long a rebooted node may take to come back Ready;
      ``unknown_grace_seconds``: after a lost reboot call, a node still Ready on the same boot id
      this long never got the command, which is then sent again (never otherwise).
    - ``pools_timeout_seconds``: at most this long for the pools after unpausing.
    - ``ssh_port``: SSH port of the nodes (``ssh``); ``ssh_hosts``: node -> ``host:port`` when the
      nodes are not reached at their InternalIP (a bastion's forwards, the simulator);
      ``ssh_user``: None = the worker's ``LOCKKEEPER_SSH_USER`` or ``core``.

    - ``rollback_of``: not empty = this run is the full revert (``lockkeeper revert ID --full``)
      of that ended migration, which stopped past the switch: it runs the documented rollback
      from ``rollback_records`` (that run's ``open_records``: ``network-type`` and each
      ``pool-paused/<pool>`` still paused) and reads back that every pool is on its
      ``rollback_baseline`` rendered config (pool -> config before the migration field; empty
      for a run that did not report it: then only Updated with every node on its config).
      Built by :func:`workflows.network_migration.plan.reverse_input`.

    Raises pydantic's ValidationError for an unknown field (a flat ``requested_by`` or
    ``gate_timeout_seconds`` of before is one), an unknown target or reboot path, an empty
    argument, a bad ``max_unavailable`` or a bound out of range.
    """

    to: Literal["OVNKubernetes"] = "OVNKubernetes"
    reboot_via: Literal["debug-pod", "ssh"] = "debug-pod"
    reboot_command: list[str] = Field(default_factory=lambda: ["systemctl", "reboot"], min_length=1)
    max_unavailable: MaxUnavailable = 1
    stall_seconds: float = Field(600.0, gt=0)
    poll_seconds: float = Field(10.0, gt=0)
    ready_timeout_seconds: float = Field(1800.0, gt=0)
    #: After a lost reboot call: a node Ready on the same boot id this long never got the command.
    unknown_grace_seconds: float = Field(180.0, gt=0)
    pools_timeout_seconds: float = Field(3600.0, gt=0)
    ssh_port: int = Field(22, ge=1, le=65535)
    ssh_hosts: dict[str, str] = Field(default_factory=dict)
    ssh_user: str | None = None
    calls: Annotated[CallTimeouts, over_defaults(migration_calls)] = Field(default_factory=migration_calls)
    rollback_of: str = ""
    rollback_records: list[RecordEntry] = Field(default_factory=list)
    rollback_baseline: dict[str, str] = Field(default_factory=dict)

    @field_validator("reboot_command")
    @classmethod
    def _argv(cls, v: list[str]) -> list[str]:
        if not all(isinstance(a, str) and a for a in v):
            raise ValueError("reboot_command must be a list of non-empty arguments")
        return v


class NodeReboot(BaseModel):
    """One node's reboot: ``state`` pending / rebooting / done; ``boot_before`` the boot id
    recorded before the command (a different boot id later proves the reboot)."""

    node: str
    master: bool = False
    state: Literal["pending", "rebooting", "done"] = "pending"
    boot_before: str = ""
    commands_sent: int = 0
    detail: str = ""


class PoolProgress(BaseModel):
    """A pool as the wait shows it: updated of machine count, and the conditions."""

    name: str
    updated: int = 0
    machines: int = 0
    conditions: str = ""
    paused: bool = False


class NetworkMigrationStatus(ProcedureStatus):
    """``step`` (preflight, migration-field, wait-pools, takeover, guard, pause-pools, switch,
    wait-multus, reboots, unpause, verify, cleanup, revert, done; a full revert's run:
    cluster-lease, rollback-gate, revert, wait-multus, reboots, unpause, read-back, done), ``pools`` progress,
    ``guard_behind`` (what the guard found behind, when it refused), ``reboots`` per node,
    ``baseline`` pool -> rendered config before the migration field, ``takeovers`` child IDs,
    ``reverting`` after a revert was requested."""

    to: str = "OVNKubernetes"
    step: str = "preflight"
    pools: list[PoolProgress] = Field(default_factory=list)
    guard_behind: list[str] = Field(default_factory=list)
    reboots: list[NodeReboot] = Field(default_factory=list)
    baseline: dict[str, str] = Field(default_factory=dict)
    takeovers: list[str] = Field(default_factory=list)
    switched: bool = False
    reverting: bool = False
    plan: list[list[str]] = Field(default_factory=list)


class NetworkMigrationResult(ProcedureResult):
    """``outcome``: completed, dry-run, reverted, refused, aborted, failed; ``plan``: reboot
    batches; ``reboots``: per node; ``cleaned_up``: the cleanup ran; ``baseline``: pool ->
    rendered config before the migration field (what a full revert reads back)."""

    plan: list[list[str]] = Field(default_factory=list)
    reboots: list[NodeReboot] = Field(default_factory=list)
    cleaned_up: bool = False
    status_type: str = ""
    #: Refused for a lease: the workflow ID holding it.
    lease_holder: str = ""
    baseline: dict[str, str] = Field(default_factory=dict)
