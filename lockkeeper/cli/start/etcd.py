"""``lockkeeper start etcd-backup`` and ``start etcd-restore`` (R3).

Both read ``members.yaml`` (a list of members, or a mapping with ``members:`` and optionally the
restore's ``survivor`` and ``snapshot``; the flags win) and validate it together with the flags
as the procedure's input model before anything is contacted: a bad file is exit 2 with one line
per problem. Both lease ``etcd/<cluster>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from lockkeeper.cli.common import (
    EXIT_USAGE,
    CliError,
    ClusterOpt,
    DryRunOpt,
    IdentityOpt,
    IdOpt,
    OutputOpt,
    check_output,
    cli_settings,
    err,
    identity_of,
    run,
    validation_lines,
)
from lockkeeper.cli.start.shared import Launch, dry_run_report, launch, spec_named

STRATEGIES = ("force-new-cluster", "snapshot-restore")
GATE_OUTCOMES = ("reject", "approve", "abort")


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


async def _launch(req: Launch, settings: Any) -> int:
    return await (dry_run_report(req, settings) if req.dry_run else launch(req, settings))


def _request(ctx: typer.Context, name: str, members: str, fields: dict[str, Any], cluster: str | None, dry_run: bool,
             workflow_id: str | None, wait: bool, output: str, who: str) -> tuple[Launch, Any]:
    from workflows.kit.scopes import subsystem_scope

    settings = cli_settings(ctx)
    spec = spec_named(name)
    where = cluster or settings.cluster
    if "cluster" in spec.input_model.model_fields:
        fields = {**fields, "cluster": where}
    try:
        inp = build_input(spec, members, **fields)
    except CliError as exc:
        err(f"error: {exc}")
        raise typer.Exit(exc.code) from None
    req = Launch(name=name, input=inp, cluster=where, who=who, output=output, wait=wait, dry_run=dry_run,
                 scopes=[subsystem_scope("etcd", where)], workflow_id=workflow_id, summary=f"{name} on {where} by {who}")
    return req, settings


def start_etcd_backup(
    ctx: typer.Context,
    members: str = typer.Option(..., "--members", help="members.yaml (validated before anything runs)."),
    attempts: int = typer.Option(2, "--attempts", min=1, help="Tries per member."),
    dry_run: bool = DryRunOpt,
    cluster: str | None = ClusterOpt,
    workflow_id: str | None = IdOpt,
    wait: bool = typer.Option(False, "--wait", help="Wait; exit 0 only if every member was backed up."),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Snapshot every etcd member (a barrier: the result names any member that failed)."""
    output = check_output(output)
    req, settings = _request(ctx, "etcd-backup", members, {"attempts": attempts}, cluster, dry_run, workflow_id, wait,
                             output, identity_of(identity))
    run(_launch(req, settings))


def start_etcd_restore(
    ctx: typer.Context,
    members: str = typer.Option(..., "--members", help="members.yaml (validated before anything is stopped)."),
    strategy: str = typer.Option(..., "--strategy", help="force-new-cluster | snapshot-restore"),
    survivor: str | None = typer.Option(None, "--survivor", help="Member the new cluster starts from (default: first)."),
    snapshot: str | None = typer.Option(None, "--snapshot", help="Snapshot path on the survivor's host (snapshot-restore)."),
    auto_approve: bool = typer.Option(False, "--auto-approve", help="Pass the gates without asking (demo/test)."),
    gate_timeout: float | None = typer.Option(None, "--gate-timeout", help="Seconds a gate waits (default: forever)."),
    gate_timeout_outcome: str | None = typer.Option(None, "--gate-timeout-outcome", help="reject | approve | abort"),
    four_eyes: bool = typer.Option(False, "--four-eyes", help="The requester may not approve."),
    allowed_approver: list[str] = typer.Option([], "--allowed-approver", help="Who may approve (repeatable)."),
    dry_run: bool = DryRunOpt,
    cluster: str | None = ClusterOpt,
    workflow_id: str | None = IdOpt,
    wait: bool = typer.Option(False, "--wait", help="Wait; exit 0 only if the restore completed and verified."),
    identity: str | None = IdentityOpt,
    output: str = OutputOpt,
) -> None:
    """Restore etcd quorum (R3): stop all, new cluster from the survivor, re-add the others."""
    output = check_output(output)
    if strategy not in STRATEGIES:
        raise typer.BadParameter("must be force-new-cluster or snapshot-restore", param_hint="'--strategy'")
    if gate_timeout is not None and gate_timeout <= 0:
        raise typer.BadParameter("must be > 0 seconds", param_hint="'--gate-timeout'")
    if gate_timeout_outcome is not None and gate_timeout_outcome not in GATE_OUTCOMES:
        raise typer.BadParameter("must be reject, approve or abort", param_hint="'--gate-timeout-outcome'")
    who = identity_of(identity)
    fields: dict[str, Any] = dict(
        strategy=strategy, survivor=survivor, snapshot=snapshot, auto_approve=auto_approve, requested_by=who,
        four_eyes=four_eyes, allowed_approvers=allowed_approver, gate_timeout_seconds=gate_timeout,
        gate_timeout_outcome=gate_timeout_outcome,
    )
    req, settings = _request(ctx, "etcd-restore", members, fields, cluster, dry_run, workflow_id, wait, output, who)
    run(_launch(req, settings))
