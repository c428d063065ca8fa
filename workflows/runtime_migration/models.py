"""Input, status and result of the container-runtime migration (R4, procedures-spec §6.2).

``RuntimeMigrationInput`` is what ``lockkeeper start runtime-migration`` sends; the per-node
child gets a :class:`NodeMigrationInput`. Times are UTC datetimes, durations seconds. Pure pydantic.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from activities.cluster.models import DrainReport
from activities.gluster.models import GlusterTarget
from activities.host.models import HostAccess
from workflows.kit.inputs import DrainPolicy, MaintenanceWindows, NodeOrder, ProcedureInput
from workflows.kit.models import ChangedItem, Gate, GateRecord, GateState, ProcedureResult, ProcedureStatus
from workflows.kit.noderun import NodeRunResult
from workflows.kit.steprow import LastCommand

#: Procedure name (spec name, LockkeeperProcedure, CLI ``start runtime-migration``).
PROCEDURE_RUNTIME_MIGRATION = "runtime-migration"

#: Seed 003's ``yum -y remove`` list, in its order.
SEED_PACKAGES = [
    "criu", "docker", "atomic-openshift-excluder", "atomic-openshift-docker-excluder", "cri-tools",
    "atomic-openshift-hyperkube", "atomic-openshift-node", "docker-client", "cri-o", "atomic-openshift-clients", "dnsmasq",
]


class ExternalStep(BaseModel):
    """A command run on the worker (an ``ansible-playbook`` run or an inventory hook): ``argv``
    (no shell), ``timeout_seconds``, non-secret ``env``. It runs at most once; an unknown
    outcome opens a gate."""

    argv: list[str] = Field(min_length=1)
    timeout_seconds: float = Field(3600.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("argv")
    @classmethod
    def _argv(cls, v: list[str]) -> list[str]:
        if not v[0].strip():
            raise ValueError("argv[0] must name a program")
        return v


class GlusterTargetSpec(BaseModel):
    """Where GlusterFS runs: ``namespace``, ``clusters`` (pods labelled
    ``glusterfs=<cluster>-pod``), ``node_label`` (``key=value`` the GlusterFS DaemonSet selects:
    ``glusterfs=storage-host``)."""

    namespace: str = "glusterfs"
    clusters: list[str] = Field(default_factory=lambda: ["storage"], min_length=1)
    node_label: str = "glusterfs=storage-host"

    @field_validator("node_label")
    @classmethod
    def _kv(cls, v: str) -> str:
        if "=" not in v or not v.split("=", 1)[0]:
            raise ValueError("node_label must be key=value")
        return v

    def label_pair(self) -> tuple[str, str]:
        k, v = self.node_label.split("=", 1)
        return k, v

    def target(self, exclude_node: str | None = None) -> GlusterTarget:
        """The GlusterFS package's target of these pods (the CLI never runs in ``exclude_node``'s pod)."""
        return GlusterTarget(namespace=self.namespace, clusters=list(self.clusters), exclude_node=exclude_node)


class Timing(BaseModel):
    """Bounds and poll intervals (seconds). Defaults follow the spec (reboot 15 min, GlusterFS
    pod 300 s, heal 1200 s with a stall gate after 300 s of no progress). ``drain_deadline``:
    a drain still running at 80 % of it is warned about. The activity timeouts are the input's
    ``calls`` (:class:`workflows.kit.inputs.CallTimeouts`), the drain's its ``drain``."""

    host_command_timeout: float = Field(120.0, gt=0)
    reboot_timeout: float = Field(900.0, gt=0)
    reboot_poll: float = Field(5.0, gt=0)
    register_timeout: float = Field(1800.0, gt=0)
    gluster_pod_timeout: float = Field(600.0, gt=0)
    bricks_timeout: float = Field(600.0, gt=0)
    heal_timeout: float = Field(1200.0, gt=0)
    heal_stall: float = Field(300.0, gt=0)
    poll: float = Field(5.0, gt=0)
    poll_max: float = Field(30.0, gt=0)
    drain_deadline: float = Field(3600.0, gt=0)


class RuntimeMigrationInput(ProcedureInput):
    """``lockkeeper start runtime-migration`` (procedures-spec §6.2): migrate ``nodes`` one at a
    time from CRI-O to Docker. ``host_access``: SSH to each node and peer (the Node object is
    deleted during the run, so debug pods cannot serve); ``peers``: nodes to compare packages
    with (None = every non-master Node in ``host_access``); ``inventory_step`` None = a
    human_action gate showing the exact change; ``inventory_restore_step`` None = a human_action
    gate. ``expected_labels`` None = the recorded labels minus ``runtime=cri-o``.

    ``node_order`` (:data:`workflows.kit.inputs.NodeOrder`, the CLI's ``--order``): None (the
    default) migrates ``nodes`` in the order given, as before issue 40; ``zone-oldest``,
    ``oldest-first`` or ``newest-first`` order them by the Nodes the preflight reads (zone label,
    creationTimestamp); a list puts those nodes first (each must be one of ``nodes``), the rest
    zone-oldest. The nodes still go strictly one at a time (GlusterFS: one brick set down).

    The kit's :class:`~workflows.kit.inputs.ProcedureInput` gives ``cluster``, ``approvals``
    (requester, four-eyes, approvers), ``gates`` (the gates' timeout), ``search_attributes`` and
    ``alerts``: the Prometheus alert gate (the CLI's ``--alert-gate URL``): no node's migration
    starts while a blocking alert fires (a GlusterFS brick-down alert, a node NotReady)."""

    nodes: list[str] = Field(min_length=1)
    node_order: NodeOrder | None = None
    #: Maintenance windows (:data:`workflows.kit.inputs.MaintenanceWindows`, ``--window``): no node
    #: starts outside them; empty: always.
    windows: MaintenanceWindows = Field(default_factory=list)
    host_access: dict[str, HostAccess]
    target_runtime: Literal["docker"] = "docker"
    gluster: GlusterTargetSpec = Field(default_factory=GlusterTargetSpec)
    packages_to_remove: list[str] = Field(default_factory=lambda: list(SEED_PACKAGES))
    runtime_services: list[str] = Field(default_factory=lambda: ["atomic-openshift-node", "crio", "docker"])
    wipe_paths: list[str] = Field(default_factory=lambda: ["/etc/origin", "/etc/sysconfig/atomic-openshift-node.rpmsave"])
    wipe_dir_contents: list[str] = Field(default_factory=lambda: ["/etc/dnsmasq.d"])
    dns_probe_names: list[str] = Field(default_factory=list)
    inventory_step: ExternalStep | None = None
    node_group_step: ExternalStep | None = None
    scaleup_step: ExternalStep
    inventory_restore_step: ExternalStep | None = None
    expected_labels: dict[str, str] | None = None
    peers: list[str] | None = None
    package_ignore: list[str] = Field(default_factory=lambda: ["cri-o", "criu", "cri-tools"])
    offer_package_install: bool = True
    timing: Timing = Field(default_factory=Timing)
    #: How each node is drained (the kit's :class:`~workflows.kit.inputs.DrainPolicy`); a decision
    #: gate without its own timeout takes ``gates.timeout_seconds``.
    drain: DrainPolicy = Field(default_factory=lambda: DrainPolicy(wait_seconds=30.0, backoff_initial_seconds=5.0, backoff_max_seconds=60.0))
    #: Namespace of the record ConfigMap ``lockkeeper-record-<workflow id>`` (one key per node:
    #: the Node object, labels, runtime, bootstrap config, packages, addresses), kept so the
    #: nodes can be recovered without Temporal (procedures-spec §1.6).
    record_namespace: str = "openshift-config"

    @field_validator("record_namespace")
    @classmethod
    def _namespace(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", v):
            raise ValueError(f"record_namespace {v!r} is not a namespace name (DNS-1123 label)")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> RuntimeMigrationInput:
        if len(set(self.nodes)) != len(self.nodes):
            raise ValueError("a node is listed twice")
        if isinstance(self.node_order, list):
            stray = [n for n in self.node_order if n not in self.nodes]
            if stray:
                raise ValueError(f"node_order names nodes that are not migrated: {', '.join(stray)} (nodes: {', '.join(self.nodes)})")
        missing = [n for n in self.nodes + (self.peers or []) if n not in self.host_access]
        if missing:
            raise ValueError(f"no SSH access for {', '.join(missing)}")
        for p in self.wipe_paths + self.wipe_dir_contents:
            if not p.startswith("/") or p.rstrip("/") in ("", "/etc", "/usr", "/var") or any(c in p for c in "*?["):
                raise ValueError(f"wipe path {p!r} must be absolute, specific and without glob characters")
        return self


# --- per node -----------------------------------------------------------------------------------

#: The steps of one node, in order (procedures-spec §6.3 table, # 1..22).
STEPS = [
    "safety", "approve-migration", "drain", "record", "stop-services", "resolv-conf", "dnsmasq", "remove-packages",
    "wipe", "reboot", "post-reboot-checks", "approve-delete", "delete-node", "inventory", "node-group", "scale-up",
    "wait-registered", "gluster-pod", "bricks-online", "heal-clean", "inventory-restore", "uncordon",
]


class NodeRecordView(BaseModel):
    """What was recorded before the node went down: the Node uid, labels, runtime, the
    bootstrap config line, the boot_id, the packages (name → version) and the full Node."""

    uid: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    runtime: str = ""
    bootstrap_config: str = ""
    boot_id: str = ""
    packages: dict[str, str] = Field(default_factory=dict)
    addresses: list[str] = Field(default_factory=list)
    node_object: dict | None = None


class NodeMigrationStatus(BaseModel):
    """One node's row: ``phase`` pending/running/waiting/done/failed/aborted; ``step`` (one of
    :data:`STEPS`); ``waiting_for``; ``since``; ``last_command``; ``heal`` (volume → pending
    entries while the heal wait runs); ``node_deleted`` (the Node object is gone and not yet
    registered again: reported, never forgotten); ``new_uid``/``new_boot_id``; ``gates`` the
    node's gates (waiting ones first); ``reason``; ``findings`` (label or health messages)."""

    node: str
    phase: Literal["pending", "running", "waiting", "done", "failed", "aborted", "skipped"] = "pending"
    step: str | None = None
    waiting_for: str | None = None
    since: datetime | None = None
    #: Until when the current wait may last: a health wait's or the reboot's timeout, a host or
    #: external command's bound, a gate's timeout (None: no bound of its own).
    deadline: datetime | None = None
    last_command: LastCommand | None = None
    heal: dict[str, int | None] = Field(default_factory=dict)
    node_deleted: bool = False
    record: NodeRecordView | None = None
    new_uid: str = ""
    new_boot_id: str = ""
    gates: list[Gate] = Field(default_factory=list)
    reason: str | None = None
    findings: list[str] = Field(default_factory=list)
    done_steps: list[str] = Field(default_factory=list)
    #: An abort before the destructive steps uncordoned the node (it ends schedulable).
    uncordoned: bool = False
    #: Packages this migration removed from the node (``yum -y remove``; those already absent
    #: are not listed); ``attempt``: 1, then +1 per ``retry-node``; ``record_configmap``:
    #: ``namespace/name`` of the ConfigMap holding the node's record (recoverable without Temporal).
    removed: list[str] = Field(default_factory=list)
    attempt: int = 1
    record_configmap: str = ""
    #: What the external steps of :data:`workflows.runtime_migration.plan.EXTERNAL_WRITES` created:
    #: the objects found after one and absent from ``external_baseline`` (the same read before
    #: the first of them; None until then), each with the command that deletes it.
    external_baseline: list[str] | None = None
    created: list[ChangedItem] = Field(default_factory=list)
    #: The fields the kit's node views read from every procedure's node rows (the live details
    #: of the Temporal UI): a pool column, the blocked-drain report.
    pool: str = "-"
    drain_report: DrainReport | None = None
    blocked_since: datetime | None = None

    @property
    def name(self) -> str:
        """The node name (the kit's node views call it ``name``)."""
        return self.node

    def waiting_gates(self) -> list[Gate]:
        return [g for g in self.gates if g.state == GateState.WAITING]


class NodeMigrationInput(BaseModel):
    """The child's input: the parent's input, the node, the parent workflow ID (the target of its
    reports), and the node's index."""

    run: RuntimeMigrationInput
    node: str
    parent_id: str
    index: int = 0
    #: ``retry-node``: the row the previous attempt ended with (its record, done steps, whether
    #: the Node was deleted); the retry skips the done steps and repeats the one that stopped.
    previous: NodeMigrationStatus | None = None


# --- post-check ---------------------------------------------------------------------------------


class PackageFinding(BaseModel):
    """One post-check finding: ``kind`` missing (present before or on the group's peers, missing
    now) or version (differs from the peers of the node's group; ``package`` ``kubelet`` /
    ``runtime`` for the Node's kubelet and container-runtime versions); ``node``, ``package``,
    ``group`` (the node's roles, "" unknown), ``message``; ``resolved``: what was done about it
    afterwards (e.g. ``installed after gate post-check/install``), None = still open."""

    kind: Literal["missing", "version"]
    node: str
    package: str
    message: str
    group: str = ""
    resolved: str | None = None


class NodeMigrationResult(NodeRunResult):
    """What a node's child returns (a node run's result for the kit's window: ``outcome`` done,
    failed, aborted or skipped, ``attempt`` the row's), with the node's final row."""

    status: NodeMigrationStatus
    gate_history: list[GateRecord] = Field(default_factory=list)


class RuntimeMigrationStatus(ProcedureStatus):
    """``status`` of the migration: ``stage`` preflight/nodes/post-check/done; per node its row
    (:class:`NodeMigrationStatus`); the post-check findings and the install offer; ``current``
    the node being migrated (the preflight's findings are the result's)."""

    procedure: str = PROCEDURE_RUNTIME_MIGRATION
    stage: Literal["preflight", "nodes", "post-check", "done", "failed"] = "preflight"
    nodes: dict[str, NodeMigrationStatus] = Field(default_factory=dict)
    #: The node order: ``as-listed`` (no ``node_order``), zone-oldest, oldest-first, newest-first
    #: or explicit; ``order`` the nodes in it, once the preflight has read the Nodes.
    node_order: str = "as-listed"
    order: list[str] = Field(default_factory=list)
    current: str | None = None
    peers: list[str] = Field(default_factory=list)
    findings: list[PackageFinding] = Field(default_factory=list)
    installed: dict[str, list[str]] = Field(default_factory=dict)


class RuntimeMigrationResult(ProcedureResult):
    """``outcome`` completed / failed / aborted / refused (a precondition failed) / dry-run;
    per-node results; the post-check findings; ``preflight`` the preflight's findings."""

    procedure: str = PROCEDURE_RUNTIME_MIGRATION
    outcome: Literal["completed", "failed", "aborted", "refused", "dry-run"] = "completed"
    nodes: list[NodeMigrationResult] = Field(default_factory=list)
    findings: list[PackageFinding] = Field(default_factory=list)
    installed: dict[str, list[str]] = Field(default_factory=dict)
    preflight: list[str] = Field(default_factory=list)
    #: node → packages the migration removed from it.
    removed: dict[str, list[str]] = Field(default_factory=dict)
