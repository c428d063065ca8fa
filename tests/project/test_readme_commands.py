"""Every ``lockkeeper`` command in the README parses with today's CLI.

Each command of the README's shell blocks (:mod:`tests.support.readme`) goes through the real command
tree's parser (typer's click group, the same that runs ``lockkeeper``): subcommands resolved,
options and their types, choices and required options checked, nothing run. A flag renamed or
removed in the code and not in the README, a misspelt subcommand, a missing required option or
a value of the wrong type fails here, with the README line.
"""

from __future__ import annotations

import pytest
import typer

#: click's usage error, whichever click typer uses (its own copy since 0.2x, the click package before).
UsageError = typer.BadParameter.__bases__[0]

from tests.support import readme


def parse(argv: list[str]) -> list[str]:
    """The command path of ``argv`` (``lockkeeper start gluster-recovery``) after parsing every
    level with the real CLI; raises typer's click ``UsageError`` (or a subclass) for bad input."""
    from lockkeeper.cli import app

    cmd = typer.main.get_command(app)
    args = list(argv[1:])
    path = ["lockkeeper"]
    parent = None
    while True:
        try:
            ctx = cmd.make_context(path[-1], args, parent=parent)
        except typer.Exit:  # an eager option such as --help
            return path
        if path == ["lockkeeper", "sim"] and not hasattr(cmd, "resolve_command"):
            from clustersim.cli import (
                sim_app,  # ``sim`` hands its arguments to the simulator's CLI
            )

            cmd, args, parent = typer.main.get_command(sim_app), list(ctx.args), ctx
            continue
        if not hasattr(cmd, "resolve_command"):  # a command, not a group
            return path
        rest = [*ctx._protected_args, *ctx.args]
        if not rest:
            return path
        name, sub, args = cmd.resolve_command(ctx, rest)
        if sub is None:
            raise UsageError(f"no such command {rest[0]!r}", ctx)
        path.append(name or rest[0])
        cmd, parent = sub, ctx


def test_the_readme_parser_reads_blocks_continuations_and_substitutions() -> None:
    text = "\n".join([
        "## A section",
        "```",
        "# a comment line",
        "X=1 lockkeeper start drain --node n1 \\",
        "    --dry-run   # prints the plan",
        "cat > /tmp/f <<EOF2",
        "lockkeeper not-a-command",
        "EOF2",
        "lockkeeper sim serve --scenario r1 | tee /tmp/r1.env",
        "lockkeeper start x $(grep ^MASTER_API /tmp/r5.env | sed 's/MASTER_API /--master /')",
        "```",
        "```yaml",
        "lockkeeper: not a command",
        "```",
    ])
    found = readme.commands("lockkeeper", text)
    assert [(c.line, c.section, c.argv) for c in found] == [
        (4, "A section", ["lockkeeper", "start", "drain", "--node", "n1", "--dry-run"]),
        (9, "A section", ["lockkeeper", "sim", "serve", "--scenario", "r1"]),
        (10, "A section", ["lockkeeper", "start", "x", "--master", "master01=http://127.0.0.1:1",
                           "--master", "master02=http://127.0.0.1:2"]),
    ]
    with pytest.raises(ValueError, match=r"\$\(date\) is no known form"):
        readme.substitute("lockkeeper start x --not-before $(date)")


def test_the_checker_refuses_what_the_cli_refuses() -> None:
    assert parse(["lockkeeper", "start", "gluster-recovery", "--check-only"]) == ["lockkeeper", "start", "gluster-recovery"]
    assert parse(["lockkeeper", "approve", "ID", "GATE", "-m", "why"]) == ["lockkeeper", "approve"]
    assert parse(["lockkeeper", "sim", "serve", "--scenario", "r1-sdn-to-ovn"]) == ["lockkeeper", "sim", "serve"]
    for bad in (["lockkeeper", "start", "gluster-recovery", "--no-such-flag"],
                ["lockkeeper", "strat", "drain"],
                ["lockkeeper", "start", "network-migration", "--to", "OVNKubernetes", "--max-unavailable"],
                ["lockkeeper", "sim", "serve", "--time-scale", "fast"],
                ["lockkeeper", "sim", "sevre"],
                ["lockkeeper", "start", "machineconfig-rollout", "--pool", "worker", "--decide-after", "soon"]):
        with pytest.raises(UsageError):
            parse(bad)


def test_every_lockkeeper_command_in_the_readme_parses() -> None:
    found = readme.commands("lockkeeper")
    assert len(found) >= 40, [c.text for c in found]
    sections = {c.section for c in found}
    for expected in ("The first hour", "GlusterFS recovery (R3a, `r3-okd310-upgrade`)",
                     "Runtime migration CRI-O -> Docker (R4, `r4-crio-to-docker`)",
                     "VXLAN port change (R5, `r5-vxlan-port`)",
                     "Network migration SDN -> OVN-Kubernetes (R1, `r1-sdn-to-ovn`)"):
        assert expected in sections, sorted(sections)
    bad = []
    for c in found:
        try:
            parse(c.argv)
        except UsageError as exc:
            bad.append(f"README.md:{c.line} ({c.section}): {exc.format_message()}\n    {c.text}")
    assert not bad, "README commands the CLI refuses:\n" + "\n".join(bad)
