"""Status and result panels for every procedure type, chosen by the spec's name.

``lockkeeper status ID`` validates the ``status`` query (or, once the run closed, its result) with
the procedure's own model and renders it here: the MachineConfig rollout keeps its rich views
(:mod:`lockkeeper.output`); every other procedure gets the generic view, which shows what the
kit's ``ProcedureStatus``/``ProcedureResult`` carry (phase, what it waits for, gates, health
waits, barriers, host steps, records, leases) and then every field of the procedure's own model:
scalars as facts, mappings of models (etcd members, nodes) as tables, lists (a log) as lines.
So a new procedure is shown completely before anyone writes a panel for it. Pure functions of
pydantic models; no Temporal calls.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from pydantic import BaseModel
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from lockkeeper.output import (
    append_next_steps,
    PHASE_STYLE,
    blocked_view,
    fmt_duration,
    fmt_time,
    gate_history_table,
    holds_view,
    preconditions_view,
    result_view,
    status_view,
)

#: Fields the generic view renders itself (the kit's base fields) before the procedure's own.
_BASE = {
    "procedure", "workflow_id", "cluster", "phase", "paused_reason", "abort_requested", "gates", "gate_history",
    "health", "barriers", "host_steps", "records", "leases", "warnings", "started_at", "updated_at",
    "waiting_for", "since", "deadline", "error", "outcome", "message", "finished_at",
    "point_of_no_return", "revert_requested_by", "left_changed", "next_commands", "problems", "open_records", "restored",
    "holds", "hold_history", "preconditions",
}
_OK_OUTCOMES = ("completed", "dry-run")


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool | datetime)


#: A value longer than this (characters) is cut in table mode; ``-o json|yaml`` shows it whole.
MAX_TEXT = 400


def _plain(value: Any, nested: bool = False) -> str:
    """A value as a person reads it, never a Python repr: times as times, enums as their value,
    models and mappings as ``key: value`` pairs, lists comma-separated (brackets when nested)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, datetime):
        return fmt_time(value)
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if value is None or value == "":
        return "-"
    if isinstance(value, dict):
        inner = ", ".join(f"{k}: {_plain(v, True)}" for k, v in value.items())
        return f"({inner})" if nested else inner
    if isinstance(value, list | tuple | set | frozenset):
        inner = ", ".join(_plain(v, True) for v in value)
        return f"[{inner}]" if nested else inner
    return str(value)


def _fmt(value: Any) -> str:
    text = _plain(value)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + " … (-o yaml shows all)"


def _table_of(title: str, rows: dict[str, Any]) -> Table:
    """A mapping name → model/dict as a table: one row per entry, a column per scalar field."""
    dumped = {k: (v.model_dump() if isinstance(v, BaseModel) else v) for k, v in rows.items()}
    cols: list[str] = []
    for v in dumped.values():
        for k, x in (v.items() if isinstance(v, dict) else []):
            if _scalar(x) and k not in cols and k != "name":
                cols.append(k)
    t = Table(title=title, title_justify="left")
    t.add_column("name")
    for c in cols:
        t.add_column(c, overflow="fold")
    for name, v in dumped.items():
        t.add_row(Text(str(name)), *[Text(_fmt(v.get(c)) if isinstance(v, dict) else "-") for c in cols])
    return t


def _headline(model: BaseModel, now: datetime) -> Text:
    get = lambda k: getattr(model, k, None)  # noqa: E731 - models differ in which base fields they have
    head = Text()
    head.append(f"{get('workflow_id') or ''}  ", style="bold")
    if get("procedure"):
        head.append(f"{get('procedure')}  ")
    if get("cluster"):
        head.append(f"cluster {get('cluster')}  ")
    if get("outcome") is not None:
        head.append("outcome ")
        head.append(str(get("outcome")), style="bold green" if str(get("outcome")) in _OK_OUTCOMES else "bold red")
        if get("message"):
            head.append(f": {get('message')}")
    elif get("phase") is not None:
        head.append("phase ")
        head.append(str(get("phase")), style="bold cyan")
    if get("paused_reason"):
        head.append(f"\npaused: {get('paused_reason')}", style="yellow")
    if get("abort_requested"):
        head.append("\nabort requested", style="red")
    if get("waiting_for"):
        head.append(f"\nwaiting for {get('waiting_for')}")
        if get("since"):
            head.append(f" since {fmt_time(get('since'), now)}")
        if get("deadline"):
            head.append(f" until {fmt_time(get('deadline'), now)}")
    append_next_steps(head, model)
    if get("started_at") and get("finished_at"):
        head.append(f"\ntotal time {fmt_duration((get('finished_at') - get('started_at')).total_seconds())}")
    if get("error"):
        head.append(f"\nerror: {get('error')}", style="bold red")
    return head


def procedure_view(model: BaseModel, now: datetime | None = None, skip: frozenset[str] = frozenset()) -> RenderableType:
    """The generic panel of any procedure's status or result (see the module docstring);
    ``skip``: fields a procedure's own panel shows itself."""
    now = now or datetime.now(UTC)
    parts: list[RenderableType] = [_headline(model, now)]
    pre = preconditions_view(model)
    if pre is not None:
        parts.append(pre)
    gates = getattr(model, "gates", None) or []
    if gates:
        t = Table(title="Gates", title_justify="left")
        for col in ("gate", "state", "opened", "timeout", "decided by", "at", "comment"):
            t.add_column(col)
        for g in gates:
            t.add_row(g.id, str(g.state), fmt_time(g.opened_at), fmt_time(g.timeout_at) if g.timeout_at else "never",
                      Text(g.decided_by or "-"), fmt_time(g.decided_at), Text(g.comment or ""))
        parts.append(t)
    for field in ("health", "barriers", "host_steps", "records"):
        value = getattr(model, field, None)
        if value:
            parts.append(_table_of(field.replace("_", " ").capitalize(), value))
    held = holds_view(model)
    if held is not None:
        parts.append(held)
    leases = getattr(model, "leases", None)
    if leases:
        parts.append(Text("leases: " + ", ".join(leases), style="dim"))
    facts: list[tuple[str, Any]] = []
    data = model.model_dump()
    for name, value in data.items():
        if name in _BASE or name in skip:
            continue
        if _scalar(value):
            facts.append((name, value))
        elif isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            parts.append(_table_of(name.replace("_", " ").capitalize(), getattr(model, name, value)))
        elif isinstance(value, dict) and value:
            facts.append((name, ", ".join(f"{k}={_fmt(v)}" for k, v in value.items())))
        elif isinstance(value, list) and value and all(_scalar(v) for v in value):
            parts.append(Text(f"{name}:\n  " + "\n  ".join(_fmt(v) for v in value[-20:])))
        elif isinstance(value, list) and value:
            items = getattr(model, name, value)
            # rows named by the items' own ``name`` (a master, a node) when every one has a distinct one
            names = [v.get("name") for v in value if isinstance(v, dict)]
            named = len(names) == len(value) and all(isinstance(n, str) and n for n in names) and len(set(names)) == len(names)
            rows = dict(zip(names, items, strict=True)) if named else {str(i): v for i, v in enumerate(items)}
            parts.append(_table_of(name.replace("_", " ").capitalize(), rows))
        elif isinstance(value, dict | list):
            continue
        else:
            facts.append((name, value))
    if facts:
        t = Table(title="Details", title_justify="left", show_header=False)
        t.add_column("field")
        t.add_column("value", overflow="fold")
        for name, value in facts:
            t.add_row(name, Text(_fmt(value)))  # a value such as "[node01][node02]" is text, not markup
        parts.insert(1, t)
    history = getattr(model, "gate_history", None) or []
    if history:
        parts.append(gate_history_table(history))
    for w in getattr(model, "warnings", None) or []:
        parts.append(Text(f"warning: {w}", style="yellow"))
    return Group(*parts)


def _rollout_status(st: Any) -> RenderableType:
    return status_view(st) if hasattr(st, "totals") and hasattr(st, "nodes") else procedure_view(st)


def _rollout_result(res: Any) -> RenderableType:
    return result_view(res) if hasattr(res, "nodes") else procedure_view(res)


def _command_text(command: Any) -> Text:
    argv = " ".join(command.argv)
    what = "timed out" if command.timed_out else f"exit {command.exit_code}"
    text = Text(f"command {argv}: {what} after {fmt_duration(command.duration_seconds)}")
    tail = (command.stderr.strip() or command.stdout.strip())[-400:]
    if tail:
        text.append(f"\n  {tail}", style="dim")
    return text


def _drain_status(st: Any) -> RenderableType:
    """The drain's node (phase, step, what it waits for), its blocked report and decision gate,
    and the reboot command's result."""
    if hasattr(st, "totals") and hasattr(st, "nodes"):
        return status_view(st)  # a drain started before it had its own status
    node = getattr(st, "node", None)
    parts: list[RenderableType] = [procedure_view(st, skip=frozenset({"node", "command"}))]
    if node is not None:
        t = Table(title="Node", title_justify="left")
        for col in ("node", "phase", "step", "waiting for", "since", "deadline", "warning / reason"):
            t.add_column(col, overflow="fold")
        t.add_row(node.name, Text(str(node.phase), style=PHASE_STYLE.get(node.phase, "")), node.step or "-",
                  node.waiting_for or "-", fmt_time(node.since) if node.since else "-",
                  fmt_time(node.deadline) if node.deadline else "-", node.warning or node.reason or "-")
        parts.append(t)
        if node.drain_report is not None and (str(node.phase) == "blocked" or node.decision_gate is not None):
            parts.append(blocked_view(node, getattr(st, "workflow_id", "ID")))
    if getattr(st, "command", None) is not None:
        parts.append(_command_text(st.command))
    return Group(*parts)


def _drain_result(res: Any) -> RenderableType:
    if hasattr(res, "nodes"):
        return result_view(res)
    parts: list[RenderableType] = [procedure_view(res, skip=frozenset({"command"}))]
    if getattr(res, "command", None) is not None:
        parts.append(_command_text(res.command))
    return Group(*parts)


#: The rollout's and the drain's (status panel, result panel), named by their specs' ``panels``.
ROLLOUT_PANELS = (_rollout_status, _rollout_result)
DRAIN_PANELS = (_drain_status, _drain_result)


def status_panel(procedure: str, status: BaseModel) -> RenderableType:
    """The status panel of ``procedure`` (a spec name) for ``status``."""
    return _views(procedure)[0](status)


def result_panel(procedure: str, result: BaseModel) -> RenderableType:
    """The result panel of ``procedure`` for a closed run's ``result``."""
    return _views(procedure)[1](result)


def result_ok(result: Any) -> bool:
    """Whether a closed run succeeded: its ``ok`` flag when it has one (the etcd backup), else
    an ``outcome`` of completed (or dry-run)."""
    ok = getattr(result, "ok", None)
    if isinstance(ok, bool):
        return ok
    return str(getattr(result, "outcome", "")) in _OK_OUTCOMES


def _views(procedure: str) -> tuple[Callable[[Any], RenderableType], Callable[[Any], RenderableType]]:
    """The panel pair of ``procedure``: what its spec names (``ProcedureSpec.panels``), else the
    generic view."""
    from workflows.kit.spec import resolve
    from workflows.registry import PROCEDURES

    spec = next((s for s in PROCEDURES if s.name == procedure), None)
    if spec is None or spec.panels is None:
        return (procedure_view, procedure_view)
    return resolve(spec.panels)  # type: ignore[return-value]
