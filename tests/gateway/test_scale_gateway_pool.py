"""Issue 16: the Kubernetes gateway's urllib3 pool holds as many connections as the worker runs
activities (local ones included) at once (the default of 5 per CPU discarded connections with 140 nodes in flight)."""

from __future__ import annotations

from pathlib import Path

from activities.kube.gateway import KubeGateway
from workers.registry import build_gateway
from workers.settings import Settings

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "http://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
"""


def _urllib3_maxsize(gateway: KubeGateway) -> int:
    return gateway._api_client.rest_client.pool_manager.connection_pool_kw["maxsize"]


def test_worker_gateway_pool_matches_activity_concurrency(tmp_path: Path):
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    # One connection per activity thread: the activities' and the local activities'.
    gateway = build_gateway(Settings(kubeconfig=path, max_concurrent_activities=140, max_concurrent_local_activities=30))
    try:
        assert gateway.pool_size == 170 and _urllib3_maxsize(gateway) == 170
    finally:
        gateway.close()


def test_pool_never_below_the_client_default(tmp_path: Path):
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    default = KubeGateway.from_kubeconfig(path)
    small = KubeGateway.from_kubeconfig(path, pool_size=1)
    try:
        assert small.pool_size == default.pool_size == _urllib3_maxsize(small)
    finally:
        default.close()
        small.close()
