"""Every benchmark script starts: ``--help`` imports all it needs and exits 0.

The benchmarks run only by hand (they print figures and assert nothing), so nothing else would
notice one that no longer imports: ``fleet.py`` imported a helper that a review had renamed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py") if 'if __name__ == "__main__"' in p.read_text())


def test_the_scripts_are_found() -> None:
    assert {"rollout_overhead.py", "multi_pool.py", "fleet.py", "window_floor.py"} <= set(SCRIPTS), SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_benchmark_script_starts(script: str) -> None:
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{script} --help exited {done.returncode}:\n{done.stderr[-2000:]}"
    assert "usage" in done.stdout.lower(), done.stdout[:500]
