"""``lockkeeper start machineconfig-rollout``: flags → ``MachineConfigRolloutInput`` → start.

The rollout plans inside the workflow (preflight), so ``--dry-run`` starts it with
``dry_run=True``: it reads the cluster, returns its plan and writes nothing. Otherwise the
command waits for the plan and prints it below the workflow ID.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer

from lockkeeper.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    ClusterOpt,
    IdentityOpt,
    IdOpt,
    OutputOpt,
    check_output,
    cli_settings,
    connect,
    err,
    identity_of,
    run,
    validation_lines,
)
from lockkeeper.cli.start.shared import (
    Launch,
    NodeOrderOpt,
    OrderOpt,
    WindowOpt,
    launch,
    node_order,
    spec_named,
    show_window_plan,
    windows,
)

APPROVALS = ("none", "pool", "node", "canary")
GATE_OUTCOMES = ("reject", "approve", "abort")
DECISION_OUTCOMES = ("wait", "skip", "abort")


def parse_max_unavailable(value: str) -> int | str:
    """``N`` (≥1) → int, ``N%`` (1..100) → ``"N%"`` (MachineConfigPool's maxUnavailable
    forms); anything else raises typer.BadParameter."""
    v = value.strip()
    m = re.fullmatch(r"(\d+)(%?)", v)
    if not m:
        raise typer.BadParameter(f"must be a count (2) or a percentage (25%), not {value!r}")
    n = int(m.group(1))
    if m.group(2):
        if not 1 <= n <= 100:
            raise typer.BadParameter(f"percentage must be 1%..100%, not {value!r}")
        return f"{n}%"
    if n < 1:
        raise typer.BadParameter(f"must be at least 1, not {value!r}")
    return n


def parse_targets(values: list[str]) -> dict[str, str]:
    """``POOL=RENDERED`` pairs → dict; raises typer.BadParameter on a malformed pair."""
    out: dict[str, str] = {}
    for v in values:
        pool, sep, rendered = v.partition("=")
        if not sep or not pool or not rendered:
            raise typer.BadParameter(f"must be POOL=RENDERED-CONFIG, not {v!r}", param_hint="'--target'")
        out[pool] = rendered
    return out


def _choice(value: str, choices: tuple[str, ...], hint: str) -> str:
    if value not in choices:
        raise typer.BadParameter(f"must be {', '.join(choices[:-1])} or {choices[-1]}", param_hint=hint)
    return value


def _not_before(value: str | None) -> Any:
    from datetime import datetime

    if not value:
        return None
    try:
        nb = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(f"not an ISO 8601 time: {value!r}", param_hint="'--not-before'") from None
    if nb.tzinfo is None:
        raise typer.BadParameter("give a timezone (e.g. 2024-05-01T10:00:00Z)", param_hint="'--not-before'")
    return nb


def start_machineconfig_rollout(
    ctx: typer.Context,
    pool: list[str] = typer.Option([], "--pool", "-p", help="Pool to roll (repeatable; default: every pool behind)."),
    target: list[str] = typer.Option([], "--target", help="POOL=RENDERED-CONFIG (default: newest rendered config)."),
    not_before: str | None = typer.Option(None, "--not-before", help="Refuse targets created before this ISO time."),
    max_unavailable: str = typer.Option("1", "--max-unavailable", help="Nodes at a time: N or N%."),
    pool_order: str = typer.Option(
        "sequential", "--pool-order",
        help="sequential | parallel (each pool its own window, as the machine-config-controller) | masters-first",
    ),
    order_by: str | None = OrderOpt,
    node_order_file: Path | None = NodeOrderOpt,
    window: list[str] = WindowOpt,
    approve_each: str = typer.Option("none", "--approve-each", help="none | pool | node | canary"),
    gate_timeout: float | None = typer.Option(None, "--gate-timeout", help="Seconds a gate waits (default: forever)."),
    gate_timeout_outcome: str = typer.Option("reject", "--gate-timeout-outcome", help="reject | approve | abort"),
    no_pause_on_degraded: bool = typer.Option(False, "--no-pause-on-degraded", help="Keep going when a node degrades."),
    four_eyes: bool = typer.Option(False, "--four-eyes", help="The requester may not approve."),
    allowed_approver: list[str] = typer.Option([], "--allowed-approver", help="Who may approve (repeatable)."),
    repair_network: bool = typer.Option(False, "--repair-network", help="R1: then wait for OVN, delete all pods (gated)."),
    decide_after: float = typer.Option(
        600.0, "--decide-after", help="Seconds a drain may stay blocked before its decision gate opens (0: never)."
    ),
    drain_escalate_after: float = typer.Option(
        2700.0, "--drain-escalate-after",
        help="Seconds after the daemon's drain request by which an unfinished drain opens its decision gate, "
             "whatever --decide-after says: before the daemon's 1 h drain deadline (0: never).",
    ),
    decision_timeout: float | None = typer.Option(None, "--decision-timeout", help="Seconds a drain decision gate waits."),
    decision_timeout_outcome: str = typer.Option(
        "wait", "--decision-timeout-outcome", help="wait | skip | abort (never delete-pod)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan (read-only preflight) and stop."),
    alerts: dict[str, Any] | None = None,  # the --alert-* flags (shared.with_alert_gate_options)
    cluster: str | None = ClusterOpt,
    workflow_id: str | None = IdOpt,
    wait: bool = typer.Option(False, "--wait", help="Wait until the rollout ends; exit 0 only if it completed."),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Start a MachineConfig rollout (lockkeeper drives the node handshake) and print its plan."""
    output = check_output(output)
    mu = parse_max_unavailable(max_unavailable)
    targets = parse_targets(target)
    stray = sorted(set(targets) - set(pool)) if pool else []
    if stray:
        raise typer.BadParameter(
            f"pool(s) {', '.join(stray)} are not among --pool {', '.join(pool)}; add them with --pool or drop the --target",
            param_hint="'--target'",
        )
    nodes_order = node_order(order_by, node_order_file)
    window_specs = windows(window)
    approval = _choice(approve_each, APPROVALS, "'--approve-each'")
    order = _choice(pool_order, ("sequential", "parallel", "masters-first"), "'--pool-order'")
    outcome = _choice(gate_timeout_outcome, GATE_OUTCOMES, "'--gate-timeout-outcome'")
    nb = _not_before(not_before)
    if gate_timeout is not None and gate_timeout <= 0:
        raise typer.BadParameter("must be > 0 seconds", param_hint="'--gate-timeout'")
    if decide_after < 0:
        raise typer.BadParameter("must be >= 0 seconds", param_hint="'--decide-after'")
    if drain_escalate_after < 0:
        raise typer.BadParameter("must be >= 0 seconds", param_hint="'--drain-escalate-after'")
    if decision_timeout is not None and decision_timeout <= 0:
        raise typer.BadParameter("must be > 0 seconds", param_hint="'--decision-timeout'")
    if decision_timeout_outcome not in DECISION_OUTCOMES:
        raise typer.BadParameter(
            "must be wait, skip or abort (delete-pod always needs a person)", param_hint="'--decision-timeout-outcome'"
        )
    settings = cli_settings(ctx)
    who = identity_of(identity)
    fields = dict(
        cluster=cluster or settings.cluster, pools=pool, target_configs=targets, not_before=nb, max_unavailable=mu,
        pool_order=order, approval=approval, gates=dict(timeout_seconds=gate_timeout, timeout_outcome=outcome),
        pause_on_degraded=not no_pause_on_degraded, dry_run=dry_run,
        approvals=dict(requested_by=who, four_eyes=four_eyes, allowed_approvers=allowed_approver), repair_network=repair_network,
        drain=dict(decide_after_seconds=decide_after or None, decision_timeout_seconds=decision_timeout,
                   decision_timeout_outcome=decision_timeout_outcome),
        daemon=dict(escalate_after_seconds=drain_escalate_after or None),
        **({"node_order": nodes_order} if nodes_order is not None else {}),
        **({"windows": window_specs} if window_specs else {}),
        alerts=alerts,
    )
    run(_start(settings, fields, workflow_id, wait, output, who))


async def _start(settings: Any, fields: dict[str, Any], workflow_id: str | None, wait: bool, output: str, who: str) -> int:
    from pydantic import ValidationError

    from lockkeeper import output as out
    from lockkeeper.starter import rollout_planned
    from workflows.kit.scopes import pool_scope

    spec = spec_named("machineconfig-rollout")
    try:
        inp = spec.input_model(**fields)
    except ValidationError as exc:
        err(f"error: invalid rollout: {validation_lines(exc)}")
        return EXIT_USAGE
    req = Launch(
        name=spec.name, input=inp, cluster=inp.cluster, who=who, output=output, wait=wait, dry_run=inp.dry_run,
        scopes=[pool_scope(inp.cluster, p) for p in inp.pools], pools=list(inp.pools), workflow_id=workflow_id,
        summary=f"MachineConfig rollout on {inp.cluster} by {who}",
        ready=rollout_planned, show_ready=lambda st: out.plan_table(st.plan) if st.plan is not None else "no plan yet",
    )
    if not inp.dry_run:
        return await launch(req, settings)
    return await _dry_run(req, settings, spec)


async def _dry_run(req: Launch, settings: Any, spec: Any) -> int:
    """The workflow's own dry run: preflight and plan, nothing written; prints the plan."""
    from lockkeeper import output as out
    from lockkeeper.cli.common import CliError
    from lockkeeper.starter import StartRefused, start_procedure

    client = await connect(settings, identity=req.who)
    try:
        handle = await start_procedure(client, settings, spec, req.input, cluster=req.cluster, pools=req.pools,
                                       workflow_id=req.workflow_id, summary=req.summary, precheck=False)
    except StartRefused as exc:
        raise CliError(f"refused: {exc}", EXIT_FAILED) from None
    if req.output == "table":
        print(handle.id, flush=True)
    from lockkeeper.cli.start.shared import QUEUED

    if handle.id in QUEUED:  # --queue and no worker: it plans when one comes
        return EXIT_OK
    err(f"started {handle.id} (dry run)")
    res = await handle.result()
    if res.plan is None:
        err("no plan")
    elif req.output == "table":
        out.console().print(out.plan_table(res.plan))
    else:
        print(out.dump({"workflow_id": handle.id, "plan": out.to_data(res.plan)}, req.output))
    show_window_plan(req)
    return EXIT_OK if res.outcome == "dry-run" else EXIT_FAILED
