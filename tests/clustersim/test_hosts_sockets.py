"""The hosts' ``command -v`` and ``ss``: what the preflight reads on a node.

The interpreter on its own (the recording world of test_hosts_interp.py) for the lookups and the
sockets a host's services imply, and the 3.11 scenarios (r3, r4, r5) over real SSH with
lockkeeper's SSHExecutor: dnsmasq on 53, the kubelet on 10250, the SDN's VXLAN on 4789/udp, etcd
on 2379-2380 and the API on 8443 on masters, and r5's VXLAN socket following ``ovs-vsctl set``.
"""

from __future__ import annotations

from typing import Any

import pytest

from activities.host.executors import SSHExecutor
from activities.preflight import ports
from clustersim.hosts import HostsComponent
from clustersim.hosts.interp import Interpreter
from clustersim.hosts.model import HostsSection, HostState, build_host
from clustersim.hosts.sockets import Listener, dnsmasq_listeners, parse_listen
from clustersim.sim import ClusterSim
from tests.clustersim.test_hosts_interp import SECTION, World

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def env() -> tuple[Interpreter, HostState, World]:
    section = HostsSection.model_validate(SECTION)
    world = World(section)
    host = build_host("gluster1.demo", section, "127.0.0.1", "node")
    return Interpreter(world, lambda: "2026-01-01T00:00:00Z"), host, world


async def run(env: Any, *argv: str) -> tuple[str, str, int]:
    interp, host, _ = env
    return await interp.run(host, list(argv))


async def test_command_v_finds_what_the_host_can_run(env: Any) -> None:
    interp, host, _ = env
    assert await run(env, "command", "-v", "crictl") == ("/usr/bin/crictl\n", "", 0)
    assert await run(env, "command", "-v", "iptables") == ("/usr/sbin/iptables\n", "", 0)
    assert await run(env, "command", "-v", "ss") == ("/usr/sbin/ss\n", "", 0)
    assert await run(env, "command", "-v", "true") == ("true\n", "", 0)  # a bash builtin prints its name
    assert await run(env, "command", "-v", "ansible-playbook") == ("", "", 1)
    assert await run(env, "command", "-v", "docker") == ("", "", 1)  # docker-client is not installed
    assert await run(env, "command", "-v", "/usr/bin/crictl") == ("/usr/bin/crictl\n", "", 0)
    assert await run(env, "command", "-v", "/bin/crictl") == ("/bin/crictl\n", "", 0)  # /bin is /usr/bin on RHEL 7
    assert await run(env, "command", "-v", "/opt/crictl") == ("", "", 1)
    assert await run(env, "command", "-v", "nosuch", "crictl") == ("/usr/bin/crictl\n", "", 0)  # bash: any found
    # A file in root's PATH is found, before the default install path.
    host.files["/usr/local/bin/ansible-playbook"] = "#!/usr/bin/python\n"
    assert await run(env, "command", "-v", "ansible-playbook") == ("/usr/local/bin/ansible-playbook\n", "", 0)
    # Under the SSH executor's wrappers, and as a plain command runner.
    assert await run(env, "sudo", "-n", "timeout", "-s", "KILL", "25", "command", "-v", "crictl") == ("/usr/bin/crictl\n", "", 0)
    assert await run(env, "command", "echo", "hi") == ("hi\n", "", 0)
    assert (await run(env, "command", "-p", "ls"))[2] == 2
    # A packaged binary goes with its package.
    assert (await run(env, "yum", "-y", "remove", "cri-tools"))[2] == 0
    assert await run(env, "command", "-v", "crictl") == ("", "", 1)
    assert interp.which(host, "crictl") is None


async def test_ss_lists_the_sockets_the_services_imply(env: Any) -> None:
    _, host, _ = env
    out, err, code = await run(env, "ss", "-Huln")
    assert (err, code) == ("", 0)
    # This profile's origin-dns.conf has no bind-dynamic: dnsmasq binds the wildcard (dnsmasq(8)).
    assert [s.local() for s in ports.parse_ss(out)] == ["0.0.0.0:53", "[::]:53"]
    assert all(s.state == "UNCONN" for s in ports.parse_ss(out))
    tcp = ports.parse_ss((await run(env, "ss", "-Htln"))[0])
    assert [s.local() for s in tcp] == ["0.0.0.0:22", "[::]:22", "0.0.0.0:53", "[::]:53", "127.0.0.1:10248", "*:10250",
                                        "*:10256"]
    assert {s.state for s in tcp} == {"LISTEN"}
    # Header unless -H; Netid column with both protocols; -p names the process.
    both, _, _ = await run(env, "ss", "-tulnp")
    assert both.splitlines()[0].split()[:2] == ["Netid", "State"]
    assert 'users:(("dnsmasq",' in both and {s.netid for s in ports.parse_ss(both)} == {"udp", "tcp"}
    assert (await run(env, "ss", "-Hl", "--udp"))[0].split()[3] == "0.0.0.0:domain"  # not numeric: service names
    assert (await run(env, "ss", "-Hun"))[0] == ""  # not listening: nothing modelled
    assert [s.local() for s in ports.parse_ss((await run(env, "ss", "-Hluln4"))[0])] == ["0.0.0.0:53"]
    assert (await run(env, "ss", "-Hulnx"))[2] == 255
    # Stopping a service closes its sockets; a down host has none.
    assert (await run(env, "systemctl", "stop", "dnsmasq"))[2] == 0
    assert ports.parse_ss((await run(env, "ss", "-Huln"))[0]) == []
    assert (await run(env, "systemctl", "stop", "atomic-openshift-node"))[2] == 0
    assert [s.port for s in ports.parse_ss((await run(env, "ss", "-Htln"))[0])] == [22, 22]
    host.listen = ["udp 0.0.0.0:4789"]
    assert [s.local() for s in ports.parse_ss((await run(env, "ss", "-Huln"))[0])] == ["0.0.0.0:4789"]


def test_dnsmasq_binds_as_its_configuration_says() -> None:
    host = HostState(name="n", ip="10.0.0.20")
    host.files["/etc/dnsmasq.d/origin-dns.conf"] = "bind-dynamic\nexcept-interface=lo\n"
    assert {(s.address, s.port) for s in dnsmasq_listeners(host)} == {("10.0.0.20", 53)}
    host.files["/etc/dnsmasq.d/origin-dns.conf"] = "bind-interfaces\n"
    assert {s.address for s in dnsmasq_listeners(host)} == {"10.0.0.20", "127.0.0.1"}
    host.files["/etc/dnsmasq.d/origin-dns.conf"] = "bind-interfaces\nlisten-address=127.0.0.1,10.0.0.20\n"
    host.files["/etc/dnsmasq.d/old.conf.rpmsave"] = "listen-address=192.0.2.1\n"
    assert [(s.proto, s.address) for s in dnsmasq_listeners(host)] == [
        ("udp", "127.0.0.1"), ("udp", "10.0.0.20"), ("tcp", "127.0.0.1"), ("tcp", "10.0.0.20")]
    assert parse_listen("tcp [::]:9100 node_exporter") == Listener("tcp", "::", 9100, "node_exporter")
    for bad in ("sctp 0.0.0.0:1", "udp 0.0.0.0", "udp 0.0.0.0:0"):
        with pytest.raises(ValueError):
            parse_listen(bad)
    with pytest.raises(ValueError):
        HostsSection.model_validate({"profiles": {"default": {"listen": ["udp 4789"]}}})


def _ssh(hc: HostsComponent, node: str) -> SSHExecutor:
    host, port = hc.ssh_map[node].split(":")
    assert hc.known_hosts_path is not None and hc.client_key_path is not None
    return SSHExecutor(host, port=int(port), user="root", known_hosts=hc.known_hosts_path,
                       client_keys=[str(hc.client_key_path)], connect_timeout=5)


async def _sockets(ex: SSHExecutor, proto: str) -> set[tuple[str, int]]:
    r = await ex.run(ports.ss_argv(proto), timeout=10)
    assert r.ok, r
    return {(s.address, s.port) for s in ports.parse_ss(r.stdout)}


@pytest.mark.parametrize(("scenario", "master", "node", "dns"), [
    ("r3-okd310-upgrade", "master01.example.com", "node01.example.com", "ip"),
    ("r4-crio-to-docker", "master1.demo", "compute1.demo", "0.0.0.0"),
    ("r5-vxlan-port", "ocp-master-01", "ocp-node-01", "ip"),
])
async def test_311_scenarios_show_their_services_over_ssh(scenario: str, master: str, node: str, dns: str) -> None:
    async with ClusterSim(scenario, time_scale=0.05) as sim:
        hc = sim.components["hosts"]
        assert isinstance(hc, HostsComponent)
        for name in (master, node):
            ex, ip = _ssh(hc, name), hc.host(name).ip
            udp, tcp = await _sockets(ex, "udp"), await _sockets(ex, "tcp")
            addr = ip if dns == "ip" else dns
            assert {(addr, 53), ("0.0.0.0", 4789)} <= udp, (name, udp)
            assert {(addr, 53), ("*", 10250), ("*", 10256), ("0.0.0.0", 22)} <= tcp, (name, tcp)
            on_master = {(ip, 2379), (ip, 2380), ("0.0.0.0", 8443), ("0.0.0.0", 8444)}
            assert on_master <= tcp if name == master else not on_master & tcp, (name, tcp)
            r = await ex.run(["command", "-v", "docker"], timeout=10)
            assert (r.exit_code, r.stdout) == (0, "/usr/bin/docker\n")
            r = await ex.run(["command", "-v", "ansible-playbook"], timeout=10)
            assert (r.exit_code, r.stdout) == (1, "")


async def test_r5_vxlan_socket_follows_the_ovs_port() -> None:
    async with ClusterSim("r5-vxlan-port", time_scale=0.05) as sim:
        hc = sim.components["hosts"]
        assert isinstance(hc, HostsComponent)
        ex = _ssh(hc, "ocp-node-02")
        assert ("0.0.0.0", 4789) in await _sockets(ex, "udp")
        r = await ex.run(["ovs-vsctl", "set", "interface", "vxlan0", "options:dst_port=4889"], timeout=10)
        assert r.ok, r
        udp = await _sockets(ex, "udp")
        assert ("0.0.0.0", 4889) in udp and ("0.0.0.0", 4789) not in udp
        assert ("0.0.0.0", 4789) in await _sockets(_ssh(hc, "ocp-node-03"), "udp")
