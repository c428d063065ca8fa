"""Inputs and results of the etcd activities (the contract with the etcd workflows).

Plain pydantic v2 models, no Kubernetes, no asyncssh: workflows import them through
``workflow.unsafe.imports_passed_through()`` and the pydantic data converter carries them in
history. Nothing here holds a secret: SSH keys, known_hosts and cluster credentials come from the
worker's environment (see :mod:`activities.host.executors`); TLS material for ``etcdctl`` is named by
*path on the member's host*, never by content.

Terms follow etcd (``member list``, ``member add``, ``endpoint health``, ``raftIndex``) and the
OKD 3.x etcd restore runbook retold in field report R3.
"""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator, model_validator

from activities.host.models import ExecBackend, HostAccess

# --- etcd members ---------------------------------------------------------------------------------


class SystemdControl(BaseModel):
    """Stop/start with ``systemctl`` (OKD 3.x ``etcd.service``). Overrides for one start
    (``--force-new-cluster``, the initial cluster) go into a systemd drop-in as ``ETCD_*``
    environment variables, which etcd reads like its flags."""

    kind: Literal["systemd"] = "systemd"
    unit: str = "etcd.service"


class StaticPodControl(BaseModel):
    """Stop/start a static pod (OpenShift) by moving its manifest out of and back into the
    kubelet's manifests folder. ``stash_dir`` keeps the original while it is out; overrides for
    one start are ``ETCD_*`` environment variables added to ``container`` in a copy."""

    kind: Literal["static-pod"] = "static-pod"
    manifest: str = "/etc/kubernetes/manifests/etcd-pod.yaml"
    stash_dir: str = "/etc/kubernetes/manifests-stopped"
    container: str = "etcd"


class ProcessControl(BaseModel):
    """A local etcd process that lockkeeper starts itself, detached, with ``argv`` (the etcd
    binary may be given as plain ``etcd``: it is located like the client tools), writing
    ``<state_dir>/<name>.pid`` and ``<name>.log``; stopped by pid. Local backend only."""

    kind: Literal["process"] = "process"
    argv: list[str] = Field(min_length=1)
    state_dir: str


MemberControl = Annotated[SystemdControl | StaticPodControl | ProcessControl, Field(discriminator="kind")]


class EtcdTLS(BaseModel):
    """Paths *on the member's host* of etcdctl's client TLS files (``--cacert/--cert/--key``)."""

    cacert: str | None = None
    cert: str | None = None
    key: str | None = None


def _check_url(value: str, what: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.port is None:
        raise ValueError(f"{what} must be http(s)://HOST:PORT, got {value!r}")
    return value.rstrip("/")


class EtcdMember(BaseModel):
    """One etcd member as the restore needs it.

    ``peer_url``/``client_url``: the URLs it advertises; ``host``: how to run commands there;
    ``data_dir``: its data directory on that host; ``control``: how to stop and start it;
    ``etcdctl``/``etcdutl``: binaries on the host (None: located, see
    :func:`activities.host.executors.find_etcd_binary`, for local; plain names on PATH remotely);
    ``backup_dir``: where snapshots go on that host (None: ``<data_dir>-backup``).
    """

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    peer_url: str
    client_url: str
    host: HostAccess = Field(default_factory=HostAccess)
    data_dir: str = Field(min_length=2)
    control: MemberControl
    etcdctl: str | None = None
    etcdutl: str | None = None
    tls: EtcdTLS | None = None
    backup_dir: str | None = None

    @field_validator("peer_url")
    @classmethod
    def _peer(cls, v: str) -> str:
        return _check_url(v, "peer_url")

    @field_validator("client_url")
    @classmethod
    def _client(cls, v: str) -> str:
        return _check_url(v, "client_url")

    @field_validator("data_dir")
    @classmethod
    def _abs(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(f"data_dir must be an absolute path, got {v!r}")
        return v.rstrip("/")

    @model_validator(mode="after")
    def _process_is_local(self) -> EtcdMember:
        if self.control.kind == "process" and self.host.backend != ExecBackend.LOCAL:
            raise ValueError(f"member {self.name}: control kind `process` needs the local backend")
        return self

    @property
    def effective_backup_dir(self) -> str:
        """``backup_dir`` or ``<data_dir>-backup``."""
        return self.backup_dir or f"{self.data_dir}-backup"


# --- etcd activity inputs and results ---------------------------------------------------------------


class EtcdctlTimeouts(BaseModel):
    """etcdctl's own ``--dial-timeout`` and ``--command-timeout``, seconds."""

    dial_seconds: float = 2.0
    command_seconds: float = 5.0


class ClusterStatusInput(BaseModel):
    """Read the cluster as seen from ``via`` (run etcdctl on its host) against ``endpoints``
    (client URLs; empty = every member's client URL)."""

    via: EtcdMember
    members: list[EtcdMember]
    endpoints: list[str] = Field(default_factory=list)
    timeouts: EtcdctlTimeouts = Field(default_factory=EtcdctlTimeouts)


class MemberInfo(BaseModel):
    """One entry of ``member list``: ``id`` in hex (as etcdctl prints it), ``name`` empty while
    the member was added but has not started yet."""

    id: str
    name: str = ""
    peer_urls: list[str] = Field(default_factory=list)
    client_urls: list[str] = Field(default_factory=list)
    is_learner: bool = False

    @property
    def started(self) -> bool:
        """An added member has no name until it starts."""
        return bool(self.name)


class EndpointState(BaseModel):
    """``endpoint health`` and ``endpoint status`` of one client URL (``error`` when it did
    not answer)."""

    endpoint: str
    healthy: bool = False
    member_id: str | None = None
    leader: str | None = None
    raft_index: int | None = None
    raft_applied_index: int | None = None
    raft_term: int | None = None
    revision: int | None = None
    error: str | None = None


class ClusterStatus(BaseModel):
    """What the cluster looks like now. ``members`` comes from ``member list`` or, without
    quorum, from ``via``'s peer endpoint ``/members`` (``members_source`` says which); None when
    neither answered (``members_error`` says why)."""

    members: list[MemberInfo] | None = None
    members_source: str | None = None
    members_error: str | None = None
    endpoints: list[EndpointState] = Field(default_factory=list)

    def member_named(self, name: str) -> MemberInfo | None:
        """The listed member called ``name``, or None."""
        return next((m for m in self.members or [] if m.name == name), None)

    def member_with_peer(self, peer_url: str) -> MemberInfo | None:
        """The listed member advertising ``peer_url``, or None."""
        return next((m for m in self.members or [] if peer_url in m.peer_urls), None)

    def healthy(self, endpoint: str) -> bool:
        """Whether ``endpoint`` answered ``endpoint health`` as healthy."""
        return any(e.endpoint == endpoint and e.healthy for e in self.endpoints)


class MemberInput(BaseModel):
    """An action on one member (stop, or a read-only check)."""

    member: EtcdMember
    timeout_seconds: float = 60.0


class MemberActionResult(BaseModel):
    """``changed`` False when the member already was in the asked state (a retried call)."""

    member: str
    changed: bool
    detail: str = ""


class StartOverrides(BaseModel):
    """Flags for one start: ``force_new_cluster``; ``initial_cluster`` (``n1=url,n2=url``) and
    ``initial_cluster_state`` (``new``/``existing``) for a member re-added after ``member add``."""

    force_new_cluster: bool = False
    initial_cluster: str | None = None
    initial_cluster_state: Literal["new", "existing"] | None = None

    def flags(self) -> dict[str, str]:
        """Overrides as etcd flag name -> value (the ``ETCD_*`` variables use the same names)."""
        out: dict[str, str] = {}
        if self.force_new_cluster:
            out["force-new-cluster"] = "true"
        if self.initial_cluster is not None:
            out["initial-cluster"] = self.initial_cluster
        if self.initial_cluster_state is not None:
            out["initial-cluster-state"] = self.initial_cluster_state
        return out


class StartMemberInput(BaseModel):
    """Start ``member`` (no-op when it already runs with the same overrides)."""

    member: EtcdMember
    overrides: StartOverrides = Field(default_factory=StartOverrides)
    timeout_seconds: float = 60.0


class WaitHealthyInput(BaseModel):
    """Poll until ``member`` answers ``endpoint health`` and, when ``joined``, appears started in
    the ``member list`` seen from ``via``. Heartbeats; fails (retryable, type NotHealthyYet)
    after ``timeout_seconds``."""

    member: EtcdMember
    via: EtcdMember
    members: list[EtcdMember]
    joined: bool = True
    timeout_seconds: float = 60.0
    poll_seconds: float = 0.5
    timeouts: EtcdctlTimeouts = Field(default_factory=EtcdctlTimeouts)


class MemberUpdateInput(BaseModel):
    """``member update`` so ``member`` advertises its ``peer_url`` (no-op when it already does).
    Run from ``via`` against ``via``'s client URL."""

    via: EtcdMember
    member: EtcdMember
    timeouts: EtcdctlTimeouts = Field(default_factory=EtcdctlTimeouts)


class MemberAddInput(BaseModel):
    """``member add NAME --peer-urls=URL`` on ``via``: never twice (an existing entry with that
    peer URL is returned, ``already_present``). "unhealthy cluster" answers are retried inside
    the activity for ``unhealthy_retry_seconds`` (heartbeating), then by Temporal."""

    via: EtcdMember
    member: EtcdMember
    unhealthy_retry_seconds: float = 30.0
    timeouts: EtcdctlTimeouts = Field(default_factory=EtcdctlTimeouts)


class MemberAddResult(BaseModel):
    """The new (or existing) member's hex ``id`` and the ``ETCD_INITIAL_CLUSTER`` value to start
    it with (as etcdctl prints it)."""

    member: str
    id: str
    initial_cluster: str
    already_present: bool = False


class MoveAsideInput(BaseModel):
    """Rename ``member``'s data dir to ``<data_dir>.<suffix>`` (never delete). No-op when the
    data dir does not exist; refused (non-retryable DataDirMoveRefused) when the target exists."""

    member: EtcdMember
    suffix: str = Field(pattern=r"^[A-Za-z0-9._-]+$")


class MoveAsideResult(BaseModel):
    """Where the data dir went (None: there was none); ``detail`` for the log."""

    member: str
    moved_to: str | None = None
    detail: str = ""


class SnapshotSaveInput(BaseModel):
    """``etcdctl snapshot save`` from ``member``'s client URL into ``path`` on its host, then
    ``etcdutl snapshot status``."""

    member: EtcdMember
    path: str
    timeouts: EtcdctlTimeouts = Field(default_factory=EtcdctlTimeouts)
    timeout_seconds: float = 120.0


class SnapshotFiles(BaseModel):
    """The files a snapshot into ``path`` left on ``member``'s host: ``path`` itself and etcdctl's
    temporary ``path.part`` (etcd ``client/v3/snapshot/v3_snapshot.go`` writes there, then
    renames), those that exist."""

    member: str
    files: list[str] = Field(default_factory=list)


class SnapshotInfo(BaseModel):
    """A checked snapshot: where it lives (host, path) and ``etcdutl snapshot status``."""

    member: str
    host: str
    path: str
    hash: int | None = None
    revision: int | None = None
    total_keys: int | None = None
    total_size: int | None = None


class SnapshotRestoreInput(BaseModel):
    """``etcdutl snapshot restore SNAPSHOT`` into ``member``'s data dir as a one-member cluster
    (``--initial-cluster NAME=PEER``). The data dir must be absent (moved aside first); a
    half-written restore from an earlier attempt is moved aside with ``attempt_suffix``."""

    member: EtcdMember
    snapshot: str
    attempt_suffix: str = Field(pattern=r"^[A-Za-z0-9._-]+$")
    timeout_seconds: float = 120.0


class PreflightRestoreInput(BaseModel):
    """Read-only checks on the hosts before anything is stopped: binaries run, the survivor's
    data dir (force-new-cluster) or the snapshot (snapshot-restore) is there."""

    members: list[EtcdMember]
    survivor: str
    strategy: Literal["force-new-cluster", "snapshot-restore"]
    snapshot: str | None = None


class PreflightRestoreResult(BaseModel):
    """``problems`` (empty = go), the checked ``snapshot`` (snapshot-restore) and the cluster as seen."""

    problems: list[str] = Field(default_factory=list)
    snapshot: SnapshotInfo | None = None
    status: ClusterStatus | None = None


class VerifyInput(BaseModel):
    """Poll (heartbeating) until every endpoint is healthy, the member list is exactly
    ``members`` (names and peer URLs) and every member reports the same raft index, or until
    ``timeout_seconds``; the last observation is returned either way."""

    via: EtcdMember
    members: list[EtcdMember]
    timeout_seconds: float = 60.0
    poll_seconds: float = 0.5
    timeouts: EtcdctlTimeouts = Field(default_factory=EtcdctlTimeouts)


class VerifyResult(BaseModel):
    """``ok`` with no ``problems``; the last ``status`` observed and the common raft index."""

    ok: bool
    problems: list[str] = Field(default_factory=list)
    status: ClusterStatus
    raft_index: int | None = None
