"""Prometheus metrics of the worker: the Temporal SDK's runtime metrics plus lockkeeper's own.

One endpoint, served by the Temporal core runtime itself (``temporalio.runtime.PrometheusConfig``
bound to ``LOCKKEEPER_LISTEN_HOST:LOCKKEEPER_METRICS_PORT``, path ``/metrics``). It carries:

- the SDK's metrics (``temporal_workflow_completed``, ``temporal_activity_execution_latency``,
  ``temporal_worker_task_slots_available``, ``temporal_request_failure``, ...; reference:
  https://docs.temporal.io/references/sdk-metrics), names as Temporal's community dashboards
  expect them (no ``_total`` suffix, durations in milliseconds);
- lockkeeper's metrics, recorded in workflow code with :mod:`workflows.kit.metrics`
  (``lockkeeper_nodes_completed``, ``lockkeeper_gates_waiting``, ``lockkeeper_drains_blocked``)
  through ``workflow.metric_meter()``, which the SDK keeps silent during replay. Workflows
  cannot use ``prometheus_client``; going through the runtime keeps one exporter and one port.

The runtime is process-wide: :func:`install_prometheus_runtime` makes it the default runtime,
so every client connected afterwards (the worker's) reports through it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from temporalio.runtime import Runtime

    from workers.settings import Settings


def prometheus_runtime(bind_address: str) -> Runtime:
    """A Temporal runtime exporting Prometheus metrics on ``bind_address`` (``host:port``).

    Binding happens here: raises ``RuntimeError`` (from the core SDK) when the port is taken.
    """
    from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

    return Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=bind_address)))


def install_prometheus_runtime(settings: Settings) -> Runtime | None:
    """When ``settings.metrics_port`` is set, build :func:`prometheus_runtime` on
    ``listen_host:metrics_port`` and make it the process's default runtime (clients connected
    later use it). Returns it, or None when metrics are off."""
    if settings.metrics_port is None:
        return None
    from temporalio.runtime import Runtime

    host = settings.listen_host
    # IPv6 literals need brackets in a socket address.
    address = f"[{host}]:{settings.metrics_port}" if ":" in host else f"{host}:{settings.metrics_port}"
    runtime = prometheus_runtime(address)
    Runtime.set_default(runtime, error_if_already_set=False)
    return runtime
