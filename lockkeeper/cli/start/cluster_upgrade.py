"""``lockkeeper start cluster-upgrade --plan upgrade.yaml``: the whole R3 upgrade as child
procedures in R3's order (GlusterFS, etcd backup, control plane, infra nodes, compute nodes,
nodeSelector migration).

The plan file is validated by pydantic before anything starts (each phase's section is that
procedure's own input). ``--dry-run`` runs the planning phases dry and prints every phase with its
nodes and batches; nothing is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from lockkeeper.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    ClusterOpt,
    DryRunOpt,
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
from lockkeeper.cli.start.shared import Launch, launch, spec_named


def start_cluster_upgrade(
    ctx: typer.Context,
    plan: Path = typer.Option(..., "--plan", help="The upgrade plan (YAML): one section per phase."),
    four_eyes: bool = typer.Option(False, "--four-eyes", help="The requester may not approve gates."),
    dry_run: bool = DryRunOpt,
    alerts: dict[str, Any] | None = None,  # the --alert-* flags (shared.with_alert_gate_options)
    cluster: str | None = ClusterOpt,
    workflow_id: str | None = IdOpt,
    wait: bool = typer.Option(False, "--wait", help="Wait until the upgrade ends; exit 0 only if it completed."),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Run the whole cluster upgrade of a plan file as durable child procedures (R3)."""
    import yaml

    output = check_output(output)
    try:
        data = yaml.safe_load(plan.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise typer.BadParameter(str(exc), param_hint="'--plan'") from None
    if not isinstance(data, dict):
        raise typer.BadParameter("expected a mapping of phases", param_hint="'--plan'")
    settings = cli_settings(ctx)
    who = identity_of(identity)
    if cluster:
        data["cluster"] = cluster
    data.setdefault("cluster", settings.cluster)
    run(_start(settings, data, dict(requested_by=who, four_eyes=four_eyes, dry_run=dry_run, alerts=alerts), workflow_id, wait, output, who))


async def _start(settings: Any, plan: dict[str, Any], fields: dict[str, Any], workflow_id: str | None, wait: bool,
                 output: str, who: str) -> int:
    from pydantic import ValidationError

    from lockkeeper import output as out
    from lockkeeper.cli.common import CliError
    from lockkeeper.starter import StartRefused, start_procedure

    spec = spec_named("cluster-upgrade")
    try:
        inp = spec.input_model(plan=plan, **fields)
    except ValidationError as exc:
        err(f"error: invalid upgrade plan:\n  {validation_lines(exc)}")
        return EXIT_USAGE
    if inp.plan.control_plane is not None and (problem := inp.plan.control_plane.etcd_health_problem()) is not None:
        err(f"error: invalid upgrade plan: control_plane: {problem}")
        return EXIT_USAGE
    req = Launch(name=spec.name, input=inp, cluster=inp.plan.cluster, who=who, output=output, wait=wait, dry_run=inp.dry_run,
                 workflow_id=workflow_id, summary=f"cluster upgrade of {inp.plan.cluster} by {who}")
    if not inp.dry_run:
        return await launch(req, settings)
    client = await connect(settings, identity=who)
    try:
        handle = await start_procedure(client, settings, spec, inp, cluster=inp.plan.cluster, workflow_id=workflow_id,
                                       summary=req.summary, precheck=False)
    except StartRefused as exc:
        raise CliError(f"refused: {exc}", EXIT_FAILED) from None
    err(f"started {handle.id} (dry run)")
    res = await handle.result()
    if output == "table":
        for ph in res.phases:
            print(f"{ph.name}: {ph.state}")
            for line in ph.dry_run_lines:
                print(f"  {line}")
    else:
        print(out.dump({"workflow_id": handle.id, "phases": out.to_data(res.phases)}, output))
    return EXIT_OK if res.outcome == "dry-run" else EXIT_FAILED
