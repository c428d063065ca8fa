"""The README's procedure sections, run as written (tests/support/readme_run.py has the conventions).

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

from tests.support.readme_run import SectionRun

pytestmark = pytest.mark.e2e

FIRST_HOUR = "The first hour"
R3A = "GlusterFS recovery (R3a, `r3-okd310-upgrade`)"
R4 = "Runtime migration CRI-O -> Docker (R4, `r4-crio-to-docker`)"
R5 = "VXLAN port change (R5, `r5-vxlan-port`)"
R1 = "Network migration SDN -> OVN-Kubernetes (R1, `r1-sdn-to-ovn`)"
#: The simulated cluster's clock in these runs (``sim serve --time-scale``'s default).
FAST = {"CLUSTERSIM_TIME_SCALE": "0.2"}
R3D = "Control-plane upgrade, node upgrade, node-selector migration and the whole upgrade (R3d/R3e, `r3-okd310-upgrade`)"
#: The sections these tests run.
RUN = (FIRST_HOUR, R3A, R3D, R4, R5, R1)
#: README sections with shell blocks that are not run here, each with the reason and what
#: covers it instead. A new section must be run above or named here.
NOT_RUN = {
    "lockkeeper": "the two set-up commands: CI runs the test command itself; the demo has its own test "
                  "(tests/cli/test_cli_surface_demo.py)",
    "Node order: `--order`, `--node-order FILE`": "examples on a cluster the reader has; "
                                                   "tests/machineconfig/test_rollout_order_e2e.py runs --order newest-first",
    "Holding a node": "examples on a run the reader has; tests/kit/test_holds_cli.py runs hold, status, release",
    "Maintenance windows": "examples on a cluster the reader has, waiting up to a week; "
                           "tests/kit/test_kit_windows_wf.py runs windows on the time-skipping server",
    "Alert gate: no node starts while Prometheus alerts": "needs a node made NotReady by hand while Prometheus runs; "
                                                          "tests/machineconfig/test_rollout_alert_gate_e2e.py runs it",
    "A campaign across clusters (issue 38)": "needs a cluster and a worker per cluster, with kubeconfigs the reader "
                                             "has; tests/campaign/test_campaign_e2e.py runs three simulated clusters",
}


async def run_sections(tmp_path: Path, dev_server: Any, task_queue: str, sections: list[str], **env: str) -> list[str]:
    run = SectionRun(tmp_path, dev_server.address, task_queue, extra_env=env)
    try:
        return await asyncio.to_thread(run.run, sections)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n\ntranscript:\n" + "\n".join(run.transcript[-40:])) from None


def test_every_readme_section_with_commands_is_run_or_says_why_not() -> None:
    from tests.support import readme

    sections = {b.section for b in readme.blocks()}
    assert sections - set(RUN) - set(NOT_RUN) == set(), "README sections neither run nor excused"
    assert set(NOT_RUN) - sections == set(), "NOT_RUN names sections the README no longer has"


async def test_the_first_hour_runs_as_written(tmp_path: Path, dev_server: Any, task_queue: str) -> None:
    """R2: a rollout with its pool gate approved and the blocked drain decided."""
    transcript = await run_sections(tmp_path, dev_server, task_queue, [FIRST_HOUR])
    assert any(line.startswith("$ lockkeeper decide") for line in transcript), transcript



@pytest.mark.timeout(600)
async def test_the_r3_upgrade_sections_run_as_written(tmp_path: Path, dev_server: Any, task_queue: str) -> None:
    """R3a then R3d/R3e on one simulator, as the README tells it: the GlusterFS recovery, the
    control plane (with R3d's missing CA fixed over SSH), the infra nodes, the selector migration."""
    transcript = await run_sections(tmp_path, dev_server, task_queue, [R3A, R3D], **FAST)
    assert any("node-selector-migration" in line for line in transcript), transcript


@pytest.mark.timeout(600)
async def test_the_runtime_migration_section_runs_as_written(tmp_path: Path, dev_server: Any, task_queue: str) -> None:
    transcript = await run_sections(tmp_path, dev_server, task_queue, [R4], **FAST)
    assert any("post-check/install" in line for line in transcript), transcript


@pytest.mark.timeout(600)
async def test_the_vxlan_section_runs_as_written_and_back(tmp_path: Path, dev_server: Any, task_queue: str) -> None:
    transcript = await run_sections(tmp_path, dev_server, task_queue, [R5], **FAST)
    assert any("--full" in line for line in transcript), transcript


@pytest.mark.timeout(900)
async def test_the_network_migration_section_runs_as_written(tmp_path: Path, dev_server: Any, task_queue: str) -> None:
    transcript = await run_sections(tmp_path, dev_server, task_queue, [R1], **FAST)
    assert any("approve" in line and "cleanup" in line for line in transcript), transcript
