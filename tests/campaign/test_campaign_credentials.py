"""A cluster's worker carries that cluster's credentials only, and only that cluster's work
reaches it (issue 38: "a worker for cluster A cannot act on cluster B").

Three simulated clusters, one ``lockkeeper worker`` process per cluster (``LOCKKEEPER_CLUSTER`` +
``LOCKKEEPER_CLUSTER_QUEUES``, as ``lockkeeper worker --cluster NAME`` sets them) started with
that cluster's kubeconfig, and a campaign of a one-node drain across the three. Judged from
outside the workers, by what the operating system and Temporal saw:

- credentials: each worker's environment names its own cluster's kubeconfig and no other
  cluster's (file, server address), and that file holds one cluster, its own;
- reach: each worker's TCP connections, sampled from /proc all through the campaign, go to its
  own cluster's API server and never to another's;
- work: every workflow task and activity of a cluster's child was taken by that cluster's worker
  (the ``identity`` of each started event in the child's history), and the only poller of a
  cluster's task queues is that cluster's worker.

Shared queues would put a cluster's tasks on another cluster's worker; shared credentials would
connect a worker to another cluster's API server: either fails this test.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.api.enums.v1 import EventType, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from tests.campaign.test_campaign_e2e import CLUSTERS, PER_CLUSTER, _fleet, _files, lk
from workers.settings import cluster_task_queue
from workflows.campaign.models import CampaignResult

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

STARTED = {EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED: "workflow_task_started_event_attributes",
           EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED: "activity_task_started_event_attributes"}


def peer_ports(pid: int) -> set[int]:
    """The remote ports of ``pid``'s established TCP connections (Linux: its socket inodes in
    /proc/PID/fd matched against /proc/PID/net/tcp and tcp6); empty once it is gone."""
    inodes = set()
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return set()
    for fd in fds:
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:["):-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[9] in inodes and f[3] == "01":  # 01: ESTABLISHED
                ports.add(int(f[2].rsplit(":", 1)[1], 16))
    return ports


def environ(pid: int) -> dict[str, str]:
    """``pid``'s environment (/proc/PID/environ)."""
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode(errors="replace").partition("=")[::2] for item in raw if b"=" in item)


async def test_each_cluster_worker_holds_and_reaches_only_its_own_cluster(
    dev_server: Any, temporal_client: Client, sim_factory: Any, worker_process_factory: Any, task_queue: str, tmp_path: Path
) -> None:
    sims, workers = await _fleet(dev_server, sim_factory, worker_process_factory, task_queue)
    pids = {c: workers[c]._proc.pid for c in CLUSTERS}  # noqa: SLF001 - the test reads the worker's pid
    port_of = {sims[c].port: c for c in CLUSTERS}
    identity = {c: f"lockkeeper-worker-{pids[c]}@{socket.gethostname()}" for c in CLUSTERS}

    # Credentials: the worker's environment and the one kubeconfig it names.
    for c in CLUSTERS:
        env = environ(pids[c])
        assert env.get("KUBECONFIG") == str(sims[c].kubeconfig_path), (c, env.get("KUBECONFIG"))
        assert env.get("LOCKKEEPER_CLUSTER") == c
        text = "\n".join(f"{k}={v}" for k, v in env.items())
        for other in CLUSTERS:
            if other != c:
                assert str(sims[other].kubeconfig_path) not in text and sims[other].url not in text, (c, other)
        config = yaml.safe_load(Path(env["KUBECONFIG"]).read_text())
        assert [x["cluster"]["server"] for x in config["clusters"]] == [sims[c].url], (c, config["clusters"])

    node = sorted(n["metadata"]["name"] for n in sims["east"].store.list("nodes"))[0]
    clusters, inp = _files(tmp_path, node, failing="none")
    seen: dict[str, set[str]] = {c: set() for c in CLUSTERS}
    done = asyncio.Event()

    async def sample() -> None:
        while not done.is_set():
            for c in CLUSTERS:
                seen[c] |= {port_of[p] for p in peer_ports(pids[c]) if p in port_of}
            await asyncio.sleep(0.05)

    sampler = asyncio.ensure_future(sample())
    try:
        code, out, err = await lk(dev_server.address, task_queue, "start", "campaign", "--procedure", "drain", "--clusters",
                                  str(clusters), "-f", str(inp), "--approve-each", "none", "-o", "json", env=PER_CLUSTER)
        assert code == 0, out + err
        wid = json.loads(out)["workflow_id"]
        res = await asyncio.wait_for(temporal_client.get_workflow_handle(wid, result_type=CampaignResult).result(), 180)
    finally:
        done.set()
        await sampler
    assert res.outcome == "completed" and {c.state for c in res.clusters} == {"done"}, res.message
    # Reach: each worker talked to its own API server (the sampling saw it) and to no other.
    assert seen == {c: {c} for c in CLUSTERS}, seen
    # Work: every task of a cluster's child was taken by that cluster's worker.
    for c in CLUSTERS:
        took = set()
        async for e in temporal_client.get_workflow_handle(f"{wid}/{c}").fetch_history_events():
            if e.event_type in STARTED:
                took.add(getattr(e, STARTED[e.event_type]).identity)
        assert took == {identity[c]}, (c, took, identity)
    # And nobody else polls a cluster's queues.
    for c in CLUSTERS:
        for kind in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
            resp = await temporal_client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
                namespace=temporal_client.namespace, task_queue=TaskQueue(name=cluster_task_queue(task_queue, c)),
                task_queue_type=kind))
            assert {p.identity for p in resp.pollers} == {identity[c]}, (c, kind, [p.identity for p in resp.pollers])
