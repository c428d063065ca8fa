"""GlusterFS assessment and health models every procedure that touches GlusterFS nodes shares
(procedures-spec §1.7, §2.5, §3.1): the pure assessment's output
(:func:`workflows.shared.glusterfs.assess.assess`), the heal progress and the health gate's
parameters (:mod:`workflows.shared.glusterfs.health`). Pure pydantic; times are UTC datetimes,
durations seconds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from activities.gluster.models import GlusterPod

QuorumRule = Literal["per-volume", "per-replica-set"]


class GlusterHealthParams(BaseModel):
    """The ``gluster_healthy`` wait (procedures-spec §1.7, §2.5): every brick online and heal
    info clean on ``volumes`` (None = every replicated volume). Polls every
    ``interval_seconds`` (o-a: 10 s, backing off to ``max_interval_seconds``) up to
    ``timeout_seconds`` (o-a 3.10 ``openshift_storage_glusterfs_health_timeout``: 1200 s); heal
    entries that do not fall for ``stall_after_seconds`` (None = never) stop the wait and open a
    gate instead of waiting on (that gate waits as the procedure's ``gates`` policy says).
    Unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")

    volumes: list[str] | None = None
    interval_seconds: float = Field(10.0, gt=0)
    max_interval_seconds: float = Field(30.0, gt=0)
    timeout_seconds: float = Field(1200.0, gt=0)
    stall_after_seconds: float | None = Field(300.0, gt=0)


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
    """What :func:`workflows.shared.glusterfs.assess.assess` concluded from one read."""

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
