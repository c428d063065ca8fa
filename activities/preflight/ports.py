"""Ports a procedure may not take: the well-known cluster ports, and the ``ss`` listing of a host.

:data:`WELL_KNOWN_PORTS` names the owner of each port an OpenShift 3.x/4.x or Kubernetes node
already uses. Sources, per entry in ``source``:

- ``spec R5``: ../shared/procedures-spec.md §7.1 (the OpenShift SDN's VXLAN port is 4789/udp,
  openshift-ansible ``openshift_node/defaults/main.yml`` "OpenShift OVS sdn 4789/udp"; the
  masters' API is ``https://<master>:8443``, §7.2) and §6.1 (dnsmasq answers DNS at every 3.x
  node's address, port 53);
- ``OCP 3.11``: OpenShift Container Platform 3.11 "Installing Clusters > Prerequisites >
  Required ports" (DNS 53 on nodes and 8053 SkyDNS on masters, SDN 4789/udp, API 8443, kubelet
  10250, etcd 2379-2380, router 80/443 and stats 1936, HAProxy statistics 9000);
- ``OCP 4``: OpenShift 4 "Network connectivity requirements" of the user-provisioned install
  (``modules/installation-network-user-infra.adoc``): 22623 Machine Config Server, 6443 API,
  2379-2380 etcd, 4789 and 6081 VXLAN/Geneve, 500/4500 IPsec, 9000-9999 "host level services,
  including the node exporter on ports 9100-9101 and the Cluster Version Operator on port 9099",
  10250-10259 "the default ports that Kubernetes reserves", 10256 openshift-sdn/kube-proxy
  health, 30000-32767 "Kubernetes node port"; its network flow matrix adds 22 sshd and 111
  rpcbind as host system services;
- ``GlusterFS``: OpenShift Container Storage 3.11 (container-native GlusterFS) port list: 24007
  glusterd, 24008 GlusterFS management, 49152-49664 bricks; counted only on GlusterFS nodes.

:func:`parse_ss` reads ``ss -H -l -n -u`` / ``-t`` output (iproute2 ``misc/ss.c``): columns
``State Recv-Q Send-Q Local-Address:Port Peer-Address:Port [Process]``, a ``Netid`` column first
when more than one socket type is listed; the local address is printed by ``inet_addr_print``:
IPv4 as is (``0.0.0.0`` for any), IPv6 in brackets (``[::1]``), the IPv6 any address of a
dual-stack socket as ``*``, and ``%IFNAME`` after the address of a socket bound to a device;
older releases (RHEL 7's iproute 4.11) print IPv6 without brackets (``:::22``) and IPv4 any as
``*``. Port ``*`` is 0. A header line (``State``/``Netid``, when ``-H`` is not supported) is skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class WellKnownPort:
    """Ports ``first``..``last`` over ``protocols`` belong to ``owner`` (cited by ``source``);
    ``glusterfs``: only on a node that runs GlusterFS."""

    first: int
    last: int
    protocols: tuple[str, ...]
    owner: str
    source: str
    glusterfs: bool = False

    def covers(self, port: int, protocol: str, glusterfs: bool = False) -> bool:
        """``port``/``protocol`` is in this entry (and the entry applies to the node)."""
        return self.first <= port <= self.last and protocol in self.protocols and (glusterfs or not self.glusterfs)

    def describe(self) -> str:
        """``2379-2380/tcp (etcd client and peer)``."""
        ports = str(self.first) if self.first == self.last else f"{self.first}-{self.last}"
        return f"{ports}/{'+'.join(self.protocols)} ({self.owner})"


_TCP, _UDP, _BOTH = ("tcp",), ("udp",), ("tcp", "udp")

#: Well-known ports of cluster nodes and their owners (module docstring for the sources).
WELL_KNOWN_PORTS: tuple[WellKnownPort, ...] = (
    WellKnownPort(22, 22, _TCP, "sshd, remote access to the node", "OCP 4"),
    WellKnownPort(53, 53, _BOTH, "DNS: dnsmasq on every OpenShift 3.x node, CoreDNS on 4.x", "spec R5, OCP 3.11"),
    WellKnownPort(80, 80, _TCP, "the router (HAProxy ingress on the host network)", "OCP 3.11"),
    WellKnownPort(111, 111, _BOTH, "rpcbind", "OCP 4"),
    WellKnownPort(443, 443, _TCP, "the router's HTTPS, or the API where masters serve on 443", "OCP 3.11"),
    WellKnownPort(500, 500, _UDP, "IPsec IKE", "OCP 4"),
    WellKnownPort(1936, 1936, _TCP, "router statistics and metrics", "OCP 3.11, OCP 4"),
    WellKnownPort(2379, 2380, _TCP, "etcd client and peer", "OCP 3.11, OCP 4"),
    WellKnownPort(4500, 4500, _UDP, "IPsec NAT-T", "OCP 4"),
    WellKnownPort(4789, 4789, _UDP, "VXLAN: the OpenShift SDN or another overlay", "spec R5, OCP 3.11, OCP 4"),
    WellKnownPort(6081, 6081, _UDP, "Geneve: OVN-Kubernetes", "OCP 4"),
    WellKnownPort(6443, 6443, _TCP, "the Kubernetes API server", "OCP 4"),
    WellKnownPort(8053, 8053, _BOTH, "SkyDNS on OpenShift 3.x masters", "OCP 3.11"),
    WellKnownPort(8443, 8443, _TCP, "the OpenShift 3.x master API", "spec R5, OCP 3.11"),
    WellKnownPort(8444, 8444, _TCP, "the OpenShift 3.x master controllers", "OCP 3.11"),
    WellKnownPort(9000, 9999, _BOTH, "host level services (node exporter 9100-9101, CVO 9099, HAProxy stats 9000)",
                  "OCP 4, OCP 3.11"),
    WellKnownPort(10248, 10248, _TCP, "kubelet health (loopback)", "OCP 4"),
    WellKnownPort(10250, 10259, _TCP, "Kubernetes reserved: kubelet 10250, kube-proxy health 10256, "
                  "controller manager 10257, scheduler 10259", "OCP 4, OCP 3.11"),
    WellKnownPort(22623, 22624, _TCP, "the Machine Config Server", "OCP 4"),
    WellKnownPort(24007, 24008, _TCP, "GlusterFS glusterd and management", "GlusterFS", glusterfs=True),
    WellKnownPort(30000, 32767, _BOTH, "Kubernetes NodePort services", "OCP 4"),
    WellKnownPort(49152, 49664, _TCP, "GlusterFS bricks", "GlusterFS", glusterfs=True),
)


def well_known_owner(port: int, protocol: str, *, glusterfs: bool = False) -> WellKnownPort | None:
    """The first :data:`WELL_KNOWN_PORTS` entry covering ``port``/``protocol`` (``udp``/``tcp``)
    on a node (GlusterFS entries only with ``glusterfs``), or None."""
    return next((e for e in WELL_KNOWN_PORTS if e.covers(port, protocol.lower(), glusterfs)), None)


@dataclass(frozen=True)
class Socket:
    """One listening socket of ``ss``: ``state`` (``UNCONN`` for UDP, ``LISTEN`` for TCP),
    ``address`` (``0.0.0.0``, ``*``, ``::``, ``10.0.0.20``; no brackets, no ``%ifname``),
    ``interface`` (``lo`` of ``127.0.0.53%lo``, else None), ``port`` (0 for ``*``), ``netid``
    (``udp``/``tcp`` when ss printed the column, else None) and the ``line`` as read."""

    state: str
    address: str
    port: int
    line: str
    interface: str | None = None
    netid: str | None = None

    def local(self) -> str:
        """The local address as ss prints it today: ``0.0.0.0:53``, ``[::]:53``, ``*:53``."""
        addr = f"[{self.address}]" if ":" in self.address else self.address
        return f"{addr}{'%' + self.interface if self.interface else ''}:{self.port or '*'}"


_NETIDS = frozenset({"udp", "tcp", "raw", "u_str", "u_dgr", "u_seq", "nl", "p_raw", "p_dgr", "sctp", "mptcp", "tipc",
                     "v_str", "v_dgr", "xdp"})


def split_local(text: str) -> tuple[str, str | None, int]:
    """``ADDR[%IF]:PORT`` of ss as ``(address, interface, port)``: ``[::]:53`` → ``("::", None,
    53)``, ``127.0.0.53%lo:53`` → ``("127.0.0.53", "lo", 53)``, ``:::22`` → ``("::", None, 22)``,
    ``*:*`` → ``("*", None, 0)``. Raises ValueError for text without a port."""
    addr, sep, port = text.rpartition(":")
    if not sep or not addr:
        raise ValueError(f"not ADDRESS:PORT: {text!r}")
    iface = None
    if "%" in addr:
        addr, _, iface = addr.partition("%")
    if addr.startswith("[") and addr.endswith("]"):
        addr = addr[1:-1]
    return addr, iface or None, 0 if port == "*" else int(port)


def parse_ss(text: str) -> list[Socket]:
    """Every socket line of ``ss -ln`` output (module docstring for the format). Lines that do
    not parse (a header, a blank) are skipped."""
    out: list[Socket] = []
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0] in ("State", "Netid"):
            continue
        netid = None
        if parts[0] in _NETIDS:
            netid, parts = parts[0], parts[1:]
        if len(parts) < 5:
            continue
        try:
            addr, iface, port = split_local(parts[3])
        except ValueError:
            continue
        out.append(Socket(state=parts[0], address=addr, port=port, line=line.strip(), interface=iface, netid=netid))
    return out


def listeners_on(sockets: list[Socket], port: int, protocol: str | None = None) -> list[Socket]:
    """The sockets bound to ``port`` (any address: the port is taken whichever address the
    procedure would bind), of ``protocol`` when ss printed the netid column."""
    return [s for s in sockets if s.port == port and (protocol is None or s.netid in (None, protocol))]


def ss_argv(protocol: str, processes: bool = False) -> list[str]:
    """``ss -Huln`` (UDP) or ``ss -Htln`` (TCP): listening sockets, numeric, no header; with
    ``processes`` also ``-p`` (the owning processes, :func:`processes_of`)."""
    return ["ss", ("-Huln" if protocol == "udp" else "-Htln") + ("p" if processes else "")]


_USER = re.compile(r'\("([^"]+)",pid=(\d+)')


def processes_of(socket: Socket) -> list[str]:
    """The process names ``ss -p`` printed for ``socket`` (its ``users:(("etcd",pid=812,fd=7),
    ...)`` column, iproute2 ``misc/ss.c`` ``user_ent_hash_build``); empty when ss named none
    (another user's socket seen without root)."""
    return [m.group(1) for m in _USER.finditer(socket.line)]
