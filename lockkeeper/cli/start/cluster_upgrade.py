"""``lockkeeper start cluster-upgrade --plan upgrade.yaml``: the whole R3 upgrade as child
procedures in R3's order (GlusterFS, etcd backup, control plane, infra nodes, compute nodes,
nodeSelector migration).

The plan file is validated by pydantic before anything starts (each phase's section is that
procedure's own input). ``--dry-run`` runs every phase's own dry run and prints every phase with
its plan (nodes and batches, masters, the selector plan) and its preconditions with their results
(``ok`` / ``FAILED`` / ``not run``); nothing is written; exit 2 when a phase's check failed
(``refused today: phase P: ...`` on stderr; a node phase's version skew behind a control-plane
phase of the same plan is shown, not counted). With a ``control_plane`` phase the run first
checks the update of the cluster's version (one minor version at a time from the cluster's
version, not back: ``control_plane.target_version`` or the static-pod image's tag) and the etcd
backup; a failed check refuses the run before any phase (exit 2; the dry run lists the checks
under the control-plane phase and exits 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from lockkeeper.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, err
from lockkeeper.cli.start.options import Approvals, Start, approval_options, completes, start_options
from lockkeeper.cli.start.shared import Launch, read_yaml
from lockkeeper.cli.start.dryrun import dry_run_result

PROCEDURE = "cluster-upgrade"


def start_cluster_upgrade(
    plan: Path = typer.Option(..., "--plan", help="The upgrade plan (YAML): one section per phase."),
    approvals: Approvals = approval_options("gates", approvers=False),
    alerts: dict[str, Any] | None = None,  # the --alert-* flags (shared.with_alert_gate_options)
    start: Start = start_options(wait=completes("upgrade")),
) -> None:
    """Run the whole cluster upgrade of a plan file as durable child procedures (R3)."""
    data = read_yaml(plan, "'--plan'", mapping="expected a mapping of phases")
    # The plan file may name its cluster (``cluster: NAME``); --cluster wins, then the settings'.
    named = data.pop("cluster", None)
    cluster = start.cluster_flag or named or start.settings.cluster
    inp = start.validated(PROCEDURE, "invalid upgrade plan:\n  ", plan=data, cluster=cluster,
                          approvals=approvals.nested(start.who), dry_run=start.dry_run, alerts=alerts)
    if inp.plan.control_plane is not None and (problem := inp.plan.control_plane.etcd_health_problem()) is not None:
        err(f"error: invalid upgrade plan: control_plane: {problem}")
        raise typer.Exit(EXIT_USAGE)
    start.go(start.request(PROCEDURE, inp, cluster=inp.cluster, summary=f"cluster upgrade of {inp.cluster} by {start.who}"),
             dry_run=_dry_run)


async def _dry_run(req: Launch, settings: Any) -> int:
    """Every phase runs its own dry run: each phase with its plan and its preconditions; nothing
    is written. Exit 0, 2 when a check failed (the result's ``problems``), 1 otherwise."""
    from lockkeeper import output as out

    handle, res = await dry_run_result(req, settings, show_id=False)
    if req.output == "table":
        for ph in res.phases:
            print(f"{ph.name}: {ph.state}")
            for line in ph.dry_run_lines:
                print(f"  {line}")
    else:
        print(out.dump({"workflow_id": handle.id, "phases": out.to_data(res.phases), "problems": list(res.problems)}, req.output))
    if res.problems:  # a precondition failed: a real start would be refused
        for line in res.problems:
            err(f"refused today: {line}")
        return EXIT_USAGE
    return EXIT_OK if res.outcome == "dry-run" else EXIT_FAILED
