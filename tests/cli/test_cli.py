"""CLI parsing and error mapping (typer CliRunner; no Temporal server needed except where noted)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

from lockkeeper import cli
from lockkeeper.cli import common, decisions, observe, operate
from lockkeeper.cli.start.machineconfig import parse_max_unavailable, parse_targets
from lockkeeper.devserver import free_port

runner = CliRunner()


def test_help_lists_commands() -> None:
    res = runner.invoke(cli.app, ["--help"])
    assert res.exit_code == 0
    for command in ("start", "status", "list", "approve", "reject", "pause", "resume", "abort",
                    "skip-node", "retry-node", "worker", "deployment", "demo", "sim"):
        assert command in res.output


@pytest.mark.parametrize(("argv", "absent"), [
    (["--help"], ("temporalio", "kubernetes", "workflows.registry", "rich.live")),
    (["status", "--help"], ("temporalio", "kubernetes", "workflows.registry", "rich.live")),
    # A start command is built from the procedure registry (workflow code: temporalio), never
    # the cluster client.
    (["start", "machineconfig-rollout", "--help"], ("kubernetes", "rich.live")),
])
def test_help_does_not_import_what_it_does_not_need(argv: list[str], absent: tuple[str, ...]) -> None:
    # --help stays fast because heavy modules load only inside commands.
    code = (
        "import sys; from lockkeeper.cli import app\n"
        "from typer.testing import CliRunner\n"
        f"r = CliRunner().invoke(app, {argv!r}); assert r.exit_code == 0, r.output\n"
        f"print(sorted(m for m in {absent!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("value", ["0", "-1", "abc", "150%", "0%", "2.5", "%"])
def test_bad_max_unavailable_is_usage_error(value: str) -> None:
    res = runner.invoke(cli.app, ["start", "machineconfig-rollout", "--max-unavailable", value])
    assert res.exit_code == 2, res.output


@pytest.mark.parametrize(("value", "parsed"), [("1", 1), ("3", 3), ("25%", "25%"), (" 100% ", "100%")])
def test_max_unavailable_values(value: str, parsed: int | str) -> None:
    assert parse_max_unavailable(value) == parsed


@pytest.mark.parametrize(
    "args",
    [
        ["--target", "worker"],
        ["--target", "=rendered-x"],
        ["--approve-each", "sometimes"],
        ["--gate-timeout-outcome", "maybe"],
        ["--not-before", "yesterday"],
        ["--not-before", "2024-05-01T10:00:00"],  # no timezone
        ["--gate-timeout", "0"],
        ["-o", "xml"],
    ],
)
def test_bad_start_flags_are_usage_errors(args: list[str]) -> None:
    res = runner.invoke(cli.app, ["start", "machineconfig-rollout", *args])
    assert res.exit_code == 2, res.output


def test_targets_parse() -> None:
    assert parse_targets(["app=rendered-app-c214", "infra=rendered-infra-1"]) == {
        "app": "rendered-app-c214",
        "infra": "rendered-infra-1",
    }


def test_invalid_settings_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", "no-port")
    res = runner.invoke(cli.app, ["status", "some-id"])
    assert res.exit_code == 2
    assert "TEMPORAL_ADDRESS must be host:port" in res.output


def test_unreachable_server_exit_3() -> None:
    res = runner.invoke(cli.app, ["--address", f"127.0.0.1:{free_port()}", "status", "some-id"])
    assert res.exit_code == 3
    assert "cannot connect to Temporal at 127.0.0.1" in res.output


def _capture_update(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, Any]]:
    calls: list[tuple[str, str, Any]] = []

    async def fake_update(settings: Any, wid: str, name: str, arg: Any, result_type: type, output: str, who: str) -> int:
        calls.append((wid, name, arg))
        return 0

    async def is_node_procedure(settings: Any, wid: str, update: str) -> None:
        return None

    monkeypatch.setattr(decisions, "update", fake_update)
    monkeypatch.setattr(operate, "require_node_procedure", is_node_procedure)
    return calls


def test_identity_defaults_to_os_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOCKKEEPER_IDENTITY", raising=False)
    monkeypatch.setattr("getpass.getuser", lambda: "alice")
    calls = _capture_update(monkeypatch)
    res = runner.invoke(cli.app, ["approve", "mcr-1", "pool/worker", "--comment", "looks fine"])
    assert res.exit_code == 0, res.output
    wid, name, arg = calls[0]
    assert (wid, name, arg.gate_id, arg.identity, arg.comment) == ("mcr-1", "approve", "pool/worker", "alice", "looks fine")


def test_identity_flag_and_node_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _capture_update(monkeypatch)
    assert runner.invoke(cli.app, ["skip-node", "mcr-1", "worker-3", "--identity", "bob"]).exit_code == 0
    assert runner.invoke(cli.app, ["pause", "mcr-1", "--reason", "change freeze", "--identity", "bob"]).exit_code == 0
    assert runner.invoke(cli.app, ["reject", "mcr-1", "--identity", "carol"]).exit_code == 0
    (_, n1, a1), (_, n2, a2), (_, n3, a3) = calls
    assert (n1, a1.node, a1.identity) == ("skip_node", "worker-3", "bob")
    assert (n2, a2.reason, a2.identity) == ("pause", "change freeze", "bob")
    assert (n3, a3.gate_id, a3.identity) == ("reject", None, "carol")


def test_update_refused_by_validator_is_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    from temporalio.client import WorkflowUpdateFailedError
    from temporalio.exceptions import ApplicationError

    try:
        try:
            raise ApplicationError("four-eyes: alice requested this rollout and may not approve it")
        except ApplicationError as cause:
            raise WorkflowUpdateFailedError(cause) from cause
    except WorkflowUpdateFailedError as exc:
        assert common.map_exception(exc) == 1  # refused (2 is only for the CLI's own input)
    assert "refused: four-eyes: alice requested this rollout and may not approve it" in capsys.readouterr().err


def test_list_query() -> None:
    assert observe.build_list_query(None, None, None, False) == "LockkeeperProcedure IS NOT NULL"
    assert observe.build_list_query("prod", "machineconfig-rollout", "paused", True) == (
        "LockkeeperProcedure = 'machineconfig-rollout' AND LockkeeperCluster = 'prod' "
        "AND LockkeeperStatus = 'paused' AND ExecutionStatus = 'Running'"
    )


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["start", "machineconfig-rollout", "--max-unavailable", "0"], 2),
        (["--address", "127.0.0.1:{port}", "status", "some-id"], 3),
        (["--help"], 0),
        (["no-such-command"], 2),
    ],
)
def test_console_entrypoint_exit_codes(args: list[str], code: int) -> None:
    from pathlib import Path

    exe = Path(sys.executable).parent / "lockkeeper"
    argv = [a.format(port=free_port()) for a in args]
    res = subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=60)
    assert res.returncode == code, res.stderr
