"""Fixtures for the etcd procedure tests: a lockkeeper worker subprocess on the session dev server
(the real 3-member etcd cluster, ``etcd_cluster``, is in tests/conftest.py: the control-plane
upgrade's tests use it too).

The worker needs no cluster for these procedures: it runs host-only (``LOCKKEEPER_HOST_ONLY``),
without any kubeconfig, exactly as a worker on a bastion host would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from lockkeeper.procs import WorkerProcess


@pytest.fixture
def etcd_worker(
    dev_server: Any, task_queue: str, worker_process_factory: Callable[..., WorkerProcess]
) -> WorkerProcess:
    """An unstarted worker subprocess on ``task_queue`` (``await etcd_worker.start()``)."""
    return worker_process_factory(
        address=dev_server.address, namespace=dev_server.namespace, kubeconfig=None,
        task_queue=task_queue, env={"LOCKKEEPER_LOG_LEVEL": "info", "LOCKKEEPER_HOST_ONLY": "true"},
    )
