"""The host command interpreter on its own: outputs and exit codes of procedures-spec §8.3.

The world around the host is a small recording stand-in (the interpreter's only collaborator);
the SSH and cluster coupling are tested in test_hosts_ssh.py / test_hosts_world.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from clustersim.hosts.ctx import SessionDropped
from clustersim.hosts.interp import Interpreter
from clustersim.hosts.model import HostsSection, HostState, PackageDef, build_host
from clustersim.hosts.netcmd import load_saved_at_boot

WATERMARK = "# nameserver updated by /etc/NetworkManager/dispatcher.d/99-origin-dns.sh"
RULE_4789 = ["OS_FIREWALL_ALLOW", "-p", "udp", "-m", "state", "--state", "NEW", "-m", "udp", "--dport", "4789",
             "-j", "ACCEPT"]

#: A small 3.11 node (used by the other test_hosts_* modules too).
SECTION: dict[str, Any] = {
    "options": {"reboot_seconds": 20, "node_monitor_grace_seconds": 10, "pull_seconds": 5, "join_seconds": 5},
    "upstream_dns": ["10.0.0.2"],
    "dns": {"master.demo": "10.0.0.10", "registry.demo": "10.0.0.20"},
    "registry_images": ["registry.redhat.io/openshift3/ose-node:v3.11"],
    "catalog": {
        "dnsmasq": {"version": "2.76-10.el7_7.1", "units": ["dnsmasq"]},
        "cri-o": {"version": "1.11.16-0.11.dev.rhaos3.11.gitd6a416d.el7", "units": ["crio"]},
        "cri-tools": {"version": "1.11.1-1.rhaos3.11.gitedabfb5.el7"},
        "docker": {"version": "1.13.1-161.git64e9980.el7_8", "units": ["docker"]},
        "docker-client": {"version": "1.13.1-161.git64e9980.el7_8"},
        "iptables-services": {"version": "1.4.21-34.el7", "units": ["iptables"]},
        "atomic-openshift-excluder": {"version": "3.11.161-1.git.0.f7b36bf.el7", "arch": "noarch"},
        "atomic-openshift-node": {
            "version": "3.11.161-1.git.0.f7b36bf.el7", "units": ["atomic-openshift-node"],
            "files": {"/etc/sysconfig/atomic-openshift-node": "BOOTSTRAP_CONFIG_NAME=node-config-infra-crio\n"},
            "config_files": ["/etc/sysconfig/atomic-openshift-node"],
        },
    },
    "profiles": {
        "default": {
            "runtime": "cri-o",
            "packages": ["dnsmasq", "cri-o", "cri-tools", "iptables-services", "atomic-openshift-excluder",
                         "atomic-openshift-node"],
            "units": {"dnsmasq": {"enabled": True, "active": True}, "crio": {"enabled": True, "active": True},
                      "iptables": {"enabled": True, "active": True},
                      "atomic-openshift-node": {"enabled": True, "active": True}},
            "files": {
                "/etc/resolv.conf": WATERMARK + "\nsearch demo\nnameserver {ip}\n",
                "/etc/origin/node/resolv.conf": "nameserver 10.0.0.2\n",
                "/etc/dnsmasq.d/origin-upstream-dns.conf": "server=10.0.0.2\n",
                "/etc/dnsmasq.d/origin-dns.conf": "no-resolv\n",
                "/etc/hosts": "127.0.0.1 localhost\n",
                "/etc/NetworkManager/dispatcher.d/99-origin-dns.sh": "#!/bin/bash\n",
            },
            "iptables": ["-N OS_FIREWALL_ALLOW", "-A INPUT -j OS_FIREWALL_ALLOW",
                         "-A OS_FIREWALL_ALLOW -p udp -m state --state NEW -m udp --dport 4789 -j ACCEPT"],
        },
    },
    "hosts": {"gluster1.demo": {"ip": "10.0.1.11"}, "gluster2.demo": {"ip": "10.0.1.12"}},
}


class World:
    """Records what the interpreter asks of the world; no cluster behind it."""

    def __init__(self, section: HostsSection) -> None:
        self.section = section
        self.changes: list[tuple[str, str, bool]] = []
        self.reboots: list[str] = []
        self.slept = 0.0
        self.real_seconds = 0.0  # real time each sim_sleep takes (0: none, just a yield)
        self.pods: list[dict[str, Any]] = []

    def unit_changed(self, host: HostState, unit: str, was_active: bool) -> None:
        self.changes.append((host.name, unit, host.unit_active(unit)))

    def request_reboot(self, host: HostState) -> None:
        self.reboots.append(host.name)

    def catalog(self) -> dict[str, PackageDef]:
        return self.section.catalog

    def registry_images(self) -> set[str]:
        return set(self.section.registry_images)

    def pods_on(self, host: HostState) -> list[dict[str, Any]]:
        return self.pods

    async def sim_sleep(self, sim_seconds: float) -> None:
        self.slept += sim_seconds
        await asyncio.sleep(self.real_seconds)

    def pull_seconds(self, host: HostState) -> float:
        return self.section.options.pull_seconds


@pytest.fixture
def env() -> tuple[Interpreter, HostState, World]:
    section = HostsSection.model_validate(SECTION)
    world = World(section)
    host = build_host("gluster1.demo", section, "127.0.0.1", "node")
    return Interpreter(world, lambda: "2026-01-01T00:00:00Z"), host, world


async def run(env: tuple[Interpreter, HostState, World], *argv: str, stdin: bytes = b"") -> tuple[str, str, int]:
    interp, host, _ = env
    return await interp.run(host, list(argv), stdin=stdin)


async def test_systemctl_states_and_messages(env: Any) -> None:
    assert await run(env, "systemctl", "is-active", "crio") == ("active\n", "", 0)
    assert await run(env, "systemctl", "is-active", "docker") == ("unknown\n", "", 3)
    assert await run(env, "systemctl", "stop", "docker") == (
        "", "Failed to stop docker.service: Unit docker.service not loaded.\n", 5)
    assert await run(env, "systemctl", "disable", "docker") == (
        "", "Failed to execute operation: No such file or directory\n", 1)
    assert await run(env, "systemctl", "is-enabled", "docker") == (
        "", "Failed to get unit file state for docker.service: No such file or directory\n", 1)
    assert await run(env, "systemctl", "stop", "atomic-openshift-node", "crio") == ("", "", 0)
    assert await run(env, "systemctl", "is-active", "crio") == ("inactive\n", "", 3)
    out, err, code = await run(env, "systemctl", "disable", "crio.service")
    assert code == 0 and err == "Removed symlink /etc/systemd/system/multi-user.target.wants/crio.service.\n"
    assert await run(env, "systemctl", "is-enabled", "crio") == ("disabled\n", "", 1)
    world = env[2]
    assert world.changes == [("gluster1.demo", "atomic-openshift-node", False), ("gluster1.demo", "crio", False)]


async def test_rpm_and_yum_remove_keeps_rpmsave(env: Any) -> None:
    assert await run(env, "rpm", "-q", "cri-o") == ("cri-o-1.11.16-0.11.dev.rhaos3.11.gitd6a416d.el7.x86_64\n", "", 0)
    assert await run(env, "rpm", "-q", "docker", "criu") == (
        "package docker is not installed\npackage criu is not installed\n", "", 2)
    out, _, code = await run(env, "rpm", "-qa", "--qf", "%{NAME}\\n")
    assert code == 0 and "atomic-openshift-excluder\n" in out and "%" not in out
    out, _, code = await run(env, "yum", "-y", "remove", "criu", "cri-o", "atomic-openshift-node", "dnsmasq")
    assert code == 0 and "No Match for argument: criu" in out and out.endswith("Complete!\n")
    _, host, world = env
    assert "crio" not in host.units and "dnsmasq" not in host.units
    assert ("gluster1.demo", "dnsmasq", False) in world.changes
    # The changed %config file stays behind as .rpmsave (what the seed's rm -fr then removes).
    assert await run(env, "cat", "/etc/sysconfig/atomic-openshift-node.rpmsave") == (
        "BOOTSTRAP_CONFIG_NAME=node-config-infra-crio\n", "", 0)
    assert await run(env, "rpm", "-q", "cri-o") == ("package cri-o is not installed\n", "", 1)
    assert (await run(env, "yum", "install", "-y", "nothere"))[1:] == ("Error: Nothing to do\n", 1)
    out, _, code = await run(env, "yum", "-y", "install", "docker")
    assert code == 0 and "Installed:" in out and host.units["docker"].enabled is False


async def test_files_find_wipe_and_shell_glob(env: Any) -> None:
    assert await run(env, "cp", "-f", "/etc/origin/node/resolv.conf", "/etc/") == ("", "", 0)
    assert await run(env, "cat", "/etc/resolv.conf") == ("nameserver 10.0.0.2\n", "", 0)
    assert await run(env, "cat", "/nope") == ("", "cat: /nope: No such file or directory\n", 1)
    assert await run(env, "grep", "BOOTSTRAP_CONFIG", "/nope") == ("", "grep: /nope: No such file or directory\n", 2)
    assert await run(env, "rm", "-rf", "/etc/origin", "/etc/sysconfig/atomic-openshift-node.rpmsave") == ("", "", 0)
    assert (await run(env, "test", "!", "-e", "/etc/origin"))[2] == 0
    assert (await run(env, "test", "-e", "/etc/origin"))[2] == 1
    out, _, _ = await run(env, "find", "/etc/dnsmasq.d", "-mindepth", "1", "-maxdepth", "1")
    assert out == "/etc/dnsmasq.d/origin-dns.conf\n/etc/dnsmasq.d/origin-upstream-dns.conf\n"
    assert await run(env, "sh", "-c", "rm -fr /etc/dnsmasq.d/* && ls /etc/dnsmasq.d") == ("", "", 0)
    assert (await run(env, "test", "-d", "/etc/dnsmasq.d"))[2] == 0  # the directory stays
    assert (await run(env, "sh", "-c", "cat /etc/hosts | grep x"))[2] == 2  # pipes are not simulated
    # Atomic replace: write a temp file from stdin, then rename over the target.
    assert await run(env, "tee", "/etc/hosts.tmp", stdin=b"10.0.0.10 master.demo\n") == ("10.0.0.10 master.demo\n", "", 0)
    assert await run(env, "mv", "-f", "/etc/hosts.tmp", "/etc/hosts") == ("", "", 0)
    assert await run(env, "ls", "/etc/hosts.tmp") == ("", "ls: cannot access /etc/hosts.tmp: No such file or directory\n", 2)
    assert await run(env, "stat", "-c", "%s %F", "/etc/hosts") == ("22 regular file\n", "", 0)


async def test_unknown_and_removed_binaries(env: Any) -> None:
    assert await run(env, "frobnicate", "x") == ("", "sh: frobnicate: command not found\n", 127)
    assert (await run(env, "crictl", "ps"))[2] == 0
    await run(env, "yum", "-y", "remove", "cri-tools")
    assert await run(env, "crictl", "ps") == ("", "sh: crictl: command not found\n", 127)
    assert await run(env, "env", "A=1", "hostname") == ("gluster1.demo\n", "", 0)


async def test_reboot_commands_drop_the_session(env: Any) -> None:
    for argv in (["reboot"], ["systemctl", "reboot"], ["shutdown", "-r", "now"]):
        with pytest.raises(SessionDropped):
            await run(env, *argv)
    _, host, world = env
    assert world.reboots == ["gluster1.demo"] * 3
    assert [r.exit for r in host.log] == [None, None, None]


async def test_iptables_runtime_saved_and_boot(env: Any) -> None:
    _, host, _ = env
    new = [*RULE_4789[:-3], "4889", "-j", "ACCEPT"]
    assert await run(env, "iptables", "-C", *new) == (
        "", "iptables: Bad rule (does a matching rule exist in that chain?).\n", 1)
    assert await run(env, "iptables", "-A", *new) == ("", "", 0)
    assert (await run(env, "iptables", "-C", *new))[2] == 0
    assert host.allows_udp(4889) and host.allows_udp(4789)
    out, _, _ = await run(env, "iptables", "-S", "OS_FIREWALL_ALLOW")
    assert out.splitlines()[0] == "-N OS_FIREWALL_ALLOW" and "--dport 4889" in out
    load_saved_at_boot(host)  # not saved: a reboot loses the rule
    assert not host.allows_udp(4889)
    await run(env, "iptables", "-A", *new)
    assert await run(env, "/usr/libexec/iptables/iptables.init", "save") == (
        "iptables: Saving firewall rules to /etc/sysconfig/iptables:[  OK  ]\n", "", 0)
    assert (await run(env, "grep", "--", "--dport 4889", "/etc/sysconfig/iptables"))[2] == 0
    load_saved_at_boot(host)
    assert host.allows_udp(4889)
    assert (await run(env, "iptables", "-D", *new))[2] == 0
    assert (await run(env, "iptables", "-D", *new))[2] == 1


async def test_dns_follows_resolv_conf_and_dnsmasq(env: Any) -> None:
    assert await run(env, "getent", "hosts", "master.demo") == ("10.0.0.10       master.demo\n", "", 0)
    await run(env, "systemctl", "stop", "dnsmasq")
    # resolv.conf still points at the node address (dnsmasq): no resolver answers.
    assert await run(env, "getent", "hosts", "master.demo") == ("", "", 2)
    out, _, code = await run(env, "nslookup", "master.demo")
    assert code == 1 and "no servers could be reached" in out
    await run(env, "cp", "-f", "/etc/origin/node/resolv.conf", "/etc/resolv.conf")
    assert (await run(env, "getent", "hosts", "master.demo"))[2] == 0
    assert (await run(env, "getent", "hosts", "unknown.demo"))[2] == 2
    assert await run(env, "nslookup", "master.demo") == (
        "Server:\t\t10.0.0.2\nAddress:\t10.0.0.2#53\n\nName:\tmaster.demo\nAddress: 10.0.0.10\n\n", "", 0)
    out, _, code = await run(env, "nslookup", "unknown.demo")
    assert code == 1 and "** server can't find unknown.demo: NXDOMAIN" in out
    # /etc/hosts answers getent but not nslookup (DNS only).
    await run(env, "tee", "-a", "/etc/hosts", stdin=b"10.9.9.9 local.only\n")
    assert (await run(env, "getent", "hosts", "local.only"))[0] == "10.9.9.9        local.only\n"
    assert (await run(env, "nslookup", "local.only"))[2] == 1


async def test_container_runtime_images_and_ps(env: Any) -> None:
    _, host, world = env
    world.pods = [{"metadata": {"name": "glusterfs-storage-abcde", "namespace": "glusterfs", "uid": "u1"},
                   "spec": {"containers": [{"name": "glusterfs", "image": "rhgs3/rhgs-server-rhel7:v3.11"}]},
                   "status": {"phase": "Running", "containerStatuses": [{"name": "glusterfs", "restartCount": 2}]}}]
    out, _, code = await run(env, "crictl", "ps")
    assert code == 0 and "glusterfs" in out
    assert await run(env, "docker", "ps") == ("", "sh: docker: command not found\n", 127)
    await run(env, "yum", "-y", "install", "docker", "docker-client")
    assert (await run(env, "docker", "ps"))[1].startswith("Cannot connect to the Docker daemon")
    await run(env, "systemctl", "stop", "crio")
    host.runtime = "docker"
    await run(env, "systemctl", "start", "docker")
    out, _, _ = await run(env, "docker", "ps")
    assert "k8s_glusterfs_glusterfs-storage-abcde_glusterfs_u1_2" in out
    img = "registry.redhat.io/openshift3/ose-node:v3.11"
    out, err, code = await run(env, "docker", "image", "inspect", img)
    assert (out, err, code) == ("[]\n", f"Error: No such image: {img}\n", 1)
    out, _, code = await run(env, "docker", "pull", img)
    assert code == 0 and f"Status: Downloaded newer image for {img}" in out and world.slept == 5
    assert (await run(env, "docker", "image", "inspect", img))[2] == 0
    assert (await run(env, "docker", "pull", "example.com/nothere:1"))[2] == 1


async def test_docker_exec_runs_on_the_host_in_a_known_container(env: Any) -> None:
    interp, host, world = env
    world.pods = [{"metadata": {"name": "sdn-x7k2p", "namespace": "openshift-sdn", "uid": "u2"},
                   "spec": {"containers": [{"name": "sdn", "image": "ose-node:v3.11"}]},
                   "status": {"phase": "Running", "containerStatuses": [{"name": "sdn", "restartCount": 0}]}}]
    await run(env, "yum", "-y", "install", "docker", "docker-client")
    await run(env, "systemctl", "stop", "crio")
    host.runtime = "docker"
    await run(env, "systemctl", "start", "docker")
    cid = (await run(env, "docker", "ps", "--filter", "name=k8s_sdn_sdn", "-q"))[0].strip()
    assert len(cid) == 12
    assert await run(env, "docker", "exec", cid, "hostname") == ("gluster1.demo\n", "", 0)
    assert await run(env, "docker", "exec", "deadbeef", "hostname") == ("", "Error: No such container: deadbeef\n", 1)


async def test_timeout_bounds_a_command_in_real_seconds_and_logs_the_command_it_ran(env: Any) -> None:
    """coreutils ``timeout`` as lockkeeper's SSH executor sends it: a command that ends in time
    answers as itself; one still running at DURATION is cut where it is (the pull never lands)
    and exits 137 under ``-s KILL``, 124 under TERM; bad usage exits 125 without running CMD."""
    interp, host, world = env
    image = "registry.redhat.io/openshift3/ose-node:v3.11"
    assert await run(env, "timeout", "-s", "KILL", "30", "env", "A=1", "echo", "hi") == ("hi\n", "", 0)
    assert (host.log[-1].argv, host.log[-1].bound_seconds, host.log[-1].exit) == (["env", "A=1", "echo", "hi"], 30.0, 0)
    world.real_seconds = 30.0  # a pull that would take half a minute of real time
    assert await run(env, "timeout", "-s", "KILL", "0.2", "crictl", "pull", image) == ("", "", 137)
    assert image not in host.images
    rec = host.log[-1]
    assert (rec.argv, rec.bound_seconds, rec.exit) == (["crictl", "pull", image], 0.2, 137)
    assert rec.as_dict()["bound_seconds"] == 0.2
    assert (await run(env, "timeout", "--signal=TERM", ".1", "crictl", "pull", image))[2] == 124
    world.real_seconds = 0.0
    assert (await run(env, "timeout", "1m", "crictl", "pull", image))[2] == 0 and image in host.images
    for bad, message in ((["-k", "5", "1", "true"], "unrecognized option '-k'"), (["5"], "missing operand"),
                         (["1x", "true"], "invalid time interval '1x'"), (["-s", "HUP", "1", "true"], "HUP")):
        out, err, code = await run(env, "timeout", *bad)
        assert (out, code) == ("", 125) and message in err, (bad, err)
        assert host.log[-1].argv == ["timeout", *bad] and host.log[-1].bound_seconds is None


async def test_sudo_runs_the_command_as_the_hosts_only_user(env: Any) -> None:
    """``sudo -n CMD`` (lockkeeper's SSH executor for a user other than root) runs CMD, logged as
    CMD with ``sudo`` set; any other sudo use is refused, as the simulator has no sudoers."""
    interp, host, _ = env
    assert await run(env, "sudo", "-n", "timeout", "-s", "KILL", "35", "systemctl", "is-active", "crio") == ("active\n", "", 0)
    rec = host.log[-1]
    assert (rec.argv, rec.sudo, rec.bound_seconds) == (["systemctl", "is-active", "crio"], True, 35.0)
    assert rec.as_dict()["sudo"] is True
    out, err, code = await run(env, "sudo", "systemctl", "is-active", "crio")
    assert (out, code) == ("", 1) and "sudo -n" in err and not host.log[-1].sudo
