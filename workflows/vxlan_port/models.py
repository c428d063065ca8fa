"""Input, status and result of the live VXLAN port change (R5, procedures-spec §7.2).

Pure pydantic (the CLI, the worker and the workflow share them; field names are a stored format).
Ports are UDP ports; durations seconds; ``t_*`` wall-clock POSIX seconds of the worker that ran
the fan-out (one clock for the window).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from activities.host.models import HostAccess
from activities.vxlan_port.models import DaemonSetRecord, FanoutResult, FileRecord, SwitchVia
from workflows.kit.models import OperatorInput, ProcedureResult, ProcedureStatus

PROCEDURE_VXLAN_PORT = "vxlan-port-change"
STAGES = ("A", "B", "C", "D", "E", "F", "G", "H")
STAGE_NAMES = {
    "A": "preflight and record", "B": "image present on every node", "C": "DaemonSet on the custom image",
    "D": "firewall rule on every node", "E": "fan-out", "F": "masters", "G": "restore the DaemonSet", "H": "report",
}


class MasterAccess(BaseModel):
    """One master: its node ``name``, how to reach its host (``access``) and its own API URL
    (``https://<master>:8443``; the per-master readiness check, never the load balancer)."""

    name: str
    access: HostAccess
    api_url: str
    ca_file: str | None = None
    insecure: bool = False


class VxlanPortChangeInput(BaseModel):
    """procedures-spec §7.2. ``nodes`` empty = every node (masters included); ``host_access``
    per node (every node needs one: pull, firewall, and the ssh switch); ``restart_order``
    None = the masters in the given order with the current controllers leader moved last."""

    new_port: int = Field(ge=1, le=65535)
    old_port: int = Field(4789, ge=1, le=65535)
    custom_image: str = Field(min_length=1)
    cluster: str = "default"
    requested_by: str = "unknown"
    four_eyes: bool = False
    allowed_approvers: list[str] = Field(default_factory=list)
    namespace: str = "openshift-sdn"
    daemonset: str = "sdn"
    label_selector: str = "app=sdn"
    container: str = "sdn"
    nodes: list[str] = Field(default_factory=list)
    masters: list[MasterAccess] = Field(min_length=1)
    host_access: dict[str, HostAccess] = Field(default_factory=dict)
    pull_cmd: list[str] = Field(default_factory=lambda: ["docker", "pull"])
    image_present_cmd: list[str] = Field(default_factory=lambda: ["docker", "image", "inspect"])
    pull_parallelism: int = Field(5, ge=1)
    pull_timeout_s: float = Field(900.0, gt=0)
    switch_via: SwitchVia = "pod-exec"
    fanout_deadline_s: float = Field(30.0, gt=0)
    fanout_attempts: int = Field(3, ge=1)
    fanout_heartbeat_s: float = Field(10.0, gt=0)
    firewall_chain: str = "OS_FIREWALL_ALLOW"
    persist_firewall: bool = True
    save_cmd: list[str] = Field(default_factory=lambda: ["/usr/libexec/iptables/iptables.init", "save"])
    saved_rules_path: str = "/etc/sysconfig/iptables"
    master_config_path: str = "/etc/origin/master/master-config.yaml"
    master_restart_cmd: str = "/usr/local/bin/master-restart"
    restart_order: list[str] | None = None
    pod_ready_timeout_s: float = Field(600.0, gt=0)
    api_ready_timeout_s: float = Field(600.0, gt=0)
    cluster_network_timeout_s: float = Field(300.0, gt=0)
    #: Where the records are mirrored (ConfigMap ``lockkeeper-record-<workflow id>``).
    record_namespace: str = "openshift-config"
    gate_timeout_s: float | None = None
    dry_run: bool = False
    #: Set on a ``revert --full`` run: the workflow ID whose change this one reverses.
    reverse_of: str | None = None
    search_attributes: bool = True

    @model_validator(mode="after")
    def _check(self) -> VxlanPortChangeInput:
        if self.new_port == self.old_port:
            raise ValueError(f"new_port and old_port are both {self.new_port}")
        names = [m.name for m in self.masters]
        if len(set(names)) != len(names):
            raise ValueError("masters are named more than once")
        if self.restart_order is not None and sorted(self.restart_order) != sorted(names):
            raise ValueError("restart_order must name every master exactly once")
        if self.nodes and not set(names) <= set(self.nodes):
            raise ValueError("nodes must include every master (all nodes run the SDN)")
        return self


class NodeRow(BaseModel):
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


class MasterRow(BaseModel):
    """One master in ``status``: config edit, API and controllers restarts, with times."""

    name: str
    config: str = "pending"
    api: str = "pending"
    controllers: str = "pending"
    leader: bool = False
    api_down_at: datetime | None = None
    api_ready_at: datetime | None = None
    detail: str = ""


class ApiInterval(BaseModel):
    """An interval a master's API (or, ``master`` "all", every master's) was not ready."""

    master: str
    start: datetime
    end: datetime | None = None
    seconds: float | None = None


class VxlanStatus(ProcedureStatus):
    """``status`` of a VXLAN port change: the stage (A–H) and step, node and master rows, the
    fan-out (``switched n/m``, window), the records and whether the point of no return passed."""

    procedure: str = PROCEDURE_VXLAN_PORT
    stage: str = "A"
    step: str = ""
    old_port: int = 4789
    new_port: int = 4889
    #: Not ``nodes``: the kit reads a status's ``nodes`` as NodeStatus rows (details, panels).
    node_rows: dict[str, NodeRow] = Field(default_factory=dict)
    masters: dict[str, MasterRow] = Field(default_factory=dict)
    switched: str = ""
    fanout_window_s: float | None = None
    partial_switch: bool = False
    point_of_no_return: bool = False
    cluster_network: str = ""
    revert_requested: bool = False
    record_configmap: str = ""


class VxlanPortChangeResult(ProcedureResult):
    """The report (phase H): ``outcome`` completed / stopped / reverted / aborted / dry-run;
    ``stage`` where it ended; the fan-out (window, per-node timings); the API-unavailable
    intervals; the records (DaemonSet, master-config files, ClusterNetwork); the inventory
    reminder; ``rebuild_free``: no workload pod restarted between preflight and the restore."""

    procedure: str = PROCEDURE_VXLAN_PORT
    stage: str = "A"
    old_port: int = 4789
    new_port: int = 4889
    fanout: FanoutResult | None = None
    outage_window_s: float | None = None
    node_timings: dict[str, NodeRow] = Field(default_factory=dict)
    api_unavailable: list[ApiInterval] = Field(default_factory=list)
    api_all_down: list[ApiInterval] = Field(default_factory=list)
    daemonset_record: DaemonSetRecord | None = None
    daemonset_restored: bool = False
    file_records: dict[str, FileRecord] = Field(default_factory=dict)
    cluster_network_record: dict | None = None
    restarted_workload_pods: list[str] = Field(default_factory=list)
    inventory_reminder: str = ""
    failed_nodes: dict[str, str] = Field(default_factory=dict)


class RevertInput(OperatorInput):
    """``lockkeeper revert ID [--full]``: who asks, and whether a change already past the
    point of no return (phase E) may be reversed as a whole; with the decision's ``sent_at`` /
    ``deadline`` / ``connection_identity`` (:class:`~workflows.kit.models.OperatorInput`)."""

    identity: str
    full: bool = False
    reason: str = ""


class RevertAnswer(BaseModel):
    """What a ``revert`` update answers: ``mode`` in-run (this run reverts and ends) or
    ``full`` (a reverse run is needed: the CLI starts it with ``reverse_input``)."""

    mode: Literal["in-run", "full"]
    message: str
