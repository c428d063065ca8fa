"""lockkeeper's own metrics, emitted from workflow code through Temporal's workflow-safe meter.

Workflows cannot touch ``prometheus_client`` (a process-global registry is a side effect and
would count again on every replay). :func:`temporalio.workflow.metric_meter` is the sanctioned
way: the SDK drops every recording made while a workflow replays, and the values leave through
the worker's Temporal runtime, which exports them with the SDK's own metrics on the Prometheus
endpoint the worker opens (``LOCKKEEPER_METRICS_PORT``, see :mod:`workers.metrics`).

Metrics (Prometheus names; the SDK adds ``namespace``, ``task_queue`` and ``workflow_type``
labels to every one):

- ``lockkeeper_nodes_completed`` (counter, nodes): a node run finished, labels ``procedure``,
  ``cluster``, ``pool``, ``outcome`` (``done``, ``skipped``, ``degraded``, ``aborted``,
  ``failed``). "Nodes completed" is ``outcome="done"``.
- ``lockkeeper_gates_waiting`` (gauge, gates): gates of one procedure run waiting for a person
  right now, labels ``procedure``, ``cluster``, ``workflow_id``. The run's ID is a label so that
  two runs on one cluster do not overwrite each other's value; sum over it:
  ``sum by (cluster, procedure) (lockkeeper_gates_waiting)``. A run sets 0 when it finishes.
- ``lockkeeper_drains_blocked`` (counter, episodes): a drain was refused by a
  PodDisruptionBudget (or pods would not terminate) after being free, labels ``procedure``,
  ``cluster``, ``pool``. One increment per blocked episode, not per retry.

Replay: a worker that picks up a running workflow replays its history silently, so counters
count each event once across workers (each process exports its own share; Prometheus sums the
instances), and a gauge is refreshed at the next change after a restart. Call
:func:`record_gates_waiting` wherever the run's state changes (the procedure's ``touch``) to keep it fresh.

Every function must be called from workflow code (it raises ``temporalio.workflow._NotInWorkflowEventLoopError``
outside a workflow).
"""

from __future__ import annotations

from temporalio import workflow

NODES_COMPLETED = "lockkeeper_nodes_completed"
GATES_WAITING = "lockkeeper_gates_waiting"
DRAINS_BLOCKED = "lockkeeper_drains_blocked"

#: Name → (kind, description, unit) of every metric above; the worker's docs and tests read it.
METRICS: dict[str, tuple[str, str, str]] = {
    NODES_COMPLETED: ("counter", "Node runs finished, by outcome (done = completed).", "nodes"),
    GATES_WAITING: ("gauge", "Gates of a procedure run waiting for a person.", "gates"),
    DRAINS_BLOCKED: ("counter", "Drains blocked by a PodDisruptionBudget or terminating pods (episodes).", "drains"),
}


def record_node_finished(*, procedure: str, cluster: str, pool: str, outcome: str) -> None:
    """Count one finished node run (``outcome``: done, skipped, degraded, aborted, failed)."""
    kind, desc, unit = METRICS[NODES_COMPLETED]
    workflow.metric_meter().create_counter(NODES_COMPLETED, desc, unit).add(
        1, {"procedure": procedure, "cluster": cluster, "pool": pool, "outcome": outcome}
    )


def record_gates_waiting(*, procedure: str, cluster: str, waiting: int) -> None:
    """Set how many gates of this run wait for a decision now (>= 0); labelled with the run's
    workflow ID (see the module doc)."""
    kind, desc, unit = METRICS[GATES_WAITING]
    workflow.metric_meter().create_gauge(GATES_WAITING, desc, unit).set(
        max(0, int(waiting)),
        {"procedure": procedure, "cluster": cluster, "workflow_id": workflow.info().workflow_id},
    )


def record_drain_blocked(*, procedure: str, cluster: str, pool: str) -> None:
    """Count one blocked-drain episode (call on the transition into blocked, not on each retry)."""
    kind, desc, unit = METRICS[DRAINS_BLOCKED]
    workflow.metric_meter().create_counter(DRAINS_BLOCKED, desc, unit).add(
        1, {"procedure": procedure, "cluster": cluster, "pool": pool}
    )
