"""``lockkeeper start NAME -f input.yaml --set key=value``: the input is the file, then the flags
the operator gave, then ``--set``, validated once against the procedure's input model
(lockkeeper/cli/start/shared.py ``build_input``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockkeeper.cli.common import CliError
from lockkeeper.cli.start.shared import INPUT_FILE, INPUT_SETS, build_input
from workflows.kit.inputs import DrainPolicy, MaxUnavailable, ProcedureInput


class Demo(ProcedureInput):
    nodes: list[str]
    max_unavailable: MaxUnavailable = 1
    drain: DrainPolicy = DrainPolicy()


def _with(file: Path | None, sets: tuple[str, ...]) -> None:
    INPUT_FILE.set(file)
    INPUT_SETS.set(sets)


def test_file_then_flags_then_sets(tmp_path: Path) -> None:
    f = tmp_path / "in.yaml"
    f.write_text("cluster: prod\nnodes: [a, b]\nmax_unavailable: 2\napprovals: {requested_by: alice}\n")
    _with(f, ("approvals.four_eyes=true", "drain.decide_after_seconds=30", "max_unavailable=25%"))
    got = build_input(Demo, {"cluster": "staging", "approvals.requested_by": None, "gates.timeout_seconds": 600})
    assert got.cluster == "staging"  # a flag over the file
    assert got.approvals.requested_by == "alice" and got.approvals.four_eyes is True  # None flags are not given
    assert got.max_unavailable == "25%" and got.drain.decide_after_seconds == 30 and got.gates.timeout_seconds == 600
    assert got.nodes == ["a", "b"]


@pytest.mark.parametrize(("sets", "needle"), [
    (("max_unavailable=0",), "max_unavailable: invalid maxUnavailable 0: must be at least 1"),
    (("max_unavailable=150%",), "a percent must be above 0 and at most 100"),
    (("nodes=[a]", "colour=blue"), "colour: Extra inputs are not permitted"),
    (("drain.decision_timeout_outcome=delete-pod",), "delete-pod needs a person's approval"),
    (("nodes",), "--set 'nodes': expected KEY=VALUE"),
])
def test_bad_input_is_refused_before_anything_starts(sets: tuple[str, ...], needle: str) -> None:
    _with(None, ("nodes=[a]", *sets) if sets[0].startswith(("max", "drain")) else sets)
    with pytest.raises(CliError) as info:
        build_input(Demo, {})
    assert needle in str(info.value) and info.value.code == 2


def test_a_file_that_is_no_mapping_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "in.yaml"
    f.write_text("- a\n- b\n")
    _with(f, ())
    with pytest.raises(CliError, match="must be a mapping"):
        build_input(Demo, {})
