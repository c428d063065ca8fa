"""``lockkeeper history ID [-o table|json|yaml]``: the audit trail of a procedure, for change
records, read from the workflow's own history (what Temporal keeps, not what a worker says now).

Rows, in time order (``time``, ``kind``, ``what``, ``by``, ``detail``):

- ``started`` / ``completed`` / ``failed`` / ``terminated`` / ``canceled`` / ``timed-out`` /
  ``continued-as-new``: the run itself (the start's client identity is the requester);
- ``update``: every accepted operator update (approve, reject, decide, pause, resume, abort,
  skip-node, retry-node, hold_node, release_node, revert) with the identity that sent it and its input's gate, node,
  decision and comment; ``signal``: signals with their sender (not the children's progress reports);
- ``node``: every child run that ended (node runs: the node's outcome from its result);
- ``gate``: the gate records the procedure kept (opened, decided, timed out: who, when, why),
  ``hold``: every hold on a node, its release or expiry ("hold on NODE expired") and
  ``record``: the records of objects it changed, all from the run's result once it closed
  (or its ``status`` query while it runs).

Payloads are read as JSON (the pydantic data converter's encoding).
"""

from __future__ import annotations

import json
from datetime import UTC
from typing import Any

import typer

from lockkeeper.cli.common import EXIT_OK, OutputOpt, check_output, cli_settings, connect, run


#: Signals that only carry progress (children's reports, a lease's answer): left out of the trail.
PROGRESS_SIGNALS = frozenset({"child_report", "lease_denied"})


def _payload(payloads: Any) -> Any:
    try:
        items = list(payloads.payloads)
        return json.loads(items[0].data) if items else None
    except (ValueError, IndexError, AttributeError):
        return None


def _ts(ev: Any) -> str:
    return ev.event_time.ToDatetime(UTC).isoformat(timespec="seconds")


def _fields(d: Any, *keys: str) -> str:
    if not isinstance(d, dict):
        return ""
    return ", ".join(f"{k}={d[k]}" for k in keys if d.get(k) not in (None, "", []))


_CLOSE = {
    "workflow_execution_completed_event_attributes": "completed",
    "workflow_execution_failed_event_attributes": "failed",
    "workflow_execution_terminated_event_attributes": "terminated",
    "workflow_execution_canceled_event_attributes": "canceled",
    "workflow_execution_timed_out_event_attributes": "timed-out",
    "workflow_execution_continued_as_new_event_attributes": "continued-as-new",
}


def rows_from_events(events: Any) -> tuple[list[dict[str, Any]], Any]:
    """Audit rows from history events, and the run's result (decoded JSON) if it completed."""
    rows: list[dict[str, Any]] = []
    result = None
    children: dict[int, str] = {}
    for ev in events:
        kind = ev.WhichOneof("attributes")
        row: dict[str, Any] | None = None
        if kind == "workflow_execution_started_event_attributes":
            a = ev.workflow_execution_started_event_attributes
            row = {"kind": "started", "what": a.workflow_type.name, "by": a.identity, "detail": ""}
        elif kind == "workflow_execution_update_accepted_event_attributes":
            req = ev.workflow_execution_update_accepted_event_attributes.accepted_request
            arg = _payload(req.input.args)
            # The operator's identity is in the input (the CLI sends --identity); the client's
            # identity (pid@host) is only the fallback.
            who = arg.get("identity") if isinstance(arg, dict) else None
            row = {"kind": "update", "what": req.input.name, "by": who or req.meta.identity,
                   "detail": _fields(arg, "gate_id", "node", "decision", "reason", "comment", "until", "for_seconds",
                                         "connection_identity")}
        elif kind == "workflow_execution_signaled_event_attributes":
            a = ev.workflow_execution_signaled_event_attributes
            if a.signal_name in PROGRESS_SIGNALS:
                continue  # a child's progress report is no audit fact; its decisions are in the gate records
            row = {"kind": "signal", "what": a.signal_name, "by": a.identity, "detail": ""}
        elif kind == "start_child_workflow_execution_initiated_event_attributes":
            children[ev.event_id] = ev.start_child_workflow_execution_initiated_event_attributes.workflow_id
        elif kind in ("child_workflow_execution_completed_event_attributes", "child_workflow_execution_failed_event_attributes"):
            a = getattr(ev, kind)
            wid = a.workflow_execution.workflow_id or children.get(a.initiated_event_id, "")
            res = _payload(a.result) if kind.endswith("completed_event_attributes") else None
            detail = _fields(res, "node", "outcome", "phase", "reason", "safe_point", "attempt") if res else str(a.failure.message if hasattr(a, "failure") else "")
            is_node = isinstance(res, dict) and "node" in res and ("outcome" in res or "phase" in res)
            if a.workflow_type.name == "LeaseWorkflow":
                continue  # a lease ending is no audit fact (its scope shows in status); a node run with a lease ID is one
            row = {"kind": "node" if is_node or "/node/" in wid or "/node:" in wid else "child",
                   "what": wid, "by": "", "detail": detail or ("failed" if "failed" in kind else "completed")}
        elif kind in _CLOSE:
            a = getattr(ev, kind)
            detail = ""
            if kind == "workflow_execution_completed_event_attributes":
                result = _payload(a.result)
                detail = _fields(result, "outcome")
            elif kind == "workflow_execution_failed_event_attributes":
                detail = a.failure.message
            elif kind == "workflow_execution_terminated_event_attributes":
                detail = a.reason
            row = {"kind": _CLOSE[kind], "what": "", "by": getattr(a, "identity", ""), "detail": detail}
        if row is not None:
            rows.append({"time": _ts(ev), **row})
    return rows, result


def rows_from_state(state: Any) -> list[dict[str, Any]]:
    """``gate``, ``hold`` and ``record`` rows from a result or status (JSON): ``gate_history``,
    ``hold_history`` and ``records``."""
    rows: list[dict[str, Any]] = []
    if not isinstance(state, dict):
        return rows
    for g in state.get("gate_history") or []:
        rows.append({"time": str(g.get("at", "")), "kind": "gate", "what": f"{g.get('gate_id')} {g.get('action')}",
                     "by": g.get("by", ""), "detail": _fields(g, "decision", "outcome", "comment", "connection_identity")})
    for h in state.get("hold_history") or []:
        what = f"hold on {h.get('node')} {h.get('action')}"
        detail = _fields(h, "reason", "until")
        rows.append({"time": str(h.get("at", "")), "kind": "hold", "what": what, "by": h.get("by", ""), "detail": detail})
    records = state.get("records") or {}
    for name, r in (records.items() if isinstance(records, dict) else []):
        rows.append({"time": "", "kind": "record", "what": f"{name}: {r.get('object', '')}", "by": "",
                     "detail": _fields(r, "state", "paths", "detail")})
    return rows


async def audit_rows(client: Any, wid: str) -> list[dict[str, Any]]:
    """Every row of ``history`` for workflow ``wid`` (latest run), sorted by time (records last)."""
    handle = client.get_workflow_handle(wid)
    history = await handle.fetch_history()
    rows, result = rows_from_events(history.events)
    state = result
    if state is None:
        from temporalio.client import WorkflowExecutionStatus

        if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
            from datetime import timedelta

            from temporalio.service import RPCError

            try:
                state = await handle.query("status", rpc_timeout=timedelta(seconds=10))
            except RPCError:
                state = None  # no worker answers: the history rows still stand
    extra = rows_from_state(state)
    return sorted(rows + extra, key=lambda r: (r["time"] == "", r["time"]))


def history(ctx: typer.Context, workflow_id: str = typer.Argument(..., metavar="ID"), output: str = OutputOpt) -> None:
    """The audit trail of a procedure: who started it, every gate and decision with who and why,
    node outcomes, records and how it ended (from the workflow history)."""
    output = check_output(output)
    settings = cli_settings(ctx)

    async def body() -> int:
        from lockkeeper import output as out

        client = await connect(settings)
        rows = await audit_rows(client, workflow_id)
        if output == "table":
            from rich.table import Table

            t = Table()
            for col in ("time", "kind", "what", "by", "detail"):
                t.add_column(col)
            for r in rows:
                t.add_row(*(str(r[c]) for c in ("time", "kind", "what", "by", "detail")))
            out.console().print(t)
        else:
            print(out.dump(rows, output))
        return EXIT_OK

    run(body())


def register(app: typer.Typer) -> None:
    """Add ``history``."""
    app.command("history")(history)
