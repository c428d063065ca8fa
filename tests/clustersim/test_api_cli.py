"""`python -m clustersim` (the sim CLI) serves a scenario, prints its kubeconfig and stops on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path


async def test_serve_prints_kubeconfig_and_stops_on_sigterm(tmp_path: Path, kubectl_path: str) -> None:
    kc = tmp_path / "kubeconfig"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "clustersim", "serve", "--scenario", "r2-pdb-blocked", "--time-scale", "0.01",
        "--kubeconfig-out", str(kc), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        first = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip()
        url = (await asyncio.wait_for(proc.stdout.readline(), 10)).decode().strip()
        assert first == f"KUBECONFIG={kc}"
        assert url.startswith("URL=http://127.0.0.1:")
        assert url.removeprefix("URL=") in kc.read_text()
        get = await asyncio.create_subprocess_exec(kubectl_path, "--kubeconfig", str(kc), "get", "nodes",
                                                   "-o", "name", stdout=asyncio.subprocess.PIPE)
        out, _ = await asyncio.wait_for(get.communicate(), 30)
        assert get.returncode == 0
        assert "node/okd-worker-01" in out.decode().split()
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = await asyncio.wait_for(proc.wait(), 20)
    assert rc == 0
    assert "stopped" in (await proc.stderr.read()).decode()


async def test_scenarios_lists_bundled_scenarios() -> None:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "clustersim", "scenarios",
                                                stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0
    names = [line.split("\t")[0] for line in out.decode().splitlines()]
    assert {"r1-ovn-interrupted", "r2-pdb-blocked"} <= set(names)
