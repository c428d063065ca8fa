"""Issue 37: the ``--alert-*`` flags are one option group (``shared.with_alert_gate_options``) that
every node procedure's start command gets: each offers them, each refuses a flag without
``--alert-gate`` and a bad URL or filter with exit 2 before anything connects (the flags reach the
input model, which validates them), and a good gate passes validation (a dead server: exit 3).
No server: a dead address shows that refusals come first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from tests.cli.test_order_cli import _args
from typer.testing import CliRunner

from lockkeeper import cli
from lockkeeper.cli.common import CliError
from lockkeeper.cli.start.shared import takes_alert_gate, with_alert_gate_options
from lockkeeper.devserver import free_port

runner = CliRunner()

#: Every start command that takes the alert gate, and what else it needs to get as far as its input.
NODE_PROCEDURES = ("machineconfig-rollout", "node-upgrade", "runtime-migration", "drain", "cluster-upgrade",
                   "network-migration", "node-selector-migration", "vxlan-port-change", "control-plane-upgrade")


@pytest.fixture(scope="module")
def dead() -> list[str]:
    return ["--address", f"127.0.0.1:{free_port()}"]


def _start(name: str, tmp_path: Path) -> list[str]:
    if name in ("machineconfig-rollout", "node-upgrade", "runtime-migration"):
        return _args(name, tmp_path)
    if name == "cluster-upgrade":
        plan = tmp_path / "plan.yaml"
        plan.write_text(json.dumps({"node_selectors": {"mapping": {"region=infra": {"node-role.kubernetes.io/infra": "true"}}}}))
        return ["start", "cluster-upgrade", "--plan", str(plan)]
    return {
        "drain": ["start", "drain", "--node", "n1"],
        "control-plane-upgrade": ["start", "control-plane-upgrade", "--master", "m1", "--action-command", "true {master}",
                                  "--etcd-backup-skip-reason", "test", "--etcd-health-skip-reason", "test"],
        "network-migration": ["start", "network-migration", "--to", "OVNKubernetes"],
        "node-selector-migration": ["start", "node-selector-migration", "--map", "region=infra=node-role.kubernetes.io/infra=true"],
        "vxlan-port-change": ["start", "vxlan-port-change", "--port", "4889", "--image", "img:1", "--master", "m1=https://m1:8443",
                              "--exec-via", "debug-pod"],
    }[name]


def test_every_node_procedure_offers_the_group_and_the_others_do_not() -> None:
    for name in NODE_PROCEDURES:
        res = runner.invoke(cli.app, ["start", name, "--help"], env={"COLUMNS": "200"})
        assert res.exit_code == 0, (name, res.output)
        for flag in ("--alert-gate", "--alert-filter", "--alert-firing-only", "--alert-pending-blocks", "--alert-severity",
                     "--alert-gate-fail-open", "--alert-bearer-token-file", "--alert-ca-file"):
            assert flag in res.output, (name, flag, res.output)
    res = runner.invoke(cli.app, ["start", "etcd-backup", "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "--alert-gate" not in res.output, res.output


@pytest.mark.parametrize("name", NODE_PROCEDURES)
@pytest.mark.parametrize(("flags", "words"), [
    (["--alert-filter", "^Watchdog$"], "--alert-filter need(s) --alert-gate URL"),
    (["--alert-gate", "ftp://prometheus:9090"], "must be http(s)://host"),
    (["--alert-gate", "http://prometheus:9090", "--alert-filter", "Kube(Node"], "is not a valid regular expression"),
])
def test_bad_alert_flags_exit_2_before_connecting(dead: list[str], tmp_path: Path, name: str, flags: list[str], words: str) -> None:
    res = runner.invoke(cli.app, [*dead, *_start(name, tmp_path), *flags])
    if isinstance(res.exception, CliError):  # raised before `run` (build_input): `lockkeeper`'s main maps it
        code, text = res.exception.code, str(res.exception)
    else:
        code, text = res.exit_code, res.output
    assert code == 2, (name, text)
    assert words in " ".join(text.split()), (name, text)


@pytest.mark.parametrize("name", NODE_PROCEDURES)
def test_a_good_gate_passes_validation_and_reaches_the_server(dead: list[str], tmp_path: Path, name: str) -> None:
    res = runner.invoke(cli.app, [*dead, *_start(name, tmp_path), "--alert-gate", "http://prometheus:9090",
                                  "--alert-filter", "^Watchdog$", "--alert-severity", "critical", "--alert-gate-fail-open"])
    assert res.exit_code == 3 and "cannot connect to Temporal" in res.output, (name, res.output)


def test_the_group_hands_the_command_the_inputs_alerts() -> None:
    got: list[Any] = []

    def command(node: str = typer.Option("n1", "--node"), alerts: dict[str, Any] | None = None) -> None:
        got.append((node, alerts))

    assert takes_alert_gate(command)
    app = typer.Typer()
    app.command()(with_alert_gate_options(command))
    res = runner.invoke(app, ["--node", "w1", "--alert-gate", "https://prometheus:9091", "--alert-filter", "^Watchdog$",
                              "--alert-pending-blocks", "--alert-severity", "critical", "--alert-severity", "warning",
                              "--alert-gate-fail-open", "--alert-bearer-token-file", "/var/run/token", "--alert-ca-file", "/etc/ca.pem"])
    assert res.exit_code == 0, res.output
    assert got == [("w1", {"url": "https://prometheus:9091", "filter": "^Watchdog$", "firing_only": False,
                           "severities": ["critical", "warning"], "fail_open": True, "bearer_token_file": "/var/run/token",
                           "ca_file": "/etc/ca.pem"})]
    got.clear()
    assert runner.invoke(app, ["--node", "w2"]).exit_code == 0
    assert got == [("w2", None)]
