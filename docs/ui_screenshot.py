"""Take docs/temporal-ui-gate.png: the Temporal Web UI's "User Metadata" tab (static summary and
the workflow's current details) on a rollout waiting at a gate.

Starts the embedded dev server with its UI, clustersim's R2 scenario, a worker and a rollout with
a gate before each pool; once the gate waits, drives headless Chromium (Debian package
``chromium``) over the DevTools protocol, waits for the single-page app to render and captures
the page. Run from the repository root: ``.venv/bin/python docs/ui_screenshot.py``.
"""

from __future__ import annotations

import asyncio
import base64
import subprocess
import tempfile
from pathlib import Path

import aiohttp
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from clustersim import ClusterSim
from lockkeeper.devserver import DevServer, free_port
from lockkeeper.procs import WorkerProcess
from workflows.machineconfig.models import MachineConfigRolloutInput, RolloutStatus

OUT = Path(__file__).parent / "temporal-ui-gate.png"


async def shoot(url: str, out: Path, wait: float = 10.0) -> None:
    """Open ``url`` in headless Chromium, wait ``wait`` seconds, write a PNG to ``out``."""
    port = free_port()
    profile = tempfile.mkdtemp()
    proc = subprocess.Popen(
        ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", f"--remote-debugging-port={port}",
         f"--user-data-dir={profile}", "--window-size=1400,1400", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        async with aiohttp.ClientSession() as s:
            targets: list = []
            for _ in range(100):
                try:
                    async with s.get(f"http://127.0.0.1:{port}/json") as r:
                        targets = await r.json()
                        break
                except aiohttp.ClientError:
                    await asyncio.sleep(0.2)
            page = next(t for t in targets if t["type"] == "page")
            async with s.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                n = 0

                async def call(method: str, **params: object) -> dict:
                    nonlocal n
                    n += 1
                    await ws.send_json({"id": n, "method": method, "params": params})
                    while True:
                        msg = await ws.receive_json()
                        if msg.get("id") == n:
                            return msg

                await call("Emulation.setDeviceMetricsOverride", width=1400, height=1400, deviceScaleFactor=1, mobile=False)
                await call("Page.navigate", url=url)
                await asyncio.sleep(wait)  # the UI renders after its API calls
                res = await call("Page.captureScreenshot", format="png")
                out.write_bytes(base64.b64decode(res["result"]["data"]))
    finally:
        proc.terminate()
        proc.wait()


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with DevServer(Path(tmp) / "temporal") as server:
            sim = ClusterSim("r2-pdb-blocked", time_scale=0.05)
            await sim.start()
            worker = WorkerProcess(address=server.address, kubeconfig=sim.kubeconfig_path, task_queue="lockkeeper",
                                   log_path=Path(tmp) / "worker.log")
            try:
                await worker.start()
                client = await Client.connect(server.address, data_converter=pydantic_data_converter)
                handle = await client.start_workflow(
                    "MachineConfigRolloutWorkflow",
                    MachineConfigRolloutInput(cluster="r2", approval="pool", approvals={"requested_by": "alice"}),
                    id="rollout-r2-demo", task_queue="lockkeeper",
                    static_summary="machineconfig-rollout on cluster r2 · pools worker · requested by alice",
                )
                for _ in range(600):
                    st = await handle.query("status", result_type=RolloutStatus)
                    if any(g.state == "waiting" for g in st.gates):
                        break
                    await asyncio.sleep(0.2)
                await shoot(f"{server.ui_url}/namespaces/default/workflows/{handle.id}/{handle.result_run_id}/user-metadata", OUT)
                print(OUT)
                await handle.terminate("screenshot taken")
            finally:
                await worker.stop()
                await sim.stop()


if __name__ == "__main__":
    asyncio.run(main())
