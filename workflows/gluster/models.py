"""Input, assessment, status and result of GlusterFS brick check and recovery (R3a).

Pure pydantic (procedures-spec §3.1): the input, the pure assessment's output
(:func:`workflows.gluster.plan.assess`), the per-host run, the heal progress the
``gluster_healthy`` gate shows, and the procedure's status and result (extending the kit's
:class:`ProcedureStatus` / :class:`ProcedureResult`). Field names travel in histories: add
fields with defaults, never rename. Times are UTC datetimes, durations seconds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from activities.gluster.models import GlusterPod, GlusterTarget
from workflows.kit.models import ProcedureResult, ProcedureStatus

#: Procedure name (spec name, LockkeeperProcedure, CLI ``start gluster-recovery``).
PROCEDURE_GLUSTER_RECOVERY = "gluster-recovery"

QuorumRule = Literal["per-volume", "per-replica-set"]


class GlusterHealthParams(BaseModel):
    """The ``gluster_healthy`` gate (procedures-spec §1.7, §2.5): every brick online and heal
    info clean on ``volumes`` (None = every replicated volume). Polls every ``interval_s``
    (o-a: 10 s) up to ``timeout_s`` (o-a 3.10 ``openshift_storage_glusterfs_health_timeout``:
    1200 s); heal entries that do not fall for ``stall_after_s`` (None = never) stop the wait
    and open a gate instead of waiting on."""

    volumes: list[str] | None = None
    interval_s: float = Field(10.0, gt=0)
    max_interval_s: float = Field(30.0, gt=0)
    timeout_s: float = Field(1200.0, gt=0)
    stall_after_s: float | None = Field(300.0, gt=0)
    gate_timeout_s: float | None = None


class GlusterRecoveryInput(BaseModel):
    """``lockkeeper start gluster-recovery`` (procedures-spec §3.1).

    ``mode`` check: read, assess and run the heal check, change nothing; recover: restart the
    GlusterFS pod of every host with an offline brick, one host at a time. ``quorum_rule``:
    what "the volume is down" means (seed 002: more than one brick of a volume).
    ``max_restarts_per_host``: pod restarts before the gate offering ``volume start VOL force``
    (only with ``allow_volume_start_force``), human recovery or abort.
    ``replacement_timeout_s``: how long a deleted pod's replacement may take to be Running and
    Ready (o-a ``openshift_storage_glusterfs_timeout`` 300 s; the readiness probe alone needs
    >= 40 s). ``gate_timeout_s``: how long a gate waits (None = until decided; a timeout
    rejects)."""

    cluster: str = "default"
    namespace: str = "glusterfs"
    clusters: list[str] = Field(default_factory=lambda: ["storage"], min_length=1)
    mode: Literal["check", "recover"] = "recover"
    exclude_node: str | None = None
    quorum_rule: QuorumRule = "per-volume"
    approve_pod_delete: bool = True
    max_restarts_per_host: int = Field(2, ge=1)
    allow_volume_start_force: bool = False
    heal: GlusterHealthParams = Field(default_factory=GlusterHealthParams)
    replacement_timeout_s: float = Field(300.0, gt=0)
    reread_delay_s: float = Field(5.0, ge=0)
    gate_timeout_s: float | None = None
    requested_by: str = "unknown"
    four_eyes: bool = False
    allowed_approvers: list[str] = Field(default_factory=list)
    read_attempts: int = Field(5, ge=1)
    read_backoff_s: float = Field(2.0, ge=0)
    command_timeout_s: float = Field(120.0, gt=0)
    activity_timeout_seconds: float = 30.0
    search_attributes: bool = True

    def target(self) -> GlusterTarget:
        """Where the GlusterFS pods are (namespace, clusters, excluded node)."""
        return GlusterTarget(namespace=self.namespace, clusters=list(self.clusters), exclude_node=self.exclude_node)


# --- assessment ----------------------------------------------------------------------------------


class BrickState(BaseModel):
    """One brick as assessed: where it sits (volume, replica set index, host, node, pod),
    ``online`` and, when offline, ``reason`` (``Online N``, ``missing from volume status``,
    ``peer disconnected``)."""

    volume: str
    name: str
    host: str
    path: str
    replica_set: int = 0
    arbiter: bool = False
    online: bool = True
    reason: str | None = None
    node: str | None = None
    pod: str | None = None
    port: int | None = None
    pid: int | None = None


class VolumeAssessment(BaseModel):
    """A volume's bricks and replica sets (brick names), offline bricks, heal state, and
    ``fatal`` (why the volume is down: more bricks offline than the quorum rule allows)."""

    name: str
    type: str = ""
    status: str = ""
    replica_count: int = 1
    arbiter_count: int = 0
    bricks: list[BrickState] = Field(default_factory=list)
    replica_sets: list[list[str]] = Field(default_factory=list)
    offline: list[str] = Field(default_factory=list)
    fatal: str | None = None
    heal_entries: int | None = None
    heal_problems: list[str] = Field(default_factory=list)
    split_brain: list[str] = Field(default_factory=list)
    heal_skipped: str | None = None


class HostPlan(BaseModel):
    """A host (brick address) whose GlusterFS pod to restart: its node and pod (name, uid), the
    offline bricks there (``volume: host:/path``), every volume with a brick there, and whether
    restarting is ``safe`` (``unsafe_reason`` says which volume would lose too many bricks)."""

    host: str
    node: str | None = None
    pod: str | None = None
    pod_uid: str | None = None
    offline_bricks: list[str] = Field(default_factory=list)
    volumes: list[str] = Field(default_factory=list)
    safe: bool = True
    unsafe_reason: str | None = None


class Assessment(BaseModel):
    """What :func:`workflows.gluster.plan.assess` concluded from one read."""

    at: datetime | None = None
    exec_pod: str = ""
    rule: QuorumRule = "per-volume"
    volumes: list[VolumeAssessment] = Field(default_factory=list)
    fatal: list[str] = Field(default_factory=list)
    hosts: list[HostPlan] = Field(default_factory=list)
    unmapped: list[str] = Field(default_factory=list)
    pods: list[GlusterPod] = Field(default_factory=list)
    disconnected_peers: list[str] = Field(default_factory=list)

    @property
    def offline(self) -> list[str]:
        return [f"{v.name}: {b}" for v in self.volumes for b in v.offline]

    @property
    def bricks_online(self) -> bool:
        return not self.offline and not self.fatal and not self.unmapped

    @property
    def heal_clean(self) -> bool:
        return all(not v.heal_problems for v in self.volumes)

    @property
    def healthy(self) -> bool:
        """Every brick online and heal info clean on every volume read."""
        return self.bricks_online and self.heal_clean


# --- the run -------------------------------------------------------------------------------------

HostStep = Literal[
    "pending", "approval", "delete", "wait-replacement", "re-read", "decision", "start-force", "heal", "done",
    "failed", "aborted",
]


class PodDelete(BaseModel):
    """A pod delete as recorded BEFORE it was sent (the record is what makes a resumed run skip
    a second delete): pod, uid, node, when; ``result`` once the call answered."""

    pod: str
    uid: str
    node: str
    at: datetime
    result: str = ""


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


class HealProgress(BaseModel):
    """Heal progress of one volume while the gate waits: entries now (None = unknown),
    at the first poll, the lowest seen and when it last fell; ``falling`` whether the last poll
    was lower than the one before; ``problems`` the heal gate's words."""

    volume: str
    entries: int | None = None
    first: int | None = None
    lowest: int | None = None
    previous: int | None = None
    falling: bool = False
    last_progress_at: datetime | None = None
    polled_at: datetime | None = None
    problems: list[str] = Field(default_factory=list)


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
    stopped (a volume is down, a host unsafe or unmapped: nothing was deleted after that),
    aborted, or failed; ``healthy`` the final check; ``fatal`` why it stopped."""

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
