"""Inputs, status and result of the control-plane upgrade (R3d masters, procedures-spec §4.1).

Pure pydantic models shared by the CLI, the worker and the workflow (stored in history: add
fields with defaults, never rename). Durations are seconds; times UTC.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from activities.etcd.models import ClusterStatus, EtcdMember
from activities.host.models import HostAccess
from workflows.etcd.models import EtcdBackupInput
from workflows.kit.inputs import MaintenanceWindows, ProcedureInput
from workflows.kit.models import NodeStatus, ProcedureResult, ProcedureStatus

PROCEDURE_CONTROL_PLANE_UPGRADE = "control-plane-upgrade"
#: A container image's release tag in a manifest (``image: docker.io/openshift/origin-control-plane:v3.10.0``).
_IMAGE_TAG = re.compile(r"^\s*-?\s*image:\s*['\"]?[^'\"\s]*:v?(\d+)\.(\d+)", re.MULTILINE)
#: openshift-ansible's static pod location (``openshift_control_plane_static_pod_location``).
STATIC_POD_DIR = "/etc/origin/node/pods/"
#: The gate word that re-runs ``master-restart api`` instead of only waiting again.
RESTART_AGAIN = "restart"


class MasterSpec(BaseModel):
    """One master: ``name`` (its Node name), ``api_url`` (this master's own API, e.g.
    ``https://master01.example.com:8443``), ``access`` (host commands: master-restart,
    master-logs, manifests), ``gluster_host`` (it serves GlusterFS bricks: the gate after it)."""

    name: str
    api_url: str
    access: HostAccess
    gluster_host: bool = False


class StaticPodManifest(BaseModel):
    """A static pod manifest to write on each master: ``path`` and the full ``content``."""

    path: str = Field(min_length=2)
    content: str = Field(min_length=1)


class MasterAction(BaseModel):
    """The master action (procedures-spec §4.1 step 2): ``external`` runs ``argv`` on the worker
    (``{master}`` replaced; e.g. ``ansible-playbook ... upgrade_control_plane.yml -l {master}``);
    ``static-pods`` writes ``manifests`` over the master's host access (each recorded first).
    Both are followed by ``master-restart`` of ``restart`` (default api, controllers), unless
    ``restart`` is empty (an external action that restarts by itself)."""

    kind: Literal["external", "static-pods"] = "static-pods"
    argv: list[str] = Field(default_factory=list)
    manifests: list[StaticPodManifest] = Field(default_factory=list)
    restart: list[str] = Field(default_factory=lambda: ["api", "controllers"])
    timeout_seconds: float = Field(900.0, gt=0)

    @model_validator(mode="after")
    def _complete(self) -> MasterAction:
        if self.kind == "external" and not self.argv:
            raise ValueError("an external master action needs argv")
        if self.kind == "static-pods" and not self.manifests:
            raise ValueError("a static-pods master action needs at least one manifest")
        bad = [c for c in self.restart if c not in ("api", "controllers", "etcd")]
        if bad:
            raise ValueError(f"master-restart knows api, controllers, etcd; not {', '.join(bad)}")
        return self


class ControlPlaneUpgradeInput(ProcedureInput):
    """Input of :class:`workflows.control_plane.workflow.ControlPlaneUpgradeWorkflow`.

    The kit's :class:`~workflows.kit.inputs.ProcedureInput` gives ``cluster``, ``approvals``
    (requester, four-eyes, approvers), ``gates`` (every gate's timeout and its declared outcome),
    ``calls`` (activity timeouts), ``search_attributes``, ``dry_run``, ``report_to`` (the parent
    procedure this one reports to, set by the cluster upgrade; :mod:`workflows.kit.report`) and
    ``alerts`` (the Prometheus alert gate: before each master, board entry
    ``alerts/master/<name>``, no master starts while a blocking alert fires; None: no gate, no
    command of the run changes).

    ``etcd_backup``: the backup barrier's input (required) unless ``etcd_backup_skip_reason``
    says why not (recorded in status; e.g. a test world without etcd). ``expected_image``: the
    mirror pods' image after the action (None: Ready is enough). ``approve_each``: a gate before
    every master (default: before the first only). ``api_ready_timeout_seconds``: o-a's
    120 × 1 s before the API gate opens. ``windows``: maintenance windows
    (:data:`workflows.kit.inputs.MaintenanceWindows`): no master starts outside them; empty: always.

    ``target_version``: the OpenShift release the control plane goes to (``3.10``; the CLI's
    ``--to-version``); None: the release in the tag of the static-pod manifests' first image
    (``origin-control-plane:v3.10.0`` -> ``3.10``; :meth:`update_target`). The preflight refuses
    an update of more than one minor version from the cluster's version, or a downgrade
    (:class:`activities.preflight.models.UpdateStep`); unknown (an external action and no
    ``target_version``): the check is ``not-run`` and says so.

    ``etcd_members``: the etcd members whose health is checked before the first master (default:
    the backup's members); without any, ``etcd_health_skip_reason`` must say why (recorded). The
    check (``etcd_cluster_status`` run with etcdctl on the first member's host):
    :func:`etcd_health_problems`.
    """

    masters: list[MasterSpec] = Field(min_length=1)
    action: MasterAction
    expected_image: str | None = None
    etcd_backup: EtcdBackupInput | None = None
    etcd_backup_skip_reason: str | None = None
    target_version: str | None = None
    etcd_members: list[EtcdMember] = Field(default_factory=list)
    etcd_health_skip_reason: str | None = None
    gluster_check: bool = True
    gluster_namespace: str = "glusterfs"
    gluster_timeout_seconds: float = Field(600.0, gt=0)
    approve_first: bool = True
    approve_each: bool = False
    api_ready_timeout_seconds: float = Field(120.0, gt=0)
    api_poll_seconds: float = Field(1.0, gt=0)
    api_ca_file: str | None = None
    api_insecure: bool = False
    pods_ready_timeout_seconds: float = Field(120.0, gt=0)
    logs_tail: int = Field(50, ge=1)
    host_command_timeout_seconds: float = Field(120.0, gt=0)
    windows: MaintenanceWindows = Field(default_factory=list)

    @model_validator(mode="after")
    def _checked(self) -> ControlPlaneUpgradeInput:
        if self.etcd_backup is None and not self.etcd_backup_skip_reason:
            raise ValueError("the etcd backup barrier is required: give etcd_backup, or etcd_backup_skip_reason saying why not")
        names = [m.name for m in self.masters]
        if len(set(names)) != len(names):
            raise ValueError(f"masters listed twice: {', '.join(sorted({n for n in names if names.count(n) > 1}))}")
        return self


    def update_target(self) -> str | None:
        """The release this upgrade goes to: ``target_version``, else the ``MAJOR.MINOR`` in the
        image tag (``:v3.10.0``) of the first ``image:`` of the static-pod manifests, else None."""
        if self.target_version:
            return self.target_version
        for m in self.action.manifests if self.action.kind == "static-pods" else []:
            found = _IMAGE_TAG.search(m.content)
            if found:
                return f"{found.group(1)}.{found.group(2)}"
        return None

    def etcd_health_problem(self) -> str | None:
        """Why the etcd health preflight cannot run (None = it can): no members and no
        ``etcd_health_skip_reason``. Checked by the CLI before a start and by the workflow's
        preflight, not by the model, so that an input stored before the check existed still
        decodes on replay."""
        if not self.health_members() and not self.etcd_health_skip_reason:
            return ("the etcd health check needs members: give etcd_members (or etcd_backup with members), "
                    "or etcd_health_skip_reason saying why not")
        return None

    def health_members(self) -> list[EtcdMember]:
        """The members the etcd health preflight checks: ``etcd_members``, else the backup's."""
        return list(self.etcd_members) or (list(self.etcd_backup.members) if self.etcd_backup is not None else [])


def etcd_health_problems(members: list[EtcdMember], st: ClusterStatus) -> list[str]:
    """Why etcd is not healthy enough to take a master down (empty = healthy): every member's
    client URL answers ``endpoint health`` healthy; ``member list`` answered (with quorum, not
    the peer ``/members`` fallback) and lists every member by peer URL, started and not a
    learner, and nothing else; every endpoint reports the same, non-zero leader."""
    out: list[str] = []
    for m in members:
        ep = next((e for e in st.endpoints if e.endpoint == m.client_url), None)
        if ep is None or not ep.healthy:
            out.append(f"member {m.name} ({m.client_url}) not healthy: {(ep.error if ep else None) or 'no answer'}")
    if st.members is None or st.members_source != "member list":
        out.append(f"member list not answered with quorum: {st.members_error or st.members_source or 'no answer'}")
    else:
        for m in members:
            info = st.member_with_peer(m.peer_url)
            if info is None:
                out.append(f"member {m.name} ({m.peer_url}) not in the member list")
            elif not info.started or info.is_learner:
                out.append(f"member {m.name} is {'a learner' if info.is_learner else 'not started'}")
        extra = [i.name or i.id for i in st.members if not any(p in i.peer_urls for p in (m.peer_url for m in members))]
        if extra:
            out.append(f"member list has members not given: {', '.join(extra)}")
    leaders = {e.leader for e in st.endpoints if e.healthy}
    if not out and (len(leaders) != 1 or not next(iter(leaders)) or next(iter(leaders)) == "0"):
        out.append(f"no single leader: endpoints report {', '.join(sorted(str(x) for x in leaders)) or 'none'}")
    return out


class ManifestRecord(BaseModel):
    """What a manifest was before we wrote it: ``sha256_before`` (None: absent), ``content_before``
    and the ``sha256_after`` we wrote."""

    path: str
    sha256_before: str | None = None
    content_before: str | None = None
    sha256_after: str | None = None


class MasterRow(BaseModel):
    """One master in ``status``: ``state`` pending / running / waiting-gate / done / aborted /
    failed (a step failed for good: the upgrade pauses; ``retry-node`` runs it again),
    ``step``, ``since``, ``detail``; ``commands`` every host/external command run (argv and exit
    code, in order); ``records`` the manifests recorded; ``logs_tail`` the last ``master-logs api
    api`` read when the API did not come back; ``host_changed`` once this run began to change the
    master's host."""

    name: str
    state: Literal["pending", "running", "waiting-gate", "done", "aborted", "failed"] = "pending"
    step: str | None = None
    since: datetime | None = None
    detail: str | None = None
    commands: list[str] = Field(default_factory=list)
    records: list[ManifestRecord] = Field(default_factory=list)
    logs_tail: str | None = None
    restarts: int = 0
    #: This run began to change the master's host (a manifest's directory or file written, the
    #: external action run, a ``master-restart``): what an ending other than completed names in
    #: ``left_changed`` (issue 39).
    host_changed: bool = False


class ControlPlaneStatus(ProcedureStatus):
    """``status``: the read-only checks before the first master (``checks``: check → result
    words: etcd backup, GlusterFS, each master's API, etcd health; the declared preconditions
    are the kit's ``preconditions``), the masters in order with their rows, the master in
    progress; ``nodes`` the masters on the kit's node board (phase, attempt, since; holds and
    skip/retry act on them)."""

    checks: dict[str, str] = Field(default_factory=dict)
    masters: list[MasterRow] = Field(default_factory=list)
    current_master: str | None = None
    nodes: dict[str, NodeStatus] = Field(default_factory=dict)


class ControlPlaneResult(ProcedureResult):
    """``outcome`` completed / aborted / refused / dry-run; the rows; ``checks`` (as in status);
    ``message``."""

    workflow_id: str = ""
    outcome: str = "completed"
    masters: list[MasterRow] = Field(default_factory=list)
    checks: dict[str, str] = Field(default_factory=dict)
    message: str = ""
