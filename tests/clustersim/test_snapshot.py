"""Snapshots and diffs of the whole simulated world (clustersim.snapshots), against running
simulators: changes made with real kubectl, the kubernetes client and real SSH (asyncssh) appear
as exactly the right entries; reboots and restarts are listed apart; ignore patterns are counted.

OpenShift 4 world: ``r1-sdn-to-ovn`` (8 nodes, agents, CNO and MCC models, hosts). OpenShift 3.11
world: ``r5-vxlan-port`` (7 nodes with hosts, masters and the SDN model), and ``r3-okd310-upgrade``
for GlusterFS.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import asyncssh
import pytest
from kubernetes import client, config

from activities.cluster.models import ObjectRef
from activities.kube.resources import RESOURCES as GATEWAY_RESOURCES
from activities.kube.resources import resource as gateway_resource
from clustersim.agents.logic import pod_ready
from clustersim.hosts import HostsComponent
from clustersim.resources import RESOURCES
from clustersim.sim import ClusterSim
from clustersim.snapshots import (
    Diff,
    FieldChange,
    Snapshot,
    SnapshotClientError,
    delete,
    diff,
    list_snapshots,
    settle,
    take,
)
from clustersim.snapshots.ignore import IgnoreSet
from clustersim.snapshots.models import (
    ObjectChange,
    PodCount,
    PodGroupChange,
    SnapshotInfo,
    StateChange,
)
from clustersim.snapshots.objects import field_changes, pod_groups
from clustersim.snapshots.state import diff_state
from clustersim.snapshots.targets import by_target, object_target, targets
from clustersim.snapshots.world import HostCapture, World
from tests.support.smallcluster import run_kubectl

SCALE = 0.05


async def settled(sim: ClusterSim) -> ClusterSim:
    """Every pod Ready and the world quiet (clustersim.snapshots.settle): what a test's "before"
    must be (a snapshot of a simulator still starting would count its start-up as changes)."""
    await until(lambda: all(pod_ready(p) for p in sim.store.list_refs("pods")))
    await settle(sim.url, quiet_seconds=0.3)
    return sim


@pytest.fixture
async def ocp4() -> AsyncIterator[ClusterSim]:
    async with ClusterSim("r1-sdn-to-ovn", time_scale=SCALE) as sim:
        await settled(sim)
        yield sim


@pytest.fixture
async def ocp3() -> AsyncIterator[ClusterSim]:
    async with ClusterSim("r5-vxlan-port", time_scale=SCALE) as sim:
        await settled(sim)
        yield sim


async def kubectl(sim: ClusterSim, *args: str) -> str:
    code, out, err = await run_kubectl(sim, *args)
    assert code == 0, err
    return out


async def ssh(sim: ClusterSim, node: str, command: str, stdin: str | None = None) -> asyncssh.SSHCompletedProcess:
    """Run ``command`` on ``node``'s simulated host over real SSH (host key verified)."""
    hc = sim.components["hosts"]
    assert isinstance(hc, HostsComponent)
    host, port = hc.ssh_map[node].split(":")
    async with asyncssh.connect(host, port=int(port), username="root", client_keys=[str(hc.client_key_path)],
                                known_hosts=str(hc.known_hosts_path)) as conn:
        return await conn.run(command, input=stdin, check=False)


async def until(fn: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Await ``fn()`` (sync or async) until it returns something truthy."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        got = fn()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return got
        if loop.time() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.1)


async def diff_when(sim: ClusterSim, sid: str, pred: Callable[[Diff], bool], timeout: float = 30.0,
                    **options: Any) -> Diff:
    """The first diff of ``sid`` for which ``pred`` holds (the agents settle in the background)."""
    last: list[Diff] = []

    async def check() -> bool:
        d = await diff(sim.url, sid, **options)
        last[:] = [d]
        return pred(d)

    try:
        await until(check, timeout)
    except AssertionError:
        raise AssertionError("diff never matched:\n" + "\n".join(last[0].lines() if last else [])) from None
    return last[0]


def fields_of(d: Diff, key: str) -> list[tuple[str, str, str, Any, Any]]:
    obj = next(o for o in d.objects if o.key == key)
    return [(f.pointer, f.category, f.op, f.old, f.new) for f in obj.fields]


def core_api(sim: ClusterSim) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(sim.kubeconfig_path)))


async def create_configmap(sim: ClusterSim, namespace: str, name: str, data: dict[str, str]) -> None:
    """With the kubernetes client (kubectl's ``create configmap`` sends protobuf, which the
    simulator does not decode)."""
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data=data)
    await asyncio.to_thread(core_api(sim).create_namespaced_config_map, namespace, body)


# ---------------------------------------------------------------------------------------- API objects

async def test_empty_after_snapshot_and_after_an_eviction_once_owner_counts_are_back(ocp4: ClusterSim) -> None:
    sid = await take(ocp4.url, "start")
    d = await diff(ocp4.url, sid)
    assert d.empty and d.objects == d.pods == d.state == [] and d.lines() == []
    assert d.before.id == sid and d.before.name == "start" and d.before.hosts == 8 and d.before.objects > 50
    assert [(i.pattern, i.default) for i in d.ignored] == [("Event", True), ("Lease", True)]

    core = core_api(ocp4)
    pods = await asyncio.to_thread(core.list_namespaced_pod, "shop", label_selector="app=shop-frontend")
    victim = pods.items[0].metadata.name
    owner = pods.items[0].metadata.owner_references[0].name
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=victim, namespace="shop"))
    await asyncio.to_thread(core.create_namespaced_pod_eviction, victim, "shop", body)

    def replaced() -> bool:
        names = {p["metadata"]["name"] for p in ocp4.store.list("pods", "shop", label_selector="app=shop-frontend")}
        return victim not in names and len(names) == 3

    await until(replaced)
    d = await diff_when(ocp4, sid, lambda d: d.empty)
    assert d.lines() == []
    # The same moment compared pod by pod: the evicted pod removed, its replacement added.
    each = await diff(ocp4.url, sid, pods="each")
    changes = {(o.change, o.key) for o in each.objects}
    assert ("removed", f"Pod/shop/{victim}") in changes
    added = [k for c, k in changes if c == "added"]
    assert len(added) == 1 and added[0].startswith(f"Pod/shop/{owner}-"), changes
    assert each.pods == []
    # Right after an eviction (before the snapshot below sees the replacement Ready) the owner's
    # counts differ; they are reported per owner, not as pods.
    sid2 = await take(ocp4.url)
    victim2 = next(p["metadata"]["name"] for p in ocp4.store.list("pods", "shop", label_selector="app=shop-frontend"))
    await asyncio.to_thread(core.create_namespaced_pod_eviction, victim2, "shop",
                            client.V1Eviction(metadata=client.V1ObjectMeta(name=victim2, namespace="shop")))
    d = await diff(ocp4.url, sid2)
    assert d.objects == [] and [p.key for p in d.pods] == [f"pods/shop/ReplicaSet/{owner}"]
    assert d.pods[0].before.model_dump() == {"pods": 3, "ready": 3}
    assert d.pods[0].after.ready < 3


async def test_label_annotation_and_cordon_are_field_changes_and_undoing_them_empties_the_diff(
        ocp4: ClusterSim) -> None:
    sid = await take(ocp4.url)
    await kubectl(ocp4, "label", "node", "qsu-worker-01", "lockkeeper.io/test=yes")
    await kubectl(ocp4, "annotate", "node", "qsu-worker-02", "example.com/note=hi")
    await kubectl(ocp4, "cordon", "qsu-worker-03")
    d = await diff(ocp4.url, sid)
    assert [(o.key, o.change, o.categories) for o in d.objects] == [
        ("Node/qsu-worker-01", "changed", ["labels"]),
        ("Node/qsu-worker-02", "changed", ["annotations"]),
        ("Node/qsu-worker-03", "changed", ["spec"]),
    ]
    assert fields_of(d, "Node/qsu-worker-01") == [("/metadata/labels/lockkeeper.io~1test", "labels", "add", None, "yes")]
    assert fields_of(d, "Node/qsu-worker-02") == [
        ("/metadata/annotations/example.com~1note", "annotations", "add", None, "hi")]
    assert fields_of(d, "Node/qsu-worker-03") == [("/spec/unschedulable", "spec", "add", None, True)]
    assert d.pods == [] and d.state == [] and not d.empty
    assert d.lines() == [
        'changed Node/qsu-worker-01 /metadata/labels/lockkeeper.io~1test [labels] (absent) -> "yes"',
        'changed Node/qsu-worker-02 /metadata/annotations/example.com~1note [annotations] (absent) -> "hi"',
        "changed Node/qsu-worker-03 /spec/unschedulable [spec] (absent) -> true",
    ]
    # Undone by hand (kubectl uncordon leaves no field, a client may write false: the same state).
    await kubectl(ocp4, "label", "node", "qsu-worker-01", "lockkeeper.io/test-")
    await kubectl(ocp4, "annotate", "node", "qsu-worker-02", "example.com/note-")
    await kubectl(ocp4, "patch", "node", "qsu-worker-03", "--type=merge", "-p", '{"spec":{"unschedulable":false}}')
    assert ocp4.store.get("nodes", "qsu-worker-03")["spec"]["unschedulable"] is False
    d = await diff(ocp4.url, sid)
    assert d.empty, d.lines()


async def test_configmap_added_removed_and_recreated(ocp4: ClusterSim) -> None:
    s1 = await take(ocp4.url)
    await create_configmap(ocp4, "shop", "lk-probe", {"k": "v"})
    d = await diff(ocp4.url, s1)
    assert [(o.change, o.key, o.resource) for o in d.objects] == [("added", "ConfigMap/shop/lk-probe", "configmaps")]
    assert d.objects[0].object is not None and d.objects[0].object["data"] == {"k": "v"}
    assert "uid" not in d.objects[0].object["metadata"]
    assert d.lines() == ["added ConfigMap/shop/lk-probe"]

    s2 = await take(ocp4.url)
    uid = ocp4.store.get("configmaps", "lk-probe", "shop")["metadata"]["uid"]
    await kubectl(ocp4, "-n", "shop", "delete", "configmap", "lk-probe")
    await create_configmap(ocp4, "shop", "lk-probe", {"k": "w"})
    d = await diff(ocp4.url, s2)
    assert len(d.objects) == 1
    rec = d.objects[0]
    assert (rec.change, rec.key, rec.old_uid) == ("recreated", "ConfigMap/shop/lk-probe", uid)
    assert rec.new_uid not in (None, uid)
    assert fields_of(d, "ConfigMap/shop/lk-probe") == [("/data/k", "data", "replace", "v", "w")]
    assert rec.categories == ["data"]

    await kubectl(ocp4, "-n", "shop", "delete", "configmap", "lk-probe")
    d = await diff(ocp4.url, s2)
    assert [(o.change, o.key) for o in d.objects] == [("removed", "ConfigMap/shop/lk-probe")]
    assert (await diff(ocp4.url, s1)).empty  # created and deleted since s1: nothing left


async def test_daemonset_image_change(ocp4: ClusterSim) -> None:
    sid = await take(ocp4.url)
    await kubectl(ocp4, "-n", "openshift-dns", "set", "image", "ds/dns-default", "dns=quay.io/example/coredns:2")
    await kubectl(ocp4, "-n", "openshift-dns", "rollout", "status", "ds/dns-default", "--timeout=60s")
    d = await diff_when(ocp4, sid, lambda d: not d.pods)
    assert [(o.key, o.change) for o in d.objects] == [("DaemonSet/openshift-dns/dns-default", "changed")]
    assert fields_of(d, "DaemonSet/openshift-dns/dns-default") == [
        ("/spec/template/spec/containers/0/image", "spec", "replace",
         "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:coredns", "quay.io/example/coredns:2")]
    assert d.state == []


def frozen(objects: dict[str, dict[tuple[str, str], dict[str, Any]]]) -> str:
    return json.dumps({r: {f"{ns}/{n}": o for (ns, n), o in objs.items()} for r, objs in objects.items()},
                      sort_keys=True)


async def test_network_type_change_reports_spec_and_status_network_type(ocp4: ClusterSim) -> None:
    sid = await take(ocp4.url)
    # Snapshots share the stored objects (copy-on-snapshot): this one must not move while the
    # CNO, the MCC and the daemons rewrite half the cluster below.
    held = ocp4.snapshots.get(sid)
    text = frozen(held.objects)
    async with aiohttp.ClientSession() as http, \
            http.post(f"{ocp4.url}/_sim/cno/faults", json={"early_switch": True}) as r:
        assert r.status == 200
    await kubectl(ocp4, "patch", "network.operator.openshift.io", "cluster", "--type=merge",
                  "-p", '{"spec":{"migration":{"networkType":"OVNKubernetes"}}}')
    await kubectl(ocp4, "patch", "network.config.openshift.io", "cluster", "--type=merge",
                  "-p", '{"spec":{"networkType":"OVNKubernetes"}}')
    d = await diff_when(ocp4, sid, lambda d: any(
        f.pointer == "/status/networkType" for o in d.objects for f in o.fields))
    assert fields_of(d, "Network.config.openshift.io/cluster") == [
        ("/spec/networkType", "spec", "replace", "OpenShiftSDN", "OVNKubernetes"),
        ("/status/migration/networkType", "status", "add", None, "OVNKubernetes"),
        ("/status/networkType", "status", "replace", "OpenShiftSDN", "OVNKubernetes"),
    ]
    # The operator's own status (conditions the CNO model wrote) is not compared.
    assert fields_of(d, "Network.operator.openshift.io/cluster") == [
        ("/spec/defaultNetwork/type", "spec", "replace", "OpenShiftSDN", "OVNKubernetes"),
        ("/spec/migration/networkType", "spec", "add", None, "OVNKubernetes"),
    ]
    assert ("removed", "DaemonSet/openshift-sdn/sdn") in {(o.change, o.key) for o in d.objects}
    # Named as lockkeeper's outcomes name them: the network type, not the two Network objects.
    named = by_target(d)
    assert "network type" in named and "DaemonSet openshift-sdn/sdn" in named, sorted(named)
    assert not any(t.startswith("Network") for t in named), sorted(named)
    assert "changed Network.config.openshift.io/cluster /spec/networkType [spec] \"OpenShiftSDN\" -> \"OVNKubernetes\"" \
        in named["network type"]
    assert ocp4.store.get("networks.operator.openshift.io", "cluster")["status"].get("conditions")
    # ...unless asked for.
    full = await diff(ocp4.url, sid, include_status=True)
    assert any(f.pointer.startswith("/status/conditions") for f in
               next(o for o in full.objects if o.key == "Network.operator.openshift.io/cluster").fields)
    current = "machineconfiguration.openshift.io/currentConfig"
    before = {n["metadata"]["name"]: n["metadata"]["annotations"][current] for n in ocp4.store.list("nodes")}
    await until(lambda: sum(n["metadata"]["annotations"][current] != before[n["metadata"]["name"]]
                            for n in ocp4.store.list_refs("nodes")) >= 3, timeout=60)
    assert frozen(held.objects) == text


async def test_ignore_patterns_hide_and_count(ocp4: ClusterSim) -> None:
    sid = await take(ocp4.url)
    for name in ("lockkeeper-record-a", "lockkeeper-record-b"):
        await create_configmap(ocp4, "shop", name, {"x": "1"})
    await kubectl(ocp4, "label", "node", "qsu-worker-01", "lockkeeper.io/owner=test", "other=kept")
    patterns = ["ConfigMap/*/lockkeeper-record-*", "Node/qsu-worker-01#/metadata/labels/lockkeeper.io~1*",
                "Secret/nowhere/*"]
    d = await diff(ocp4.url, sid, ignore=patterns)
    assert fields_of(d, "Node/qsu-worker-01") == [("/metadata/labels/other", "labels", "add", None, "kept")]
    assert len(d.objects) == 1
    counts = {i.pattern: (i.count, i.keys, i.default) for i in d.ignored}
    assert counts["ConfigMap/*/lockkeeper-record-*"] == (
        2, ["ConfigMap/shop/lockkeeper-record-a", "ConfigMap/shop/lockkeeper-record-b"], False)
    assert counts["Node/qsu-worker-01#/metadata/labels/lockkeeper.io~1*"] == (
        1, ["Node/qsu-worker-01#/metadata/labels/lockkeeper.io~1owner"], False)
    assert counts["Secret/nowhere/*"] == (0, [], False)  # a pattern that hid nothing is visible too
    assert [p for p, (_, _, default) in counts.items() if default] == ["Event", "Lease"]
    assert "ignored ConfigMap/*/lockkeeper-record-* (default): 2" not in d.lines()
    assert "ignored ConfigMap/*/lockkeeper-record-*: 2" in d.lines()
    assert d.ignored_total() >= 3

    # The same through the endpoint with a JSON body, and the resource-key form of a pattern.
    async with aiohttp.ClientSession() as http:
        body = {"ignore": ["configmaps/shop/lockkeeper-record-*", "Node/qsu-worker-01"], "include_events": True}
        async with http.post(f"{ocp4.url}/_sim/snapshots/{sid}/diff", json=body) as r:
            assert r.status == 200
            got = Diff.model_validate(await r.json())
        assert got.empty and got.options.include_events
        assert [(i.pattern, i.count) for i in got.ignored if not i.default] == [
            ("configmaps/shop/lockkeeper-record-*", 2), ("Node/qsu-worker-01", 1)]
        assert [i.pattern for i in got.ignored if i.default] == ["Lease"]
        async with http.get(f"{ocp4.url}/_sim/snapshots/{sid}/diff", params={"pods": "some"}) as r:
            assert r.status == 400 and "pods" in (await r.json())["error"]
        async with http.get(f"{ocp4.url}/_sim/snapshots/{sid}/diff", params={"include_status": "yes"}) as r:
            assert r.status == 400 and "ParseBool" in (await r.json())["error"]
    with pytest.raises(SnapshotClientError) as err:
        await diff(ocp4.url, "s999")
    assert err.value.status == 404


async def test_events_are_hidden_by_default_and_counted(ocp4: ClusterSim) -> None:
    sid = await take(ocp4.url)
    ocp4.store.create("events", {"metadata": {"name": "lk.1", "namespace": "shop"}, "reason": "Test",
                                 "message": "hello", "involvedObject": {"kind": "Node", "name": "qsu-worker-01"}})
    d = await diff(ocp4.url, sid)
    assert d.empty
    event = next(i for i in d.ignored if i.pattern == "Event")
    assert event.default and event.count >= 1 and "Event/shop/lk.1" in event.keys
    d = await diff(ocp4.url, sid, include_events=True)
    assert ("added", "Event/shop/lk.1") in {(o.change, o.key) for o in d.objects}
    assert "Event" not in {i.pattern for i in d.ignored}


async def test_registry_endpoints_and_client(ocp4: ClusterSim, monkeypatch: pytest.MonkeyPatch) -> None:
    async with Snapshot(ocp4.url, "ctx") as snap:
        assert snap.id.startswith("s")
        infos = await list_snapshots(ocp4.url)
        assert [(i.id, i.name) for i in infos] == [(snap.id, "ctx")]
        await kubectl(ocp4, "label", "node", "qsu-infra-01", "a=b")
        later = await take(ocp4.url, "later")
        await kubectl(ocp4, "label", "node", "qsu-infra-01", "c=d")
        between = await snap.diff(to=later)
        assert [f.pointer for o in between.objects for f in o.fields] == ["/metadata/labels/a"]
        assert between.after.id == later
        now = await snap.diff()
        assert [f.pointer for o in now.objects for f in o.fields] == ["/metadata/labels/a", "/metadata/labels/c"]
        assert now.after.id == "" and now.compare_ms >= 0 and now.after.capture_ms >= 0
        await delete(ocp4.url, later)
    assert await list_snapshots(ocp4.url) == []
    with pytest.raises(SnapshotClientError) as err:
        await delete(ocp4.url, snap.id)
    assert err.value.status == 404
    # A full registry refuses (none is dropped to make room).
    monkeypatch.setattr("clustersim.snapshots.registry.MAX_SNAPSHOTS", 2)
    kept = [await take(ocp4.url), await take(ocp4.url)]
    with pytest.raises(SnapshotClientError) as err:
        await take(ocp4.url)
    assert err.value.status == 409
    assert [i.id for i in await list_snapshots(ocp4.url)] == kept


async def test_cli_snapshot_and_diff(ocp4: ClusterSim) -> None:
    async def cli(*args: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).parent / "lockkeeper"), "sim", *args, "--url", ocp4.url,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        return proc.returncode or 0, out.decode(), err.decode()

    code, out, err = await cli("snapshot", "--name", "cli")
    assert code == 0, err
    sid = out.strip()
    assert (await list_snapshots(ocp4.url))[0].name == "cli"
    assert await cli("diff", sid) == (0, "", "")
    await kubectl(ocp4, "annotate", "node", "qsu-infra-02", "x=y")
    code, out, _ = await cli("diff", sid)
    assert (code, out) == (1, 'changed Node/qsu-infra-02 /metadata/annotations/x [annotations] (absent) -> "y"\n')
    code, out, _ = await cli("diff", sid, "--ignore", "Node/qsu-infra-02", "-o", "json")
    assert code == 0 and json.loads(out)["ignored"][0] == {
        "pattern": "Node/qsu-infra-02", "count": 1, "default": False, "keys": ["Node/qsu-infra-02"]}
    code, _, err = await cli("diff", "s404")
    assert code == 2 and "404" in err


# ---------------------------------------------------------------------------------------- hosts, masters, SDN

async def test_host_file_unit_and_package_changes_over_ssh(ocp3: ClusterSim) -> None:
    sid = await take(ocp3.url)
    path = "/etc/origin/master/master-config.yaml"
    before = ocp3.components["hosts"].host("ocp-master-01").files[path]  # type: ignore[attr-defined]
    r = await ssh(ocp3, "ocp-master-01", f"tee -a {path}", stdin="# lockkeeper was here\n")
    assert r.exit_status == 0, r.stderr
    for cmd in ("systemctl stop iptables", "systemctl disable iptables"):
        r = await ssh(ocp3, "ocp-node-01", cmd)
        assert r.exit_status == 0, r.stderr
    r = await ssh(ocp3, "ocp-node-02", "yum -y remove atomic-openshift-clients")
    assert r.exit_status == 0, r.stderr
    d = await diff(ocp3.url, sid)
    assert d.objects == [] and d.pods == []
    assert [(s.key, s.change) for s in d.state] == [
        (f"host/ocp-master-01/file{path}", "changed"),
        ("host/ocp-node-01/unit/iptables", "changed"),
        ("host/ocp-node-02/package/atomic-openshift-clients", "removed"),
    ]
    file, unit, pkg = d.state
    assert (file.component, file.name, file.what, file.item) == ("host", "ocp-master-01", "file", path)
    assert file.old["size"] == len(before.encode()) and file.new["size"] == file.old["size"] + 22
    assert file.old["sha256"] != file.new["sha256"]
    assert file.diff is not None and "+# lockkeeper was here" in file.diff.splitlines()
    assert (unit.old, unit.new) == ({"enabled": True, "active": True}, {"enabled": False, "active": False})
    assert (pkg.old, pkg.new) == ("3.11.161-1.git.0.3fe3c9e.el7", None)
    assert d.reboots == [] and not d.empty
    # Documented as expected: one pattern per host entry, each counted.
    d = await diff(ocp3.url, sid, ignore=[f"host/*/file{path}", "host/ocp-node-01/unit", "host/ocp-node-02"])
    assert d.empty and [i.count for i in d.ignored if not i.default] == [1, 1, 1]


async def test_iptables_and_ovs_port_changes(ocp3: ClusterSim) -> None:
    sid = await take(ocp3.url)
    rule = "-A OS_FIREWALL_ALLOW -p udp -m state --state NEW -m udp --dport 4889 -j ACCEPT"
    r = await ssh(ocp3, "ocp-node-03", f"iptables {rule}")
    assert r.exit_status == 0, r.stderr
    r = await ssh(ocp3, "ocp-node-03", "ovs-vsctl set interface vxlan0 options:dst_port=4889")
    assert r.exit_status == 0, r.stderr
    d = await diff(ocp3.url, sid, ignore=["sdn/*/port_at_start"])
    entries = {s.key: s for s in d.state}
    ipt = entries["host/ocp-node-03/iptables/runtime"]
    assert ipt.new == [*ipt.old, rule] and ipt.diff is not None and f"+{rule}" in ipt.diff.splitlines()
    assert "host/ocp-node-03/iptables/saved" not in entries  # not saved: a reboot would lose it
    port = entries["sdn/ocp-node-03/dst_port"]
    assert (port.component, port.name, port.old, port.new) == ("sdn", "ocp-node-03", 4789, 4889)
    assert set(entries) == {"host/ocp-node-03/iptables/runtime", "sdn/ocp-node-03/dst_port"}
    assert by_target(d) == {"host ocp-node-03": sorted(d.lines()[:2])}  # the host's rule and its OVS port


async def test_reboots_and_restarts_are_listed_apart_from_changes(ocp3: ClusterSim) -> None:
    sid = await take(ocp3.url)
    hosts = ocp3.components["hosts"]
    assert isinstance(hosts, HostsComponent)
    boot = hosts.host("ocp-node-04").boot_id
    await ssh(ocp3, "ocp-node-04", "systemctl reboot")  # the session drops
    async with aiohttp.ClientSession() as http, \
            http.post(f"{ocp3.url}/_sim/masters/ocp-master-02/restart", json={"what": "api"}) as r:
        assert r.status == 200, await r.text()
    await until(lambda: not hosts.host("ocp-node-04").up)
    down = await diff(ocp3.url, sid)  # while it is down, that shows (a host not back is a change)
    assert ("host/ocp-node-04/up", True, False) in [(s.key, s.old, s.new) for s in down.state]
    await until(lambda: hosts.host("ocp-node-04").boot_count == 2)
    d = await diff_when(ocp3, sid, lambda d: d.empty and bool(d.reboots) and bool(d.restarts), timeout=60)
    assert [(r.host, r.boots, r.boot_id_before) for r in d.reboots] == [("ocp-node-04", 1, boot)]
    assert d.reboots[0].boot_id_after == hosts.host("ocp-node-04").boot_id != boot
    assert ("master", "ocp-master-02", "api", 1) in {(r.component, r.name, r.what, r.count) for r in d.restarts}
    assert "reboot host/ocp-node-04: 1 boot(s)" in d.lines()
    assert "restart master/ocp-master-02/api: 1" in d.lines()


async def test_a_master_left_down_is_a_change(ocp3: ClusterSim) -> None:
    sid = await take(ocp3.url)
    masters = ocp3.components["masters"]
    async with aiohttp.ClientSession() as http, \
            http.post(f"{ocp3.url}/_sim/masters/ocp-master-03/restart", json={"what": "controllers"}) as r:
        assert r.status == 200
    d = await diff(ocp3.url, sid)
    assert ("master/ocp-master-03/controllers_up", True, False) in [(s.key, s.old, s.new) for s in d.state]
    await until(lambda: masters.masters["ocp-master-03"].controllers_up)  # type: ignore[attr-defined]
    d = await diff(ocp3.url, sid)
    assert d.empty, d.lines()


# ---------------------------------------------------------------------------------------- rules (pure)

def test_a_saved_iptables_file_differing_only_in_its_comments_is_no_change() -> None:
    """Saving the same rules again stamps a new date in iptables-save's comment lines: no change;
    another rule in the file is one."""
    def host(saved: str) -> HostCapture:
        return HostCapture(files={"/etc/sysconfig/iptables": saved, "/etc/hosts": "# x\n"}, dirs=frozenset(), units={},
                           packages={}, iptables_runtime=(), iptables_saved=(), runtime="docker", images=frozenset(),
                           node_group="", up=True, boot_id="b", boot_count=1)

    def world(saved: str) -> World:
        info = SnapshotInfo(id="s", taken_at="2024-01-01T00:00:00Z", resource_version=1, objects=0)
        return World(info=info, objects={}, hosts={"n1": host(saved)})

    rules = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j OS_FIREWALL_ALLOW\nCOMMIT\n"
    at = lambda date, body=rules: f"# Generated by iptables-save v1.4.21 on {date}\n{body}# Completed on {date}\n"  # noqa: E731
    changes, _, _ = diff_state(world(at("Mon Jan  1 00:00:00 2024")), world(at("Mon Jan  1 00:05:00 2024")), IgnoreSet([]))
    assert changes == []
    more = rules.replace("COMMIT", "-A OS_FIREWALL_ALLOW -p udp --dport 4889 -j ACCEPT\nCOMMIT")
    changes, _, _ = diff_state(world(at("Mon Jan  1 00:00:00 2024")), world(at("Mon Jan  1 00:05:00 2024", more)), IgnoreSet([]))
    assert [c.key for c in changes] == ["host/n1/file/etc/sysconfig/iptables"]
    assert changes[0].diff is not None and "+-A OS_FIREWALL_ALLOW -p udp --dport 4889 -j ACCEPT" in changes[0].diff


def test_targets_are_named_as_lockkeeper_names_what_it_left_changed() -> None:
    """Every resource lockkeeper's gateway and the simulator both serve: the object's target is
    what ``ObjectRef.describe()`` prints, with a kind the gateway resolves back to the same group
    and plural; then one entry of each sort, grouped by target."""
    checked = 0
    for gw in GATEWAY_RESOURCES.values():
        key = next((k for k, rt in RESOURCES.items() if (rt.group, rt.plural) == (gw.group, gw.plural)), None)
        if key is None:
            continue
        ns = "ns1" if RESOURCES[key].namespaced else ""
        target = object_target(key, ns, "x")
        kind = target.split(" ")[0]
        back = gateway_resource(kind)
        assert (back.group, back.plural) == (gw.group, gw.plural), target
        assert target == ObjectRef(kind=kind, name="x", namespace=ns or None).describe()
        checked += 1
    assert checked >= 15
    assert object_target("networks.config.openshift.io", "", "cluster") == "Network cluster"
    assert object_target("networks.operator.openshift.io", "", "cluster") == "Network.operator.openshift.io cluster"

    info = SnapshotInfo(id="s1", taken_at="2024-01-01T00:00:00Z", resource_version=1, objects=1)
    ds = ObjectChange(key="DaemonSet/openshift-sdn/sdn", resource="daemonsets.apps", kind="DaemonSet",
                      namespace="openshift-sdn", name="sdn", change="changed",
                      fields=[FieldChange(pointer="/spec/template/spec/containers/0/image", category="spec", op="replace",
                                          old="stock", new="custom")])
    cn = ObjectChange(key="ClusterNetwork/default", resource="clusternetworks.network.openshift.io", kind="ClusterNetwork",
                      name="default", change="removed")
    net = ObjectChange(key="Network.config.openshift.io/cluster", resource="networks.config.openshift.io", kind="Network",
                       name="cluster", change="changed",
                       fields=[FieldChange(pointer="/metadata/labels/x", category="labels", op="add", new="1"),
                               FieldChange(pointer="/status/migration/networkType", category="status", op="add", new="OVN")])
    pods = PodGroupChange(key="pods/openshift-sdn/DaemonSet/sdn", namespace="openshift-sdn", owner_kind="DaemonSet",
                          owner_name="sdn", before=PodCount(pods=2, ready=2), after=PodCount(pods=2, ready=1))
    state = [StateChange(key="host/n1/iptables/runtime", component="host", name="n1", what="iptables", item="runtime",
                         change="changed", old=[], new=["-A X"]),
             StateChange(key="sdn/n1/dst_port", component="sdn", name="n1", what="dst_port", change="changed", old=1, new=2),
             StateChange(key="master/m1/api_config", component="master", name="m1", what="api_config", change="changed"),
             StateChange(key="master/leader", component="master", name="", what="leader", change="changed", old="m1", new="m2"),
             StateChange(key="gluster/vol1/started", component="gluster", name="vol1", what="started", change="changed")]
    d = Diff(before=info, after=info, options={}, objects=[cn, ds, net], pods=[pods], state=state)
    named = by_target(d)
    assert set(named) == targets(d) == {"ClusterNetwork default", "DaemonSet openshift-sdn/sdn", "Network cluster",
                                        "network type", "host n1", "host m1", "masters leader", "gluster volume vol1"}
    assert named["DaemonSet openshift-sdn/sdn"] == [
        "changed DaemonSet/openshift-sdn/sdn /spec/template/spec/containers/0/image [spec] \"stock\" -> \"custom\"",
        "pods openshift-sdn/DaemonSet/sdn: 2 (2 ready) -> 2 (1 ready)"]
    assert named["network type"] == [
        "changed Network.config.openshift.io/cluster /status/migration/networkType [status] (absent) -> \"OVN\""]
    assert named["Network cluster"] == ["changed Network.config.openshift.io/cluster /metadata/labels/x [labels] (absent) -> \"1\""]
    assert named["ClusterNetwork default"] == ["removed ClusterNetwork/default"]
    assert len(named["host n1"]) == 2
    assert sorted(ln for lines in named.values() for ln in lines) == sorted(d.lines())
    assert by_target(Diff(before=info, after=info, options={})) == {}


def test_field_changes_rules() -> None:
    old = {"kind": "Node", "metadata": {"name": "n", "uid": "1", "resourceVersion": "5", "generation": 1,
                                         "labels": {"a/b": "1"}, "ownerReferences": [{"name": "x"}]},
           "spec": {"taints": [{"key": "k"}], "podCIDR": None, "containers": [{"image": "a"}, {"image": "b"}]},
           "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    new = {"kind": "Node", "metadata": {"name": "n", "uid": "1", "resourceVersion": "9", "generation": 2,
                                         "labels": {"a/b": "2", "c~d": "3"}, "ownerReferences": []},
           "spec": {"taints": [], "unschedulable": False, "containers": [{"image": "a"}, {"image": "c"}]},
           "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    got = [(f.pointer, f.category, f.op) for f in field_changes("nodes", old, new)]
    assert got == [("/metadata/labels/a~1b", "labels", "replace"), ("/metadata/labels/c~0d", "labels", "add"),
                   ("/metadata/ownerReferences", "other", "remove"), ("/spec/containers/1/image", "spec", "replace"),
                   ("/spec/taints", "spec", "remove")]
    assert [f.pointer for f in field_changes("nodes", old, new, include_status=True)][-1] == \
        "/status/conditions/0/status"
    # A ConfigMap's data and a ClusterNetwork's top-level desired state.
    assert field_changes("configmaps", {"data": {"k": "v"}}, {"data": {"k": "w"}}) == [
        FieldChange(pointer="/data/k", category="data", op="replace", old="v", new="w")]
    assert [f.category for f in field_changes("clusternetworks.network.openshift.io", {"vxlanPort": 4789},
                                              {"vxlanPort": 4889})] == ["spec"]


def test_ignore_matching_and_pod_groups() -> None:
    ig = IgnoreSet(["ConfigMap/*/lk-*", "host/n1"], ["Event"])
    assert ig.hide(["ConfigMap/a/lk-1"]) and ig.hide(["ConfigMap/a/lk-1#/data/x"])
    assert ig.hide(["host/n1/file/etc/x"]) and not ig.hide(["host/n10/file/etc/x"])
    assert ig.hide(["Event/ns/e1"]) and not ig.hide(["EventRateLimit/x"])
    assert [(c.pattern, c.count, c.default) for c in ig.counts()] == [
        ("ConfigMap/*/lk-*", 2, False), ("host/n1", 1, False), ("Event", 1, True)]

    def pod(name: str, owner: str | None, ready: bool, terminating: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "namespace": "ns"}
        if owner:
            meta["ownerReferences"] = [{"kind": "Node", "name": "n"}, {"kind": "ReplicaSet", "name": owner,
                                                                        "controller": True}]
        if terminating:
            meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
        return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": str(ready)}]}}

    pods = {("ns", p["metadata"]["name"]): p for p in (
        pod("a", "rs", True), pod("b", "rs", False), pod("c", "rs", True, terminating=True), pod("bare", None, True))}
    assert {k: v.model_dump() for k, v in pod_groups(pods).items()} == {
        ("ns", "ReplicaSet", "rs"): {"pods": 2, "ready": 1}}


async def test_gluster_brick_started_by_a_volume_start_force() -> None:
    async with ClusterSim("r3-okd310-upgrade", time_scale=SCALE) as sim:
        await settled(sim)
        sid = await take(sim.url)
        vol = "glusterfs-registry-volume"
        brick = ("10.0.0.12:/var/lib/heketi/mounts/vg_5ecf67ed85f71cf28090d7db1acc6433/"
                 "brick_d364694c7034276c22e264eb2576413b/brick")
        out = await kubectl(sim, "exec", "-n", "glusterfs", "glusterfs-storage-dz8qj", "--",
                            "gluster", "volume", "start", vol, "force")
        assert "success" in out
        d = await diff(sim.url, sid)
        assert [(s.key, s.change, s.old, s.new) for s in d.state] == [
            (f"gluster/{vol}/brick/{brick}", "changed", {"online": False}, {"online": True})]
        assert [(r.component, r.name, r.what) for r in d.restarts] == [("gluster", vol, f"brick:{brick}")]
        assert d.objects == [] and d.pods == []
