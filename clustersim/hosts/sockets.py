"""Listening sockets of a simulated host and the ``ss`` command that lists them.

Which sockets a host has is derived from its state where the model knows the service, while the
host is up:

- ``sshd``: TCP ``0.0.0.0:22`` and ``[::]:22`` (OpenSSH's default ``ListenAddress``: every IPv4
  and IPv6 address, the IPv6 socket ``IPV6_V6ONLY``); every simulated host runs an SSH server;
- ``dnsmasq`` (package installed, unit active), UDP and TCP port 53 (dnsmasq(8)): with
  ``bind-interfaces`` or ``bind-dynamic`` in ``/etc/dnsmasq.conf`` or ``/etc/dnsmasq.d/*`` one
  socket per ``listen-address`` (none given: the host's address, and ``127.0.0.1`` unless
  ``except-interface=lo``); without them dnsmasq "binds the wildcard address, even when it is
  listening on only some interfaces", ``0.0.0.0:53`` and ``[::]:53``;
- the node service (``atomic-openshift-node``/``origin-node`` active, :meth:`HostState.kubelet_up`):
  the kubelet on TCP ``*:10250`` (a Go listener on ``:10250``, dual-stack) and its health port
  ``127.0.0.1:10248``, and kube-proxy's health port ``*:10256`` (the node process up to 3.9,
  the SDN pod on the host network from 3.10: both live and die with the node service here);
- a master (role ``master`` with ``/etc/origin/master/master-config.yaml``, its kubelet and
  runtime up: the control plane runs as static pods): the API on ``servingInfo.bindAddress``
  (default ``0.0.0.0:8443``, openshift-ansible ``openshift_master_api_port``), the controllers on
  ``0.0.0.0:8444``, etcd on ``<ip>:2379`` and ``<ip>:2380`` (o-a ``etcd.conf``
  ``ETCD_LISTEN_CLIENT_URLS``/``ETCD_LISTEN_PEER_URLS``); the API's availability during a
  restart is the masters component's, not modelled here;
- the VXLAN port: UDP ``0.0.0.0:<dst_port>`` (the kernel socket of OVS's ``vxlan_sys_<port>``,
  no process) where the world knows the node's OVS ``dst_port`` (the SDN component), so an
  ``ovs-vsctl set ... options:dst_port=N`` moves it.

What the model cannot derive is static: a host's ``listen:`` lines in the scenario
(``PROTO ADDR:PORT [PROCESS]``, e.g. ``udp 0.0.0.0:4789`` for the VXLAN port of a scenario without
an SDN component), listed while the host is up.

``ss`` (iproute2 ``misc/ss.c``): ``-l``/``-a`` list the listening sockets (others: none here),
``-t``/``-u`` (``--tcp``/``--udp``) filter, ``-4``/``-6`` the family, ``-n`` numeric ports
(else a few ``/etc/services`` names), ``-H`` no header, ``-p`` the ``users:(("NAME",pid=N,fd=N))``
column. A ``Netid`` column comes first when more than one socket type is listed. States are
``UNCONN`` (UDP) and ``LISTEN`` (TCP, Send-Q = the backlog, 128 = ``net.core.somaxconn`` on RHEL
7/8). Addresses as ``inet_addr_print`` prints them: IPv4 as is, IPv6 in brackets, a dual-stack
IPv6 wildcard as ``*``. Columns are separated by spaces (widths approximate ss's).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import yaml

from clustersim.hosts.model import HostState

if TYPE_CHECKING:
    from clustersim.hosts.ctx import Ctx

Result = tuple[str, str, int]
MASTER_CONFIG = "/etc/origin/master/master-config.yaml"
#: ``/etc/services`` names ss prints without ``-n``.
SERVICE_NAMES = {22: "ssh", 53: "domain", 80: "http", 111: "sunrpc", 443: "https", 2379: "etcd-client",
                 2380: "etcd-server"}
#: The listen backlog a LISTEN socket shows as Send-Q.
BACKLOG = 128


@dataclass(frozen=True)
class Listener:
    """One listening socket: ``proto`` ``tcp``/``udp``; ``address`` ``0.0.0.0``, ``::`` (IPv6 only),
    ``*`` (dual-stack IPv6 wildcard) or an address; ``port``; ``process`` (the ``-p`` name, ``""``
    for a kernel socket)."""

    proto: str
    address: str
    port: int
    process: str = ""

    @property
    def ipv6(self) -> bool:
        """An IPv6 socket (``::``, ``*`` or an IPv6 address)."""
        return self.address == "*" or ":" in self.address


def parse_listen(line: str) -> Listener:
    """A scenario ``listen:`` line ``PROTO ADDR:PORT [PROCESS]`` (``udp 0.0.0.0:4789``,
    ``tcp [::]:9100 node_exporter``). Raises ValueError for anything else."""
    parts = line.split()
    if len(parts) not in (2, 3) or parts[0] not in ("tcp", "udp") or ":" not in parts[1]:
        raise ValueError(f"listen line {line!r}: expected 'tcp|udp ADDRESS:PORT [PROCESS]'")
    addr, _, port = parts[1].rpartition(":")
    addr = addr[1:-1] if addr.startswith("[") and addr.endswith("]") else addr
    if not port.isdigit() or not 0 < int(port) < 65536 or not addr:
        raise ValueError(f"listen line {line!r}: bad address or port")
    return Listener(parts[0], addr, int(port), parts[2] if len(parts) == 3 else "")


def _dnsmasq_options(host: HostState) -> list[str]:
    lines = host.files.get("/etc/dnsmasq.conf", "").splitlines()
    for path in sorted(host.files):
        if path.startswith("/etc/dnsmasq.d/") and not path.endswith((".rpmnew", ".rpmsave", ".orig")):
            lines += host.files[path].splitlines()
    return [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]


def dnsmasq_listeners(host: HostState) -> list[Listener]:
    """dnsmasq's port 53 sockets (module docstring), both protocols."""
    opts = _dnsmasq_options(host)
    bound = any(o in ("bind-interfaces", "bind-dynamic") for o in opts)
    if not bound:
        addresses = ["0.0.0.0", "::"]
    else:
        addresses = [a.strip() for o in opts if o.startswith("listen-address=") for a in o.split("=", 1)[1].split(",")
                     if a.strip()]
        if not addresses:
            addresses = [host.ip] + ([] if "except-interface=lo" in opts else ["127.0.0.1"])
    return [Listener(proto, a, 53, "dnsmasq") for proto in ("udp", "tcp") for a in dict.fromkeys(addresses)]


def _api_bind(host: HostState) -> tuple[str, int]:
    try:
        doc = yaml.safe_load(host.files.get(MASTER_CONFIG, "")) or {}
        bind = str(((doc.get("servingInfo") or {}).get("bindAddress")) or "0.0.0.0:8443")
        addr, _, port = bind.rpartition(":")
        return (addr or "*"), int(port)
    except (yaml.YAMLError, AttributeError, ValueError):
        return "0.0.0.0", 8443


def derived_listeners(host: HostState) -> list[Listener]:
    """The sockets the host's state implies (module docstring), before static and world ones."""
    if not host.up:
        return []
    out = [Listener("tcp", "0.0.0.0", 22, "sshd"), Listener("tcp", "::", 22, "sshd")]
    if "dnsmasq" in host.packages and host.unit_active("dnsmasq"):
        out += dnsmasq_listeners(host)
    if host.kubelet_up():
        node = host.node_service() or "kubelet"
        out += [Listener("tcp", "*", 10250, node), Listener("tcp", "127.0.0.1", 10248, node),
                Listener("tcp", "*", 10256, node)]
        if host.role == "master" and MASTER_CONFIG in host.files and host.runtime_up():
            addr, port = _api_bind(host)
            out += [Listener("tcp", addr, port, "openshift"), Listener("tcp", "0.0.0.0", 8444, "openshift"),
                    Listener("tcp", host.ip, 2379, "etcd"), Listener("tcp", host.ip, 2380, "etcd")]
    return out


def static_listeners(host: HostState) -> list[Listener]:
    """The scenario's ``listen:`` lines of the host, while it is up."""
    return [parse_listen(line) for line in host.listen] if host.up else []


def _addr(address: str) -> str:
    return "*" if address == "*" else f"[{address}]" if ":" in address else address


def _port(port: int, numeric: bool) -> str:
    return str(port) if numeric else SERVICE_NAMES.get(port, str(port))


def render(listeners: list[Listener], *, protos: list[str], header: bool, numeric: bool, processes: bool) -> str:
    """``ss -l`` output for ``listeners`` of ``protos`` (module docstring for the format)."""
    netid = len(protos) > 1
    rows = []
    if header:
        rows.append(("Netid " if netid else "") + "State  Recv-Q Send-Q Local Address:Port  Peer Address:Port Process")
    order = {"udp": 0, "tcp": 1}
    for i, s in enumerate(sorted(listeners, key=lambda s: (order[s.proto], s.port, s.ipv6, s.address))):
        if s.proto not in protos:
            continue
        state, send_q = ("UNCONN", 0) if s.proto == "udp" else ("LISTEN", BACKLOG)
        peer = "*:*" if s.address == "*" else "[::]:*" if s.ipv6 else "0.0.0.0:*"
        local = f"{_addr(s.address)}:{_port(s.port, numeric)}"
        line = (f"{s.proto:<6}" if netid else "") + f"{state:<7}{0:<7}{send_q:<7}{local:<22}{peer:<22}"
        if processes and s.process:
            line += f'users:(("{s.process}",pid={1000 + zlib.crc32(s.process.encode()) % 30000},fd={3 + i}))'
        rows.append(line.rstrip())
    return "".join(r + "\n" for r in rows)


_LONG = {"--tcp": "t", "--udp": "u", "--listening": "l", "--all": "a", "--numeric": "n", "--no-header": "H",
         "--processes": "p", "--ipv4": "4", "--ipv6": "6"}


async def cmd_ss(ctx: Ctx) -> Result:
    """``ss [-Hltuanp46]`` over the host's listeners (module docstring); any other option exits
    255 with ss's usage complaint."""
    flags: set[str] = set()
    for arg in ctx.args:
        if arg in _LONG:
            flags.add(_LONG[arg])
        elif arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
            flags.update(arg[1:])
        else:
            return "", f"ss: only listing options are simulated, not {arg!r}\n", 255
    bad = flags - set("Hltuanp46")
    if bad:
        return "", f"ss: invalid option -- '{sorted(bad)[0]}'\nUsage: ss [ OPTIONS ]\n", 255
    protos = [p for p, f in (("udp", "u"), ("tcp", "t")) if f in flags] or ["udp", "tcp"]
    listeners = [*derived_listeners(ctx.host), *static_listeners(ctx.host)]
    extra = getattr(ctx.world, "extra_listeners", None)
    if callable(extra):
        listeners += extra(ctx.host)
    if not flags & {"l", "a"}:
        listeners = []  # only listening sockets are modelled
    if "4" in flags and "6" not in flags:
        listeners = [s for s in listeners if not s.ipv6]
    elif "6" in flags and "4" not in flags:
        listeners = [s for s in listeners if s.ipv6]
    unique = list(dict.fromkeys(listeners))
    return render(unique, protos=protos, header="H" not in flags, numeric="n" in flags, processes="p" in flags), "", 0
