"""Benchmark of the simulated API server on a 1,000-node / 20,000-pod cluster (prints figures only).

Measures: store load time, requests/s for GET node, PATCH node annotation (strategic merge) and
LIST pods by spec.nodeName (aiohttp client, concurrency 8, same process and loop as the server,
as in the tests), watch delivery latency p50/p99 (PATCH response received -> the MODIFIED event
read from an open watch on nodes), and pods/exec round trips per second over WebSocket
(v5.channel.k8s.io: connect, run the built-in ``echo`` / ``cat`` with stdin and EOF, read the
output and the channel-3 status, close). No agents run, so only the API is measured.

Then SSH commands per second across 100 hosts: a second ClusterSim with a generated 100-node
cluster and a ``hosts:`` section (one simulated host with an SSH server per node), commands run
with asyncssh using the client key and known_hosts the hosts component writes (host keys
verified), concurrency bounded by ``--concurrency``; once over one kept connection per host,
once with a fresh connection (key exchange + auth) per command.

    python benchmarks/sim_api.py [--nodes 1000] [--pods 20000] [--seconds 3] [--ssh-hosts 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable

import aiohttp
import asyncssh

from clustersim.sim import ClusterSim


def _populate(sim: ClusterSim, nodes: int, pods: int) -> None:
    from clustersim.scenario import generate_scenario

    t0 = time.perf_counter()
    objects = generate_scenario(nodes, pods).build_objects()
    t1 = time.perf_counter()
    sim.store.load(objects)
    t2 = time.perf_counter()
    print(f"generate_scenario + build_objects: {t1 - t0:.2f} s; Store.load of {len(objects)} objects: "
          f"{t2 - t1:.2f} s")


async def _rate(name: str, seconds: float, concurrency: int, op: Callable[[int], Awaitable[None]],
                unit: str = "req/s") -> None:
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker(w: int) -> None:
        nonlocal done
        i = w
        while time.perf_counter() < deadline:
            await op(i)
            done += 1
            i += concurrency

    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    elapsed = time.perf_counter() - start
    print(f"{name:<40} {done / elapsed:9.0f} {unit}  ({done} requests, concurrency {concurrency})")


async def main(nodes: int, pods: int, seconds: float, concurrency: int) -> None:
    async with ClusterSim(None) as sim:
        _populate(sim, nodes, pods)
        print(f"cluster: {sim.store.count('nodes')} nodes, {sim.store.count('pods')} pods")
        node_names = [k[1] for k in sim.store.iter_keys("nodes")]
        hdr = {"Content-Type": "application/strategic-merge-patch+json"}
        conn = aiohttp.TCPConnector(limit=concurrency * 2)
        async with aiohttp.ClientSession(base_url=sim.url, connector=conn) as http:

            async def get_node(i: int) -> None:
                async with http.get(f"/api/v1/nodes/{node_names[i % len(node_names)]}") as r:
                    await r.read()
                    assert r.status == 200

            async def patch_node(i: int) -> None:
                body = json.dumps({"metadata": {"annotations": {"bench/i": str(i)}}})
                async with http.patch(f"/api/v1/nodes/{node_names[i % len(node_names)]}", data=body,
                                      headers=hdr) as r:
                    await r.read()
                    assert r.status == 200

            async def list_pods(i: int) -> None:
                params = {"fieldSelector": f"spec.nodeName={node_names[i % len(node_names)]}"}
                async with http.get("/api/v1/pods", params=params) as r:
                    await r.read()
                    assert r.status == 200

            await _rate("GET node", seconds, concurrency, get_node)
            await _rate("PATCH node annotation (SMP)", seconds, concurrency, patch_node)
            await _rate("LIST pods fieldSelector=spec.nodeName", seconds, concurrency, list_pods)

            # Watch latency: one watch on all nodes; sequential PATCHes; time until each event arrives.
            latencies: list[float] = []
            params = {"watch": "true", "resourceVersion": str(sim.store.resource_version)}
            async with http.get("/api/v1/nodes", params=params) as watch:
                for i in range(500):
                    name = node_names[i % len(node_names)]
                    body = json.dumps({"metadata": {"annotations": {"bench/w": str(i)}}})
                    async with http.patch(f"/api/v1/nodes/{name}", data=body, headers=hdr) as r:
                        await r.read()
                        sent = time.perf_counter()
                    while True:
                        line = await watch.content.readline()
                        ev = json.loads(line)
                        if ev["object"]["metadata"].get("annotations", {}).get("bench/w") == str(i):
                            break
                    latencies.append((time.perf_counter() - sent) * 1000)
            latencies.sort()
            p99 = latencies[int(len(latencies) * 0.99) - 1]
            print(f"watch delivery after PATCH response: p50 {statistics.median(latencies):.2f} ms, "
                  f"p99 {p99:.2f} ms, max {latencies[-1]:.2f} ms ({len(latencies)} events)")

            await _exec_rates(sim, http, seconds, concurrency)


def _exec_pod(sim: ClusterSim) -> tuple[str, str]:
    """(namespace, name) of a pod with a running container (one is created when none is)."""
    for pod in sim.store.list_refs("pods"):
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        if pod["spec"].get("nodeName") and any("running" in (c.get("state") or {}) for c in statuses):
            return pod["metadata"]["namespace"], pod["metadata"]["name"]
    node = next(iter(sim.store.iter_keys("nodes")))[1]
    sim.store.create("pods", {"metadata": {"name": "exec-bench", "namespace": "default"},
                              "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
                              "status": {"phase": "Running", "containerStatuses": [
                                  {"name": "c", "image": "i", "imageID": "", "ready": True, "restartCount": 0,
                                   "state": {"running": {}}}]}})
    return "default", "exec-bench"


async def _exec_rates(sim: ClusterSim, http: aiohttp.ClientSession, seconds: float, concurrency: int) -> None:
    ns, pod = _exec_pod(sim)
    base = f"/api/v1/namespaces/{ns}/pods/{pod}/exec"

    async def exec_echo(i: int) -> None:
        async with http.ws_connect(f"{base}?command=echo&command={i}&stdout=true&stderr=true",
                                   protocols=("v5.channel.k8s.io",)) as ws:
            frames = [msg.data async for msg in ws]
        assert frames[0] == b"\x01" + f"{i}\n".encode() and frames[-1].startswith(b"\x03"), frames

    async def exec_cat_stdin(i: int) -> None:
        async with http.ws_connect(f"{base}?command=cat&stdin=true&stdout=true&stderr=true",
                                   protocols=("v5.channel.k8s.io",)) as ws:
            await ws.send_bytes(b"\x00" + str(i).encode())
            await ws.send_bytes(b"\xff\x00")  # v5: stdin closed
            frames = [msg.data async for msg in ws]
        assert frames[0] == b"\x01" + str(i).encode(), frames

    await _rate("exec round trip (echo, v5)", seconds, concurrency, exec_echo)
    await _rate("exec round trip (cat + stdin EOF, v5)", seconds, concurrency, exec_cat_stdin)
    print(f"exec log entries: {len(sim.exec_router.log)}")


# A small 3.11-like host: enough for rpm/systemctl/cat to answer as on a real node.
HOSTS_SECTION = {
    "upstream_dns": ["10.0.0.2"],
    "catalog": {
        "cri-o": {"version": "1.11.16-0.11.dev.rhaos3.11.gitd6a416d.el7", "units": ["crio"]},
        "atomic-openshift-node": {"version": "3.11.161-1.git.0.f7b36bf.el7", "units": ["atomic-openshift-node"]},
    },
    "profiles": {"default": {
        "runtime": "cri-o",
        "packages": ["cri-o", "atomic-openshift-node"],
        "units": {"crio": {"enabled": True, "active": True},
                  "atomic-openshift-node": {"enabled": True, "active": True}},
        "files": {"/etc/resolv.conf": "search demo\nnameserver {ip}\n"},
    }},
}
SSH_COMMANDS = ("rpm -q cri-o", "systemctl is-active crio", "cat /etc/resolv.conf")


async def ssh_rates(hosts: int, seconds: float, concurrency: int) -> None:
    """Print SSH commands/s across ``hosts`` simulated hosts (kept connections, then one
    connection per command). Host keys are checked against the sim's known_hosts."""
    from clustersim.hosts import HostsComponent
    from clustersim.scenario import generate_scenario

    t0 = time.perf_counter()
    async with ClusterSim(generate_scenario(hosts, hosts * 2), component_sections={"hosts": HOSTS_SECTION}) as sim:
        hc = sim.components["hosts"]
        assert isinstance(hc, HostsComponent) and hc.client_key_path and hc.known_hosts_path
        targets = [(n, *addr.split(":")) for n, addr in sorted(hc.ssh_map.items())]
        print(f"ssh: {len(targets)} hosts up in {time.perf_counter() - t0:.2f} s")
        opts = {"username": "root", "client_keys": [str(hc.client_key_path)],
                "known_hosts": str(hc.known_hosts_path)}

        async def connect(i: int) -> asyncssh.SSHClientConnection:
            _, host, port = targets[i % len(targets)]
            return await asyncssh.connect(host, int(port), **opts)

        t1 = time.perf_counter()
        sem = asyncio.Semaphore(concurrency)

        async def bounded_connect(i: int) -> asyncssh.SSHClientConnection:
            async with sem:
                return await connect(i)

        conns = await asyncio.gather(*(bounded_connect(i) for i in range(len(targets))))
        print(f"ssh: {len(conns)} connections opened in {time.perf_counter() - t1:.2f} s")
        try:
            async def kept(i: int) -> None:
                r = await conns[i % len(conns)].run(SSH_COMMANDS[i % len(SSH_COMMANDS)], check=True)
                assert r.stdout, r

            async def fresh(i: int) -> None:
                async with await connect(i) as conn:
                    await conn.run(SSH_COMMANDS[i % len(SSH_COMMANDS)], check=True)

            await _rate(f"SSH commands across {len(targets)} hosts (kept conn)", seconds, concurrency, kept, "cmd/s")
            await _rate(f"SSH commands across {len(targets)} hosts (new conn)", seconds, concurrency, fresh, "cmd/s")
        finally:
            for c in conns:
                c.close()
            await asyncio.gather(*(c.wait_closed() for c in conns))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=20000)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--ssh-hosts", type=int, default=100, help="hosts for the SSH figure (0: skip)")
    ap.add_argument("--skip-api", action="store_true", help="only the SSH figure")
    args = ap.parse_args()
    if not args.skip_api:
        asyncio.run(main(args.nodes, args.pods, args.seconds, args.concurrency))
    if args.ssh_hosts:
        asyncio.run(ssh_rates(args.ssh_hosts, args.seconds, args.concurrency))
