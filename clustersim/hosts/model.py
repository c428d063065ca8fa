"""Host state of the simulated nodes and the ``hosts:`` scenario section that builds it.

A host is one node's operating system as lockkeeper's host commands see it (procedures-spec
§8.3): systemd units, RPM packages, a small file system, iptables rules (runtime and saved),
the container runtime and its images, DNS resolution and the boot id.

The ``hosts:`` section (validated by :class:`HostsSection`)::

    hosts:
      options: {reboot_seconds: 60, node_monitor_grace_seconds: 40, pull_seconds: 20, join_seconds: 30}
      upstream_dns: [10.0.0.2]            # resolvers that always answer
      dns: {master.demo: 10.0.0.10}       # names those resolvers know
      catalog:                            # every package a host may have or yum may install
        cri-o: {version: 1.11.16-0.11.dev.rhaos3.11.gitd6a416d.el7, units: [crio]}
      profiles:                           # reusable host descriptions, merged in order
        node: {packages: [cri-o], units: {crio: {enabled: true, active: true}}, runtime: cri-o,
               files: {/etc/resolv.conf: "nameserver {ip}\\n"}}
      hosts:                              # one per node; nodes not listed use profile "default"
        gluster1.demo: {profiles: [node], ip: 10.0.1.11}

``{ip}``, ``{name}`` and ``{group}`` in file contents are replaced by the host's address, name
and node group. A host's ``openssh`` (default :data:`DEFAULT_OPENSSH`) sets whether its sshd ends
a command on the client's ``signal`` request (7.9 and later; the RHEL 7 scenarios say 7.4p1).
Its ``listen`` lines are static listening sockets ``ss`` shows besides those its services imply
(:mod:`clustersim.hosts.sockets`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

#: systemd unit of each container runtime (the runtime is usable while that unit is active).
RUNTIME_UNITS: dict[str, str] = {"cri-o": "crio", "docker": "docker"}
#: The socket each runtime's active unit provides (``test -S`` reads it).
RUNTIME_SOCKETS: dict[str, str] = {"cri-o": "/var/run/crio/crio.sock", "docker": "/var/run/docker.sock"}
#: Node service names of OCP 3.11 and OKD 3.x.
NODE_SERVICES: tuple[str, ...] = ("atomic-openshift-node", "origin-node")
#: Comment the 3.x NetworkManager dispatcher (o-a 99-origin-dns.sh) writes into /etc/resolv.conf.
ORIGIN_DNS_WATERMARK = "# nameserver updated by /etc/NetworkManager/dispatcher.d/99-origin-dns.sh"
#: A host's OpenSSH when its spec names none: RHEL 8's and RHCOS's.
DEFAULT_OPENSSH = "8.0p1"
#: A static ``listen:`` line: ``tcp|udp ADDRESS:PORT [PROCESS]`` (IPv6 addresses in brackets).
LISTEN_LINE = r"^(tcp|udp) (\[[0-9A-Fa-f:.]+\]|\*|[0-9.]+):[0-9]{1,5}( [A-Za-z0-9_.-]+)?$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HostOptions(_Strict):
    """Timings in simulated seconds (scaled by the sim clock)."""

    reboot_seconds: float = 60.0
    node_monitor_grace_seconds: float = 40.0  # kube-controller-manager --node-monitor-grace-period
    pull_seconds: float = 20.0
    join_seconds: float = 30.0  # scale-up: from the playbook's start to the Node registering
    restart_seconds: float = 10.0  # node service restart during an upgrade playbook
    ssh_port_base: int = 0  # 0: every host listens on a free port
    # Written to each host's Node at start (nodeInfo.kubeletVersion/kubeProxyVersion) when set.
    kubelet_version: str | None = None


class PackageDef(_Strict):
    """A package in the catalog: ``version`` is VERSION-RELEASE as deployed, ``latest`` what
    ``yum install`` (and an unpinned scale-up) installs today; ``units`` the systemd units it
    ships (they vanish when it is removed); ``files`` paths it owns; ``config_files`` owned
    paths that rpm keeps as ``PATH.rpmsave`` on removal when they exist."""

    version: str
    latest: str | None = None  # what an unpinned install gets now (newer repos); default: version
    arch: str = "x86_64"
    units: list[str] = Field(default_factory=list)
    files: dict[str, str] = Field(default_factory=dict)
    config_files: list[str] = Field(default_factory=list)


class UnitSpec(_Strict):
    """A unit's state at scenario start."""
    enabled: bool = False
    active: bool = False


class HostSpec(_Strict):
    """One host (or a profile: the same fields). Lists and maps merge over the profiles'."""

    profiles: list[str] = Field(default_factory=list)
    ip: str | None = None
    role: Literal["master", "node"] | None = None
    packages: list[str] = Field(default_factory=list)
    units: dict[str, UnitSpec] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict)
    dirs: list[str] = Field(default_factory=list)
    iptables: list[str] = Field(default_factory=list)  # ``-A CHAIN ...`` lines, runtime == saved at start
    runtime: Literal["cri-o", "docker", ""] | None = None
    images: list[str] = Field(default_factory=list)
    node_group: str | None = None  # openshift_node_group_name the host was deployed with
    # The sshd's OpenSSH version: from 7.9 it ends a command on the client's ``signal`` request
    # (RFC 4254 6.9); RHEL 7 ships 7.4p1, which ignores it; RHEL 8 and RHCOS ship 8.0p1.
    openssh: str | None = Field(default=None, pattern=r"^[0-9]+\.[0-9]+(p[0-9]+)?$")
    # Static listening sockets the model cannot derive from the host's services
    # (clustersim.hosts.sockets): ``PROTO ADDR:PORT [PROCESS]``, e.g. ``udp 0.0.0.0:4789``.
    listen: list[Annotated[str, Field(pattern=LISTEN_LINE)]] = Field(default_factory=list)


class ScaleupSpec(_Strict):
    """What openshift-ansible's scale-up installs and starts (clustersim.hosts.join).
    ``units`` may name ``{runtime}`` for the runtime's unit; ``files`` may use ``{group}``."""

    packages: dict[str, list[str]] = Field(default_factory=dict)  # runtime -> packages
    omit: list[str] = Field(default_factory=lambda: ["atomic-openshift-excluder"])
    units: list[str] = Field(default_factory=list)
    files: dict[str, str] = Field(default_factory=dict)
    kubelet_version: str = "v1.11.0+d4cacc0"


class HostsSection(_Strict):
    """The scenario's ``hosts:`` section (see module docstring)."""

    options: HostOptions = Field(default_factory=HostOptions)
    upstream_dns: list[str] = Field(default_factory=list)
    dns: dict[str, str] = Field(default_factory=dict)
    catalog: dict[str, PackageDef] = Field(default_factory=dict)
    profiles: dict[str, HostSpec] = Field(default_factory=dict)
    hosts: dict[str, HostSpec] = Field(default_factory=dict)
    node_groups: dict[str, dict[str, str]] = Field(default_factory=dict)  # group name -> node labels
    registry_images: list[str] = Field(default_factory=list)  # images ``docker pull`` can fetch
    faults: dict[str, list[str]] = Field(default_factory=dict)  # host -> faults set at start
    scaleup: ScaleupSpec = Field(default_factory=ScaleupSpec)

    def resolve(self, name: str) -> HostSpec:
        """``name``'s spec with its profiles merged (profiles first, the host's own fields last).
        A host without a ``profiles`` key (or missing from ``hosts``) uses profile ``default``
        when there is one.
        Raises ValueError for an unknown profile."""
        own = self.hosts.get(name) or HostSpec()
        profiles = own.profiles
        if "profiles" not in own.model_fields_set and "default" in self.profiles:
            profiles = ["default"]
        merged = HostSpec()
        for pname in profiles:
            prof = self.profiles.get(pname)
            if prof is None:
                raise ValueError(f"host {name}: unknown profile {pname!r}")
            merged = _merge(merged, self.resolve_profile(pname))
        return _merge(merged, own)

    def resolve_profile(self, pname: str, _seen: tuple[str, ...] = ()) -> HostSpec:
        """Profile ``pname`` with its parent profiles merged; raises ValueError on a cycle or unknown parent."""
        if pname in _seen:
            raise ValueError(f"profile cycle: {' -> '.join((*_seen, pname))}")
        prof = self.profiles[pname]
        merged = HostSpec()
        for parent in prof.profiles:
            if parent not in self.profiles:
                raise ValueError(f"profile {pname}: unknown profile {parent!r}")
            merged = _merge(merged, self.resolve_profile(parent, (*_seen, pname)))
        return _merge(merged, prof)


def _merge(base: HostSpec, top: HostSpec) -> HostSpec:
    return HostSpec(
        ip=top.ip or base.ip,
        role=top.role or base.role,
        packages=list(dict.fromkeys([*base.packages, *top.packages])),
        units={**base.units, **top.units},
        files={**base.files, **top.files},
        dirs=list(dict.fromkeys([*base.dirs, *top.dirs])),
        iptables=[*base.iptables, *[r for r in top.iptables if r not in base.iptables]],
        runtime=top.runtime if top.runtime is not None else base.runtime,
        images=list(dict.fromkeys([*base.images, *top.images])),
        node_group=top.node_group or base.node_group,
        openssh=top.openssh or base.openssh,
        listen=list(dict.fromkeys([*base.listen, *top.listen])),
    )


@dataclass
class Unit:
    """A systemd unit: ``enabled`` (starts at boot) and ``active`` (running now)."""

    enabled: bool = False
    active: bool = False


@dataclass
class HostEvent:
    """Something happened on a host. ``kind``: runtime_stopped, runtime_started,
    node_service_stopped, node_service_started, reboot_started, reboot_done; ``data`` details
    (e.g. the runtime name, the new boot id)."""

    kind: str
    host: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class CommandRecord:
    """One command run on a host: ``via`` is ``ssh`` or ``debug-pod``; times are RFC 3339;
    ``exit`` is None while running or when the session was dropped (reboot) or cut by the client's
    signal. A command run under coreutils ``timeout`` is logged as the command it runs, with
    ``bound_seconds`` its DURATION (137 in ``exit`` when ``timeout -s KILL`` killed it), and one
    run under ``sudo -n`` with ``sudo`` set."""

    argv: list[str]
    via: str
    start: str
    end: str | None = None
    exit: int | None = None
    bound_seconds: float | None = None
    sudo: bool = False

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (admin endpoint)."""
        return {"argv": self.argv, "via": self.via, "start": self.start, "end": self.end, "exit": self.exit,
                "bound_seconds": self.bound_seconds, "sudo": self.sudo}


def new_boot_id() -> str:
    """A boot id as the kernel prints it (a random UUID)."""
    return str(uuid.uuid4())


@dataclass
class HostState:
    """The mutable state of one host (one per node). See module docstring; ``up`` is False while
    rebooting; ``dns_names`` maps names to addresses for resolvers in ``upstream_dns``."""

    name: str
    ip: str
    role: str = "node"
    units: dict[str, Unit] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    iptables_runtime: list[str] = field(default_factory=list)
    iptables_saved: list[str] = field(default_factory=list)
    runtime: str = ""
    images: set[str] = field(default_factory=set)
    node_group: str = ""
    boot_id: str = field(default_factory=new_boot_id)
    boot_ids: list[str] = field(default_factory=list)
    boot_count: int = 1
    up: bool = True
    faults: set[str] = field(default_factory=set)
    upstream_dns: list[str] = field(default_factory=list)
    dns_names: dict[str, str] = field(default_factory=dict)
    log: list[CommandRecord] = field(default_factory=list)
    ssh_port: int = 0
    host_key: str = ""
    openssh: str = DEFAULT_OPENSSH
    listen: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.boot_ids:
            self.boot_ids.append(self.boot_id)

    @property
    def sshd_honours_signals(self) -> bool:
        """The host's sshd ends a command on the client's ``signal`` request: OpenSSH 7.9 and later
        (its release notes: "sshd(8): support signalling sessions via the SSH protocol")."""
        major, minor = (int(p) for p in self.openssh.split("p", 1)[0].split(".")[:2])
        return (major, minor) >= (7, 9)

    # -- derived facts ----------------------------------------------------------------------
    def unit_active(self, name: str) -> bool:
        """Unit ``name`` exists and runs."""
        u = self.units.get(name)
        return bool(u and u.active)

    @property
    def runtime_unit(self) -> str:
        """The systemd unit of the configured runtime (``crio``/``docker``, "" for none)."""
        return RUNTIME_UNITS.get(self.runtime, "")

    def runtime_up(self) -> bool:
        """The configured runtime's unit is active (and the host is up)."""
        return self.up and bool(self.runtime_unit) and self.unit_active(self.runtime_unit)

    def node_service(self) -> str | None:
        """The node service unit this host has (atomic-openshift-node or origin-node), if any."""
        return next((n for n in NODE_SERVICES if n in self.units), None)

    def kubelet_up(self) -> bool:
        """The host is up and its node service runs."""
        svc = self.node_service()
        return self.up and svc is not None and self.unit_active(svc)

    def allows_udp(self, port: int) -> bool:
        """The runtime OS_FIREWALL_ALLOW chain accepts new UDP packets to ``port`` (the o-a rule
        ``-p udp -m state --state NEW -m udp --dport PORT -j ACCEPT``)."""
        want = f"-A OS_FIREWALL_ALLOW -p udp -m state --state NEW -m udp --dport {port} -j ACCEPT"
        return want in self.iptables_runtime

    def is_dir(self, path: str) -> bool:
        """``path`` is a directory (explicit, or implied by a file or directory below it)."""
        path = norm(path)
        if path == "/" or path in self.dirs:
            return True
        prefix = path + "/"
        return any(p.startswith(prefix) for p in self.files) or any(d.startswith(prefix) for d in self.dirs)

    def sockets(self) -> set[str]:
        """Unix sockets present now: each runtime whose unit is active provides its socket."""
        out = set()
        for rt, unit in RUNTIME_UNITS.items():
            if self.up and self.unit_active(unit):
                out.add(RUNTIME_SOCKETS[rt])
        return out

    def exists(self, path: str) -> bool:
        """``path`` is a file, a directory or a live socket."""
        path = norm(path)
        return path in self.files or self.is_dir(path) or path in self.sockets()

    def resolvers(self) -> list[str]:
        """``nameserver`` addresses of /etc/resolv.conf, in order."""
        out = []
        for line in self.files.get("/etc/resolv.conf", "").splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "nameserver":
                out.append(parts[1])
        return out

    def resolver_works(self, server: str) -> bool:
        """An upstream resolver always answers; the node's own address answers only while
        dnsmasq runs (the 3.x node-local DNS, spec §6.1)."""
        if server in self.upstream_dns:
            return True
        if server in (self.ip, "127.0.0.1"):
            return self.up and self.unit_active("dnsmasq") and "dnsmasq" in self.packages
        return False

    def resolve(self, name: str, use_hosts: bool = True) -> tuple[str | None, str | None]:
        """(address, server that answered) for ``name``: /etc/hosts first (``use_hosts``, what
        glibc's ``files dns`` order does; nslookup asks DNS only), then the first working
        resolver of /etc/resolv.conf. (None, None) when no resolver works; (None, server) when
        the working resolver does not know the name."""
        for line in self.files.get("/etc/hosts", "").splitlines() if use_hosts else []:
            parts = line.split("#", 1)[0].split()
            if len(parts) >= 2 and name in parts[1:]:
                return parts[0], None
        for server in self.resolvers():
            if self.resolver_works(server):
                return self.dns_names.get(name), server
        return None, None

    def summary(self) -> dict[str, Any]:
        """JSON-able state for the admin endpoint (units, packages, iptables, boots, log)."""
        return {
            "name": self.name, "ip": self.ip, "role": self.role, "up": self.up,
            "ssh_port": self.ssh_port, "host_key": self.host_key,
            "boot_id": self.boot_id, "boot_ids": list(self.boot_ids), "boot_count": self.boot_count,
            "runtime": self.runtime, "runtime_up": self.runtime_up(), "kubelet_up": self.kubelet_up(),
            "units": {k: {"enabled": u.enabled, "active": u.active} for k, u in sorted(self.units.items())},
            "packages": dict(sorted(self.packages.items())),
            "iptables": {"runtime": list(self.iptables_runtime), "saved": list(self.iptables_saved)},
            "images": sorted(self.images), "node_group": self.node_group, "faults": sorted(self.faults),
            "openssh": self.openssh,
            "files": sorted(self.files), "log": [r.as_dict() for r in self.log],
        }


def norm(path: str) -> str:
    """``path`` without a trailing slash or ``//`` runs (``/`` stays ``/``)."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    return "/" + "/".join(parts)


def build_host(name: str, section: HostsSection, default_ip: str, default_role: str) -> HostState:
    """A fresh HostState for node ``name`` from the section (packages from the catalog, unit
    states from the spec, ``{ip}``/``{name}`` substituted in files). Raises ValueError for a
    package missing from the catalog."""
    spec = section.resolve(name)
    ip = spec.ip or default_ip
    host = HostState(name=name, ip=ip, role=spec.role or default_role,
                     upstream_dns=list(section.upstream_dns), dns_names=dict(section.dns))
    group = spec.node_group or ""

    def subst(text: str) -> str:
        return text.replace("{ip}", ip).replace("{name}", name).replace("{group}", group)

    for pkg in spec.packages:
        pdef = section.catalog.get(pkg)
        if pdef is None:
            raise ValueError(f"host {name}: package {pkg!r} is not in hosts.catalog")
        host.packages[pkg] = pdef.version
        for u in pdef.units:
            host.units.setdefault(u, Unit())
        for path, content in pdef.files.items():
            host.files[norm(path)] = subst(content)
    for uname, u in spec.units.items():
        host.units[uname] = Unit(enabled=u.enabled, active=u.active)
    for path, content in spec.files.items():
        host.files[norm(path)] = subst(content)
    host.dirs.update(norm(d) for d in spec.dirs)
    host.iptables_runtime = list(spec.iptables)
    host.iptables_saved = list(spec.iptables)
    host.runtime = spec.runtime or ""
    host.images = set(spec.images)
    host.node_group = spec.node_group or ""
    host.openssh = spec.openssh or DEFAULT_OPENSSH
    host.listen = list(spec.listen)
    host.faults = set(section.faults.get(name, []))
    return host
