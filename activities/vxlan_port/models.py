"""Inputs and results of the R5 activities (procedures-spec §7, §1.5, §1.6).

Plain pydantic v2 (no Kubernetes, no asyncssh): the workflow imports them and the pydantic data
converter carries them in history, so field names are a stored format (add with defaults, never
rename). Ports are UDP port numbers; times are seconds (``*_seconds``) or POSIX wall-clock seconds
(``t_*``, ``time.time()`` of the worker that ran the command: the fan-out window is measured on
that one clock, merged across retries through heartbeat details).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from activities.cluster.models import SaveRecordInput as SaveRecordInput  # the shared record ConfigMap write's input
from activities.host.models import HostAccess

SwitchVia = Literal["pod-exec", "ssh"]
#: The image trigger annotation of the SDN DaemonSets (o-a ``roles/openshift_sdn/files/sdn.yaml``):
#: while it is there the image trigger controller puts the ImageStreamTag's image back.
TRIGGERS_ANNOTATION = "image.openshift.io/triggers"
#: Its JSON Pointer (RFC 6901: "/" in a key is "~1").
TRIGGERS_POINTER = "/metadata/annotations/image.openshift.io~1triggers"


class SdnRef(BaseModel):
    """Where the SDN DaemonSet lives: ``namespace``/``daemonset``, its pods' ``label_selector``
    and the ``container`` running openshift-sdn (o-a ``roles/openshift_sdn/files/sdn.yaml``).
    Part of the procedure's input too: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")
    namespace: str = "openshift-sdn"
    daemonset: str = "sdn"
    label_selector: str = "app=sdn"
    container: str = "sdn"


class SdnPod(BaseModel):
    """One SDN pod: its node, name, readiness and the image its ``sdn`` container runs
    (``status.containerStatuses[name=sdn].image``, falling back to the spec)."""

    node: str
    name: str
    ready: bool
    image: str
    restarts: int = 0


class DaemonSetRecord(BaseModel):
    """The seed's ``oc get --export ds sdn -o yaml``: the object minus status, uid,
    resourceVersion, managedFields, creationTimestamp, generation (``sanitized_object``, mirrored
    to the record ConfigMap before the change), plus ``resource_version``, ``container_index`` of
    the sdn container (the JSON Pointer the kit's record changes), its ``image`` and the
    ``triggers`` annotation (None when absent)."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    container_index: int
    image: str
    triggers: str | None = None
    update_strategy: str = "OnDelete"
    sanitized_object: dict[str, Any] = Field(default_factory=dict)


class ClusterNetworkState(BaseModel):
    """ClusterNetwork ``default``: ``exists``, ``vxlan_port`` (4789 when the field is unset, as
    origin defaults it), ``uid`` and the object as read (``object``, for the record)."""

    exists: bool
    vxlan_port: int | None = None
    uid: str | None = None
    object: dict[str, Any] | None = None


class PreflightInput(BaseModel):
    """Phase A reads of the SDN ``sdn`` (read-only)."""

    sdn: SdnRef = Field(default_factory=SdnRef)


class PreflightResult(BaseModel):
    """What phase A saw: ``nodes`` (every Node of the cluster: name → Ready), ``glusterfs_nodes``
    (the Nodes labelled ``glusterfs``, o-a's ``glusterfs=storage-host``), ``sdn_pods`` (node →
    pod; a node without one is absent), the DaemonSet, the ClusterNetwork, the controllers
    ``leader`` (from the leader-election ConfigMap, None when unknown) and ``workload_restarts``
    (pod uid → its restartCount sum, pods outside the SDN namespace that are not hostNetwork: the
    no-restart baseline)."""

    nodes: dict[str, bool]
    glusterfs_nodes: list[str] = Field(default_factory=list)
    sdn_pods: dict[str, SdnPod]
    daemonset: DaemonSetRecord
    cluster_network: ClusterNetworkState
    leader: str | None = None
    workload_restarts: dict[str, int] = Field(default_factory=dict)


class SwitchTarget(BaseModel):
    """Where the fan-out runs ``ovs-vsctl`` for one node: ``pod`` (pod-exec: the SDN pod and
    ``container``) or ``container_id`` + ``access`` (ssh: ``docker exec ID`` on the host)."""

    node: str
    via: SwitchVia = "pod-exec"
    namespace: str = "openshift-sdn"
    pod: str | None = None
    container: str = "sdn"
    container_id: str | None = None
    access: HostAccess | None = None


class ResolveTargetsInput(BaseModel):
    """Resolve one :class:`SwitchTarget` per node in ``nodes`` (``access`` per node for ssh)."""

    sdn: SdnRef = Field(default_factory=SdnRef)
    nodes: list[str]
    via: SwitchVia = "pod-exec"
    access: dict[str, HostAccess] = Field(default_factory=dict)


class FanoutInput(BaseModel):
    """Set ``vxlan0`` ``options:dst_port`` to ``port`` on every target at once (``apply`` False:
    only read). ``deadline_seconds`` bounds the whole fan-out; ``concurrency`` caps the commands in
    flight (None: all targets at once)."""

    targets: list[SwitchTarget]
    port: int = Field(ge=1, le=65535)
    apply: bool = True
    deadline_seconds: float = Field(30.0, gt=0)
    concurrency: int | None = Field(None, ge=1)
    command_timeout_seconds: float = Field(10.0, gt=0)


class NodeSwitch(BaseModel):
    """One node's fan-out outcome: ``before``/``after`` ports (None: unreadable), ``applied``
    (this fan-out ran the ``set``), ``ok`` (``after == port``), ``t_apply_start`` /
    ``t_apply_end`` (wall clock of the ``set``), ``attempt`` (activity attempt that switched it),
    ``error``."""

    node: str
    before: int | None = None
    after: int | None = None
    applied: bool = False
    ok: bool = False
    t_apply_start: float | None = None
    t_apply_end: float | None = None
    attempt: int = 1
    error: str = ""
    #: Found switched by a retry with no timing from the attempt that died (heartbeats lost):
    #: ``t_apply_start`` is then when the activity was first scheduled, ``t_apply_end`` when the
    #: retry saw it switched, an interval that contains the real set.
    lost_attempt: bool = False


class FanoutResult(BaseModel):
    """Per-node outcomes (target order) and the window: ``window_seconds`` = last ``t_apply_end`` minus
    first ``t_apply_start`` over the nodes switched by any attempt (0 when none was);
    ``t_first``/``t_last`` those instants; ``failed`` the nodes not on ``port``."""

    port: int
    nodes: list[NodeSwitch]
    window_seconds: float = 0.0
    t_first: float | None = None
    t_last: float | None = None
    failed: list[str] = Field(default_factory=list)
    attempts: int = 1
    #: False when a node's set time was lost with a crashed attempt: ``window_seconds`` is then an
    #: upper bound (see :attr:`NodeSwitch.lost_attempt`).
    window_exact: bool = True


class ReplacePodInput(BaseModel):
    """OnDelete replacement on one node: delete its SDN pod unless it already runs ``image``,
    then wait (``timeout_seconds``) until a new pod there is Ready with ``image``, reading its pods
    every ``poll_seconds`` seconds (at most 5: the activity beats once per read, against a 10 s
    heartbeat timeout)."""

    sdn: SdnRef = Field(default_factory=SdnRef)
    node: str
    image: str
    timeout_seconds: float = Field(600.0, gt=0)
    poll_seconds: float = Field(0.5, gt=0, le=5.0)


class ReplacePodResult(BaseModel):
    """``deleted``: the old pod this attempt deleted (None: none was deleted); ``pod``: the Ready
    pod now; ``seconds`` this attempt took."""

    node: str
    pod: str
    deleted: str | None = None
    seconds: float = 0.0


class DeleteClusterNetworkInput(BaseModel):
    """Delete ClusterNetwork ``default`` only while its uid is ``uid`` (the recorded one)."""

    uid: str


class DeleteClusterNetworkResult(BaseModel):
    """``outcome``: deleted, already-gone, or replaced (another uid exists: not touched)."""

    outcome: Literal["deleted", "already-gone", "replaced"]
    detail: str = ""


class MasterApiInput(BaseModel):
    """GET ``<api_url>/healthz/ready`` of one master (``ca_file`` to verify TLS; ``insecure``
    skips verification, for labs only)."""

    api_url: str
    ca_file: str | None = None
    insecure: bool = False
    timeout_seconds: float = Field(5.0, gt=0)


class CheckResult(BaseModel):
    """A poll's answer: ``ok`` and what was seen."""

    ok: bool
    detail: str = ""


class ControllersInput(BaseModel):
    """Readiness of ``master``'s controllers mirror pod ``master-controllers-<master>`` in
    ``kube-system``; ``min_restarts``: the container must have restarted at least so often."""

    master: str
    min_restarts: int = 0


class ControllersState(BaseModel):
    """The controllers pod's readiness and restart count, and the current leader."""

    ready: bool
    restarts: int = 0
    leader: str | None = None
    detail: str = ""


class FileRecord(BaseModel):
    """procedures-spec §1.6 FileRecord: a host file before we wrote it."""

    host: str
    path: str
    sha256_before: str
    content_before: str
    sha256_after: str | None = None


class ReadFileInput(BaseModel):
    """Read ``path`` on ``host`` through ``access``."""

    host: str
    access: HostAccess
    path: str


class WriteMasterConfigInput(BaseModel):
    """Write ``content`` to ``path`` atomically (temp file mode 0600, then ``mv``), only while
    the file still hashes to ``sha256_before`` (already ``content``: nothing to do), then read it
    back and check ``networkConfig.vxlanPort == port``."""

    host: str
    access: HostAccess
    path: str
    sha256_before: str
    content: str
    port: int | None


class WriteFileResult(BaseModel):
    """``written`` False: the file already held ``content``."""

    written: bool
    sha256_after: str


def summarise(port: int, rows: list[NodeSwitch], *, attempts: int = 1) -> FanoutResult:
    """The :class:`FanoutResult` of ``rows``: the window over every applied node's set."""
    starts = [r.t_apply_start for r in rows if r.applied and r.t_apply_start is not None]
    ends = [r.t_apply_end for r in rows if r.applied and r.t_apply_end is not None]
    first, last = (min(starts), max(ends)) if starts and ends else (None, None)
    return FanoutResult(
        port=port, nodes=rows, window_seconds=round(last - first, 6) if first is not None and last is not None else 0.0,
        t_first=first, t_last=last, failed=[r.node for r in rows if not r.ok], attempts=attempts,
        window_exact=not any(r.lost_attempt for r in rows),
    )
