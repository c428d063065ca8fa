"""The one document ``lockkeeper status`` prints, for running, finished and failed procedures.

Shape (``-o json|yaml``; the table shows the same)::

    {"workflow_id": str, "run_id": str, "procedure": str | null, "workflow_type": str,
     "state": "running" | "completed" | "failed" | "canceled" | "terminated" | "timed_out" | ...,
     "status": {...} | null,     # the procedure's status model (running, worker answered)
     "result": {...} | null,     # its result model (completed)
     "failure": str | null,      # why it failed, was terminated, canceled or timed out
     "warning": str | null,      # e.g. no worker answered the status query
     "versioning": {             # the worker build the run is on (worker versioning), null if unversioned
        "deployment": str, "build_id": str, "behavior": "pinned" | "auto_upgrade"} | null,
     "priority": {               # the run's Temporal task priority (issue 40), null if none was set
        "priority_key": int | null, "fairness_key": str | null, "fairness_weight": float | null} | null,
     "upgrade": {...} | null,    # a running MachineConfig rollout: `oc adm upgrade status`'s view
                                 # (pools, nodes, health insights; lockkeeper.upgrade_status)
     "pending_activities": [     # each activity still scheduled or retrying, here or in a child
        {"workflow_id", "activity_id", "activity_type", "state", "attempt", "maximum_attempts",
         "last_failure": str | null, "next_attempt_time": ISO 8601 | null,
         "last_started_time": ISO 8601 | null}]}

Inside ``status`` and ``result``, a node's row (``nodes``, ``node``) leaves out its fields that
are null (``JsonWithoutNulls``: a 5,000-node status is 1.28 MB instead of 1.98 MB); read them with
a default (``.get`` in Python; in jq a missing key reads as null).

The pending activities come from ``DescribeWorkflowExecution`` (``pending_activities``) of the
procedure and of its running children (node runs; leases are skipped), so a step that keeps
failing (an API outage, a missing permission) is visible with its attempt count and next retry
time while the procedure waits for it.

``versioning`` comes from the same description (``versioning_info``): a pinned run is answered
only by workers of its build, so a run whose build has no worker left shows which build to start
(:mod:`workers.versioning`).

``priority`` also: the priority key (1 first .. 5 last; unset is the server's default 3) and the
fairness key (the cluster) the run was started with (:func:`lockkeeper.starter.run_priority`);
its children and activities inherit them. A run started before issue 40 has none.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

#: At most this many running children are described for their pending activities.
MAX_CHILDREN = 20


def _ts(msg: Any, field: str) -> str | None:
    if not msg.HasField(field):
        return None
    return getattr(msg, field).ToDatetime(UTC).isoformat(timespec="seconds")


def pending_rows(workflow_id: str, raw: Any) -> list[dict[str, Any]]:
    """Rows for the ``pending_activities`` of one ``DescribeWorkflowExecutionResponse``."""
    from temporalio.api.enums.v1 import PendingActivityState

    rows = []
    for pa in raw.pending_activities:
        failure = pa.last_failure.message if pa.HasField("last_failure") and pa.last_failure.message else None
        rows.append(
            {
                "workflow_id": workflow_id,
                "activity_id": pa.activity_id,
                "activity_type": pa.activity_type.name,
                "state": PendingActivityState.Name(pa.state).removeprefix("PENDING_ACTIVITY_STATE_").lower(),
                "attempt": pa.attempt,
                "maximum_attempts": pa.maximum_attempts or None,
                "last_failure": failure,
                "next_attempt_time": _ts(pa, "next_attempt_schedule_time"),
                "last_started_time": _ts(pa, "last_started_time"),
            }
        )
    return rows


async def pending_activities(client: Any, workflow_id: str, desc: Any) -> list[dict[str, Any]]:
    """The pending activities of ``workflow_id`` (``desc``: its description) and of its running
    children, one level down (a node run's own steps)."""
    from temporalio.service import RPCError

    raw = desc.raw_description
    rows = pending_rows(workflow_id, raw)
    for child in list(raw.pending_children)[:MAX_CHILDREN]:
        if child.workflow_type_name == "LeaseWorkflow":
            continue
        try:
            cdesc = await client.get_workflow_handle(child.workflow_id, run_id=child.run_id or None).describe()
        except RPCError:
            continue  # it just ended
        rows.extend(pending_rows(child.workflow_id, cdesc.raw_description))
    return rows


def versioning_of(desc: Any) -> dict[str, str] | None:
    """``{"deployment", "build_id", "behavior"}`` of the build a run is on (the effective one:
    an override wins), None for an unversioned run or one no worker has picked up yet."""
    from temporalio.api.enums.v1 import VersioningBehavior

    vi = desc.raw_description.workflow_execution_info.versioning_info
    behavior = vi.behavior
    version = vi.deployment_version if vi.HasField("deployment_version") else None
    if vi.HasField("versioning_override"):
        o = vi.versioning_override
        if o.HasField("pinned") and o.pinned.HasField("version"):
            behavior, version = VersioningBehavior.VERSIONING_BEHAVIOR_PINNED, o.pinned.version
        elif o.auto_upgrade:
            behavior = VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE
    if not behavior or version is None or not version.build_id:
        return None
    return {
        "deployment": version.deployment_name,
        "build_id": version.build_id,
        "behavior": VersioningBehavior.Name(behavior).removeprefix("VERSIONING_BEHAVIOR_").lower(),
    }


def priority_of(desc: Any) -> dict[str, Any] | None:
    """``{"priority_key", "fairness_key", "fairness_weight"}`` the run was started with (each None
    when unset), None when none of them is set."""
    info = desc.raw_description.workflow_execution_info
    if not info.HasField("priority"):
        return None
    p = info.priority
    doc = {"priority_key": p.priority_key or None, "fairness_key": p.fairness_key or None,
           "fairness_weight": p.fairness_weight or None}
    return doc if any(v is not None for v in doc.values()) else None


def state_name(status: Any) -> str:
    """``WorkflowExecutionStatus.FAILED`` → ``failed``."""
    return status.name.lower() if status is not None else "unknown"


def document(desc: Any, spec: Any, *, status: Any = None, result: Any = None, failure: str | None = None,
             warning: str | None = None, pending: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The status document (see the module doc); ``status``/``result`` are models or None."""
    from lockkeeper import output as out
    from workflows.machineconfig.models import RolloutStatus

    upgrade = None
    if isinstance(status, RolloutStatus):
        from lockkeeper.upgrade_status import upgrade_view

        upgrade = upgrade_view(status)
    return {
        "workflow_id": desc.id,
        "run_id": desc.run_id,
        "procedure": getattr(spec, "name", None),
        "workflow_type": desc.workflow_type,
        "state": state_name(desc.status),
        "status": out.to_data(status) if status is not None else None,
        "result": out.to_data(result) if result is not None else None,
        "failure": failure,
        "warning": warning,
        "versioning": versioning_of(desc),
        "priority": priority_of(desc),
        "upgrade": upgrade,
        "pending_activities": pending or [],
    }


def pending_table(rows: list[dict[str, Any]]) -> Any:
    """A rich table of pending activities: where, step, attempt, last failure, next retry."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(title="Steps waiting or retrying", title_justify="left")
    for col in ("workflow", "step", "state", "attempt", "last failure", "next attempt"):
        t.add_column(col, overflow="fold")
    for r in rows:
        attempts = f"{r['attempt']}" + (f"/{r['maximum_attempts']}" if r["maximum_attempts"] else "")
        t.add_row(r["workflow_id"], r["activity_type"], r["state"], attempts,
                  f"[red]{escape(r['last_failure'])}[/red]" if r["last_failure"] else "-", r["next_attempt_time"] or "-")
    return t
