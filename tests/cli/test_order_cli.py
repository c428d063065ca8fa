"""Issue 40: ``--order`` / ``--node-order FILE`` on the node procedures' start commands, refused
before anything connects (exit 2, one clear message), and the shared helper that turns them
into the input's ``node_order``. No server: a dead address shows that refusals come first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from lockkeeper import cli
from lockkeeper.cli.start.shared import node_order, read_node_order
from lockkeeper.devserver import free_port

runner = CliRunner()


@pytest.fixture(scope="module")
def dead() -> list[str]:
    return ["--address", f"127.0.0.1:{free_port()}"]


@pytest.fixture
def order_file(tmp_path: Path) -> Path:
    f = tmp_path / "order.txt"
    f.write_text("# canary first\nworker-0003\n\n  worker-0001   # then this one\n#worker-0002\n")
    return f


def test_the_file_is_one_name_a_line_with_comments(order_file: Path) -> None:
    assert read_node_order(order_file) == ["worker-0003", "worker-0001"]
    assert node_order("explicit", order_file) == ["worker-0003", "worker-0001"]


@pytest.mark.parametrize("order", ["zone-oldest", "oldest-first", "newest-first"])
def test_a_named_order_is_the_value(order: str) -> None:
    assert node_order(order, None) == order


def test_no_flag_leaves_the_procedure_default() -> None:
    assert node_order(None, None) is None


@pytest.mark.parametrize(("text", "words"), [("# nothing\n\n", "names no node"), ("a\nb\na\n", "listed twice"),
                                             ("a b\n", "one node name per line")])
def test_bad_files_are_refused(tmp_path: Path, text: str, words: str) -> None:
    f = tmp_path / "o.txt"
    f.write_text(text)
    with pytest.raises(typer.BadParameter, match=words):
        node_order("explicit", f)


START = {
    "machineconfig-rollout": ["start", "machineconfig-rollout", "--pool", "worker"],
    "node-upgrade": ["start", "node-upgrade", "--selector", "region=infra", "--action-command", "x -l {node}"],
    "runtime-migration": ["start", "runtime-migration", "--node", "g1", "--node", "g2", "--to", "docker",
                          "--scaleup-command", "scaleup {node}"],
}


def _args(name: str, tmp_path: Path) -> list[str]:
    args = list(START[name])
    if name == "runtime-migration":
        m = tmp_path / "map.json"
        m.write_text(json.dumps({"g1": "10.0.0.1", "g2": "10.0.0.2"}))
        args += ["--ssh-map", str(m)]
    return args


@pytest.mark.parametrize("name", list(START))
@pytest.mark.parametrize(("flags", "words"), [
    (["--order", "sideways"], "unknown order 'sideways'"),
    (["--order", "explicit"], "--order explicit needs --node-order FILE"),
    (["--order", "newest-first", "--node-order", "FILE"], "--node-order FILE needs --order explicit"),
    (["--node-order", "FILE"], "--node-order FILE needs --order explicit"),
    (["--order", "explicit", "--node-order", "MISSING"], "cannot read"),
])
def test_bad_order_flags_exit_2_before_connecting(dead: list[str], tmp_path: Path, order_file: Path, name: str,
                                                  flags: list[str], words: str) -> None:
    flags = [str(order_file) if f == "FILE" else str(tmp_path / "missing.txt") if f == "MISSING" else f for f in flags]
    res = runner.invoke(cli.app, [*dead, *_args(name, tmp_path), *flags])
    assert res.exit_code == 2, res.output
    assert words in " ".join(res.output.split()), res.output


@pytest.mark.parametrize("name", list(START))
def test_good_order_flags_pass_validation_and_reach_the_server(dead: list[str], tmp_path: Path, name: str) -> None:
    res = runner.invoke(cli.app, [*dead, *_args(name, tmp_path), "--order", "newest-first", "--dry-run"])
    assert res.exit_code == 3 and "cannot connect to Temporal" in res.output, res.output


def test_runtime_migration_explicit_order_names_only_migrated_nodes(dead: list[str], tmp_path: Path) -> None:
    f = tmp_path / "o.txt"
    f.write_text("g2\ng9\n")
    res = runner.invoke(cli.app, [*dead, *_args("runtime-migration", tmp_path), "--order", "explicit", "--node-order", str(f)])
    assert res.exit_code == 2 and "g9" in res.output and "not migrated" in res.output, res.output


@pytest.mark.parametrize("flags", [["--order", "newest-first"], ["--order", "explicit", "--node-order", "x.txt"]])
def test_drain_refuses_an_order_it_cannot_honour(dead: list[str], flags: list[str]) -> None:
    res = runner.invoke(cli.app, [*dead, "start", "drain", "--node", "n1", *flags])
    assert res.exit_code == 2, res.output
    assert "takes no node order" in res.output and "exactly one node" in " ".join(res.output.split()), res.output


def test_every_node_procedure_offers_the_flags() -> None:
    for name in [*START, "drain"]:
        res = runner.invoke(cli.app, ["start", name, "--help"])
        assert res.exit_code == 0 and "--order" in res.output and "--node-order" in res.output, (name, res.output)
