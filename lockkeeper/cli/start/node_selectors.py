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

The flags are aliases of the input's fields (:class:`workflows.node_selectors.models.NodeSelectorMigrationInput`:
``--map`` ``mapping``, ``--drop-key`` ``drop_keys``, ``--remove-label`` ``remove_labels``,
``--no-approve`` ``approve_plan`` and ``approve_label_removal``, ``--revert-window``
``revert_window_seconds``, ...), built with :func:`lockkeeper.cli.start.shared.build_input`, so
``-f input.yaml`` and ``--set gates.timeout_seconds=600`` work the same way; the flags given
override the file, and the model says what is missing. Each flag's default is the model's.
"""

from __future__ import annotations

from typing import Any

import typer

from lockkeeper.cli.start.options import MasterSsh, Start, master_ssh_options, start_options
from lockkeeper.cli.start.shared import INPUT_FILE, Launch, build_input, spec_named
from lockkeeper.cli.start.dryrun import workflow_dry_run

PROCEDURE = "node-selector-migration"


def start_node_selector_migration(
    mapping: list[str] = typer.Option([], "--map", help="OLDKEY=OLDVALUE=NEWKEY=NEWVALUE (repeatable)."),
    drop_key: list[str] = typer.Option([], "--drop-key", help="Selector keys dropped without replacement (default zone)."),
    remove_label: list[str] = typer.Option([], "--remove-label", help="Node labels removed at the end (default region, zone)."),
    no_approve: bool = typer.Option(False, "--no-approve", help="No plan / label-removal gates."),
    revert_window: float | None = typer.Option(None, "--revert-window", help="Seconds the run stays open for `revert` "
                                                                             "(default 86400)."),
    master: list[str] = typer.Option([], "--master", help="Master whose master-config.yaml defaultNodeSelector is scanned "
                                                         "over SSH (repeatable; none: not scanned, a warning)."),
    ssh: MasterSsh = master_ssh_options("JSON file master -> host[:port] (instead of the names and --ssh-port; `sim serve` "
                                        "prints one as CLUSTERSIM_SSH_MAP)."),
    master_config: str | None = typer.Option(None, "--master-config", help="Its path on the masters "
                                                                          "(default /etc/origin/master/master-config.yaml)."),
    ondelete: str | None = typer.Option(None, "--ondelete-daemonsets",
                                        help="OnDelete DaemonSets: 'report' (default) their pods still on the old selector, or "
                                             "'delete' them one node at a time after a gate."),
    alerts: dict[str, Any] | None = None,  # the --alert-* flags (shared.with_alert_gate_options)
    start: Start = start_options(wait="Wait until the run ends."),
) -> None:
    """Fix nodeSelectors left on old labels, verify every pod runs, then remove the labels (R3e)."""
    from workflows.node_selectors.plan import MappingError, parse_mapping

    from_file = INPUT_FILE.get() is not None
    if not mapping and not from_file:
        raise typer.BadParameter("give --map (repeatable) or -f FILE with a mapping", param_hint="'--map'")
    try:
        parsed = parse_mapping(mapping) if mapping else None
    except MappingError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--map'") from None
    access = ssh.access(master)
    inp = build_input(spec_named(PROCEDURE).input_model, {
        "cluster": start.cluster_flag or (None if from_file else start.settings.cluster),
        "approvals.requested_by": start.who, "dry_run": start.dry_run or None, "mapping": parsed,
        "drop_keys": list(drop_key) or None, "remove_labels": list(remove_label) or None,
        "approve_plan": False if no_approve else None, "approve_label_removal": False if no_approve else None,
        "revert_window_seconds": revert_window, "master_config_path": master_config, "ondelete_daemonsets": ondelete,
        "masters": [{"name": m, "access": access[m]} for m in master] or None,
        "alerts": alerts,
    })
    start.go(start.request(PROCEDURE, inp, cluster=inp.cluster, dry_run=inp.dry_run,
                           summary=f"nodeSelector migration on {inp.cluster} by {start.who}"),
             dry_run=_dry_run)


start_node_selector_migration.takes_input_overrides = True  # type: ignore[attr-defined]  # build_input applies -f/--set


async def _dry_run(req: Launch, settings: Any) -> int:
    """The workflow's own dry run (:func:`workflow_dry_run`): the scan, the capacity plan and
    every precondition (each label it removes, and who still selects it), nothing written;
    exit 2 when the plan is blocked or a check failed."""
    return await workflow_dry_run(req, settings, plan=lambda res: res.message.splitlines() if res.outcome == "dry-run" else [])
