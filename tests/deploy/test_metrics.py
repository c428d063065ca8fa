"""Metrics and health endpoints of the worker.

- The workflow-safe helpers of :mod:`workflows.kit.metrics` reach the Prometheus endpoint of a
  Temporal runtime built by :mod:`workers.metrics`, and count once although every workflow task
  replays the whole history (no workflow cache).
- A worker subprocess with ``LOCKKEEPER_METRICS_PORT`` / ``LOCKKEEPER_HEALTH_PORT`` serves the
  SDK's metrics after a rollout, ``/healthz`` and ``/readyz``.
- After a rollout the endpoint also carries lockkeeper's own metrics (nodes completed, gates
  waiting, blocked drains), which the rollout workflow records through :mod:`workflows.kit.metrics`.
"""

from __future__ import annotations

import asyncio
import re
import urllib.error
import urllib.request
import uuid
from datetime import timedelta

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

from clustersim.scenario import generate_scenario
from lockkeeper.devserver import free_port
from tests.support.harness import drive, start_rollout
from workers.metrics import prometheus_runtime
from workflows.kit import metrics as lk_metrics
from workflows.machineconfig.models import PROCEDURE_MACHINECONFIG_ROLLOUT

SCALE = 0.05
FAST = dict(
    drain={"backoff_initial_seconds": 1, "backoff_max_seconds": 3, "wait_seconds": 5},
    daemon={"drain_deadline_seconds": 3600 * SCALE, "uncordon_deadline_seconds": 600 * SCALE},
)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return resp.read().decode()


def samples(text: str, name: str, **labels: str) -> list[float]:
    """Values of the samples of ``name`` whose labels include ``labels``."""
    out = []
    for line in text.splitlines():
        m = re.match(rf"^{re.escape(name)}\{{(.*)\}} (\S+)$", line)
        if not m:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1)))
        if all(have.get(k) == v for k, v in labels.items()):
            out.append(float(m.group(2)))
    return out


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


@workflow.defn
class MetricsProbeWorkflow:
    """Records each lockkeeper metric once, waits for a signal (so a later workflow task replays
    the recordings), then sets the gauge to 0 as a finished run does."""

    def __init__(self) -> None:
        self._go = False

    @workflow.signal
    def go(self) -> None:
        self._go = True

    @workflow.run
    async def run(self, cluster: str) -> None:
        lk_metrics.record_node_finished(procedure="probe", cluster=cluster, pool="worker", outcome="done")
        lk_metrics.record_drain_blocked(procedure="probe", cluster=cluster, pool="worker")
        lk_metrics.record_gates_waiting(procedure="probe", cluster=cluster, waiting=2)
        await workflow.wait_condition(lambda: self._go)
        await workflow.sleep(timedelta(milliseconds=10))
        lk_metrics.record_gates_waiting(procedure="probe", cluster=cluster, waiting=0)


async def test_workflow_metrics_reach_the_endpoint_once_despite_replay(dev_server, task_queue) -> None:
    port = free_port()
    runtime = prometheus_runtime(f"127.0.0.1:{port}")
    client = await Client.connect(dev_server.address, namespace=dev_server.namespace, runtime=runtime)
    cluster = f"probe-{uuid.uuid4().hex[:6]}"
    # max_cached_workflows=0: every workflow task replays the history from the start, so a
    # helper that recorded during replay would count 3 times here.
    async with Worker(client, task_queue=task_queue, workflows=[MetricsProbeWorkflow], max_cached_workflows=0):
        handle = await client.start_workflow(MetricsProbeWorkflow.run, cluster, id=f"probe-{uuid.uuid4().hex}", task_queue=task_queue)
        await asyncio.sleep(0.5)
        text = scrape(port)
        assert samples(text, lk_metrics.GATES_WAITING, cluster=cluster, procedure="probe", workflow_id=handle.id) == [2]
        await handle.signal(MetricsProbeWorkflow.go)
        await handle.result()
        await asyncio.sleep(0.5)
        text = scrape(port)
    labels = dict(cluster=cluster, procedure="probe", workflow_type="MetricsProbeWorkflow")
    assert samples(text, lk_metrics.NODES_COMPLETED, outcome="done", pool="worker", **labels) == [1]
    assert samples(text, lk_metrics.DRAINS_BLOCKED, pool="worker", **labels) == [1]
    assert samples(text, lk_metrics.GATES_WAITING, workflow_id=handle.id, **labels) == [0]
    for name, (kind, _, _) in lk_metrics.METRICS.items():
        assert f"# TYPE {name} {kind}" in text


async def _rollout_with_metrics_worker(sim_factory, worker_process_factory, dev_server, temporal_client, task_queue):
    sim = await sim_factory(
        generate_scenario(nodes=2, pods=4, pools={"worker": 2}, name="metrics", reboot_seconds=20,
                          pod_start_seconds=1, namespaces=1, pods_per_deployment=2),
        time_scale=SCALE,
    )
    metrics_port, health_port = free_port(), free_port()
    worker = worker_process_factory(
        address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue,
        env={"LOCKKEEPER_METRICS_PORT": str(metrics_port), "LOCKKEEPER_HEALTH_PORT": str(health_port),
             "LOCKKEEPER_LISTEN_HOST": "127.0.0.1"},
    )
    await worker.start()
    handle = await start_rollout(temporal_client, task_queue, cluster="metrics", max_unavailable=1, **FAST)
    result = await drive(handle, timeout=90)
    assert result.outcome == "completed", result.message
    await asyncio.sleep(1.5)  # the core runtime exports on its own cadence
    return worker, metrics_port, health_port, scrape(metrics_port)


@pytest.mark.e2e
async def test_worker_serves_sdk_metrics_and_health(
    sim_factory, worker_process_factory, dev_server, temporal_client, task_queue
) -> None:
    worker, metrics_port, health_port, text = await _rollout_with_metrics_worker(
        sim_factory, worker_process_factory, dev_server, temporal_client, task_queue
    )
    assert http_status(f"http://127.0.0.1:{health_port}/healthz") == 200
    assert http_status(f"http://127.0.0.1:{health_port}/readyz") == 200
    assert samples(text, "temporal_workflow_completed", task_queue=task_queue, workflow_type="MachineConfigRolloutWorkflow") == [1]
    assert samples(text, "temporal_workflow_completed", task_queue=task_queue, workflow_type="NodeRolloutWorkflow") == [2]
    # Each node's drain request, cordon and first drain pass run in one drain_when_asked activity.
    assert sum(samples(text, "temporal_activity_execution_latency_count", task_queue=task_queue, activity_type="drain_when_asked")) >= 2
    assert await worker.stop() == 0
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{health_port}/healthz", timeout=2)


@pytest.mark.e2e
async def test_rollout_exports_lockkeeper_metrics(
    sim_factory, worker_process_factory, dev_server, temporal_client, task_queue
) -> None:
    worker, _, _, text = await _rollout_with_metrics_worker(
        sim_factory, worker_process_factory, dev_server, temporal_client, task_queue
    )
    await worker.stop()
    labels = dict(procedure=PROCEDURE_MACHINECONFIG_ROLLOUT, cluster="metrics", task_queue=task_queue)
    assert sum(samples(text, lk_metrics.NODES_COMPLETED, outcome="done", **labels)) == 2
    assert samples(text, lk_metrics.GATES_WAITING, **labels) == [0]
