"""Input, status and result of the live VXLAN port change (R5, procedures-spec §7.2).

Pure pydantic (the CLI, the worker and the workflow share them; field names are a stored format).
The input extends the kit's :class:`~workflows.kit.inputs.ProcedureInput` (cluster, approvals,
gates, calls, dry run) with one sub-model per part of the procedure. Ports are UDP ports;
durations are seconds (``*_seconds``); ``t_*`` wall-clock POSIX seconds of the worker that ran
the fan-out (one clock for the window).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field, field_validator, model_validator

from activities.host.models import HostAccess
from activities.vxlan_port.models import DaemonSetRecord, FanoutResult, FileRecord, SdnRef, SwitchVia
from workflows.kit.inputs import MaintenanceWindows, ProcedureInput, Strict
from workflows.kit.models import NodeStatus, ProcedureResult, ProcedureStatus

PROCEDURE_VXLAN_PORT = "vxlan-port-change"
#: The stages (``status.step``) and what each does.
STAGES = {
    "A": "preflight: every precondition checked before the first write",
    "B": "image present on every node",
    "C": "DaemonSet on the custom image, sdn pods replaced node by node",
    "D": "firewall rule on every node",
    "E": "fan-out: vxlan0 switched on every node at once",
    "F": "masters: master-config, ClusterNetwork, restarts one master at a time",
    "G": "DaemonSet restored from the record, sdn pods replaced node by node",
    "H": "report",
}


class MasterAccess(Strict):
    """One master: its node ``name``, how to reach its host (``access``) and its own API URL
    (``https://<master>:8443``; the per-master readiness check, never the load balancer)."""

    name: str = Field(min_length=1)
    access: HostAccess
    api_url: str
    ca_file: str | None = None
    insecure: bool = False

    @field_validator("api_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r} is not an http(s) URL (https://HOST:8443)")
        return v


class ImagePull(Strict):
    """Phase B: ``present_cmd IMAGE`` exits 0 when the image is on the host (``docker image
    inspect``; ``crictl inspecti`` on CRI-O), else ``pull_cmd IMAGE`` (``docker pull`` /
    ``crictl pull``), at most ``parallelism`` nodes at once, each pull bounded by
    ``timeout_seconds``."""

    pull_cmd: list[str] = Field(default_factory=lambda: ["docker", "pull"], min_length=1)
    present_cmd: list[str] = Field(default_factory=lambda: ["docker", "image", "inspect"], min_length=1)
    parallelism: int = Field(5, ge=1)
    timeout_seconds: float = Field(900.0, gt=0)


class FanoutPolicy(Strict):
    """Phase E: how ``ovs-vsctl`` reaches each node's ``vxlan0`` (``switch_via``: exec in the sdn
    pod, or ``docker exec`` over SSH), the whole fan-out's ``deadline_seconds``, the immediate
    rounds for failed nodes (``attempts``) and the activity's ``heartbeat_seconds``."""

    switch_via: SwitchVia = "pod-exec"
    deadline_seconds: float = Field(30.0, gt=0)
    attempts: int = Field(3, ge=1)
    heartbeat_seconds: float = Field(10.0, gt=0)


class FirewallPolicy(Strict):
    """Phase D: the rule ``CHAIN -p udp -m state --state NEW -m udp --dport PORT -j ACCEPT`` in
    ``chain``; with ``persist`` saved by ``save_cmd`` and found in ``saved_rules_path`` (o-a
    ``os_firewall_manage_iptables``)."""

    chain: str = "OS_FIREWALL_ALLOW"
    persist: bool = True
    save_cmd: list[str] = Field(default_factory=lambda: ["/usr/libexec/iptables/iptables.init", "save"], min_length=1)
    saved_rules_path: str = "/etc/sysconfig/iptables"


class MasterPolicy(Strict):
    """Phase F: ``config_path`` (``networkConfig.vxlanPort`` is edited there), ``restart_cmd``
    (``master-restart api|controllers``), ``restart_order`` (None: the masters as given with the
    current controllers leader moved last), ``api_ready_timeout_seconds`` (each master's API and
    controllers back), ``cluster_network_timeout_seconds`` (ClusterNetwork re-created)."""

    config_path: str = "/etc/origin/master/master-config.yaml"
    restart_cmd: str = "/usr/local/bin/master-restart"
    restart_order: list[str] | None = None
    api_ready_timeout_seconds: float = Field(600.0, gt=0)
    cluster_network_timeout_seconds: float = Field(300.0, gt=0)


class VxlanPortChangeInput(ProcedureInput):
    """procedures-spec §7.2. ``nodes`` empty = every node of the cluster (masters included; every
    node runs the SDN and must switch); ``host_access`` per node (pull, firewall, the ssh switch);
    ``pod_ready_timeout_seconds`` bounds each sdn pod replacement; ``record_namespace`` holds the
    record ConfigMap ``lockkeeper-record-<id>``; ``reverse_of``: set on a ``revert --full`` run, the
    workflow ID whose change this one reverses (its record ConfigMap gives the DaemonSet's
    original image and triggers annotation)."""

    new_port: int = Field(ge=1, le=65535)
    old_port: int = Field(4789, ge=1, le=65535)
    custom_image: str = Field(min_length=1)
    sdn: SdnRef = Field(default_factory=SdnRef)
    nodes: list[str] = Field(default_factory=list)
    masters: list[MasterAccess] = Field(min_length=1)
    host_access: dict[str, HostAccess] = Field(default_factory=dict)
    images: ImagePull = Field(default_factory=ImagePull)
    fanout: FanoutPolicy = Field(default_factory=FanoutPolicy)
    firewall: FirewallPolicy = Field(default_factory=FirewallPolicy)
    master: MasterPolicy = Field(default_factory=MasterPolicy)
    pod_ready_timeout_seconds: float = Field(600.0, gt=0)
    record_namespace: str = "openshift-config"
    reverse_of: str | None = None
    #: Maintenance windows (:data:`workflows.kit.inputs.MaintenanceWindows`, ``--window``): no master restart
    #: starts outside them; empty: always.
    windows: MaintenanceWindows = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> VxlanPortChangeInput:
        if self.new_port == self.old_port:
            raise ValueError(f"new_port and old_port are both {self.new_port}")
        names = [m.name for m in self.masters]
        if len(set(names)) != len(names):
            raise ValueError("masters are named more than once")
        order = self.master.restart_order
        if order is not None and sorted(order) != sorted(names):
            raise ValueError("master.restart_order must name every master exactly once")
        if self.nodes and not set(names) <= set(self.nodes):
            raise ValueError("nodes must include every master (all nodes run the SDN)")
        if self.fanout.switch_via == "ssh" and any(a.backend != "ssh" for a in self.host_access.values()):
            raise ValueError("fanout.switch_via ssh needs SSH host access for every node (docker exec over SSH)")
        return self


class SdnNode(BaseModel):
    """One node in ``status``: its SDN pod and image, the image barrier, the firewall barrier,
    its dst_port and its fan-out timing (``t_apply_start``/``t_apply_end``)."""

    name: str
    sdn_pod: str | None = None
    sdn_image: str | None = None
    image_present: str = "pending"
    firewall: str = "pending"
    port: int | None = None
    switch: str = "pending"
    t_apply_start: float | None = None
    t_apply_end: float | None = None
    detail: str = ""


class ApiInterval(BaseModel):
    """An interval a master's API (or, ``master`` "all", every master's) was not ready."""

    master: str
    start: datetime
    end: datetime | None = None
    seconds: float | None = None


class VxlanStatus(ProcedureStatus):
    """``status`` of a VXLAN port change: the stage in ``step`` (A–H, :data:`STAGES`), every
    node's SDN row (``sdn_nodes``), the masters on the kit's node board (``nodes``: their restart
    one at a time, in ``restart_order``), the fan-out (``switched n/m``, window), the
    ClusterNetwork and the record ConfigMap."""

    procedure: str = PROCEDURE_VXLAN_PORT
    old_port: int = 4789
    new_port: int = 4889
    sdn_nodes: dict[str, SdnNode] = Field(default_factory=dict)
    #: The masters (NodeStatus rows of the kit's board, :class:`workflows.kit.board.NodeBoard`).
    nodes: dict[str, NodeStatus] = Field(default_factory=dict)
    restart_order: list[str] = Field(default_factory=list)
    switched: str = ""
    fanout_window_seconds: float | None = None
    partial_switch: bool = False
    cluster_network: str = ""
    record_configmap: str = ""


class VxlanPortChangeResult(ProcedureResult):
    """The report (phase H): ``outcome`` completed / aborted / reverted / refused / dry-run (and
    the kit's ``restored`` / ``left_changed`` / ``next_commands``); ``step`` where it ended; the
    preconditions checked (``preconditions``, one line each); the fan-out (window, per-node
    timings); the API-unavailable intervals; the DaemonSet as found (``daemonset``), master-config
    files and ClusterNetwork as recorded; the inventory reminder; ``restarted_workload_pods``: the
    pods that restarted between preflight and the restore (none: no network rebuild)."""

    procedure: str = PROCEDURE_VXLAN_PORT
    step: str | None = None
    old_port: int = 4789
    new_port: int = 4889
    preconditions: list[str] = Field(default_factory=list)
    fanout: FanoutResult | None = None
    outage_window_seconds: float | None = None
    sdn_nodes: dict[str, SdnNode] = Field(default_factory=dict)
    api_unavailable: list[ApiInterval] = Field(default_factory=list)
    api_all_down: list[ApiInterval] = Field(default_factory=list)
    daemonset: DaemonSetRecord | None = None
    file_records: dict[str, FileRecord] = Field(default_factory=dict)
    cluster_network_record: dict | None = None
    restarted_workload_pods: list[str] = Field(default_factory=list)
    inventory_reminder: str = ""
    failed_nodes: dict[str, str] = Field(default_factory=dict)
