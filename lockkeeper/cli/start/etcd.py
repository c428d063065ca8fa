"""``lockkeeper start etcd-backup`` and ``start etcd-restore`` (R3).

The input is the procedure's input model (:class:`workflows.etcd.models.EtcdBackupInput`,
:class:`~workflows.etcd.models.EtcdRestoreInput`, both on the kit's ``ProcedureInput``), built with
:func:`lockkeeper.cli.start.shared.build_input`: ``-f input.yaml``, then the flags given, then
each ``--set KEY=VALUE`` (``--set approvals.four_eyes=true``, ``--set gates.timeout_seconds=600``).
The flags are aliases of its fields:

- ``--members members.yaml``: ``members`` (a list of members, or a mapping with ``members:`` and
  optionally the restore's ``survivor`` and ``snapshot``; the flags win); required unless the
  ``-f`` file has ``members``;
- ``--attempts`` ``attempts``; ``--strategy`` ``strategy``; ``--survivor`` ``survivor``;
  ``--snapshot`` ``snapshot``; ``--auto-approve`` ``auto_approve``;
- ``--gate-timeout`` ``gates.timeout_seconds``; ``--gate-timeout-outcome``
  ``gates.timeout_outcome``; ``--four-eyes`` / ``--allowed-approver`` ``approvals``; ``--cluster``
  ``cluster``; ``--dry-run`` ``dry_run``.

The input is validated before anything is contacted: a bad file or flag is exit 2 with one line
per problem. Both lease ``etcd/<cluster>``. ``--dry-run`` runs the procedure's own dry run: it
checks every precondition on the members' hosts (binaries, the restore's ports and host checks)
and prints each with its result, changing nothing (:func:`.dryrun.workflow_dry_run`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from lockkeeper.cli.common import EXIT_USAGE, CliError, err
from lockkeeper.cli.start.dryrun import leased_workflow_dry_run
from lockkeeper.cli.start.options import (
    GATE_OUTCOMES,
    Approvals,
    Start,
    approval_options,
    choice,
    positive_seconds,
    start_options,
)
from lockkeeper.cli.start.shared import INPUT_FILE, build_input, spec_named

STRATEGIES = ("force-new-cluster", "snapshot-restore")


def read_members_file(path: str) -> dict[str, Any]:
    """``members.yaml`` as a mapping (a bare list becomes ``{"members": [...]}``). Raises
    :class:`CliError` (exit 2) when it cannot be read or is not YAML of that shape."""
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise CliError(f"--members: cannot read {path}: {exc.strerror or exc}", EXIT_USAGE) from None
    except yaml.YAMLError as exc:
        raise CliError(f"--members: {path} is not valid YAML: {exc}", EXIT_USAGE) from None
    if isinstance(doc, list):
        doc = {"members": doc}
    if not isinstance(doc, dict):
        raise CliError(f"--members: {path} must hold a mapping with `members:`", EXIT_USAGE)
    return doc


def _start(start: Start, name: str, members: str | None, flags: dict[str, Any]) -> None:
    """Build procedure ``name``'s input (``-f``, the members file and ``flags``, ``--set``;
    exit 2 listing every problem) and start it, leasing ``etcd/<cluster>``."""
    from workflows.kit.scopes import subsystem_scope

    from_file = INPUT_FILE.get() is not None
    try:
        if members is None and not from_file:
            raise CliError("give --members members.yaml, or -f FILE with `members:`", EXIT_USAGE)
        doc = read_members_file(members) if members is not None else {}
        given = {k: doc.get(k) for k in ("members", "survivor", "snapshot") if k in doc}
        inp = build_input(spec_named(name).input_model, {
            **given, **flags, "cluster": start.cluster_flag or (None if from_file else start.settings.cluster),
            "approvals.requested_by": start.who, "dry_run": start.dry_run or None,
        })
    except CliError as exc:
        err(f"error: {exc}")
        raise typer.Exit(exc.code) from None
    # --dry-run: the workflow reads, checks every precondition on the hosts and ends dry-run
    # (no snapshot, nothing stopped, no lease); each check is printed with its result, exit 2
    # when a real start would be refused.
    start.go(start.request(name, inp, cluster=inp.cluster, dry_run=inp.dry_run, scopes=[subsystem_scope("etcd", inp.cluster)],
                           summary=f"{name} on {inp.cluster} by {start.who}"),
             dry_run=lambda req, settings: leased_workflow_dry_run(req, settings, plan=lambda res: [res.message]))


def start_etcd_backup(
    members: str | None = typer.Option(None, "--members", help="members.yaml (validated before anything runs)."),
    attempts: int | None = typer.Option(None, "--attempts", min=1, help="Tries per member (default 2)."),
    start: Start = start_options(wait="Wait; exit 0 only if every member was backed up."),
) -> None:
    """Snapshot every etcd member (a barrier: the result names any member that failed)."""
    _start(start, "etcd-backup", members, {"attempts": attempts})


start_etcd_backup.takes_input_overrides = True  # type: ignore[attr-defined]  # build_input applies -f/--set


def start_etcd_restore(
    members: str | None = typer.Option(None, "--members", help="members.yaml (validated before anything is stopped)."),
    strategy: str | None = typer.Option(None, "--strategy", help="force-new-cluster | snapshot-restore"),
    survivor: str | None = typer.Option(None, "--survivor", help="Member the new cluster starts from (default: first)."),
    snapshot: str | None = typer.Option(None, "--snapshot", help="Snapshot path on the survivor's host (snapshot-restore)."),
    auto_approve: bool = typer.Option(False, "--auto-approve", help="Pass the gates without asking (demo/test)."),
    gate_timeout: float | None = typer.Option(None, "--gate-timeout", help="Seconds a gate waits (default: forever)."),
    gate_timeout_outcome: str | None = typer.Option(None, "--gate-timeout-outcome", help="reject | approve | abort"),
    approvals: Approvals = approval_options(),
    start: Start = start_options(wait="Wait; exit 0 only if the restore completed and verified."),
) -> None:
    """Restore etcd quorum (R3): stop all, new cluster from the survivor, re-add the others."""
    if strategy is None and INPUT_FILE.get() is None:
        raise typer.BadParameter("give --strategy force-new-cluster|snapshot-restore (or -f FILE with `strategy:`)",
                                 param_hint="'--strategy'")
    if strategy is not None:
        choice(strategy, STRATEGIES, "'--strategy'")
    positive_seconds(gate_timeout, "'--gate-timeout'")
    if gate_timeout_outcome is not None:
        choice(gate_timeout_outcome, GATE_OUTCOMES, "'--gate-timeout-outcome'")
    _start(start, "etcd-restore", members, {
        "strategy": strategy, "survivor": survivor, "snapshot": snapshot, "auto_approve": auto_approve or None,
        "approvals.four_eyes": approvals.four_eyes or None, "approvals.allowed_approvers": approvals.allowed_approvers or None,
        "gates.timeout_seconds": gate_timeout, "gates.timeout_outcome": gate_timeout_outcome,
    })


start_etcd_restore.takes_input_overrides = True  # type: ignore[attr-defined]  # build_input applies -f/--set
