"""Inputs, results and status of the etcd backup and quorum-restore workflows (field report R3).

Pure pydantic v2 models shared by the CLI, the worker and the workflows. The members file the
CLI reads (``--members members.yaml``) is :class:`EtcdMembersFile`; its validation (unknown
survivor, duplicate names or URLs, missing snapshot) runs before anything is started, let alone
stopped. Both inputs extend the kit's :class:`~workflows.kit.inputs.ProcedureInput` (``cluster``,
``approvals``, ``gates``, ``calls``, ``search_attributes``, ``dry_run``): ``lockkeeper start
etcd-restore -f input.yaml --set approvals.four_eyes=true`` reads the same shape as the flags.
Status and result extend the kit's :class:`ProcedureStatus` / :class:`ProcedureResult`;
gate, approval and control models are the kit's, so ``lockkeeper approve/reject/pause/resume/
abort`` work as for every procedure. Times are UTC datetimes, durations seconds.
"""

from __future__ import annotations

from collections import Counter
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from activities.etcd.models import EtcdMember, EtcdctlTimeouts, SnapshotInfo, VerifyResult
from activities.host.models import ExecBackend
from workflows.kit.inputs import ProcedureInput
from workflows.kit.models import ProcedureResult, ProcedureStatus

PROCEDURE_ETCD_BACKUP = "etcd-backup"
PROCEDURE_ETCD_RESTORE = "etcd-restore"


def member_problems(members: list[EtcdMember]) -> list[str]:
    """Duplicate names, peer URLs, client URLs or data dirs on one host (empty list = fine)."""
    problems = []
    if not members:
        problems.append("no members given")
    for what, values in (
        ("name", [m.name for m in members]),
        ("peer URL", [m.peer_url for m in members]),
        ("client URL", [m.client_url for m in members]),
        ("data dir on one host", [f"{m.host.describe()}:{m.host.host}:{m.data_dir}" for m in members]),
    ):
        problems += [f"duplicate {what} {v!r}" for v, n in Counter(values).items() if n > 1]
    return problems


class _MembersMixin(BaseModel):
    @model_validator(mode="after")
    def _unique(self) -> _MembersMixin:
        problems = member_problems(self.members)  # type: ignore[attr-defined]
        if problems:
            raise ValueError("; ".join(problems))
        return self


class EtcdMembersFile(_MembersMixin):
    """``members.yaml``: the members, and optionally the restore's ``survivor`` and
    ``snapshot`` (the CLI flags win)."""

    members: list[EtcdMember]
    survivor: str | None = None
    snapshot: str | None = None


class _NoAlertGate(BaseModel):
    """The etcd procedures take no alert gate: a backup reads, and a quorum restore answers the
    very alerts an outage fires. ``alerts`` (from :class:`ProcedureInput`) is refused rather
    than ignored."""

    @model_validator(mode="after")
    def _no_alerts(self) -> _NoAlertGate:
        if getattr(self, "alerts", None) is not None:
            raise ValueError("the etcd backup and restore take no alert gate (alerts): leave it out")
        return self


# --- backup -----------------------------------------------------------------------------------------------


class EtcdBackupInput(ProcedureInput, _MembersMixin, _NoAlertGate):
    """Snapshot every member (``etcdctl snapshot save`` + ``etcdutl snapshot status``) into its
    ``backup_dir`` as ``snapshot-<member>-<UTC time>.db``. ``attempts`` per member before it
    counts as failed; ``fail_on_incomplete``: fail the workflow (type EtcdBackupIncomplete)
    instead of returning ``ok=False``; ``snapshot_timeout_seconds`` bounds one snapshot;
    ``timeouts`` etcdctl's own dial and command timeouts. The kit's fields
    (:class:`ProcedureInput`): ``cluster`` (search attribute, lease scope), ``dry_run`` (check
    the preconditions, take no snapshot), ``calls.heartbeat_seconds`` (the snapshot activity's
    heartbeat timeout), ``search_attributes``."""

    members: list[EtcdMember]
    attempts: int = Field(2, ge=1)
    fail_on_incomplete: bool = False
    timeouts: EtcdctlTimeouts = Field(default_factory=EtcdctlTimeouts)
    snapshot_timeout_seconds: float = Field(120.0, gt=0)


class EtcdBackupResult(ProcedureResult):
    """The barrier's answer: ``ok`` only when every member has a checked snapshot;
    ``outcome`` completed / incomplete / aborted / refused (a precondition failed: nothing was
    written, ``problems`` one line each) / dry-run (``ok``: nothing failed); ``message`` is "all members backed up" or
    names the failed members; ``snapshots`` says where each lives; ``failed`` member → why; an
    incomplete backup's ``left_changed`` names every snapshot file it left on the hosts."""

    procedure: str = PROCEDURE_ETCD_BACKUP
    ok: bool = False
    outcome: Literal["completed", "incomplete", "aborted", "refused", "dry-run"] = "completed"
    message: str
    snapshots: list[SnapshotInfo] = Field(default_factory=list)
    failed: dict[str, str] = Field(default_factory=dict)


class EtcdBackupStatus(ProcedureStatus):
    """Answer of the backup's ``status`` query: the barrier (``barriers["backup"]``: members
    done, failed, pending) and the members asked for."""

    procedure: str = PROCEDURE_ETCD_BACKUP
    members: list[str] = Field(default_factory=list)


# --- restore ----------------------------------------------------------------------------------------------


class RestoreStrategy(StrEnum):
    """``force-new-cluster``: keep the survivor's data (newest writes survive);
    ``snapshot-restore``: the survivor starts from a snapshot (data as of the snapshot)."""

    FORCE_NEW_CLUSTER = "force-new-cluster"
    SNAPSHOT_RESTORE = "snapshot-restore"


class RestoreStep(StrEnum):
    """Steps of the restore, in R3's order."""

    PREFLIGHT = "preflight"
    STOP_MEMBERS = "stop-members"
    FORCE_NEW_CLUSTER = "force-new-cluster"
    RESTORE_SNAPSHOT = "restore-snapshot"
    FIX_PEER_URL = "fix-peer-url"
    RESTART_SURVIVOR = "restart-survivor"
    ADD_MEMBER = "add-member"
    MOVE_DATA = "move-data"
    START_MEMBER = "start-member"
    WAIT_JOINED = "wait-joined"
    VERIFY = "verify"
    DONE = "done"


class RestorePhase(StrEnum):
    """The kit's phase values a restore goes through (``paused``/``aborted`` since the kit)."""

    RUNNING = "running"
    PAUSED = "paused"
    WAITING_APPROVAL = "waiting-approval"
    DONE = "done"
    REJECTED = "rejected"
    ABORTED = "aborted"
    FAILED = "failed"


class EtcdRestoreInput(ProcedureInput, _MembersMixin, _NoAlertGate):
    """Restore etcd quorum (R3).

    - ``members``: every member the cluster must end with; ``survivor``: the member the new
      cluster starts from (default: the first); ``strategy``; ``snapshot``: path of the snapshot
      on the survivor's host (snapshot-restore only, required there).
    - Gates before each destructive step (stopping the members, moving a data dir aside) wait
      for the ``approve`` update unless ``auto_approve``; ``gates.timeout_seconds`` None waits
      forever; a timeout applies ``gates.timeout_outcome`` (reject: the restore stops before the
      step; approve: it goes on; abort: it stops as aborted), recorded as a timeout.
      ``approvals`` (requested_by, four_eyes, allowed_approvers) as in every procedure.
    - ``pause`` holds the restore before its next step; ``abort`` stops it there (nothing is
      undone: the result says what was done and ``left_changed`` what stays changed).
      ``cluster``: the lease scope ``etcd/<cluster>`` and the search attribute; ``dry_run``:
      check the preconditions and end ``dry-run`` listing them, no member stopped.
    - ``join_timeout_seconds``: how long one wait for a healthy (and joined) member polls before
      Temporal retries it; ``member_add_retry_seconds``: how long ``member add`` retries
      "unhealthy cluster" inside one attempt; ``verify_timeout_seconds`` the final check;
      ``stop_timeout_seconds`` one member's stop; ``calls.heartbeat_seconds`` the activities'
      heartbeat timeout; ``timeouts`` etcdctl's own dial and command timeouts.
    """

    members: list[EtcdMember]
    strategy: RestoreStrategy = RestoreStrategy.FORCE_NEW_CLUSTER
    survivor: str | None = None
    snapshot: str | None = None
    auto_approve: bool = False
    timeouts: EtcdctlTimeouts = Field(default_factory=EtcdctlTimeouts)
    join_timeout_seconds: float = Field(60.0, gt=0)
    member_add_retry_seconds: float = Field(30.0, gt=0)
    verify_timeout_seconds: float = Field(60.0, gt=0)
    stop_timeout_seconds: float = Field(60.0, gt=0)

    @model_validator(mode="after")
    def _choices(self) -> EtcdRestoreInput:
        names = [m.name for m in self.members]
        if self.survivor is not None and self.survivor not in names:
            raise ValueError(f"unknown survivor {self.survivor!r}; members are {', '.join(names)}")
        if self.strategy == RestoreStrategy.SNAPSHOT_RESTORE and not self.snapshot:
            raise ValueError("strategy snapshot-restore needs a backup: give the snapshot path (--snapshot)")
        if self.strategy == RestoreStrategy.FORCE_NEW_CLUSTER and self.snapshot:
            raise ValueError("a snapshot is only used by strategy snapshot-restore")
        via_pods = [m.name for m in self.members if m.host.backend == ExecBackend.DEBUG_POD]
        if via_pods:
            # A debug pod is created through the Kubernetes API, which has no quorum to serve it
            # while etcd is down (OpenShift's restore procedure reaches the hosts over SSH).
            raise ValueError(
                f"members {', '.join(via_pods)} are reached through debug pods, which need the Kubernetes API; "
                "a quorum restore runs while the API is down: give them ssh or local host access")
        return self

    @property
    def survivor_name(self) -> str:
        return self.survivor or self.members[0].name


class MemberRestoreState(BaseModel):
    """Per member: ``state`` pending/stopped/restored/added/started/joined; ``id`` once known;
    ``moved_to`` where its old data dir went."""

    name: str
    state: str = "pending"
    id: str | None = None
    moved_to: str | None = None
    detail: str = ""


class RestoreStatus(ProcedureStatus):
    """Answer of the ``status`` query: the step, the member it concerns, what it waits for,
    since when; gates and their history (kit fields); the log of finished steps."""

    procedure: str = PROCEDURE_ETCD_RESTORE
    phase: RestorePhase = RestorePhase.RUNNING
    strategy: RestoreStrategy = RestoreStrategy.FORCE_NEW_CLUSTER
    survivor: str = ""
    step: RestoreStep = RestoreStep.PREFLIGHT
    member: str | None = None
    members: dict[str, MemberRestoreState] = Field(default_factory=dict)
    log: list[str] = Field(default_factory=list)


class EtcdRestoreResult(ProcedureResult):
    """``outcome`` completed (verified), rejected (a gate was rejected or timed out with outcome
    reject; ``message`` says what had been done), aborted (``abort``, or a gate timed out with
    outcome abort), unverified (the final check found ``verification.problems``), refused (a
    precondition failed before any member was stopped: ``problems``, one line each) or dry-run
    (every check listed in ``preconditions``; nothing stopped). A restore that stopped short
    (rejected, aborted, failed) lists in ``left_changed`` what differs from what its preflight
    read, read back from the cluster (:mod:`workflows.etcd.changes`)."""

    procedure: str = PROCEDURE_ETCD_RESTORE
    outcome: Literal["completed", "rejected", "aborted", "unverified", "refused", "dry-run"]
    message: str
    strategy: RestoreStrategy
    survivor: str
    members: dict[str, MemberRestoreState] = Field(default_factory=dict)
    verification: VerifyResult | None = None
    log: list[str] = Field(default_factory=list)
    duration_seconds: float | None = None
