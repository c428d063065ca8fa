"""What openshift-ansible's node scale-up and node upgrade do to a simulated host and its Node
(procedures-spec §8.7), driven by the ``ansible-playbook`` stand-in or ``POST /_sim/hosts/<h>/scaleup``.

Scale-up of a wiped host:

1. installs the node packages for the runtime (``hosts.scaleup.packages[runtime]``) **except**
   those in ``hosts.scaleup.omit`` (``atomic-openshift-excluder`` by default: openshift-ansible
   installs the excluders at deployment, not at scale-up, the seed 003 finding);
2. sets the runtime from ``openshift_use_crio``, writes ``hosts.scaleup.files`` (``{group}`` is
   the node group) and enables and starts ``hosts.scaleup.units``;
3. after ``join_seconds`` registers the Node with a new uid, labelled with the node group's
   labels plus ``kubernetes.io/hostname`` and the beta os/arch labels, and any ``extra_labels``
   (the playbook passes the GlusterFS label for hosts in ``[glusterfs]``).
"""

from __future__ import annotations

import hashlib
import uuid
from typing import TYPE_CHECKING, Any

from clustersim.agents.objects import node_condition, rfc3339
from clustersim.hosts.ctx import Ctx
from clustersim.hosts.model import HostState, norm
from clustersim.hosts.nodesync import RUNTIME_VERSIONS
from clustersim.hosts.pkg import install_package, pick_version, set_active

if TYPE_CHECKING:
    from clustersim.hosts.component import HostsComponent

KUBELET_VERSION = "v1.11.0+d4cacc0"
NODE_CONFIG = "/etc/origin/node/node-config.yaml"
MD5SUM_ANNOTATION = "node.openshift.io/md5sum"


class JoinError(RuntimeError):
    """Scale-up or upgrade cannot proceed; the message is what the playbook prints."""


def node_object(host: HostState, labels: dict[str, str], now: str, kubelet_version: str) -> dict[str, Any]:
    """A freshly registered 3.11 Node for ``host`` (new uid, Ready, the host's runtime)."""
    lbls = {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
            "kubernetes.io/hostname": host.name, **labels}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": host.name, "uid": str(uuid.uuid4()), "creationTimestamp": now, "labels": lbls,
                     "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
        "spec": {},
        "status": {
            "capacity": {"cpu": "4", "memory": "16266152Ki", "pods": "250"},
            "allocatable": {"cpu": "4", "memory": "16163752Ki", "pods": "250"},
            "conditions": [
                node_condition("OutOfDisk", "False", "KubeletHasSufficientDisk", "kubelet has sufficient disk space available", now),
                node_condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available", now),
                node_condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", now),
                node_condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available", now),
                node_condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", now),
            ],
            "addresses": [{"type": "InternalIP", "address": host.ip}, {"type": "Hostname", "address": host.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64", "bootID": host.boot_id,
                "containerRuntimeVersion": RUNTIME_VERSIONS.get(host.runtime, ""),
                "kernelVersion": "3.10.0-1127.el7.x86_64", "kubeProxyVersion": kubelet_version,
                "kubeletVersion": kubelet_version, "machineID": uuid.uuid4().hex,
                "operatingSystem": "linux", "osImage": "Red Hat Enterprise Linux Server 7.8 (Maipo)",
                "systemUUID": str(uuid.uuid4()).upper(),
            },
        },
    }


async def scaleup(hosts: HostsComponent, name: str, group: str, runtime: str,
                  extra_labels: dict[str, str] | None = None, pkg_version: str | None = None) -> list[str]:
    """Scale ``name`` up into node group ``group`` with ``runtime`` ("docker"|"cri-o").
    ``pkg_version`` (inventory ``openshift_pkg_version``, e.g. ``-3.11.161``) pins the
    ``atomic-openshift*`` packages; without it they come at the catalog's ``latest`` (newer than
    the rest of the cluster when the repos moved on). Returns the log lines the playbook prints;
    raises JoinError (unknown host/group, no such package build, the Node still registered)."""
    host = hosts.hosts.get(name)
    if host is None:
        raise JoinError(f"host {name} is not part of the simulated cluster")
    spec = hosts.section.scaleup
    if group not in hosts.section.node_groups:
        raise JoinError(f"node group {group!r} is not defined (openshift_node_groups)")
    if hosts.sim.store.try_get("nodes", name) is not None:
        raise JoinError(f"Node {name} is still registered; delete it before scaling the host up again")
    if not host.up:
        raise JoinError(f"{name}: UNREACHABLE! => Failed to connect to the host via ssh")
    ctx = Ctx(host=host, argv=["ansible"], stdin=b"", world=hosts, via="ansible")
    lines = []
    installed = []
    host.runtime = runtime
    host.node_group = group
    for pkg in spec.packages.get(runtime, []):
        if pkg in spec.omit or pkg in host.packages:
            continue
        if pkg not in hosts.section.catalog:
            raise JoinError(f"No package {pkg} available.")
        pin = pkg_version.lstrip("-") if pkg_version and pkg.startswith("atomic-openshift") else None
        version = pick_version(ctx, pkg, pin)
        if version is None:
            raise JoinError(f"No package {pkg}-{pin} available.")
        install_package(ctx, pkg, version)
        installed.append(f"{pkg}-{version}")
    lines.append(f"installed: {', '.join(installed) or 'nothing'}")
    for path, content in spec.files.items():
        host.files[norm(path)] = content.replace("{group}", group).replace("{ip}", host.ip).replace("{name}", name)
    for unit in spec.units:
        if unit == "{runtime}":
            unit = host.runtime_unit
        if unit not in host.units:
            continue
        host.units[unit].enabled = True
        if unit == "dnsmasq" and "/etc/NetworkManager/dispatcher.d/99-origin-dns.sh" in host.files:
            set_active(ctx, unit, True)
            hosts.origin_dns(host)
        else:
            set_active(ctx, unit, True)
    await hosts.sim.clock.sleep(hosts.options.join_seconds)
    labels = {**hosts.section.node_groups[group], **(extra_labels or {})}
    now = rfc3339(hosts.sim.clock.now())
    hosts.sim.store.register_node(node_object(host, labels, now, spec.kubelet_version))
    hosts.sync_node(host)
    lines.append(f"node {name} registered (group {group}, runtime {runtime})")
    return lines


async def upgrade(hosts: HostsComponent, name: str, version: str, *, node_group: str | None = None,
                  node_config: str | None = None, labels: dict[str, str] | None = None) -> list[str]:
    """Upgrade ``name``'s node to kubelet ``version``: the node service restarts (Node not Ready
    for ``restart_seconds``), then the Node reports the new kubeletVersion.

    With ``node_group`` (the 3.10 upgrade, procedures-spec §8.7) the node also moves into that
    group: ``/etc/sysconfig/<node service>`` gets ``BOOTSTRAP_CONFIG_NAME=<group>`` (o-a
    ``roles/openshift_node/tasks/upgrade/bootstrap_changes.yml``), ``node_config`` becomes
    ``/etc/origin/node/node-config.yaml``, and when the node is back its Node carries ``labels``
    (added or overwritten, none removed) and the annotation ``node.openshift.io/md5sum`` (md5
    of ``node_config``), what the ``sync`` DaemonSet does (o-a
    ``roles/openshift_node_group/files/sync.yaml``: ``oc label ... --overwrite``, then
    ``oc annotate node.openshift.io/md5sum``). Returns the log lines; raises JoinError."""
    host = hosts.hosts.get(name)
    if host is None or hosts.sim.store.try_get("nodes", name) is None:
        raise JoinError(f"host {name} has no registered Node")
    svc = host.node_service()
    if svc is None:
        raise JoinError(f"{name}: no node service installed")
    ctx = Ctx(host=host, argv=["ansible"], stdin=b"", world=hosts, via="ansible")
    set_active(ctx, svc, False)
    hosts.write_ready(host, ("False", "KubeletNotReady", "kubelet is restarting"))
    if node_group:
        host.node_group = node_group
        sysconfig = f"/etc/sysconfig/{svc}"
        kept = [ln for ln in host.files.get(sysconfig, "").splitlines() if not ln.startswith("BOOTSTRAP_CONFIG_NAME=")]
        host.files[sysconfig] = "\n".join([*kept, f"BOOTSTRAP_CONFIG_NAME={node_group}"]) + "\n"
        if node_config is not None:
            host.files[NODE_CONFIG] = node_config
    await hosts.sim.clock.sleep(hosts.options.restart_seconds)

    def bump(o: dict[str, Any]) -> None:
        info = o.setdefault("status", {}).setdefault("nodeInfo", {})
        info["kubeletVersion"] = info["kubeProxyVersion"] = version
        if labels:
            o["metadata"].setdefault("labels", {}).update(labels)
        if node_group and node_config is not None:
            o["metadata"].setdefault("annotations", {})[MD5SUM_ANNOTATION] = hashlib.md5(node_config.encode()).hexdigest()  # noqa: S324 - the sync pod's md5sum

    hosts.sim.store.mutate("nodes", name, None, bump)
    set_active(ctx, svc, True)
    lines = [f"node {name} upgraded to {version}"]
    if labels:
        lines.append(f"node {name} in node group {node_group}, labels " + ",".join(f"{k}={v}" for k, v in sorted(labels.items())))
    return lines
