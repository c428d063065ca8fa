"""The option groups the start commands share (:mod:`.groups`), each flag declared here once:

- :func:`start_options`: ``--dry-run``, ``--cluster``, ``--id``, ``--wait``, ``--identity``,
  ``-o``; the command gets a :class:`Start` that also validates its input and runs the start
  (launch, or the dry run) the same way for every procedure;
- :func:`approval_options`: ``--four-eyes``, ``--allowed-approver``;
- :func:`ordering_options`: ``--order``, ``--node-order``, ``--window`` (the node procedures);
  :func:`window_options`: ``--window`` alone;
- :func:`master_ssh_options`: ``--ssh-user``, ``--ssh-port``, ``--ssh-map`` for SSH to the masters;

and the checks of the seconds, outcomes and choices several commands validate
(``typer.BadParameter``, exit 2, before anything starts). The help texts, defaults and messages
are those the commands had when each declared its own (the README and the CLI tests read them).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from lockkeeper.cli.common import (
    EXIT_USAGE,
    ClusterOpt,
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
from lockkeeper.cli.start.groups import OptionGroup, flags
from lockkeeper.cli.start.dryrun import dry_run_report
from lockkeeper.cli.start.shared import (
    NodeOrderOpt,
    OrderOpt,
    WindowOpt,
    Launch,
    launch,
    node_order,
    read_ssh_map,
    spec_named,
    windows,
)

DRY_RUN_HELP = "Validate and show what would run; start nothing that writes."


def completes(what: str) -> str:
    """The ``--wait`` help of a procedure that completes or not: ``Wait until the <what> ends; exit
    0 only if it completed.``"""
    return f"Wait until the {what} ends; exit 0 only if it completed."


@dataclass
class Start:
    """The common start flags of one command (``--cluster`` as given: ``cluster_flag``), the
    settings and the requester (read when first used, so a command's own flag errors come
    first), and the way every start ends: :meth:`validated` input, :meth:`request`, :meth:`go`."""

    ctx: typer.Context
    cluster_flag: str | None
    workflow_id: str | None
    wait: bool
    identity: str | None
    output: str
    dry_run: bool

    @functools.cached_property
    def settings(self) -> Any:
        """The settings (environment and global flags); exit 2 when they are invalid."""
        return cli_settings(self.ctx)

    @functools.cached_property
    def who(self) -> str:
        """The requester (:func:`lockkeeper.cli.common.identity_of`)."""
        return identity_of(self.identity)

    @property
    def cluster(self) -> str:
        """``--cluster``, else the settings' cluster."""
        return self.cluster_flag or self.settings.cluster

    def input_fields(self) -> dict[str, Any]:
        """What these flags give every :class:`workflows.kit.inputs.ProcedureInput`, as
        :func:`.shared.build_input`'s dotted fields: ``cluster`` (``--cluster``; else the settings'
        one, unless ``-f`` is given: then the file's, or the model's default), the requester as
        ``approvals.requested_by``, and ``dry_run`` when ``--dry-run`` is given."""
        from lockkeeper.cli.start.shared import INPUT_FILE

        return {"cluster": self.cluster_flag or (None if INPUT_FILE.get() else self.settings.cluster),
                "approvals.requested_by": self.who, "dry_run": self.dry_run or None}

    def validated(self, name: str, invalid: str, **fields: Any) -> Any:
        """Procedure ``name``'s input model from ``fields``; on a validation error one line
        ``error: <invalid><field: message; ...>`` on stderr and exit 2 (``typer.Exit``), before
        anything is contacted."""
        from pydantic import ValidationError

        try:
            return spec_named(name).input_model(**fields)
        except ValueError as exc:  # pydantic's ValidationError is one
            err(f"error: {invalid}{validation_lines(exc) if isinstance(exc, ValidationError) else exc}")
            raise typer.Exit(EXIT_USAGE) from None

    def request(self, name: str, inp: Any, *, cluster: str, **more: Any) -> Launch:
        """The :class:`Launch` of procedure ``name`` with ``inp`` on ``cluster``: the requester,
        ``-o``, ``--wait``, ``--dry-run`` and ``--id`` of these flags (``more`` overrides them
        and adds the rest of :class:`Launch`)."""
        base: dict[str, Any] = dict(who=self.who, output=self.output, wait=self.wait, dry_run=self.dry_run,
                                    workflow_id=self.workflow_id)
        return Launch(name=name, input=inp, cluster=cluster, **{**base, **more})

    def go(self, req: Launch, dry_run: Callable[[Launch, Any], Awaitable[int]] = dry_run_report,
           launcher: Callable[[Launch, Any], Awaitable[int]] = launch) -> None:
        """Run the start (:func:`lockkeeper.cli.common.run`: exits with the code it returns):
        ``launcher`` (default :func:`.shared.launch`), or for a dry run ``dry_run`` (default
        :func:`.dryrun.dry_run_report`: the input and the leases that would refuse it)."""
        run((dry_run if req.dry_run else launcher)(req, self.settings))


def start_options(wait: str, dry_run: str = DRY_RUN_HELP, cluster: bool = True) -> OptionGroup:
    """The common start flags (a :class:`Start`, with the command's context); ``wait`` and ``dry_run`` are the help texts of
    ``--wait`` and ``--dry-run`` (what this procedure waits for, what its dry run shows);
    ``cluster`` False: no ``--cluster`` (a campaign names its clusters in a file)."""

    def build(start_ctx: typer.Context, dry_run: bool, workflow_id: str | None, wait: bool, identity: str | None,
              output: str, cluster: str | None = None) -> Start:
        return Start(ctx=start_ctx, cluster_flag=cluster, workflow_id=workflow_id, wait=bool(wait), identity=identity,
                     output=check_output(output), dry_run=bool(dry_run))

    return OptionGroup(flags(
        ("start_ctx", typer.Context, None),  # typer passes the command's context (for the settings)
        ("dry_run", bool, typer.Option(False, "--dry-run", help=dry_run)),
        *([("cluster", str | None, ClusterOpt)] if cluster else []),
        ("workflow_id", str | None, IdOpt),
        ("wait", bool, typer.Option(False, "--wait", help=wait)),
        ("identity", str | None, IdentityOpt),
        ("output", str, OutputOpt),
    ), build)


@dataclass(frozen=True)
class Approvals:
    """``--four-eyes`` and ``--allowed-approver``: who may decide the procedure's gates."""

    four_eyes: bool
    allowed_approvers: list[str]

    def fields(self, requested_by: str) -> dict[str, Any]:
        """The input's ``requested_by``, ``four_eyes`` and ``allowed_approvers``."""
        return dict(requested_by=requested_by, four_eyes=self.four_eyes, allowed_approvers=self.allowed_approvers)

    def flags(self) -> dict[str, Any]:
        """The flags given, as :func:`.shared.build_input`'s dotted fields of a
        :class:`workflows.kit.inputs.ProcedureInput` (``approvals.four_eyes``,
        ``approvals.allowed_approvers``; None when not given, so an input file's value stays)."""
        return {"approvals.four_eyes": self.four_eyes or None, "approvals.allowed_approvers": self.allowed_approvers or None}

    def nested(self, requested_by: str) -> dict[str, Any]:
        """The same as ``approvals`` of an input on :class:`workflows.kit.inputs.ProcedureInput`."""
        return {"approvals": self.fields(requested_by)}


def approval_options(approves: str = "", verb: str = "approve", approvers: bool = True) -> OptionGroup:
    """``--four-eyes`` (help: ``The requester may not approve <approves>.``) and, unless
    ``approvers`` is False, ``--allowed-approver`` (help: ``Who may <verb> (repeatable).``)."""
    return OptionGroup(flags(
        ("four_eyes", bool, typer.Option(False, "--four-eyes",
                                         help=f"The requester may not approve{' ' + approves if approves else ''}.")),
        *([("allowed_approver", list[str], typer.Option([], "--allowed-approver", help=f"Who may {verb} (repeatable)."))]
          if approvers else []),
    ), lambda four_eyes, allowed_approver=None: Approvals(bool(four_eyes), list(allowed_approver or [])))


def ordering_options(order: Any = OrderOpt) -> OptionGroup:
    """``--order``, ``--node-order FILE`` and ``--window`` (``order``: this procedure's ``--order``
    option when its default differs). Builds the input's ``node_order`` and ``windows`` fields,
    each only when given (:func:`.shared.node_order`, :func:`.shared.windows`: exit 2 for a bad
    one)."""

    def build(order_by: str | None, node_order_file: Path | None, window: list[str] | None) -> dict[str, Any]:
        nodes_order, specs = node_order(order_by, node_order_file), windows(window)
        return {**({"node_order": nodes_order} if nodes_order is not None else {}), **({"windows": specs} if specs else {})}

    return OptionGroup(flags(
        ("order_by", str | None, order),
        ("node_order_file", Path | None, NodeOrderOpt),
        ("window", list[str], WindowOpt),
    ), build)


def window_options() -> OptionGroup:
    """``--window`` alone: the input's ``windows`` (each parsed; exit 2 for a bad one)."""
    return OptionGroup(flags(("window", list[str], WindowOpt)), lambda window: windows(window))


@dataclass(frozen=True)
class MasterSsh:
    """``--ssh-user``, ``--ssh-port`` and ``--ssh-map FILE``: how the worker reaches the masters."""

    user: str
    port: int
    map: Path | None

    def access(self, masters: list[str]) -> dict[str, dict[str, Any]]:
        """Each master's ``HostAccess`` fields (SSH): its ``--ssh-map`` address, or its name and
        ``--ssh-port``. Raises ``typer.BadParameter`` (``--ssh-map``) for a map without one of
        them (or one it cannot read: :func:`.shared.read_ssh_map`)."""
        where = {m: (m, self.port) for m in masters}
        if self.map is not None:
            mapped = read_ssh_map(self.map)
            if missing := [m for m in masters if m not in mapped]:
                raise typer.BadParameter(f"{self.map} has no address for {', '.join(missing)}", param_hint="'--ssh-map'")
            where = {m: mapped[m] for m in masters}
        return {m: {"backend": "ssh", "host": where[m][0], "port": where[m][1], "user": self.user, "node": m} for m in masters}


def master_ssh_options(map_help: str) -> OptionGroup:
    """The masters' SSH flags (``--ssh-map``'s help: ``map_help``)."""
    return OptionGroup(flags(
        ("ssh_user", str, typer.Option("root", "--ssh-user", help="SSH user on the masters.")),
        ("ssh_port", int, typer.Option(22, "--ssh-port", help="SSH port on the masters.")),
        ("ssh_map", Path | None, typer.Option(None, "--ssh-map", help=map_help)),
    ), lambda ssh_user, ssh_port, ssh_map: MasterSsh(ssh_user, ssh_port, ssh_map))


# --- checks several commands share (exit 2 naming the flag) ------------------------------------

DECISION_OUTCOMES = ("wait", "skip", "abort")
GATE_OUTCOMES = ("reject", "approve", "abort")


def parse_argv(value: str, hint: str) -> list[str]:
    """Shell-split a command option (``hint``: ``'--reboot-command'``) into an argv, never run
    through a shell; ``typer.BadParameter`` for an unbalanced quote or an empty command."""
    import shlex

    try:
        argv = shlex.split(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=hint) from None
    if not argv:
        raise typer.BadParameter("empty command", param_hint=hint)
    return argv


def max_unavailable_flag(value: str | None, hint: str = "'--max-unavailable'") -> int | str | None:
    """A ``--max-unavailable`` (or ``--serial``: ``hint``) flag as the input's
    :data:`workflows.kit.inputs.MaxUnavailable`: ``N`` >= 1 (an int) or ``N%`` with
    0 < N <= 100 (the string ``"N%"``); None when not given. ``typer.BadParameter`` otherwise
    (:func:`workflows.kit.inputs.parse_max_unavailable`'s message)."""
    from workflows.kit.inputs import parse_max_unavailable

    if value is None:
        return None
    try:
        return parse_max_unavailable(value)
    except ValueError as exc:
        raise typer.BadParameter(f"expected N or N%: {exc}", param_hint=hint) from None


def choice(value: str, choices: tuple[str, ...], hint: str) -> str:
    """``value`` when it is one of ``choices``; else ``typer.BadParameter`` ``must be a, b or c``."""
    if value not in choices:
        raise typer.BadParameter(f"must be {', '.join(choices[:-1])} or {choices[-1]}", param_hint=hint)
    return value


def positive_seconds(value: float | None, hint: str) -> None:
    """A duration in seconds that, when given, must be > 0 (``typer.BadParameter`` naming ``hint``)."""
    if value is not None and value <= 0:
        raise typer.BadParameter("must be > 0 seconds", param_hint=hint)


def non_negative_seconds(value: float, hint: str) -> None:
    """A duration in seconds that must be >= 0 (``typer.BadParameter`` naming ``hint``)."""
    if value < 0:
        raise typer.BadParameter("must be >= 0 seconds", param_hint=hint)


def check_decision(decide_after: float | None, decision_timeout: float | None, outcome: str | None) -> None:
    """A blocked drain's decision flags, each when given: ``--decide-after`` >= 0,
    ``--decision-timeout`` > 0, ``--decision-timeout-outcome`` wait, skip or abort (a person
    decides delete-pod)."""
    if decide_after is not None:
        non_negative_seconds(decide_after, "'--decide-after'")
    positive_seconds(decision_timeout, "'--decision-timeout'")
    if outcome is not None and outcome not in DECISION_OUTCOMES:
        raise typer.BadParameter("must be wait, skip or abort (delete-pod always needs a person)",
                                 param_hint="'--decision-timeout-outcome'")
