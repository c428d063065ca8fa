"""``lockkeeper status ID`` as a person reads it, for tests of procedures the README runner does
not reach (tests/support/readme_run.py checks the others): the real CLI in a subprocess, table mode,
checked for Python reprs (issue 42: status is for a person)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.support.readme_run import reprs_in

LOCKKEEPER = str(Path(sys.executable).parent / "lockkeeper")


async def person_status(address: str, workflow_id: str) -> str:
    """The table-mode ``status`` of ``workflow_id`` (stdout, whitespace-normalised, wide enough
    for no wrapping); fails the test when it exits with an error or shows a Python repr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "LOCKKEEPER_"))}
    env["COLUMNS"] = "400"
    proc = await asyncio.create_subprocess_exec(LOCKKEEPER, "--address", address, "status", workflow_id, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    text = out.decode()
    assert proc.returncode in (0, 1), (proc.returncode, text, err.decode())
    assert reprs_in(text) == [], text
    return " ".join(text.split())
