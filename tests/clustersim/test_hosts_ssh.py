"""Simulated hosts over real SSH with lockkeeper's own SSHExecutor (host keys verified), the
reboot sequence, the Node coupling and the admin endpoints."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import asyncssh
import pytest

from activities.host.models import ExecBackend, HostAccess
from activities.host.executors import NodeCommandError, SSHExecutor
from activities.host.factory import ExecutorFactory
from clustersim.hosts import HostEvent, HostsComponent
from clustersim.hosts.sshd import command_argv
from clustersim.sim import ClusterSim
from tests.support.smallcluster import make_node
from tests.clustersim.test_hosts_interp import SECTION

SCALE = 0.05  # reboot 20 s -> 1 s real; node monitor grace 10 s -> 0.5 s real


@pytest.fixture
async def sim() -> AsyncIterator[ClusterSim]:
    async with ClusterSim(None, time_scale=SCALE, component_sections={"hosts": SECTION}) as s:
        for name in ("gluster1.demo", "gluster2.demo"):
            s.store.create("nodes", make_node(name))
        yield s


def hosts_of(sim: ClusterSim) -> HostsComponent:
    hc = sim.components["hosts"]
    assert isinstance(hc, HostsComponent)
    return hc


def executor(sim: ClusterSim, node: str, known_hosts: Path | None = None) -> SSHExecutor:
    hc = hosts_of(sim)
    host, port = hc.ssh_map[node].split(":")
    assert hc.known_hosts_path is not None and hc.client_key_path is not None
    return SSHExecutor(host, port=int(port), user="root", known_hosts=known_hosts or hc.known_hosts_path,
                       client_keys=[str(hc.client_key_path)], connect_timeout=5)


async def wait_for(pred: Callable[[], Any], timeout: float = 20.0) -> Any:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        got = pred()
        if got:
            return got
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached in time")


def ready(sim: ClusterSim, node: str) -> tuple[str, str]:
    c = next(c for c in sim.store.get("nodes", node)["status"]["conditions"] if c["type"] == "Ready")
    return c["status"], c.get("message", "")


async def test_commands_over_ssh_with_host_key_verification(sim: ClusterSim, tmp_path: Path) -> None:
    ex = executor(sim, "gluster1.demo")
    r = await ex.run(["rpm", "-q", "cri-o", "docker"], timeout=10)
    assert r.exit_code == 1
    assert r.stdout == "cri-o-1.11.16-0.11.dev.rhaos3.11.gitd6a416d.el7.x86_64\npackage docker is not installed\n"
    r = await ex.run(["grep", "BOOTSTRAP_CONFIG", "/etc/sysconfig/atomic-openshift-node"], timeout=10)
    assert (r.exit_code, r.stdout) == (0, "BOOTSTRAP_CONFIG_NAME=node-config-infra-crio\n")
    r = await ex.run(["tee", "/etc/origin/node/x.tmp"], timeout=10, stdin="payload\n")
    assert r.exit_code == 0
    assert (await ex.run(["mv", "/etc/origin/node/x.tmp", "/etc/origin/node/x"], timeout=10)).exit_code == 0
    assert hosts_of(sim).host("gluster1.demo").files["/etc/origin/node/x"] == "payload\n"
    assert (await ex.run(["nosuch"], timeout=10)).stderr == "sh: nosuch: command not found\n"
    # The other host's key for this address is not this host's: the connection is refused.
    hc = hosts_of(sim)
    wrong = tmp_path / "known_hosts"
    port1 = hc.ssh_map["gluster1.demo"].split(":")[1]
    wrong.write_text(f"[127.0.0.1]:{port1} {hc.servers['gluster2.demo'].host_key_line}\n")
    with pytest.raises(NodeCommandError):
        await executor(sim, "gluster1.demo", known_hosts=wrong).run(["true"], timeout=10)
    log = hc.host("gluster1.demo").log
    assert log[0].argv == ["rpm", "-q", "cri-o", "docker"] and log[0].via == "ssh" and log[0].exit == 1


async def test_reboot_drops_session_refuses_then_returns_with_new_boot_id(sim: ClusterSim) -> None:
    hc = hosts_of(sim)
    events: list[HostEvent] = []
    hc.subscribe(events.append)
    ex = executor(sim, "gluster1.demo")
    seen: list[str] = []  # every Ready status the Node goes through (no polling window to miss)
    sub = sim.store.subscribe(["nodes"])

    async def watch() -> None:
        async for ev in sub:
            if ev.object["metadata"]["name"] == "gluster1.demo":
                status = next(c["status"] for c in ev.object["status"]["conditions"] if c["type"] == "Ready")
                if not seen or seen[-1] != status:
                    seen.append(status)

    watcher = asyncio.create_task(watch())
    boot = (await ex.run(["cat", "/proc/sys/kernel/random/boot_id"], timeout=10)).stdout.strip()
    await ex.run(["systemctl", "disable", "crio"], timeout=10)
    r = await ex.run(["systemctl", "reboot"], timeout=10)
    assert r.exit_code is None and not r.timed_out  # lost connection, no exit status
    with pytest.raises(NodeCommandError):
        await ex.run(["true"], timeout=5)
    host = hc.host("gluster1.demo")
    await wait_for(lambda: host.up, timeout=30)
    r = await ex.run(["cat", "/proc/sys/kernel/random/boot_id"], timeout=10)
    assert r.exit_code == 0 and r.stdout.strip() not in ("", boot)
    assert host.boot_count == 2 and host.boot_ids == [boot, r.stdout.strip()]
    # Enabled units came back, the disabled runtime did not: the kubelet reports it down.
    assert (await ex.run(["systemctl", "is-active", "atomic-openshift-node", "crio"], timeout=10)).stdout == \
        "active\ninactive\n"
    assert await wait_for(lambda: ready(sim, "gluster1.demo") == ("False", "container runtime is down"))
    assert sim.store.get("nodes", "gluster1.demo")["status"]["nodeInfo"]["bootID"] == host.boot_id
    watcher.cancel()
    sub.close()
    assert seen[seen.index("Unknown"):] == ["Unknown", "False"]  # node controller after the grace, then the kubelet
    kinds = [e.kind for e in events]
    assert kinds[0] == "reboot_started" and kinds[-1] == "reboot_done" and "runtime_stopped" in kinds


async def test_node_service_and_runtime_drive_node_readiness(sim: ClusterSim) -> None:
    hc = hosts_of(sim)
    events: list[HostEvent] = []
    hc.subscribe(events.append)
    ex = executor(sim, "gluster2.demo")
    await ex.run(["systemctl", "stop", "crio"], timeout=10)
    assert ready(sim, "gluster2.demo") == ("False", "container runtime is down")
    await ex.run(["systemctl", "start", "crio"], timeout=10)
    assert ready(sim, "gluster2.demo")[0] == "True"
    loop = asyncio.get_running_loop()
    sent = loop.time()
    await ex.run(["systemctl", "stop", "atomic-openshift-node"], timeout=10)
    await wait_for(lambda: ready(sim, "gluster2.demo") == ("Unknown", "Kubelet stopped posting node status."))
    # The node controller waited for the grace (10 simulated seconds) after the kubelet stopped.
    assert loop.time() - sent >= sim.clock.real(10)
    taints = sim.store.get("nodes", "gluster2.demo")["spec"]["taints"]
    assert {"node.kubernetes.io/unreachable"} == {t["key"] for t in taints}
    assert [e.kind for e in events] == ["runtime_stopped", "runtime_started", "node_service_stopped"]


async def test_wrong_order_breaks_dns_after_reboot(sim: ClusterSim) -> None:
    """R4 symptom (b): wiping /etc/origin before copying its resolv.conf leaves /etc/resolv.conf
    on the node address; with dnsmasq gone, nothing resolves after the reboot."""
    hc = hosts_of(sim)
    for node, order in (("gluster1.demo", "right"), ("gluster2.demo", "wrong")):
        ex = executor(sim, node)
        steps = [["systemctl", "stop", "dnsmasq"], ["systemctl", "disable", "dnsmasq"],
                 ["yum", "-y", "remove", "dnsmasq"], ["rm", "-rf", "/etc/origin"]]
        cp = ["cp", "-f", "/etc/origin/node/resolv.conf", "/etc/resolv.conf"]
        steps = [cp, *steps] if order == "right" else [*steps, cp]
        codes = [(await ex.run(s, timeout=10)).exit_code for s in steps]
        assert codes == ([0, 0, 0, 0, 0] if order == "right" else [0, 0, 0, 0, 1])
        await ex.run(["reboot"], timeout=10)
    await wait_for(lambda: all(h.up and h.boot_count == 2 for h in hc.hosts.values()), timeout=30)
    good = await executor(sim, "gluster1.demo").run(["getent", "hosts", "master.demo"], timeout=10)
    bad = await executor(sim, "gluster2.demo").run(["getent", "hosts", "master.demo"], timeout=10)
    assert (good.exit_code, good.stdout) == (0, "10.0.0.10       master.demo\n")
    assert (bad.exit_code, bad.stdout) == (2, "")


async def test_admin_endpoints_and_ssh_down_fault(sim: ClusterSim) -> None:
    ex = executor(sim, "gluster1.demo")
    await ex.run(["hostname"], timeout=10)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{sim.url}/_sim/hosts") as resp:
            body = await resp.json()
        assert set(body["hosts"]) == {"gluster1.demo", "gluster2.demo"}
        assert body["ssh_map"] == hosts_of(sim).ssh_map and Path(body["known_hosts_path"]).is_file()
        async with http.get(f"{sim.url}/_sim/hosts/gluster1.demo") as resp:
            h = await resp.json()
        assert h["log"][-1]["argv"] == ["hostname"] and h["log"][-1]["exit"] == 0 and h["boot_count"] == 1
        assert h["packages"]["cri-o"].startswith("1.11.16") and h["units"]["crio"] == {"enabled": True, "active": True}
        assert h["host_key"].startswith("ssh-ed25519 ")
        assert any("--dport 4789" in r for r in h["iptables"]["runtime"])
        async with http.get(f"{sim.url}/_sim/hosts/nope") as resp:
            assert resp.status == 404
        async with http.post(f"{sim.url}/_sim/hosts/gluster1.demo/fault", json={"fault": "ssh_down"}) as resp:
            assert resp.status == 200
        with pytest.raises(NodeCommandError):
            await ex.run(["true"], timeout=5)
        async with http.post(f"{sim.url}/_sim/hosts/gluster1.demo/fault", json={"fault": "ssh_down", "clear": True}):
            pass
        assert (await ex.run(["true"], timeout=10)).exit_code == 0
        async with http.post(f"{sim.url}/_sim/hosts/gluster1.demo/fault", json={"fault": "bogus"}) as resp:
            assert resp.status == 400
        # The masters component asks api_start_blocked() before starting a master API.
        ca = "/etc/origin/master/ldap_ca.crt"
        async with http.post(f"{sim.url}/_sim/hosts/gluster1.demo/fault",
                             json={"fault": f"api_start_blocked_until_file={ca}"}) as resp:
            assert (await resp.json())["faults"] == [f"api_start_blocked_until_file={ca}"]
    hc = hosts_of(sim)
    assert hc.api_start_blocked("gluster1.demo") == ca and hc.api_start_blocked("gluster2.demo") is None
    assert (await ex.run(["mkdir", "-p", "/etc/origin/master"], timeout=10)).exit_code == 0
    assert (await ex.run(["tee", ca], timeout=10, stdin="-----BEGIN CERTIFICATE-----\n")).exit_code == 0
    assert hc.api_start_blocked("gluster1.demo") is None


async def test_executor_factory_from_the_exported_environment(sim: ClusterSim) -> None:
    """What a worker does in production: key, known_hosts and user from its environment."""
    hc = hosts_of(sim)
    env = hc.client_env()
    factory = ExecutorFactory(env)
    for node, address in hc.ssh_map.items():
        host, port = address.split(":")
        ex = factory.for_access(HostAccess(backend=ExecBackend.SSH, host=host, port=int(port)))
        r = await ex.run(["hostname"], timeout=10)
        assert (r.exit_code, r.stdout) == (0, f"{node}\n")
    assert json.loads(Path(env["CLUSTERSIM_SSH_MAP"]).read_text()) == hc.ssh_map


async def test_host_state_shows_the_sdn_port_when_modelled() -> None:
    async with ClusterSim("r5-vxlan-port", time_scale=SCALE) as s:
        hc = hosts_of(s)
        name = sorted(hc.hosts)[0]
        async with aiohttp.ClientSession() as http, http.get(f"{s.url}/_sim/hosts/{name}") as resp:
            body = await resp.json()
        assert body["ovs"] == {"vxlan0": {"dst_port": "4789"}}


async def test_faults_dns_breaks_on_reboot_and_pull_slow(sim: ClusterSim) -> None:
    hc = hosts_of(sim)
    ex = executor(sim, "gluster2.demo")
    await hc.set_fault("gluster2.demo", "dns_breaks_on_reboot")
    assert (await ex.run(["getent", "hosts", "master.demo"], timeout=10)).exit_code == 0
    await ex.run(["reboot"], timeout=10)
    host = hc.host("gluster2.demo")
    await wait_for(lambda: host.up and host.boot_count == 2, timeout=30)
    assert (await ex.run(["getent", "hosts", "master.demo"], timeout=10)).exit_code == 2
    assert (await ex.run(["systemctl", "is-active", "dnsmasq"], timeout=10)).stdout == "inactive\n"
    assert "dns_breaks_on_reboot" not in host.faults  # one boot only
    assert (await ex.run(["systemctl", "start", "dnsmasq"], timeout=10)).exit_code == 0
    assert (await ex.run(["getent", "hosts", "master.demo"], timeout=10)).exit_code == 0
    assert hc.pull_seconds(host) == 5
    await hc.set_fault("gluster2.demo", "pull_slow")
    assert hc.pull_seconds(host) == 50
    await hc.set_fault("gluster2.demo", "pull_slow", clear=True)
    assert hc.pull_seconds(host) == 5
    with pytest.raises(ValueError):
        await hc.set_fault("gluster2.demo", "nonsense")


async def test_raw_command_lines_with_shell_operators(sim: ClusterSim) -> None:
    """An operator's ``ssh host 'a; b'`` goes through the small sh -c, not into argv."""
    assert command_argv("systemctl stop dnsmasq; systemctl disable dnsmasq") == [
        "sh", "-c", "systemctl stop dnsmasq; systemctl disable dnsmasq"]
    assert command_argv("grep -- '--dport 4889' /etc/sysconfig/iptables") == [
        "grep", "--", "--dport 4889", "/etc/sysconfig/iptables"]
    assert command_argv("echo 'a;b'") == ["echo", "a;b"]
    hc = hosts_of(sim)
    host, port = hc.ssh_map["gluster1.demo"].split(":")
    async with asyncssh.connect(host, port=int(port), username="root", known_hosts=str(hc.known_hosts_path),
                                client_keys=[str(hc.client_key_path)], agent_path=None) as conn:
        r = await conn.run("systemctl stop dnsmasq && systemctl is-active dnsmasq", check=False)
        assert (r.exit_status, r.stdout) == (3, "inactive\n")
        r = await conn.run("docker ps | grep k8s_sdn", check=False)
        assert r.exit_status == 2 and "not simulated" in str(r.stderr)


async def test_stop_ends_a_command_still_running() -> None:
    """A slow pull in flight when the simulator stops does not keep it alive."""
    s = ClusterSim(None, time_scale=1.0, component_sections={"hosts": SECTION})
    await s.start()
    try:
        ex = executor(s, "gluster1.demo")
        pull = asyncio.create_task(ex.run(["crictl", "pull", "registry.redhat.io/openshift3/ose-node:v3.11"],
                                          timeout=60))
        await wait_for(lambda: hosts_of(s).host("gluster1.demo").log)  # the pull started (5 s real)
    finally:
        await s.stop()
    r = await pull
    # Cut, not waited for: a pull that completed would have exited 0.
    assert r.exit_code is None and not r.timed_out


@pytest.mark.parametrize("given_up_by", ["timeout", "cancel"])
async def test_a_command_given_up_is_killed_on_the_host(sim: ClusterSim, given_up_by: str) -> None:
    """An SSH server leaves a command running when its client goes away; the executor sends
    SIGKILL first (RFC 4254 6.9), so a pull given up at its timeout or by a cancelled call never
    lands later behind an unknown outcome."""
    hc = hosts_of(sim)
    host = hc.host("gluster1.demo")
    await hc.set_fault("gluster1.demo", "pull_slow")  # 50 s simulated: 2.5 s real
    image = "registry.redhat.io/openshift3/ose-node:v3.11"
    ex = executor(sim, "gluster1.demo")
    if given_up_by == "timeout":
        r = await ex.run(["crictl", "pull", image], timeout=0.5)
        assert r.timed_out and r.exit_code is None
    else:
        call = asyncio.create_task(ex.run(["crictl", "pull", image], timeout=60))
        await wait_for(lambda: any(rec.argv[:2] == ["crictl", "pull"] for rec in host.log))
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    await asyncio.sleep(sim.clock.real(hc.pull_seconds(host)) + 1.0)  # past the pull's own end
    assert image not in host.images
    pull = next(rec for rec in host.log if rec.argv[:2] == ["crictl", "pull"])
    assert pull.exit is None  # cut where it was, not ended


async def test_an_old_sshd_ignores_the_kill_and_the_host_bound_ends_the_command(sim: ClusterSim) -> None:
    """RHEL 7's OpenSSH 7.4 refuses a client's signal request, so a command given up runs on; the
    executor's ``timeout -s KILL`` bound still ends it on the host, where it is."""
    hc = hosts_of(sim)
    host = hc.host("gluster1.demo")
    host.openssh = "7.4p1"
    await hc.set_fault("gluster1.demo", "pull_slow")  # 50 s simulated: 2.5 s real
    pull_real = sim.clock.real(hc.pull_seconds(host))
    image = "registry.redhat.io/openshift3/ose-node:v3.11"
    ssh_host, port = hc.ssh_map["gluster1.demo"].split(":")
    # The model first: without a bound, a pull whose client signals it and leaves lands anyway.
    async with asyncssh.connect(ssh_host, port=int(port), username="root", known_hosts=str(hc.known_hosts_path),
                                client_keys=[str(hc.client_key_path)], agent_path=None) as conn:
        proc = await conn.create_process(f"crictl pull {image}")
        await wait_for(lambda: any(rec.argv[:2] == ["crictl", "pull"] for rec in host.log))
        proc.kill()
    await wait_for(lambda: image in host.images, timeout=pull_real + 5)
    host.images.discard(image)
    # lockkeeper's executor: given up at 0.3 s, killed by the host at 0.8 s, long before 2.5 s.
    ex = executor(sim, "gluster1.demo")
    ex.remote_grace = 0.5
    r = await ex.run(["crictl", "pull", image], timeout=0.3)
    assert r.timed_out and r.exit_code is None
    killed = await wait_for(lambda: [rec for rec in host.log if rec.bound_seconds is not None and rec.end])
    assert [(rec.argv, rec.bound_seconds, rec.exit) for rec in killed] == [(["crictl", "pull", image], 0.8, 137)]
    await asyncio.sleep(pull_real + 0.5)  # past the pull's own end
    assert image not in host.images


async def test_a_user_other_than_root_runs_host_commands_through_sudo(sim: ClusterSim) -> None:
    """As RHCOS's ``core``: the executor's ``sudo -n`` reaches the host and the command runs."""
    ex = executor(sim, "gluster1.demo")
    ex.user, ex.sudo = "core", True
    r = await ex.run(["tee", "/etc/origin/node/by-core"], timeout=10, stdin="x\n")
    assert r.exit_code == 0, r
    host = hosts_of(sim).host("gluster1.demo")
    assert host.files["/etc/origin/node/by-core"] == "x\n"
    assert (host.log[-1].argv, host.log[-1].sudo, host.log[-1].bound_seconds) == (
        ["tee", "/etc/origin/node/by-core"], True, 15.0)
