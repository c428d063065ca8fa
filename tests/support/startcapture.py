"""Starting a procedure from the CLI without a server: :func:`capture_starts` stops ``lockkeeper
start`` where it would contact Temporal and keeps the validated input it would send, :func:`start`
runs a start command as ``alice``, :func:`refused` reads what a refused start said, :func:`write`
writes an input file. The tests of the start commands' input fields (issue 36) share them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lockkeeper import cli
from lockkeeper.cli.common import CliError
from lockkeeper.cli.start.options import Start

runner = CliRunner()


def capture_starts(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The inputs the start commands would start their workflow with from now on (nothing is
    contacted: :meth:`Start.go` only records ``req.input``)."""
    got: list[Any] = []
    monkeypatch.setattr(Start, "go", lambda self, req, *a, **k: got.append(req.input))
    return got


def start(*args: str) -> Any:
    """``lockkeeper start ARGS --identity alice`` against an address nothing listens on."""
    return runner.invoke(cli.app, ["--address", "127.0.0.1:1", "start", *args, "--identity", "alice"], env={"COLUMNS": "200"})


def refused(res: Any) -> str:
    """What a start refused with exit 2 (a typer usage error, or the CliError ``main`` turns into
    exit 2 with its message)."""
    if isinstance(res.exception, CliError):
        assert res.exception.code == 2, res.exception
        return str(res.exception)
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    return " ".join(res.output.split())


def write(tmp_path: Path, data: dict[str, Any]) -> str:
    """``data`` as the input file ``tmp_path/input.yaml`` (JSON is YAML); its path."""
    f = tmp_path / "input.yaml"
    f.write_text(json.dumps(data))
    return str(f)
