"""``lockkeeper start node-upgrade``: nodes by label in openshift-ansible ``serial`` batches with a
canary first (R3d nodes, procedures-spec §1.2, §4.2).

``--selector region=infra --serial 50% --canary node01.example.com --action-command
"ansible-playbook -i hosts upgrade_nodes.yml -e openshift_upgrade_nodes_label=kubernetes.io/hostname={node}"``.
``{node}`` in the action is replaced per node. ``--order`` (zone-oldest by default, oldest-first,
newest-first, or explicit with ``--node-order FILE``) orders the selected nodes, so the canary
count and the batches take them in that order; the plan prints it. ``--dry-run`` runs the workflow's own planning
(it reads the Nodes) and prints the plan: selection, excluded masters, done nodes, canary,
batches; nothing is written. A blocked drain asks after ``--decide-after`` seconds (R2's gate);
``--drain-timeout S --drain-on-timeout proceed`` instead gives the drain up after S seconds and
upgrades the node with the pods still on it (openshift-ansible's
``openshift_upgrade_nodes_drain_timeout``), recorded in the node's result.

The flags are aliases of the input's fields (:class:`workflows.node_upgrade.models.NodeUpgradeInput`:
``--selector`` ``selection.label_selector``, ``--serial`` ``policy.serial``, ``--decide-after``
``drain.decide_after_seconds``, ``--drain-timeout`` / ``--drain-on-timeout`` ``drain.timeout_seconds`` /
``drain.on_timeout``, ``--four-eyes`` ``approvals.four_eyes``, ...), built with
:func:`lockkeeper.cli.start.shared.build_input`: ``-f input.yaml`` gives the input (e.g. per-node
``host_access`` for ``--action-on host``), the flags given override it, ``--set policy.serial=2``
any field; the model says what is missing. Each flag's default is the model's.
"""

from __future__ import annotations

from typing import Any

import typer

from lockkeeper.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, err
from lockkeeper.cli.start.options import Approvals, Start, approval_options, completes, max_unavailable_flag, ordering_options, parse_argv, start_options
from lockkeeper.cli.start.shared import INPUT_FILE, Launch, build_input, show_window_plan, spec_named
from lockkeeper.cli.start.dryrun import dry_run_result


def parse_serial(value: str) -> int | str:
    """``--serial``: the kit's :data:`~workflows.kit.inputs.MaxUnavailable`, as the input model
    validates it (:func:`lockkeeper.cli.start.options.max_unavailable_flag`); raises BadParameter
    naming ``--serial`` otherwise."""
    parsed = max_unavailable_flag(value, "'--serial'")
    assert parsed is not None
    return parsed


def start_node_upgrade(
    selector: str | None = typer.Option(None, "--selector", help="Label selector of the nodes (openshift_upgrade_nodes_label)."),
    serial: str | None = typer.Option(None, "--serial", help="Batch size: N or N% (openshift_upgrade_nodes_serial; default 1)."),
    canary: list[str] = typer.Option([], "--canary", help="Canary node (repeatable); upgraded first, then a gate."),
    canary_count: int | None = typer.Option(None, "--canary-count", help="Or: the first K nodes still to do are the canary."),
    max_fail_percentage: float | None = typer.Option(None, "--max-fail-percentage",
                                                     help="Stop after a batch above this failure % (default 0)."),
    action_command: str | None = typer.Option(None, "--action-command", help="What upgrades one node ({node} is replaced)."),
    action_on: str | None = typer.Option(None, "--action-on", help="external (run by the worker; the default) | host (on the "
                                                                   "node over SSH: host_access from -f)."),
    target_version: str | None = typer.Option(None, "--target-version", help="Kubelet version that means done "
                                                                             "(default v1.10.0+b81c8f8)."),
    master: list[str] = typer.Option([], "--master", help="Master node names, excluded by name (repeatable)."),
    ordering: dict[str, Any] = ordering_options(),
    ready_timeout: float | None = typer.Option(None, "--ready-timeout", help="Seconds a node may take to be Ready at the target "
                                                                             "(default 180)."),
    decide_after: float | None = typer.Option(None, "--decide-after", help="Seconds a blocked drain waits before asking (default 600)."),
    drain_timeout: float | None = typer.Option(None, "--drain-timeout", help="Seconds after which a drain that has not "
                                                                            "finished times out (see --drain-on-timeout)."),
    drain_on_timeout: str | None = typer.Option(None, "--drain-on-timeout", help="'gate' (default): ask (wait/skip/delete-pod/abort); "
                                                                                "'proceed': upgrade the node with its pods still on "
                                                                                "it, as openshift_upgrade_nodes_drain_timeout does."),
    approvals: Approvals = approval_options("gates"),
    alerts: dict[str, Any] | None = None,  # the --alert-* flags (shared.with_alert_gate_options)
    start: Start = start_options(wait=completes("upgrade")),
) -> None:
    """Upgrade nodes by label in serial batches with a canary first (R3d)."""
    if canary and canary_count:
        raise typer.BadParameter("give --canary or --canary-count, not both", param_hint="'--canary'")
    if action_on not in (None, "external", "host"):
        raise typer.BadParameter("must be external or host", param_hint="'--action-on'")
    if action_on == "host" and INPUT_FILE.get() is None:
        raise typer.BadParameter("host actions need per-node host access (host_access), which only an input file gives: -f FILE",
                                 param_hint="'--action-on'")
    if drain_on_timeout not in (None, "gate", "proceed"):
        raise typer.BadParameter("must be gate or proceed", param_hint="'--drain-on-timeout'")
    inp = build_input(spec_named("node-upgrade").input_model, {
        "cluster": start.cluster_flag or (None if INPUT_FILE.get() else start.settings.cluster),
        "approvals.requested_by": start.who, "approvals.four_eyes": approvals.four_eyes or None,
        "approvals.allowed_approvers": approvals.allowed_approvers or None, "dry_run": start.dry_run or None,
        "target_version": target_version, "ready_timeout_seconds": ready_timeout,
        "drain.decide_after_seconds": decide_after, "drain.timeout_seconds": drain_timeout, "drain.on_timeout": drain_on_timeout,
        "selection.label_selector": selector, "selection.masters": list(master) or None, **ordering,
        "policy.serial": parse_serial(serial) if serial is not None else None,
        "policy.canary": list(canary) or canary_count, "policy.max_fail_percentage": max_fail_percentage,
        "action.kind": action_on, "action.argv": parse_argv(action_command, "'--action-command'") if action_command else None,
        "alerts": alerts,
    })
    selected = inp.selection.label_selector
    start.go(start.request(
        "node-upgrade", inp, cluster=inp.cluster, dry_run=inp.dry_run,
        id_name=selected.replace("=", "-").replace("/", "-") if selected else None,
        summary=f"node upgrade of {selected or ', '.join(inp.selection.nodes)} on {inp.cluster} by {start.who}",
        ready=_planned, show_ready=lambda st: "\n".join(st.plan_lines) if st.plan_lines else (st.error or "no plan"),
        ready_timeout=60.0, ready_required=False,
    ), dry_run=_dry_run)


start_node_upgrade.takes_input_overrides = True  # type: ignore[attr-defined]  # build_input applies -f/--set


def _planned(st: Any) -> bool:
    return getattr(st, "plan", None) is not None or str(getattr(st, "phase", "")) in ("failed", "done")


async def _dry_run(req: Launch, settings: Any) -> int:
    """The workflow's own dry run: read the Nodes and plan, write nothing; print the plan."""
    from lockkeeper import output as out
    from lockkeeper.cli.start.shared import spec_named
    from workflows.node_upgrade.plan import plan_lines

    handle, res = await dry_run_result(req, settings)
    if req.output == "table":
        st = await handle.query("status", result_type=spec_named(req.name).status_model)
        print("\n".join(st.plan_lines) if st.plan_lines else ("\n".join(plan_lines(res.plan)) if res.plan else res.message))
    else:
        print(out.dump({"workflow_id": handle.id, "plan": out.to_data(res.plan), "problems": res.problems}, req.output))
    show_window_plan(req)
    if res.outcome == "refused" or res.problems:
        for line in res.problems:
            err(f"refused today: {line}")
        return EXIT_USAGE
    return EXIT_OK if res.outcome == "dry-run" else EXIT_FAILED
