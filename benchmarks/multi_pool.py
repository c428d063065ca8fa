"""R1's three pools (master 3, infra 2, app 4 nodes; maxUnavailable 1): ``pool_order`` parallel
against sequential, against the ideal (prints figures; asserts nothing).

Each run gets a fresh clustersim ``r1-ovn-interrupted`` (same ``--time-scale``), a real Temporal
dev server and a lockkeeper worker process. First every pool is rolled alone, which gives each
pool's own time; the ideal for parallel pools is the slowest pool's own time (issue 16: parallel
at most 1.05x of it). Then the three pools sequentially and in parallel.

    python benchmarks/multi_pool.py [--time-scale 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clustersim import ClusterSim  # noqa: E402
from lockkeeper.devserver import DevServer  # noqa: E402
from lockkeeper.procs import WorkerProcess  # noqa: E402
from workers.client import connect  # noqa: E402
from workers.settings import Settings  # noqa: E402
from workflows.machineconfig.models import MachineConfigRolloutInput, MachineConfigRolloutResult  # noqa: E402

POOLS = ("master", "infra", "app")


async def roll(server: DevServer, tmp: Path, scale: float, pools: list[str], order: str) -> tuple[float, str]:
    """One rollout of ``pools`` with ``order`` on a fresh R1; (seconds, outcome)."""
    async with ClusterSim("r1-ovn-interrupted", time_scale=scale) as sim:
        queue = f"mp-{uuid.uuid4().hex[:6]}"
        worker = WorkerProcess(address=server.address, kubeconfig=sim.kubeconfig_path, task_queue=queue,
                               log_path=tmp / f"worker-{queue}.log")
        await worker.start()
        try:
            client = await connect(Settings(temporal_address=server.address))
            started = time.monotonic()
            handle = await client.start_workflow(
                "MachineConfigRolloutWorkflow",
                MachineConfigRolloutInput(
                    cluster=f"r1-{queue}", pools=pools, max_unavailable=1, pool_order=order, approvals={"requested_by": "benchmark"},
                    drain={"backoff_initial_seconds": 1, "backoff_max_seconds": 5, "wait_seconds": 10},
                    daemon={"drain_deadline_seconds": 3600 * scale, "uncordon_deadline_seconds": 600 * scale},
                ),
                id=f"mp-{queue}", task_queue=queue, result_type=MachineConfigRolloutResult,
            )
            result = await handle.result()
            return time.monotonic() - started, result.outcome
        finally:
            await worker.stop()


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="lk-mp-") as tmp:
        async with DevServer(Path(tmp) / "temporal", headless=True) as server:
            own: dict[str, float] = {}
            for pool in POOLS:
                own[pool], outcome = await roll(server, Path(tmp), args.time_scale, [pool], "sequential")
                print(f"pool {pool} alone: {own[pool]:.1f}s ({outcome})")
            seq, seq_outcome = await roll(server, Path(tmp), args.time_scale, list(POOLS), "sequential")
            par, par_outcome = await roll(server, Path(tmp), args.time_scale, list(POOLS), "parallel")
    ideal = max(own.values())
    print(f"ideal (slowest pool's own time, {max(own, key=own.get)}): {ideal:.1f}s; sum of the pools' own times {sum(own.values()):.1f}s")
    print(f"sequential: {seq:.1f}s ({seq_outcome}), {seq / ideal:.2f}x ideal")
    print(f"parallel:   {par:.1f}s ({par_outcome}), {par / ideal:.2f}x ideal (target <= 1.05)")
    print(f"parallel saves {seq - par:.1f}s ({(1 - par / seq) * 100:.0f}%) against sequential")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--time-scale", type=float, default=0.05)
    asyncio.run(main(p.parse_args()))
