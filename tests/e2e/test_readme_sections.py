"""The README's procedure sections, run as written (tests/readme_run.py has the conventions).

Each test runs one or more README sections line by line against the session's dev server, with
the simulator and the worker started by the README's own lines, and fails on the first line
whose exit code or status differs from what the README says. A flag renamed, a gate renamed, an
outcome reworded or a step reordered in the code and not in the README fails here.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.readme_run import SectionRun

pytestmark = pytest.mark.e2e

R3A = "GlusterFS recovery (R3a, `r3-okd310-upgrade`)"


async def run_sections(tmp_path: Path, dev_server: Any, task_queue: str, sections: list[str], **env: str) -> list[str]:
    run = SectionRun(tmp_path, dev_server.address, task_queue, extra_env=env)
    try:
        return await asyncio.to_thread(run.run, sections)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n\ntranscript:\n" + "\n".join(run.transcript[-40:])) from None


async def test_the_glusterfs_recovery_section_runs_as_written(tmp_path: Path, dev_server: Any, task_queue: str) -> None:
    transcript = await run_sections(tmp_path, dev_server, task_queue, [R3A])
    assert any("lockkeeper approve" in line for line in transcript), transcript


R3D = "Control-plane upgrade, node upgrade, node-selector migration and the whole upgrade (R3d/R3e, `r3-okd310-upgrade`)"


@pytest.mark.timeout(600)
async def test_the_r3_upgrade_sections_run_as_written(tmp_path: Path, dev_server: Any, task_queue: str) -> None:
    """R3a then R3d/R3e on one simulator, as the README tells it: the GlusterFS recovery, the
    control plane (with R3d's missing CA fixed over SSH), the infra nodes, the selector migration."""
    transcript = await run_sections(tmp_path, dev_server, task_queue, [R3A, R3D])
    assert any("node-selector-migration" in line for line in transcript), transcript
