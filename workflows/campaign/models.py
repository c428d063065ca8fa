"""A campaign's input, status and result (issue 38): one procedure across a fleet of clusters, in waves.

The input names the procedure by its spec name and workflow type (the CLI resolves both from
``workflows.PROCEDURES``; workflow code never imports the registry), the procedure's shared input
as a JSON object (validated by the CLI against the procedure's own input model for every
cluster before anything starts), and the clusters, each with its own task queue (the CLI computes
``<task queue>-<cluster>``, :func:`workers.settings.cluster_task_queue`) and optional overrides
merged into the shared input. Stored in history: add fields, never rename.

Waves (:func:`parse_waves`, :meth:`CampaignInput.wave_plan`): a comma-separated list of sizes,
each a count (``1``), a percentage of the fleet (``10%``, rounded up, at least 1, as
MachineConfigPool's maxUnavailable rounds) or ``rest`` (every cluster not in an earlier wave; only
last). Clusters are taken in the order the file lists them; a wave that would be empty is dropped,
and clusters left over after the last wave form one more wave.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from workflows.kit.inputs import AlertGatePolicy, ProcedureInput
from workflows.kit.models import ChangedItem, ProcedureResult, ProcedureStatus
from workflows.kit.report import ChildReport
from workflows.kit.windows import check_specs

PROCEDURE_CAMPAIGN = "campaign"
DEFAULT_WAVES = "1,rest"

_CLUSTER_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$")
_WAVE_ITEM = re.compile(r"^(?:(\d+)|(\d+(?:\.\d+)?)%|rest)$")


def parse_waves(spec: str) -> list[str]:
    """The items of a wave spec (``"1,10%,rest"`` → ``["1", "10%", "rest"]``). Raises ValueError
    naming the bad item: not a positive count, a percentage in (0, 100], or ``rest``, or a
    ``rest`` that is not last."""
    items = [i.strip() for i in spec.split(",")]
    if not items or any(not i for i in items):
        raise ValueError(f"waves {spec!r}: give comma-separated sizes, e.g. 1,10%,rest")
    for n, item in enumerate(items):
        m = _WAVE_ITEM.match(item)
        if m is None:
            raise ValueError(f"waves {spec!r}: {item!r} is not a count, a percentage (10%) or rest")
        if m.group(1) is not None and int(m.group(1)) < 1:
            raise ValueError(f"waves {spec!r}: a wave has at least 1 cluster, not {item}")
        if m.group(2) is not None and not 0 < float(m.group(2)) <= 100:
            raise ValueError(f"waves {spec!r}: a percentage is in (0, 100], not {item}")
        if item == "rest" and n != len(items) - 1:
            raise ValueError(f"waves {spec!r}: rest can only be the last wave")
    return items


def wave_sizes(spec: str, total: int) -> list[int]:
    """How many clusters each wave of ``spec`` takes out of ``total`` (sums to ``total``; no
    empty wave). Percentages round up; clusters left after the last item form one more wave."""
    sizes: list[int] = []
    left = total
    for item in parse_waves(spec):
        if left <= 0:
            break
        if item == "rest":
            n = left
        elif item.endswith("%"):
            n = max(1, math.ceil(total * float(item[:-1]) / 100))
        else:
            n = int(item)
        n = min(n, left)
        sizes.append(n)
        left -= n
    if left > 0:
        sizes.append(left)
    return sizes


class CampaignCluster(BaseModel):
    """One cluster of the fleet: ``name`` (the child's ``cluster``, its ID part and its queue's
    suffix), ``task_queue`` the queue its own worker polls (empty: the campaign's own queue), and
    ``overrides``: fields of the procedure's input for this cluster only, merged into the shared
    input (nested mappings merge key by key; anything else replaces)."""

    name: str
    task_queue: str = ""
    overrides: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _CLUSTER_NAME.match(v):
            raise ValueError(f"cluster name {v!r}: lower-case letters, digits, '.' and '-', 1 to 63 characters")
        return v


def _as_dict(value: Any) -> dict[str, Any]:
    """A nested input group as a mapping (a model as its fields; None as empty)."""
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_unset=True)
    return dict(value or {})


def merged(shared: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``shared`` with ``overrides`` merged in (nested mappings key by key); neither is changed."""
    out = dict(shared)
    for k, v in overrides.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merged(out[k], v)
        else:
            out[k] = v
    return out


class SoakChecks(BaseModel):
    """What must hold, throughout the soak between two waves, on every cluster that has completed
    so far (issue 38: "a soak time passed with the cluster health gates and the alert gate
    green"). Each check runs on the cluster's own queue (its worker has its credentials):

    - ``nodes_ready``, ``pools_not_degraded``, ``pod_namespaces``: the cluster's health
      (:class:`activities.cluster.models.ClusterHealthInput`);
    - ``alerts``: no alert blocks in the cluster's Prometheus (the kit's alert query,
      :class:`workflows.kit.inputs.AlertGatePolicy`); a cluster whose procedure input carries
      its own ``alerts`` policy (shared input or the cluster's overrides) is asked with that one,
      so each cluster's own Prometheus answers; None: no alert check;
    - ``poll_seconds``: between two rounds of checks (seconds);
    - ``red_timeout_seconds``: how long the checks may stay red before the gate ``soak/<wave>/<n>``
      opens (approve: start the next wave anyway; reject: abort the campaign); None: wait.

    The soak passes once every check has been green for ``soak_seconds`` in a row: a red round
    starts the soak again from the next green one."""

    nodes_ready: bool = True
    pools_not_degraded: bool = True
    pod_namespaces: list[str] = Field(default_factory=list)
    alerts: AlertGatePolicy | None = None
    poll_seconds: float = Field(30.0, gt=0)
    red_timeout_seconds: float | None = Field(3600.0, gt=0)


class CampaignInput(ProcedureInput):
    """The campaign (see the module doc).

    - ``procedure``: the spec name of the procedure each cluster runs (e.g. ``drain``);
      ``workflow_type``: its workflow type; ``reports``: its input takes ``report_to`` (the kit's
      child→parent channel), so each child's summary (phase, waiting gates) reaches the campaign.
    - ``input``: the procedure's input shared by every cluster (JSON object).
    - ``clusters``: the fleet, in order (at least 1; names unique).
    - ``waves``: the wave spec (:func:`parse_waves`), default ``1,rest``.
    - ``max_clusters_in_flight``: at most this many children run at once (default: no cap
      beyond the wave).
    - ``failure_budget``: how many clusters may fail before the campaign stops starting new ones
      and opens the decision gate ``budget/<n>`` (approve: go on, the budget grows to the failures
      so far; reject: abort). Default 0.
    - ``soak_seconds``: after a wave ended, how long to wait before the next one (seconds),
      with ``soak_checks`` (:class:`SoakChecks`; None: a plain timer) green all along.
    - ``approve_each``: ``wave``: gate ``wave/<n>`` before each wave after the first;
      ``none``: waves follow each other after the soak.
    - ``windows``: maintenance windows of the campaign (``DAYS HH:MM-HH:MM ZONE``,
      :mod:`workflows.kit.windows`; the CLI's ``--window``): no cluster's procedure starts outside
      every window; those running go on to their end (the system-upgrade-controller's semantics,
      one level up). Empty: always open. A cluster's own procedure may carry node windows in its
      input as well.
    - the kit's fields (:class:`workflows.kit.inputs.ProcedureInput`, issue 36): ``cluster``
      (``fleet``: the campaign's own name for what it runs on), ``approvals`` (the requester,
      four-eyes and allowed approvers of the campaign's gates), ``gates`` (how long a gate waits,
      None: forever, and what its timeout does, default reject), ``search_attributes``,
      ``dry_run`` (below), ``calls``.

    An input stored before the move (``requested_by``, ``four_eyes``, ``allowed_approvers`` and
    ``gate_timeout_seconds`` at the top level) is read into ``approvals`` and ``gates``
    (:meth:`_flat_fields`), so a running campaign and its history decode as before.
    """

    cluster: str = Field("fleet", min_length=1)

    procedure: str
    workflow_type: str
    reports: bool = False
    input: dict[str, Any] = Field(default_factory=dict)
    clusters: list[CampaignCluster]
    waves: str = DEFAULT_WAVES
    max_clusters_in_flight: int | None = Field(None, ge=1)
    failure_budget: int = Field(0, ge=0)
    soak_seconds: float = Field(0.0, ge=0)
    soak_checks: SoakChecks | None = Field(default_factory=SoakChecks)
    approve_each: Literal["wave", "none"] = "wave"
    windows: list[str] = Field(default_factory=list)
    # ``dry_run`` (the kit's): check the preconditions (below) and end ``dry-run`` with the
    # waves; no cluster's procedure runs (only their own dry runs, with ``procedure_has_dry_run``).
    #: Check that a worker polls every cluster's queue before the first child starts (False: a
    #: start with ``--queue``, whose children wait for their workers).
    check_workers: bool = True
    #: The procedure's input takes ``dry_run``: the campaign's own dry run runs the procedure's
    #: dry run on each cluster whose queue has a worker (child ``<campaign>/<cluster>/dry-run``,
    #: bounded by ``child_dry_run_timeout_seconds``) and lists its result. A real start does not:
    #: each child checks its own preconditions through the kit before its first write, and a
    #: refused child counts against ``failure_budget`` like any failed cluster.
    procedure_has_dry_run: bool = False
    #: The procedure's input is a :class:`workflows.kit.inputs.ProcedureInput` (its requester is
    #: ``approvals.requested_by``, never a flat ``requested_by``); the CLI sets it from the model.
    nested_approvals: bool = False
    child_dry_run_timeout_seconds: float = Field(300.0, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _flat_fields(cls, data: Any) -> Any:
        """The flat approval and gate fields of an input stored before the campaign took the
        kit's nested ones: ``requested_by``, ``four_eyes``, ``allowed_approvers`` into
        ``approvals``, ``gate_timeout_seconds`` into ``gates.timeout_seconds`` (a nested value
        given as well wins)."""
        if not isinstance(data, dict) or not ({"requested_by", "four_eyes", "allowed_approvers", "gate_timeout_seconds"} & set(data)):
            return data
        data = dict(data)
        flat = {k: data.pop(k) for k in ("requested_by", "four_eyes", "allowed_approvers") if k in data}
        if flat:
            data["approvals"] = merged(flat, _as_dict(data.get("approvals")))
        if "gate_timeout_seconds" in data:
            data["gates"] = merged({"timeout_seconds": data.pop("gate_timeout_seconds")}, _as_dict(data.get("gates")))
        return data

    @property
    def requested_by(self) -> str:
        """Who started the campaign (``approvals.requested_by``)."""
        return self.approvals.requested_by

    @field_validator("waves")
    @classmethod
    def _waves(cls, v: str) -> str:
        parse_waves(v)
        return v

    @field_validator("windows")
    @classmethod
    def _windows(cls, v: list[str]) -> list[str]:
        return check_specs(v)

    @model_validator(mode="after")
    def _fleet(self) -> CampaignInput:
        if not self.clusters:
            raise ValueError("a campaign needs at least one cluster")
        names = [c.name for c in self.clusters]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"clusters listed twice: {', '.join(dup)}")
        return self

    def wave_plan(self) -> list[list[str]]:
        """The cluster names of each wave, in order."""
        names = [c.name for c in self.clusters]
        plan: list[list[str]] = []
        at = 0
        for n in wave_sizes(self.waves, len(names)):
            plan.append(names[at:at + n])
            at += n
        return plan

    def child_input(self, cluster: CampaignCluster, campaign_id: str) -> dict[str, Any]:
        """The input of ``cluster``'s child: the shared input, its overrides, its ``cluster``
        name, the campaign's requester when the shared input names nobody (``approvals.requested_by``
        with ``nested_approvals``, else ``requested_by``), and ``report_to`` the campaign
        when the procedure reports."""
        data = merged(self.input, cluster.overrides)
        data["cluster"] = cluster.name
        if self.nested_approvals:  # a ProcedureInput: the requester is approvals.requested_by
            data["approvals"] = {"requested_by": self.requested_by, **(data.get("approvals") or {})}
        else:
            data.setdefault("requested_by", self.requested_by)
        if self.reports:
            data["report_to"] = campaign_id
            # Milestones only: the campaign's history holds a few signals per cluster (issue
            # 38's target); `status CAMPAIGN` reads each running child's step live.
            data["report_progress"] = False
        return data

    def dry_run_input(self, cluster: CampaignCluster) -> dict[str, Any]:
        """The input of ``cluster``'s own dry run: its child's input with ``dry_run`` and no
        ``report_to`` (a dry run reports nothing to the campaign)."""
        data = self.child_input(cluster, "")
        data.pop("report_to", None)
        data.pop("report_progress", None)
        data["dry_run"] = True
        return data


ClusterState = Literal["pending", "running", "done", "failed", "aborted", "not-started"]


class ClusterRun(BaseModel):
    """One cluster in the campaign: its ``wave`` (1-based), ``state``, the child's workflow ID
    (``lockkeeper status <child_id>`` shows all of it) and task queue, its last report (children
    whose procedure reports), its ``outcome`` and ``message`` once ended, ``started_at`` and
    ``ended_at``."""

    name: str
    wave: int
    state: ClusterState = "pending"
    task_queue: str = ""
    child_id: str | None = None
    outcome: str | None = None
    message: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    child_status: ChildReport | None = None
    #: The soak's last look at this cluster (``healthy (...)`` or its problems) and when.
    health: str | None = None
    health_at: datetime | None = None
    #: What this cluster's child changed and left so (issue 39), each item named as the
    #: simulator's diff names it (``Node worker-0000``): a completed child that reports to the
    #: campaign (``reports``), what it did (its result's ``changed``); any other ending, what its
    #: result's ``left_changed`` says stays changed, or, for a failed child, its last report's.
    #: Empty: nothing stays changed, or a completed child that does not report (its own
    #: ``lockkeeper status CHILD_ID`` shows its run).
    changed: list[ChangedItem] = Field(default_factory=list)


class CampaignStatus(ProcedureStatus):
    """``status``: every cluster (:class:`ClusterRun`), the wave now, the failures against the
    budget, and the count of clusters per state (``counts``)."""

    target_procedure: str = ""
    clusters: list[ClusterRun] = Field(default_factory=list)
    waves: int = 0
    current_wave: int = 0
    failures: int = 0
    failure_budget: int = 0
    budget_spent: bool = False
    max_in_flight_seen: int = 0
    counts: dict[str, int] = Field(default_factory=dict)
    #: While every window is closed: when the next one opens (no cluster starts before it).
    window_opens_at: datetime | None = None


class CampaignResult(ProcedureResult):
    """``outcome`` completed (every cluster ran; ``failed`` names those that failed within the
    budget), aborted, refused (a precondition failed before any cluster started: ``problems``)
    or dry-run (``preconditions`` lists every check); every cluster's :class:`ClusterRun`.

    ``left_changed`` (the kit's field, issue 39): what the fleet is left with, cluster by
    cluster, each item's ``target`` prefixed with its cluster (``east: Node worker-0000``), the
    clusters in the campaign's order. A completed campaign lists its failed and aborted clusters'
    items only (what its done clusters did is the campaign's purpose, in each ``ClusterRun.changed``);
    any other ending (aborted, failed) lists every cluster's, done clusters included: what the
    campaign did and did not undo."""

    clusters: list[ClusterRun] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)


def fleet_changed(runs: list[ClusterRun], *, done_too: bool) -> list[ChangedItem]:
    """The campaign's ``left_changed`` (:class:`CampaignResult`): every cluster's ``changed`` in
    the order of ``runs``, each item's target prefixed ``<cluster>: `` (``east: Node
    worker-0000``); ``done_too`` False leaves out the clusters whose child completed. The
    undo command is the child's own (run it against that cluster)."""
    return [i.model_copy(update={"target": f"{r.name}: {i.target}"})
            for r in runs if done_too or r.state != "done" for i in r.changed]


def cluster_of(item: ChangedItem) -> tuple[str, ChangedItem]:
    """The inverse of :func:`fleet_changed` for one item: ``(cluster, item with its own
    target)``. Raises ValueError for an item without a cluster prefix."""
    cluster, sep, target = item.target.partition(": ")
    if not sep:
        raise ValueError(f"{item.target!r} names no cluster")
    return cluster, item.model_copy(update={"target": target})
