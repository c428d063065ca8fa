"""``lockkeeper start node-selector-migration``: move workloads off old node labels, verify, then
remove the labels (R3e, procedures-spec §5).

``--map region=infra=node-role.kubernetes.io/infra=true`` (repeatable; ``OLDK=OLDV:NEWK=NEWV,...``
for several new labels), ``--drop-key zone`` (removed from selectors without replacement),
``--remove-label region --remove-label zone``. ``--dry-run`` runs the scan and the capacity plan
and prints it; a blocked object names the reason and nothing is changed. ``lockkeeper revert ID``
restores the labels, then the selectors, from the records while the run's revert window is open.
``--master NAME`` (repeatable, SSH ``--ssh-user``/``--ssh-port``, or ``--ssh-map FILE`` for
addresses the names do not resolve to, e.g. the simulator's) adds each master's
``master-config.yaml`` ``projectConfig.defaultNodeSelector`` to the scan: one on an old label
blocks the plan until a person changes it and restarts the APIs. ``--ondelete-daemonsets
report|delete``: an OnDelete DaemonSet's pods keep the old selector until deleted; ``report``
(default) names them, ``delete`` replaces them one node at a time after gate ``ondelete/<ds>``.
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
from lockkeeper.cli.start.shared import Launch, launch, read_ssh_map, spec_named


def start_node_selector_migration(
    ctx: typer.Context,
    mapping: list[str] = typer.Option(..., "--map", help="OLDKEY=OLDVALUE=NEWKEY=NEWVALUE (repeatable)."),
    drop_key: list[str] = typer.Option(["zone"], "--drop-key", help="Selector keys dropped without replacement."),
    remove_label: list[str] = typer.Option(["region", "zone"], "--remove-label", help="Node labels removed at the end."),
    no_approve: bool = typer.Option(False, "--no-approve", help="No plan / label-removal gates."),
    revert_window: float = typer.Option(86400.0, "--revert-window", help="Seconds the run stays open for `revert`."),
    master: list[str] = typer.Option([], "--master", help="Master whose master-config.yaml defaultNodeSelector is scanned "
                                                         "over SSH (repeatable; none: not scanned, a warning)."),
    ssh_user: str = typer.Option("root", "--ssh-user", help="SSH user on the masters."),
    ssh_port: int = typer.Option(22, "--ssh-port", help="SSH port on the masters."),
    ssh_map: Path | None = typer.Option(None, "--ssh-map", help="JSON file master -> host[:port] (instead of the "
                                        "names and --ssh-port; `sim serve` prints one as CLUSTERSIM_SSH_MAP)."),
    master_config: str = typer.Option("/etc/origin/master/master-config.yaml", "--master-config", help="Its path on the masters."),
    ondelete: str = typer.Option("report", "--ondelete-daemonsets",
                                 help="OnDelete DaemonSets: 'report' their pods still on the old selector, or 'delete' them "
                                      "one node at a time after a gate."),
    dry_run: bool = DryRunOpt,
    alerts: dict[str, Any] | None = None,  # the --alert-* flags (shared.with_alert_gate_options)
    cluster: str | None = ClusterOpt,
    workflow_id: str | None = IdOpt,
    wait: bool = typer.Option(False, "--wait", help="Wait until the run ends."),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Fix nodeSelectors left on old labels, verify every pod runs, then remove the labels (R3e)."""
    from workflows.node_selectors.plan import MappingError, parse_mapping

    output = check_output(output)
    try:
        parsed = parse_mapping(mapping)
    except MappingError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--map'") from None
    addr = {m: (m, ssh_port) for m in master}
    if ssh_map is not None:
        mapped = read_ssh_map(ssh_map)
        missing = [m for m in master if m not in mapped]
        if missing:
            raise typer.BadParameter(f"{ssh_map} has no address for {', '.join(missing)}", param_hint="'--ssh-map'")
        addr = {m: mapped[m] for m in master}
    settings = cli_settings(ctx)
    who = identity_of(identity)
    fields: dict[str, Any] = dict(
        cluster=cluster or settings.cluster, requested_by=who, dry_run=dry_run, mapping=parsed, drop_keys=drop_key,
        remove_labels=remove_label, approve_plan=not no_approve, approve_label_removal=not no_approve,
        revert_window_seconds=revert_window, master_config_path=master_config, ondelete_daemonsets=ondelete,
        masters=[{"name": m, "access": {"backend": "ssh", "host": addr[m][0], "port": addr[m][1], "user": ssh_user, "node": m}}
                 for m in master],
        alerts=alerts,
    )
    run(_start(settings, fields, workflow_id, wait, output, who))


async def _start(settings: Any, fields: dict[str, Any], workflow_id: str | None, wait: bool, output: str, who: str) -> int:
    from pydantic import ValidationError

    from lockkeeper import output as out
    from lockkeeper.cli.common import CliError
    from lockkeeper.starter import StartRefused, start_procedure

    spec = spec_named("node-selector-migration")
    try:
        inp = spec.input_model(**fields)
    except ValidationError as exc:
        err(f"error: invalid nodeSelector migration:\n  {validation_lines(exc)}")
        return EXIT_USAGE
    req = Launch(name=spec.name, input=inp, cluster=inp.cluster, who=who, output=output, wait=wait, dry_run=inp.dry_run,
                 workflow_id=workflow_id, summary=f"nodeSelector migration on {inp.cluster} by {who}")
    if not inp.dry_run:
        return await launch(req, settings)
    client = await connect(settings, identity=who)
    try:
        handle = await start_procedure(client, settings, spec, inp, cluster=inp.cluster, workflow_id=workflow_id,
                                       summary=req.summary, precheck=False)
    except StartRefused as exc:
        raise CliError(f"refused: {exc}", EXIT_FAILED) from None
    err(f"started {handle.id} (dry run)")
    res = await handle.result()
    if res.outcome == "refused":  # the plan is blocked: one line per object, nothing was written
        err(f"refused before any change: {handle.id} (node-selector-migration)")
        for line in res.problems:
            err(f"  {line}")
    if output == "table":
        print(res.message)
    else:
        print(out.dump({"workflow_id": handle.id, "plan": out.to_data(res.plan)}, output))
    return EXIT_OK if res.outcome == "dry-run" else EXIT_USAGE if res.outcome == "refused" else EXIT_FAILED
