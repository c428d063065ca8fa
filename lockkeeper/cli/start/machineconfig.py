"""``lockkeeper start machineconfig-rollout``: flags → ``MachineConfigRolloutInput`` → start.

The rollout plans inside the workflow (preflight), so ``--dry-run`` starts it with
``dry_run=True``: it reads the cluster, checks its preconditions, returns its plan and writes
nothing; the command prints the plan and every check with its result (exit 2 when a real start
would be refused). Otherwise the command waits past the preconditions (a failed one: exit 2, one
line per problem, nothing written) and for the plan, and prints it below the workflow ID.
"""

from __future__ import annotations

import re
from typing import Any

import typer

from lockkeeper.cli.common import err
from lockkeeper.cli.start.options import (
    GATE_OUTCOMES,
    Approvals,
    Start,
    approval_options,
    check_decision,
    choice,
    completes,
    non_negative_seconds,
    ordering_options,
    positive_seconds,
    start_options,
)
from lockkeeper.cli.start.shared import Launch, show_window_plan
from lockkeeper.cli.start.dryrun import workflow_dry_run


APPROVALS = ("none", "pool", "node", "canary")


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
    pool: list[str] = typer.Option([], "--pool", "-p", help="Pool to roll (repeatable; default: every pool behind)."),
    target: list[str] = typer.Option([], "--target", help="POOL=RENDERED-CONFIG (default: newest rendered config)."),
    not_before: str | None = typer.Option(None, "--not-before", help="Refuse targets created before this ISO time."),
    max_unavailable: str = typer.Option("1", "--max-unavailable", help="Nodes at a time: N or N%."),
    pool_order: str = typer.Option(
        "sequential", "--pool-order",
        help="sequential | parallel (each pool its own window, as the machine-config-controller) | masters-first",
    ),
    ordering: dict[str, Any] = ordering_options(),
    approve_each: str = typer.Option("none", "--approve-each", help="none | pool | node | canary"),
    gate_timeout: float | None = typer.Option(None, "--gate-timeout", help="Seconds a gate waits (default: forever)."),
    gate_timeout_outcome: str = typer.Option("reject", "--gate-timeout-outcome", help="reject | approve | abort"),
    no_pause_on_degraded: bool = typer.Option(False, "--no-pause-on-degraded", help="Keep going when a node degrades."),
    approvals: Approvals = approval_options(),
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
    alerts: dict[str, Any] | None = None,  # the --alert-* flags (shared.with_alert_gate_options)
    start: Start = start_options(wait=completes("rollout"), dry_run="Print the plan (read-only preflight) and stop."),
) -> None:
    """Start a MachineConfig rollout (lockkeeper drives the node handshake) and print its plan."""
    mu = parse_max_unavailable(max_unavailable)
    targets = parse_targets(target)
    stray = sorted(set(targets) - set(pool)) if pool else []
    if stray:
        raise typer.BadParameter(
            f"pool(s) {', '.join(stray)} are not among --pool {', '.join(pool)}; add them with --pool or drop the --target",
            param_hint="'--target'",
        )
    approval = choice(approve_each, APPROVALS, "'--approve-each'")
    order = choice(pool_order, ("sequential", "parallel", "masters-first"), "'--pool-order'")
    outcome = choice(gate_timeout_outcome, GATE_OUTCOMES, "'--gate-timeout-outcome'")
    nb = _not_before(not_before)
    positive_seconds(gate_timeout, "'--gate-timeout'")
    non_negative_seconds(drain_escalate_after, "'--drain-escalate-after'")
    check_decision(decide_after, decision_timeout, decision_timeout_outcome)
    fields = dict(
        cluster=start.cluster, pools=pool, target_configs=targets, not_before=nb, max_unavailable=mu,
        pool_order=order, approval=approval, gates=dict(timeout_seconds=gate_timeout, timeout_outcome=outcome),
        pause_on_degraded=not no_pause_on_degraded, dry_run=start.dry_run, **approvals.nested(start.who),
        repair_network=repair_network,
        drain=dict(decide_after_seconds=decide_after or None, decision_timeout_seconds=decision_timeout,
                   decision_timeout_outcome=decision_timeout_outcome),
        daemon=dict(escalate_after_seconds=drain_escalate_after or None),
        **ordering,
        alerts=alerts,
    )
    inp = start.validated("machineconfig-rollout", "invalid rollout: ", **fields)
    start.go(_request(start, inp), dry_run=_dry_run)


def _request(start: Start, inp: Any) -> Launch:
    from lockkeeper import output as out
    from lockkeeper.starter import rollout_planned
    from workflows.kit.scopes import pool_scope

    return start.request(
        "machineconfig-rollout", inp, cluster=inp.cluster,
        scopes=[pool_scope(inp.cluster, p) for p in inp.pools], pools=list(inp.pools),
        summary=f"MachineConfig rollout on {inp.cluster} by {start.who}",
        ready=rollout_planned, show_ready=lambda st: out.plan_table(st.plan) if st.plan is not None else "no plan yet",
    )


async def _dry_run(req: Launch, settings: Any) -> int:
    """The workflow's own dry run (:func:`workflow_dry_run`): preflight, every precondition with
    its result, and the plan (a table, above the checks), nothing written. Exit 0, or 2 when a
    real start would be refused (one line per problem), 1 when it could not plan."""
    from lockkeeper import output as out

    def plan(res: Any) -> list[str]:
        if res.plan is not None and res.plan.pools:
            out.console().print(out.plan_table(res.plan))
        else:
            err("no plan")
        show_window_plan(req)
        return []

    return await workflow_dry_run(req, settings, plan=plan)
