"""Input, assessment, status and result of GlusterFS brick check and recovery (R3a).

Pure pydantic (procedures-spec §3.1): the input, the pure assessment's output
(:func:`workflows.shared.glusterfs.assess.assess`), the per-host run, the heal progress the
``gluster_healthy`` gate shows, and the procedure's status and result (extending the kit's
:class:`ProcedureStatus` / :class:`ProcedureResult`). Field names travel in histories: add
fields with defaults, never rename. Times are UTC datetimes, durations seconds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from activities.gluster.models import GlusterTarget
from workflows.shared.glusterfs.models import (  # noqa: F401 - the procedure's models use them
    Assessment,
    BrickState,
    GlusterHealthParams,
    HealProgress,
    HostPlan,
    QuorumRule,
    VolumeAssessment,
)
from workflows.kit.inputs import CallTimeouts, ProcedureInput, over_defaults
from workflows.kit.models import ProcedureResult, ProcedureStatus

#: Procedure name (spec name, LockkeeperProcedure, CLI ``start gluster-recovery``).
PROCEDURE_GLUSTER_RECOVERY = "gluster-recovery"

def gluster_calls() -> CallTimeouts:
    """The recovery's activity timeouts: the kit's :class:`CallTimeouts` with 30 s per short call
    (a GlusterFS read runs the gluster CLI in a pod)."""
    return CallTimeouts(short_call_seconds=30.0)


class GlusterRecoveryInput(ProcedureInput):
    """``lockkeeper start gluster-recovery`` (procedures-spec §3.1).

    The kit's :class:`~workflows.kit.inputs.ProcedureInput` gives ``cluster`` (the lease
    ``gluster/<cluster>``), ``approvals`` (requester, four-eyes, approvers of every gate),
    ``gates`` (every gate's timeout, the heal gate's too, and what a timeout does: by default it
    rejects), ``calls`` (activity timeouts, :func:`gluster_calls`), ``search_attributes`` and
    ``dry_run`` (read, check every precondition and end ``dry-run`` with the plan; nothing is
    written, no lease taken, either mode) and ``alerts`` (the Prometheus alert gate: in recover
    mode no host's GlusterFS pod is deleted while a blocking alert fires; None: no gate).

    ``mode`` check: read, assess and run the heal check, change nothing; recover: restart the
    GlusterFS pod of every host with an offline brick, one host at a time. ``quorum_rule``:
    what "the volume is down" means (seed 002: more than one brick of a volume).
    ``max_restarts_per_host``: pod restarts before the gate offering ``volume start VOL force``
    (only with ``allow_volume_start_force``), human recovery or abort. ``heal``: the
    ``gluster_healthy`` wait (:class:`GlusterHealthParams`).
    ``replacement_timeout_seconds``: how long a deleted pod's replacement may take to be Running
    and Ready (o-a ``openshift_storage_glusterfs_timeout`` 300 s; the readiness probe alone needs
    >= 40 s). ``reread_delay_seconds``: the first pause before re-reading a restarted host's
    bricks. ``read_attempts`` / ``read_backoff_seconds``: a read's tries and the pause between;
    ``command_timeout_seconds``: one gluster CLI command.

    Raises pydantic's ValidationError for an unknown field (a flat ``gate_timeout_s`` or
    ``requested_by`` of before is one: ``gates.timeout_seconds``, ``approvals.requested_by``), an
    unknown mode or quorum rule, or a bound out of range."""

    namespace: str = "glusterfs"
    clusters: list[str] = Field(default_factory=lambda: ["storage"], min_length=1)
    mode: Literal["check", "recover"] = "recover"
    exclude_node: str | None = None
    quorum_rule: QuorumRule = "per-volume"
    approve_pod_delete: bool = True
    max_restarts_per_host: int = Field(2, ge=1)
    allow_volume_start_force: bool = False
    heal: GlusterHealthParams = Field(default_factory=GlusterHealthParams)
    replacement_timeout_seconds: float = Field(300.0, gt=0)
    reread_delay_seconds: float = Field(5.0, ge=0)
    read_attempts: int = Field(5, ge=1)
    read_backoff_seconds: float = Field(2.0, ge=0)
    command_timeout_seconds: float = Field(120.0, gt=0)
    calls: Annotated[CallTimeouts, over_defaults(gluster_calls)] = Field(default_factory=gluster_calls)

    def target(self) -> GlusterTarget:
        """Where the GlusterFS pods are (namespace, clusters, excluded node)."""
        return GlusterTarget(namespace=self.namespace, clusters=list(self.clusters), exclude_node=self.exclude_node)


# --- assessment ----------------------------------------------------------------------------------


class PodDelete(BaseModel):
    """A pod delete as recorded BEFORE it was sent (the record is what makes a resumed run skip
    a second delete): pod, uid, node, when; ``result`` once the call answered."""

    pod: str
    uid: str
    node: str
    at: datetime
    result: str = ""


HostStep = Literal[
    "pending", "alerts", "approval", "delete", "wait-replacement", "re-read", "decision", "start-force", "heal", "done",
    "failed", "aborted",
]


class HostRun(BaseModel):
    """One host's recovery: step, the pods it went through, restarts, actions taken."""

    host: str
    node: str | None = None
    pod: str | None = None
    pod_uid: str | None = None
    step: HostStep = "pending"
    since: datetime | None = None
    waiting_for: str | None = None
    restarts: int = 0
    deletes: list[PodDelete] = Field(default_factory=list)
    replacement: str | None = None
    replacement_uid: str | None = None
    offline_bricks: list[str] = Field(default_factory=list)
    actions: list[str] = Field(default_factory=list)
    reason: str | None = None
    #: ``offline_bricks`` was read again after a restart (until then it is the plan's list).
    reread: bool = False


class GlusterRecoveryStatus(ProcedureStatus):
    """Answer of the ``status`` query: mode, step, the latest assessment, the host runs and the
    heal progress per volume."""

    procedure: str = PROCEDURE_GLUSTER_RECOVERY
    mode: str = "recover"
    step: str = "inventory"
    assessment: Assessment | None = None
    hosts: list[HostRun] = Field(default_factory=list)
    heal: dict[str, HealProgress] = Field(default_factory=dict)


class VolumeResult(BaseModel):
    """Per volume at the end: bricks (with online state), whether all are online, heal entries
    at the start and at the end, and the actions taken on it."""

    name: str
    bricks: list[BrickState] = Field(default_factory=list)
    online: bool = True
    heal_entries_start: int | None = None
    heal_entries_end: int | None = None
    heal_problems: list[str] = Field(default_factory=list)
    actions: list[str] = Field(default_factory=list)


class GlusterRecoveryResult(ProcedureResult):
    """``outcome`` completed (healthy at the end), unhealthy (check mode found a problem),
    stopped (a volume is down or a host unsafe: nothing was deleted after that), refused (a
    precondition failed, e.g. a brick host maps to no node or pod: nothing was written,
    ``problems`` one line each), dry-run (``preconditions`` lists every check), aborted, or failed; ``healthy`` the final check; ``fatal`` why it stopped."""

    procedure: str = PROCEDURE_GLUSTER_RECOVERY
    mode: str = "recover"
    healthy: bool = False
    #: completed and healthy: what ``lockkeeper start --wait`` / ``--check-only`` exit 0 on.
    ok: bool = False
    volumes: list[VolumeResult] = Field(default_factory=list)
    fatal: list[str] = Field(default_factory=list)
    hosts: list[HostRun] = Field(default_factory=list)
    assessment_start: Assessment | None = None
    assessment_end: Assessment | None = None
