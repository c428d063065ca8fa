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

from typing import Any

import typer

from lockkeeper.cli.start.options import MasterSsh, Start, master_ssh_options, start_options
from lockkeeper.cli.start.shared import Launch
from lockkeeper.cli.start.dryrun import workflow_dry_run

PROCEDURE = "node-selector-migration"


def start_node_selector_migration(
    mapping: list[str] = typer.Option(..., "--map", help="OLDKEY=OLDVALUE=NEWKEY=NEWVALUE (repeatable)."),
    drop_key: list[str] = typer.Option(["zone"], "--drop-key", help="Selector keys dropped without replacement."),
    remove_label: list[str] = typer.Option(["region", "zone"], "--remove-label", help="Node labels removed at the end."),
    no_approve: bool = typer.Option(False, "--no-approve", help="No plan / label-removal gates."),
    revert_window: float = typer.Option(86400.0, "--revert-window", help="Seconds the run stays open for `revert`."),
    master: list[str] = typer.Option([], "--master", help="Master whose master-config.yaml defaultNodeSelector is scanned "
                                                         "over SSH (repeatable; none: not scanned, a warning)."),
    ssh: MasterSsh = master_ssh_options("JSON file master -> host[:port] (instead of the names and --ssh-port; `sim serve` "
                                        "prints one as CLUSTERSIM_SSH_MAP)."),
    master_config: str = typer.Option("/etc/origin/master/master-config.yaml", "--master-config", help="Its path on the masters."),
    ondelete: str = typer.Option("report", "--ondelete-daemonsets",
                                 help="OnDelete DaemonSets: 'report' their pods still on the old selector, or 'delete' them "
                                      "one node at a time after a gate."),
    alerts: dict[str, Any] | None = None,  # the --alert-* flags (shared.with_alert_gate_options)
    start: Start = start_options(wait="Wait until the run ends."),
) -> None:
    """Fix nodeSelectors left on old labels, verify every pod runs, then remove the labels (R3e)."""
    from workflows.node_selectors.plan import MappingError, parse_mapping

    try:
        parsed = parse_mapping(mapping)
    except MappingError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--map'") from None
    access = ssh.access(master)
    inp = start.validated(
        PROCEDURE, "invalid nodeSelector migration:\n  ",
        cluster=start.cluster, requested_by=start.who, dry_run=start.dry_run, mapping=parsed, drop_keys=drop_key,
        remove_labels=remove_label, approve_plan=not no_approve, approve_label_removal=not no_approve,
        revert_window_seconds=revert_window, master_config_path=master_config, ondelete_daemonsets=ondelete,
        masters=[{"name": m, "access": access[m]} for m in master],
        alerts=alerts,
    )
    start.go(start.request(PROCEDURE, inp, cluster=inp.cluster, summary=f"nodeSelector migration on {inp.cluster} by {start.who}"),
             dry_run=_dry_run)


async def _dry_run(req: Launch, settings: Any) -> int:
    """The workflow's own dry run (:func:`workflow_dry_run`): the scan, the capacity plan and
    every precondition (each label it removes, and who still selects it), nothing written;
    exit 2 when the plan is blocked or a check failed."""
    return await workflow_dry_run(req, settings, plan=lambda res: res.message.splitlines() if res.outcome == "dry-run" else [])
