"""``-f``/``--set`` on ``lockkeeper start``: applied where the command builds its input with them,
refused (exit 2, before anything is contacted) where it does not, never silently ignored."""

from __future__ import annotations

import subprocess
import sys

import pytest


def lockkeeper(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from lockkeeper.cli import main; sys.argv = ['lockkeeper', *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, check=False,
                          env={"TEMPORAL_ADDRESS": "127.0.0.1:1", "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("args", [
    ["machineconfig-rollout", "--pool", "worker", "--set", "max_unavailable=2"],
    ["runtime-migration", "--node", "g1", "--to", "docker", "--scaleup-command", "s {node}", "--set", "nodes=[g2]"],
])
def test_a_command_that_does_not_apply_set_refuses_it(args: list[str]) -> None:
    p = lockkeeper("start", *args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "refused rather than ignored" in p.stderr
    assert "Traceback" not in p.stderr


def test_a_command_that_applies_set_validates_it_and_exits_2_on_a_bad_field() -> None:
    p = lockkeeper("start", "vxlan-port-change", "--set", "no_such_field=1", "--dry-run")
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "no_such_field: Extra inputs are not permitted" in p.stderr
    assert "CliError" not in p.stderr
