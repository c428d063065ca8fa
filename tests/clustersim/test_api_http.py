"""Raw HTTP checks of the simulated API server: discovery, watch details, bodies, faults, request record."""

from __future__ import annotations

import asyncio
import time
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from clustersim.sim import ClusterSim
from clustersim.store import Store



def _ld(field: int, payload: bytes) -> bytes:
    """A protobuf length-delimited field (payloads here are < 128 bytes)."""
    return bytes([field << 3 | 2, len(payload)]) + payload


# k8s\0 + runtime.Unknown{typeMeta{apiVersion:"v1",kind:"DeleteOptions"}, raw=DeleteOptions{gracePeriodSeconds:0,
# preconditions{uid:"u"}}}, the shape kubectl >= 1.32 sends.
PROTO_DELETE_GRACE_0 = b"k8s\x00" + _ld(1, _ld(1, b"v1") + _ld(2, b"DeleteOptions")) + _ld(
    2, b"\x08\x00" + _ld(2, _ld(1, b"u")))


@pytest.fixture
async def http(sim: ClusterSim) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=sim.url) as s:
        yield s


async def read_lines(resp: aiohttp.ClientResponse, n: int, timeout: float = 5) -> list[dict]:
    out = []
    while len(out) < n:
        line = await asyncio.wait_for(resp.content.readline(), timeout)
        if not line:
            break
        if line.strip():
            out.append(json.loads(line))
    return out


async def test_discovery(http: aiohttp.ClientSession) -> None:
    api = await (await http.get("/api/")).json()
    assert api["kind"] == "APIVersions" and api["versions"] == ["v1"]
    groups = await (await http.get("/apis")).json()
    names = {g["name"] for g in groups["groups"]}
    assert {"apps", "policy", "machineconfiguration.openshift.io", "config.openshift.io",
            "operator.openshift.io"} <= names
    v1 = await (await http.get("/api/v1")).json()
    eviction = next(r for r in v1["resources"] if r["name"] == "pods/eviction")
    assert eviction == {"name": "pods/eviction", "singularName": "", "namespaced": True, "group": "policy",
                        "version": "v1", "kind": "Eviction", "verbs": ["create"]}
    nodes = next(r for r in v1["resources"] if r["name"] == "nodes")
    assert nodes["namespaced"] is False and "watch" in nodes["verbs"] and nodes["shortNames"] == ["no"]
    mc = await (await http.get("/apis/machineconfiguration.openshift.io/v1/")).json()
    assert {r["name"] for r in mc["resources"]} == {"machineconfigs", "machineconfigpools",
                                                    "machineconfigpools/status"}
    version = await http.get("/version/")
    assert version.status == 200 and (await version.json())["major"] == "1"
    missing = await http.get("/apis/nope.example.com/v1")
    assert missing.status == 404 and (await missing.json())["reason"] == "NotFound"


async def test_watch_list_initial_events_end_bookmark(sim: ClusterSim, http: aiohttp.ClientSession) -> None:
    params = {"watch": "True", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
              "allowWatchBookmarks": "1", "timeoutSeconds": "2", "fieldSelector": "metadata.name=node1"}
    async with http.get("/api/v1/nodes", params=params) as resp:
        assert resp.status == 200 and resp.content_type == "application/json"
        events = await read_lines(resp, 2)
        assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "node1"
        assert events[0]["object"]["kind"] == "Node" and events[0]["object"]["apiVersion"] == "v1"
        assert events[1] == {"type": "BOOKMARK", "object": {"kind": "Node", "apiVersion": "v1", "metadata": {
            "resourceVersion": str(sim.store.resource_version),
            "annotations": {"k8s.io/initial-events-end": "true"}}}}
        # A change that moves node1 out of a label-selected watch would be DELETED; here it stays MODIFIED.
        sim.store.mutate("nodes", "node1", None, lambda n: n["metadata"]["labels"].update(x="y"))
        sim.store.mutate("nodes", "node2", None, lambda n: n["metadata"]["labels"].update(x="y"))
        (modified,) = await read_lines(resp, 1)
        assert modified["type"] == "MODIFIED" and modified["object"]["metadata"]["labels"]["x"] == "y"
        rest = await read_lines(resp, 10)  # stream ends at timeoutSeconds with a final bookmark
        assert [e["type"] for e in rest] == ["BOOKMARK"]


async def test_watch_selector_transitions(sim: ClusterSim, http: aiohttp.ClientSession) -> None:
    params = {"watch": "1", "labelSelector": "pool=infra", "timeoutSeconds": "2"}
    async with http.get("/api/v1/nodes", params=params) as resp:
        for _ in range(100):
            if sim.faults.open_watches:
                break
            await asyncio.sleep(0.01)
        sim.store.mutate("nodes", "node3", None, lambda n: n["metadata"]["labels"].update(pool="infra"))
        sim.store.mutate("nodes", "node3", None, lambda n: n["metadata"]["labels"].pop("pool"))
        events = await read_lines(resp, 2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "node3"),
                                                                              ("DELETED", "node3")]


async def test_expired_from_history(tmp_path: Path) -> None:
    async with ClusterSim(None, kubeconfig_path=tmp_path / "kc", event_history=5) as sim:
        for i in range(10):
            sim.store.create("namespaces", {"metadata": {"name": f"ns{i}"}})
        async with aiohttp.ClientSession(base_url=sim.url) as http:
            async with http.get("/api/v1/namespaces", params={"watch": "true", "resourceVersion": "2"}) as resp:
                assert resp.status == 200
                (err,) = await read_lines(resp, 5)
    assert err == {"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "too old resource version: 2 (6)", "reason": "Expired", "code": 410}}


async def test_protobuf_delete_options_and_dry_run(sim: ClusterSim, http: aiohttp.ClientSession) -> None:
    headers = {"Content-Type": "application/vnd.kubernetes.protobuf"}
    resp = await http.delete("/api/v1/namespaces/app/pods/web-1", data=PROTO_DELETE_GRACE_0, headers=headers)
    # The precondition uid "u" does not match: 409, proving the body was decoded rather than rejected.
    assert resp.status == 409 and (await resp.json())["reason"] == "Conflict"
    resp = await http.delete("/api/v1/namespaces/app/pods/web-1", params={"dryRun": "All"},
                             json={"gracePeriodSeconds": 0})
    assert resp.status == 200 and sim.store.try_get("pods", "web-1", "app") is not None
    resp = await http.delete("/api/v1/namespaces/app/pods/web-1", data=b"k8s\x00garbage", headers=headers)
    assert resp.status == 200
    assert (await resp.json())["metadata"]["deletionGracePeriodSeconds"] == 30


async def test_create_without_content_type_patch_errors(sim: ClusterSim, http: aiohttp.ClientSession) -> None:
    body = json.dumps({"metadata": {"name": "cfg"}, "data": {"a": "1"}}).encode()
    resp = await http.post("/api/v1/namespaces/app/configmaps", data=body, headers={"Content-Type": ""})
    assert resp.status == 201
    created = await resp.json()
    assert created["metadata"]["resourceVersion"] == str(sim.store.resource_version)
    again = await http.post("/api/v1/namespaces/app/configmaps", data=body)
    assert again.status == 409 and (await again.json())["reason"] == "AlreadyExists"
    bad = await http.patch("/api/v1/namespaces/app/configmaps/cfg", data=b"{}",
                           headers={"Content-Type": "text/plain"})
    assert bad.status == 415 and (await bad.json())["reason"] == "UnsupportedMediaType"
    dry = await http.patch("/api/v1/namespaces/app/configmaps/cfg", params={"dryRun": "All"},
                           data=b'{"data":{"a":"2"}}', headers={"Content-Type": "application/merge-patch+json"})
    assert (await dry.json())["data"]["a"] == "2"
    assert sim.store.get("configmaps", "cfg", "app")["data"]["a"] == "1"


async def test_delete_collection(sim: ClusterSim, http: aiohttp.ClientSession) -> None:
    resp = await http.delete("/api/v1/namespaces/app/pods", params={"labelSelector": "app=web",
                                                                   "gracePeriodSeconds": "0"})
    assert resp.status == 200
    assert sorted(p["metadata"]["name"] for p in (await resp.json())["items"]) == ["web-1", "web-2"]
    assert sorted(p["metadata"]["name"] for p in sim.store.list("pods", "app")) == [
        "agent-node1", "agent-node2", "agent-node3", "db-1"]


async def test_fault_injection_and_request_record(sim: ClusterSim, http: aiohttp.ClientSession) -> None:
    sim.faults.configure(error_429=1.0, retry_after_seconds=3, verbs="mutating")
    resp = await http.get("/api/v1/nodes/node1")
    assert resp.status == 200  # reads are not faulted
    resp = await http.patch("/api/v1/nodes/node1", data=b'{"metadata":{"labels":{"f":"1"}}}',
                            headers={"Content-Type": "application/merge-patch+json"})
    assert resp.status == 429 and resp.headers["Retry-After"] == "3"
    assert (await resp.json())["reason"] == "TooManyRequests"
    # Admin endpoints are never faulted and drive the same injector.
    resp = await http.post("/_sim/faults", json={"clear": True, "error_503": 1.0, "verbs": ["get"]})
    assert resp.status == 200
    assert (await http.get("/api/v1/nodes/node1")).status == 503
    assert (await http.get("/api/v1/nodes")).status == 200
    sim.faults.configure(error_503=0.0, timeout=1.0, timeout_seconds=0.1, verbs=[])
    with pytest.raises(aiohttp.ClientError):
        await http.get("/api/v1/nodes")
    sim.faults.clear()

    log = await (await http.get("/_sim/requests")).json()
    codes = [(e["verb"], e["resource"], e["code"]) for e in log]
    assert codes[:5] == [("get", "nodes", 200), ("patch", "nodes", 429), ("get", "nodes", 503),
                         ("list", "nodes", 200), ("list", "nodes", 0)]
    assert set(codes[5:]) <= {("list", "nodes", 0)}  # aiohttp may retry a dropped idempotent GET once
    assert sim.requests.entries(verb="patch")[0].user_agent.startswith("Python")
    assert (await http.delete("/_sim/requests")).status == 200
    assert len(sim.requests) == 0


async def test_latency_delays_matching_requests_only(sim: ClusterSim, http: aiohttp.ClientSession) -> None:
    sim.faults.configure(latency_seconds=0.3, verbs=["patch"], resources=["nodes"])
    try:
        started = time.monotonic()
        assert (await http.get("/api/v1/nodes/node1")).status == 200
        read = time.monotonic() - started
        started = time.monotonic()
        resp = await http.patch("/api/v1/nodes/node1", data=b'{"metadata":{"labels":{"slow":"1"}}}',
                                headers={"Content-Type": "application/merge-patch+json"})
        written = time.monotonic() - started
        assert resp.status == 200 and sim.store.get("nodes", "node1")["metadata"]["labels"]["slow"] == "1"
        assert written >= 0.3 and read < 0.3, (written, read)
        assert (await (await http.get("/_sim/faults")).json())["latency_seconds"] == 0.3
        with pytest.raises(ValueError, match="latency_seconds"):
            sim.faults.configure(latency_seconds=-1)
    finally:
        sim.faults.clear()
    assert sim.faults.latency_seconds == 0.0


async def test_drop_watch_streams(sim: ClusterSim, http: aiohttp.ClientSession) -> None:
    async with http.get("/api/v1/pods", params={"watch": "true", "resourceVersion": str(
            sim.store.resource_version)}) as resp:
        for _ in range(100):
            if sim.faults.open_watches:
                break
            await asyncio.sleep(0.01)
        assert sim.faults.drop_watches() == 1
        with pytest.raises(aiohttp.ClientPayloadError):
            await asyncio.wait_for(resp.content.read(), 5)


def test_store_generation_and_status_split() -> None:
    store = Store()
    store.create("daemonsets.apps", {"metadata": {"name": "d", "namespace": "x"}, "spec": {"a": 1},
                                     "status": {"numberReady": 0}})
    upd = store.update("daemonsets.apps", {"metadata": {"name": "d", "namespace": "x"}, "spec": {"a": 2},
                                           "status": {"numberReady": 5}})
    assert upd["metadata"]["generation"] == 2 and upd["status"] == {"numberReady": 0}
    st = store.update("daemonsets.apps", {"metadata": {"name": "d", "namespace": "x"}, "spec": {"a": 3},
                                          "status": {"numberReady": 5}}, subresource="status")
    assert st["metadata"]["generation"] == 2 and st["spec"] == {"a": 2} and st["status"] == {"numberReady": 5}
    assert int(st["metadata"]["resourceVersion"]) == store.resource_version == 3


async def test_admin_node_fault_endpoints(sim: ClusterSim, http: aiohttp.ClientSession, tmp_path: Path) -> None:
    resp = await http.post("/_sim/nodes/node1/fault", json={"kind": "degrade"})
    assert resp.status == 503  # the agent-less fixture has nobody to inject into
    async with ClusterSim("r2-pdb-blocked", time_scale=0.01, kubeconfig_path=tmp_path / "kc2") as r2:
        assert r2.agents is not None
        async with aiohttp.ClientSession(base_url=r2.url) as admin:
            assert (await (await admin.get("/_sim/healthz")).json())["ok"] is True
            ok = await admin.post("/_sim/nodes/okd-worker-01/fault", json={"kind": "degrade", "reason": "boom"})
            assert ok.status == 200
            bad = await admin.post("/_sim/nodes/okd-worker-01/fault", json={"kind": "melt"})
            assert bad.status == 400 and (await bad.json())["reason"] == "BadRequest"
            assert (await admin.delete("/_sim/nodes/okd-worker-01/fault")).status == 200
