"""The ``workflows`` package's ``__init__`` imports no procedure (the sandbox runs it per run)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_importing_the_package_imports_no_procedure() -> None:
    # A fresh interpreter: this one has imported the procedures already.
    code = (
        "import sys, workflows\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('workflows.'))\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_public_names_resolve_on_first_use() -> None:
    import workflows
    from workflows.kit.lease import LeaseWorkflow
    from workflows.machineconfig import MachineConfigRolloutWorkflow
    from workflows.registry import PROCEDURES, WORKFLOWS

    assert workflows.PROCEDURES is PROCEDURES and workflows.WORKFLOWS is WORKFLOWS
    assert workflows.MachineConfigRolloutWorkflow is MachineConfigRolloutWorkflow
    assert WORKFLOWS[-1] is LeaseWorkflow and MachineConfigRolloutWorkflow in WORKFLOWS
    assert set(workflows.__all__) >= {"PROCEDURES", "WORKFLOWS", "NodeRolloutWorkflow"}
    for name in workflows.__all__:
        assert getattr(workflows, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'NoSuchWorkflow'"):
        _ = workflows.NoSuchWorkflow  # type: ignore[attr-defined]
