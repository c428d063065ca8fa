"""Step traps (issue 39): the simulator holds, fails or counts the first request of a step, seen
by the real kubernetes client and by lockkeeper's own SSH and debug-pod executors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import aiohttp
import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from activities.host.executors import SSHExecutor
from clustersim import traps
from clustersim.sim import ClusterSim
from tests.clustersim.test_hosts_debugpod import debug_executor

SCALE = 0.05
T = TypeVar("T")


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """A blocking kubernetes-client call, off the event loop the simulator runs on."""
    return await asyncio.to_thread(fn, *args, **kwargs)


def api_client(sim: ClusterSim) -> Any:
    return config.new_client_from_config(config_file=str(sim.kubeconfig_path))


def ssh(sim: ClusterSim, node: str) -> SSHExecutor:
    """lockkeeper's own SSH executor to ``node``'s simulated host."""
    hc = sim.components["hosts"]
    host, port = hc.ssh_map[node].split(":")
    return SSHExecutor(host, port=int(port), user="root", known_hosts=hc.known_hosts_path,
                       client_keys=[str(hc.client_key_path)], connect_timeout=5)


@pytest.fixture
async def r5() -> AsyncIterator[ClusterSim]:
    async with ClusterSim("r5-vxlan-port", time_scale=SCALE) as sim:
        yield sim


def labels(sim: ClusterSim, node: str) -> dict[str, str]:
    return sim.store.get("nodes", node)["metadata"].get("labels") or {}


async def test_hold_then_release(r5: ClusterSim) -> None:
    core = client.CoreV1Api(api_client(r5))
    trap = await traps.arm(r5.url, traps.api("patch", "nodes", name="ocp-node-0[12]"))
    assert (trap.id, trap.state.hits, trap.state.held) == ("t1", 0, 0)
    patch = asyncio.ensure_future(call(core.patch_node, "ocp-node-01", {"metadata": {"labels": {"held": "yes"}}}))
    state = await trap.wait_hit(timeout=10)
    assert (state.hits, state.held, state.acted, state.released) == (1, 1, 1, False)
    assert [h.model_dump() for h in state.log] == [{"request": "patch nodes ocp-node-01", "action": "held"}]
    await asyncio.sleep(0.3)
    assert not patch.done() and "held" not in labels(r5, "ocp-node-01"), "the PATCH waits while the trap holds it"
    # Other requests (a read of the same node, a patch of another resource) pass meanwhile.
    assert (await call(core.read_node, "ocp-node-01")).metadata.name == "ocp-node-01"
    state = await trap.release()
    assert state.released
    assert (await patch).metadata.labels["held"] == "yes"
    # Spent: the next match passes, still counted.
    await call(core.patch_node, "ocp-node-02", {"metadata": {"labels": {"after": "1"}}})
    state = await trap.refresh()
    assert (state.hits, state.acted, state.held) == (2, 1, 0) and state.log[1].action == "passed"
    # The held request is recorded like any other, once it was answered.
    assert [e.code for e in r5.requests.entries(verb="patch", resource="nodes")] == [200, 200]


async def test_fail_403_is_an_api_exception_and_times(r5: ClusterSim) -> None:
    apps = client.AppsV1Api(api_client(r5))
    trap = await traps.arm(r5.url, traps.api("patch", "daemonsets.apps", namespace="openshift-sdn", name="sdn",
                                             action="fail", status=403, times=2))
    body = {"metadata": {"annotations": {"x": "1"}}}
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            await call(apps.patch_namespaced_daemon_set, "sdn", "openshift-sdn", body)
        assert err.value.status == 403
        status = err.value.body
        assert '"reason": "Forbidden"' in status and (
            'daemonsets.apps \\"sdn\\" is forbidden: User \\"system:serviceaccount:lockkeeper:lockkeeper\\" cannot '
            'patch resource \\"daemonsets\\" in API group \\"apps\\" in the namespace \\"openshift-sdn\\"') in status, status
    ds = r5.store.get("daemonsets.apps", "sdn", "openshift-sdn")
    assert "x" not in (ds["metadata"].get("annotations") or {}), "a refused PATCH changes nothing"
    await call(apps.patch_namespaced_daemon_set, "sdn", "openshift-sdn", body)
    state = await trap.refresh()
    assert (state.hits, state.acted) == (3, 2) and [h.action for h in state.log] == ["failed", "failed", "passed"]
    # A 422 with its own message, on the eviction subresource of any pod.
    await traps.arm(r5.url, traps.api("create", "pods", subresource="eviction", action="fail", status=422,
                                      message="refused for the test"))
    core = client.CoreV1Api(api_client(r5))
    pod = next(p for p in r5.store.list("pods", "demo"))["metadata"]["name"]
    with pytest.raises(ApiException) as err:
        await call(core.create_namespaced_pod_eviction, pod, "demo",
                   client.V1Eviction(metadata=client.V1ObjectMeta(name=pod, namespace="demo")))
    assert err.value.status == 422 and '"message": "refused for the test"' in err.value.body
    assert r5.store.try_get("pods", pod, "demo") is not None


async def test_a_create_is_matched_by_the_name_in_its_body(r5: ClusterSim) -> None:
    core = client.CoreV1Api(api_client(r5))
    trap = await traps.arm(r5.url, traps.api("create", "configmaps", namespace="openshift-*", name="lockkeeper-record-*",
                                             action="fail", status=409, reason="AlreadyExists", message="taken"))
    await call(core.create_namespaced_config_map, "demo", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="lockkeeper-record-a")))
    await call(core.create_namespaced_config_map, "openshift-config", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="other")))
    with pytest.raises(ApiException) as err:
        await call(core.create_namespaced_config_map, "openshift-config",
                   client.V1ConfigMap(metadata=client.V1ObjectMeta(name="lockkeeper-record-b"), data={"k": "v"}))
    assert err.value.status == 409 and '"reason": "AlreadyExists"' in err.value.body
    assert r5.store.try_get("configmaps", "lockkeeper-record-b", "openshift-config") is None
    state = await trap.refresh()
    assert [h.model_dump() for h in state.log] == [
        {"request": "create configmaps openshift-config/lockkeeper-record-b", "action": "failed"}]
    # The body is still there for the handler once a trap has read it.
    await call(core.create_namespaced_config_map, "openshift-config",
               client.V1ConfigMap(metadata=client.V1ObjectMeta(name="lockkeeper-record-b"), data={"k": "v"}))
    assert r5.store.get("configmaps", "lockkeeper-record-b", "openshift-config")["data"] == {"k": "v"}


async def test_a_host_command_trap_fails_with_its_exit_code_over_ssh(r5: ClusterSim) -> None:
    hc = r5.components["hosts"]
    trap = await traps.arm(r5.url, traps.host(r"^systemctl stop atomic-openshift-node$", host="ocp-node-0*",
                                              action="fail", exit_code=5, stderr="Failed to stop: refused\n"))
    r = await ssh(r5, "ocp-node-03").run(["sudo", "-n", "timeout", "30", "systemctl", "stop", "atomic-openshift-node"],
                                        timeout=20)
    assert (r.exit_code, r.stderr) == (5, "Failed to stop: refused\n")
    assert hc.host("ocp-node-03").unit_active("atomic-openshift-node"), "the refused command did not run"
    assert hc.host("ocp-node-03").log[-1].exit == 5
    # Other commands and other hosts pass; times=1: the same command now runs.
    assert (await ssh(r5, "ocp-master-01").run(["systemctl", "stop", "atomic-openshift-node"], timeout=20)).exit_code == 0
    assert (await ssh(r5, "ocp-node-03").run(["systemctl", "stop", "atomic-openshift-node"], timeout=20)).exit_code == 0
    assert not hc.host("ocp-node-03").unit_active("atomic-openshift-node")
    state = await trap.refresh()
    assert (state.hits, state.acted) == (2, 1)
    assert state.log[0].request == "ocp-node-03: systemctl stop atomic-openshift-node"


async def test_a_host_command_is_held_over_ssh_and_through_the_debug_pod() -> None:
    from tests.clustersim.test_hosts_interp import SECTION

    section = {k: v for k, v in SECTION.items() if k != "hosts"}
    async with ClusterSim("r2-pdb-blocked", time_scale=SCALE, component_sections={"hosts": section}) as sim:
        if sim.store.try_get("namespaces", "default") is None:
            sim.store.create("namespaces", {"metadata": {"name": "default"}})
        hc = sim.components["hosts"]
        node = "okd-worker-01"
        trap = await traps.arm(sim.url, traps.host(r"^tee /etc/marker$", via="debug-pod"))
        with debug_executor(sim) as ex:
            run = asyncio.ensure_future(ex.run(["tee", "/etc/marker"], timeout=60, stdin="x\n"))
            await trap.wait_hit(timeout=60)
            await asyncio.sleep(0.2)
            assert "/etc/marker" not in hc.host(node).files and not run.done()
            # The same command over SSH is another route: the trap (via debug-pod) lets it pass.
            assert (await ssh(sim, node).run(["tee", "/etc/other"], timeout=20, stdin="y\n")).exit_code == 0
            await trap.release()
            assert (await run).exit_code == 0
        assert hc.host(node).files["/etc/marker"] == "x\n"


async def test_count_delete_and_shutdown_let_held_requests_go(r5: ClusterSim) -> None:
    core = client.CoreV1Api(api_client(r5))
    counter = await traps.arm(r5.url, traps.api(["get", "list"], "nodes", action="count", times=0))
    held = await traps.arm(r5.url, traps.api("patch", "nodes", name="ocp-node-04"))
    await call(core.list_node)
    await call(core.read_node, "ocp-node-04")
    patch = asyncio.ensure_future(call(core.patch_node, "ocp-node-04", {"metadata": {"labels": {"d": "1"}}}))
    await held.wait_hit(timeout=10)
    assert (await counter.refresh()).hits == 2 and counter.state.acted == 2
    await held.delete()
    assert (await patch).metadata.labels["d"] == "1"
    assert [t.id for t in await traps.list_traps(r5.url)] == [counter.id]
    # A request still held when the simulator stops is failed cleanly (503), not leaked.
    trap = await traps.arm(r5.url, traps.api("patch", "nodes", name="ocp-node-03"))
    patch = asyncio.ensure_future(call(core.patch_node, "ocp-node-03", {"metadata": {"labels": {"s": "1"}}}))
    await trap.wait_hit(timeout=10)
    await r5.stop()
    with pytest.raises(ApiException) as err:
        await patch
    assert err.value.status == 503 and "shutting down" in err.value.body


async def test_bad_specs_and_unknown_ids(r5: ClusterSim) -> None:
    async with aiohttp.ClientSession() as s:
        for body in ({"on": "api", "argv": "x"}, {"on": "host", "verb": "get"}, {"action": "explode"},
                     {"on": "host", "argv": "("}, {"status": 200}):
            async with s.post(f"{r5.url}/_sim/traps", json=body) as resp:
                doc: Any = await resp.json()
                assert resp.status == 400 and doc["reason"] == "BadRequest", (body, doc)
        async with s.get(f"{r5.url}/_sim/traps/t9") as resp:
            assert resp.status == 404
    trap = await traps.arm(r5.url, traps.api("delete", "nodes"))
    with pytest.raises(TimeoutError):
        await trap.wait_hit(timeout=0.3)
    with pytest.raises(traps.TrapError) as err:
        await traps.Trap(r5.url, trap.state.model_copy(update={"id": "t9"})).release()
    assert err.value.status == 404
