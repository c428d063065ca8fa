"""Models of what the GlusterFS CLI reports and of the GlusterFS activities' inputs and results.

Pure pydantic v2 (no I/O), shared by the parsers (:mod:`activities.gluster.parse`), the
activities, the workflows (which import only models from ``activities``) and the CLI. Field
names are a stored format (they travel in workflow histories): add fields with defaults, never
rename. The CLI output formats behind them are quoted in procedures-spec §2.3-§2.6 (glusterfs
3.12 ``cli/src/cli-rpc-ops.c``, ``cli/src/cli-xml-output.c``, ``heal/src/glfs-heal.c``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

# --- what the CLI reports ------------------------------------------------------------------------


class BrickStatus(BaseModel):
    """One brick line of ``gluster volume status``: ``host`` exactly as the volume was created
    with (IP or hostname), ``path`` the brick directory, ``online`` the ``Online`` column (XML
    ``status`` 1/0), ``port``/``pid`` None where the CLI prints ``N/A`` (or nothing, in the
    seed's variant), ``peerid`` the owning glusterd's UUID (XML only)."""

    host: str
    path: str
    online: bool
    port: int | None = None
    rdma_port: int | None = None
    pid: int | None = None
    peerid: str | None = None

    @property
    def name(self) -> str:
        """``host:/path``, the brick's name everywhere in the CLI."""
        return f"{self.host}:{self.path}"


class DaemonStatus(BaseModel):
    """A daemon line (``Self-heal Daemon on localhost``): ``daemon`` the name, ``host`` where."""

    daemon: str
    host: str
    online: bool
    pid: int | None = None


class VolumeStatus(BaseModel):
    """``gluster volume status VOL``: the bricks the reachable glusterds reported (a brick of a
    down or disconnected peer is missing, not ``N``: procedures-spec §2.3) and the daemons."""

    name: str
    bricks: list[BrickStatus] = Field(default_factory=list)
    daemons: list[DaemonStatus] = Field(default_factory=list)


class Brick(BaseModel):
    """A brick as ``gluster volume info`` lists it (``Brick1..N`` order): ``arbiter`` for a
    brick printed with `` (arbiter)`` (XML ``isArbiter``), ``host_uuid`` from the XML form."""

    host: str
    path: str
    arbiter: bool = False
    host_uuid: str | None = None

    @property
    def name(self) -> str:
        """``host:/path``."""
        return f"{self.host}:{self.path}"


class VolumeInfo(BaseModel):
    """``gluster volume info VOL``: type (``Replicate``, ``Distributed-Replicate``,
    ``Distribute``...), ``status`` (``Started``/``Stopped``), counts and the bricks in order.
    ``replica_count`` is 1 for a volume without replication."""

    name: str
    id: str = ""
    type: str = ""
    status: str = ""
    brick_count: int = 0
    dist_count: int = 1
    replica_count: int = 1
    arbiter_count: int = 0
    disperse_count: int = 0
    bricks: list[Brick] = Field(default_factory=list)

    @property
    def replicated(self) -> bool:
        """Replicate/disperse volumes have heal info; a plain distribute volume has none."""
        return self.replica_count > 1 or self.disperse_count > 0

    def replica_sets(self) -> list[list[Brick]]:
        """Consecutive groups of ``replica_count`` bricks in ``Brick1..N`` order (how GlusterFS
        forms its AFR subvolumes; procedures-spec §2.4). A non-replicated volume gives one
        single-brick set per brick."""
        size = max(1, self.replica_count if self.replica_count > 1 else (self.disperse_count or 1))
        return [self.bricks[i : i + size] for i in range(0, len(self.bricks), size)]


HealEntryState = Literal["heal", "possibly-healing", "split-brain"]


class HealEntry(BaseModel):
    """One ``heal info`` entry: a path or ``<gfid:...>`` and its state (the line's suffix:
    none = needs heal, ``- Possibly undergoing heal``, ``- Is in split-brain``)."""

    path: str
    state: HealEntryState = "heal"


class HealBrick(BaseModel):
    """One brick block of ``heal VOL info``: ``status`` the ``Status:`` text (``Connected``, a
    strerror such as ``Transport endpoint is not connected``, or ``Brick is not connected``),
    ``entries`` the ``Number of entries`` (None when the CLI prints ``-``), ``files`` the listed
    entries."""

    host: str
    path: str
    status: str = "Connected"
    entries: int | None = None
    files: list[HealEntry] = Field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.host}:{self.path}"

    @property
    def connected(self) -> bool:
        return self.status == "Connected"


class HealInfo(BaseModel):
    """``gluster volume heal VOL info`` for one volume. ``error``: a whole-volume answer printed
    instead of brick blocks (``Volume X is not started (Or) All the bricks are not running.``,
    ``Volume X does not exist``, not replicate/disperse); ``skipped``: the volume was not asked
    (not replicated), with the reason."""

    volume: str
    bricks: list[HealBrick] = Field(default_factory=list)
    error: str | None = None
    skipped: str | None = None

    @property
    def total_entries(self) -> int | None:
        """Sum of the per-brick counts; None when any brick's count is unknown (``-``)."""
        if any(b.entries is None for b in self.bricks):
            return None
        return sum(b.entries or 0 for b in self.bricks)

    @property
    def known_entries(self) -> int | None:
        """Sum of the counts the bricks did report (None when none did): what is known to need
        healing even while a brick is unreachable."""
        known = [b.entries for b in self.bricks if b.entries is not None]
        return sum(known) if known else None

    def split_brain(self) -> list[str]:
        """``host:/path: entry`` for every entry in split-brain."""
        return [f"{b.name}: {f.path}" for b in self.bricks for f in b.files if f.state == "split-brain"]

    def problems(self, expected_bricks: int | None = None) -> list[str]:
        """Why the volume is not heal-clean (empty = clean), after procedures-spec §2.5: blocks
        present, as many as ``expected_bricks`` (from ``volume info``), every one ``Connected``,
        every count 0, no split-brain entry. A skipped volume has no problems."""
        if self.skipped:
            return []
        if self.error:
            return [self.error]
        if not self.bricks:
            return ["heal info printed no brick blocks"]
        out: list[str] = []
        if expected_bricks is not None and len(self.bricks) != expected_bricks:
            out.append(f"heal info lists {len(self.bricks)} bricks, volume info {expected_bricks}")
        for b in self.bricks:
            if not b.connected:
                out.append(f"brick {b.name}: {b.status}")
            elif b.entries is None:
                out.append(f"brick {b.name}: number of entries unknown")
            elif b.entries:
                out.append(f"brick {b.name}: {b.entries} entries to heal")
        out += [f"split-brain {s}" for s in self.split_brain()]
        return out


class Peer(BaseModel):
    """One peer of ``gluster peer status`` (the other peers; the local one is not listed)."""

    hostname: str
    uuid: str = ""
    state: str = ""
    connected: bool = False


# --- inventory -------------------------------------------------------------------------------------


class GlusterPod(BaseModel):
    """A GlusterFS pod: name, uid, node, ``pod_ip``/``host_ip`` (equal under hostNetwork, which
    is why a brick's IP finds its pod: procedures-spec §2.1), phase, Ready, terminating."""

    name: str
    uid: str
    node: str = ""
    pod_ip: str = ""
    host_ip: str = ""
    phase: str = ""
    ready: bool = False
    terminating: bool = False
    created_at: datetime | None = None

    @property
    def healthy(self) -> bool:
        """Running, Ready and not being deleted."""
        return self.phase == "Running" and self.ready and not self.terminating


class NodeAddresses(BaseModel):
    """A Node's name, its ``status.addresses`` and whether it is Ready."""

    name: str
    addresses: list[str] = Field(default_factory=list)
    ready: bool = False


# --- activity inputs and results ------------------------------------------------------------------


class GlusterTarget(BaseModel):
    """Where the GlusterFS pods are: ``namespace`` and ``clusters`` (pods labelled
    ``glusterfs=<cluster>-pod``, o-a's template), and ``exclude_node`` whose pod is never used
    to run the CLI (o-a ``exclude_node``: the host being upgraded)."""

    namespace: str = "glusterfs"
    clusters: list[str] = Field(default_factory=lambda: ["storage"])
    exclude_node: str | None = None

    def selectors(self) -> list[str]:
        """The label selectors, one per cluster."""
        return [f"glusterfs={c}-pod" for c in self.clusters]


class GlusterReadInput(BaseModel):
    """What :func:`read_gluster` reads: ``heal`` runs ``heal VOL info`` on ``heal_volumes``
    (None = every replicated volume); ``attempts``/``backoff_seconds``: retries of a CLI call
    answered ``Another transaction is in progress``; ``command_timeout_seconds`` per call."""

    target: GlusterTarget = Field(default_factory=GlusterTarget)
    heal: bool = True
    heal_volumes: list[str] | None = None
    attempts: int = Field(5, ge=1)
    backoff_seconds: float = Field(2.0, ge=0)
    max_backoff_seconds: float = Field(10.0, ge=0)
    command_timeout_seconds: float = Field(120.0, gt=0)


class CommandNote(BaseModel):
    """One CLI call as it went: the pod, the argv, the attempts, the final error (if any)."""

    pod: str
    argv: list[str]
    attempts: int = 1
    error: str | None = None


class GlusterReport(BaseModel):
    """Everything one read saw: the pods and nodes, the pod the CLI ran in, the volume list,
    ``volume info``/``volume status`` per volume, the peers as that pod sees them, heal info per
    volume (when asked), the calls made and when."""

    at: datetime | None = None
    pods: list[GlusterPod] = Field(default_factory=list)
    nodes: list[NodeAddresses] = Field(default_factory=list)
    exec_pod: str = ""
    exec_node: str = ""
    volume_names: list[str] = Field(default_factory=list)
    info: list[VolumeInfo] = Field(default_factory=list)
    status: list[VolumeStatus] = Field(default_factory=list)
    peers: list[Peer] = Field(default_factory=list)
    heal: dict[str, HealInfo] = Field(default_factory=dict)
    #: pod name → its glusterd's UUID (``gluster system:: uuid get``), read only when a brick
    #: host matches no pod or node address (storage network; procedures-spec §2.7 step 4).
    pod_uuids: dict[str, str] = Field(default_factory=dict)
    calls: list[CommandNote] = Field(default_factory=list)


class DeletePodResult(BaseModel):
    """``deleted``: this call sent the DELETE; ``already_gone``: the recorded uid no longer
    exists (or is already terminating), so nothing was sent (a retried or resumed delete)."""

    deleted: bool = False
    already_gone: bool = False
    detail: str = ""


class ReplacementInput(BaseModel):
    """Look for the pod replacing ``old_uid`` on ``node`` (same selector, any name)."""

    target: GlusterTarget = Field(default_factory=GlusterTarget)
    node: str
    old_uid: str


class ReplacementState(BaseModel):
    """The pods of the selector on that node now: ``replacement`` a pod with a new uid (None
    yet), ``old_present`` the recorded pod still exists (terminating or not)."""

    replacement: GlusterPod | None = None
    old_present: bool = False

    @property
    def ready(self) -> bool:
        return self.replacement is not None and self.replacement.healthy


class VolumeStartInput(BaseModel):
    """``gluster volume start VOL force`` (restarts only the offline bricks of VOL)."""

    target: GlusterTarget = Field(default_factory=GlusterTarget)
    volume: str
    attempts: int = Field(5, ge=1)
    backoff_seconds: float = Field(2.0, ge=0)


class VolumeStartResult(BaseModel):
    """What the CLI said (``volume start: VOL: success``) and in which pod."""

    pod: str
    output: str
    ok: bool
