"""Fixtures of the VXLAN port change's tests: the time-skipping server of tests/workflows (and
its helpers: beats, replay, kit_fakes) and the end-to-end worker of tests/e2e, re-used here."""

from __future__ import annotations

import sys
from pathlib import Path

# The workflow tests' helper modules (beats, replay, timeskip, kit_fakes) import by their own names.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "workflows"))

from tests.e2e.conftest import worker_for  # noqa: E402,F401
from tests.workflows.conftest import time_skipping_env, wf_task_queue  # noqa: E402,F401
