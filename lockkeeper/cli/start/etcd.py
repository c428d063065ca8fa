"""``lockkeeper start etcd-backup`` and ``start etcd-restore`` (R3).

Both read ``members.yaml`` (a list of members, or a mapping with ``members:`` and optionally the
restore's ``survivor`` and ``snapshot``; the flags win) and validate it together with the flags
as the procedure's input model before anything is contacted: a bad file is exit 2 with one line
per problem. Both lease ``etcd/<cluster>``. ``--dry-run`` runs the procedure's own dry run: it
checks every precondition on the members' hosts (binaries, the restore's ports and host checks)
and prints each with its result, changing nothing (:func:`.dryrun.workflow_dry_run`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from lockkeeper.cli.common import EXIT_USAGE, CliError, err, validation_lines
from lockkeeper.cli.start.options import (
    GATE_OUTCOMES,
    Approvals,
    Start,
    approval_options,
    choice,
    positive_seconds,
    start_options,
)
from lockkeeper.cli.start.dryrun import leased_workflow_dry_run
from lockkeeper.cli.start.shared import spec_named


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


def build_input(spec: Any, path: str, **fields: Any) -> Any:
    """The spec's input model from the members file and ``fields`` (None values leave the
    file's). Raises :class:`CliError` (exit 2) listing every problem; nothing is contacted."""
    from pydantic import ValidationError

    doc = read_members_file(path)
    doc.update({k: v for k, v in fields.items() if v is not None})
    try:
        return spec.input_model.model_validate(doc)
    except ValidationError as exc:
        raise CliError(f"invalid {spec.name} request from {path}: " + validation_lines(exc), EXIT_USAGE) from None


def _start(start: Start, name: str, members: str, fields: dict[str, Any]) -> None:
    """Validate procedure ``name``'s input (the members file and ``fields``; exit 2 listing every
    problem) and start it, leasing ``etcd/<cluster>``."""
    from workflows.kit.scopes import subsystem_scope

    who, spec, where = start.who, spec_named(name), start.cluster
    if "cluster" in spec.input_model.model_fields:
        fields = {**fields, "cluster": where}
    try:
        inp = build_input(spec, members, **fields, dry_run=start.dry_run)
    except CliError as exc:
        err(f"error: {exc}")
        raise typer.Exit(exc.code) from None
    # --dry-run: the workflow reads, checks every precondition on the hosts and ends dry-run
    # (no snapshot, nothing stopped, no lease); each check is printed with its result, exit 2
    # when a real start would be refused.
    start.go(start.request(name, inp, cluster=where, scopes=[subsystem_scope("etcd", where)],
                           summary=f"{name} on {where} by {who}"),
             dry_run=lambda req, settings: leased_workflow_dry_run(req, settings, plan=lambda res: [res.message]))


def start_etcd_backup(
    members: str = typer.Option(..., "--members", help="members.yaml (validated before anything runs)."),
    attempts: int = typer.Option(2, "--attempts", min=1, help="Tries per member."),
    start: Start = start_options(wait="Wait; exit 0 only if every member was backed up."),
) -> None:
    """Snapshot every etcd member (a barrier: the result names any member that failed)."""
    _start(start, "etcd-backup", members, {"attempts": attempts})


def start_etcd_restore(
    members: str = typer.Option(..., "--members", help="members.yaml (validated before anything is stopped)."),
    strategy: str = typer.Option(..., "--strategy", help="force-new-cluster | snapshot-restore"),
    survivor: str | None = typer.Option(None, "--survivor", help="Member the new cluster starts from (default: first)."),
    snapshot: str | None = typer.Option(None, "--snapshot", help="Snapshot path on the survivor's host (snapshot-restore)."),
    auto_approve: bool = typer.Option(False, "--auto-approve", help="Pass the gates without asking (demo/test)."),
    gate_timeout: float | None = typer.Option(None, "--gate-timeout", help="Seconds a gate waits (default: forever)."),
    gate_timeout_outcome: str | None = typer.Option(None, "--gate-timeout-outcome", help="reject | approve | abort"),
    approvals: Approvals = approval_options(),
    start: Start = start_options(wait="Wait; exit 0 only if the restore completed and verified."),
) -> None:
    """Restore etcd quorum (R3): stop all, new cluster from the survivor, re-add the others."""
    choice(strategy, STRATEGIES, "'--strategy'")
    positive_seconds(gate_timeout, "'--gate-timeout'")
    if gate_timeout_outcome is not None:
        choice(gate_timeout_outcome, GATE_OUTCOMES, "'--gate-timeout-outcome'")
    fields: dict[str, Any] = dict(
        strategy=strategy, survivor=survivor, snapshot=snapshot, auto_approve=auto_approve, **approvals.fields(start.who),
        gate_timeout_seconds=gate_timeout, gate_timeout_outcome=gate_timeout_outcome,
    )
    _start(start, "etcd-restore", members, fields)
