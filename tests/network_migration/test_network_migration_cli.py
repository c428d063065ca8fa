"""``lockkeeper start network-migration`` and ``lockkeeper revert`` parsing (no server needed:
bad input is refused before any connection)."""

from __future__ import annotations

from typer.testing import CliRunner

from lockkeeper import cli
from lockkeeper.cli.common import CliError
from lockkeeper.devserver import free_port

runner = CliRunner()


def refused(res) -> str:
    """What a start refused with exit 2: a usage error, or the input's validation (the CliError
    ``lockkeeper``'s main prints as ``error: invalid input: ...`` and exits 2 with)."""
    if isinstance(res.exception, CliError):
        assert res.exception.code == 2, res.exception
        return str(res.exception)
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    return res.output


def test_start_network_migration_is_registered_with_its_options() -> None:
    res = runner.invoke(cli.app, ["start", "network-migration", "--help"])
    assert res.exit_code == 0
    for opt in ("--to", "--reboot-via", "--max-unavailable", "--dry-run", "--stall-after", "--wait"):
        assert opt in res.output


def test_unknown_target_type_is_a_usage_error_before_connecting() -> None:
    res = runner.invoke(cli.app, ["--address", f"127.0.0.1:{free_port()}", "start", "network-migration", "--to", "Calico"])
    assert "invalid input: to: Input should be 'OVNKubernetes'" in refused(res)


def test_bad_reboot_via_is_a_usage_error() -> None:
    res = runner.invoke(cli.app, ["--address", f"127.0.0.1:{free_port()}", "start", "network-migration", "--to", "OVNKubernetes",
                                  "--reboot-via", "telnet"])
    assert "reboot_via" in refused(res)


def test_max_unavailable_must_be_positive() -> None:
    res = runner.invoke(cli.app, ["start", "network-migration", "--to", "OVNKubernetes", "--max-unavailable", "0"])
    assert res.exit_code == 2


def test_revert_is_a_generic_command() -> None:
    res = runner.invoke(cli.app, ["revert", "--help"])
    assert res.exit_code == 0 and "revert" in res.output.lower()


def test_unreadable_ssh_map_is_a_usage_error(tmp_path) -> None:
    bad = tmp_path / "map.json"
    bad.write_text("not json")
    res = runner.invoke(cli.app, ["start", "network-migration", "--to", "OVNKubernetes", "--reboot-via", "ssh", "--ssh-map", str(bad)])
    assert res.exit_code == 2 and "ssh-map" in res.output
