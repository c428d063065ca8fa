"""Pure decisions of the runtime migration (procedures-spec §6.3): the host commands of each step,
how their output says "already done", the inventory change a person is asked to make, the labels
expected after the rejoin, the GlusterFS safety rule and the package post-check.

Output formats read here (EL7): ``systemctl is-active`` prints ``active``/``inactive``/``unknown``
per unit; ``systemctl is-enabled`` prints ``enabled``/``disabled`` or, for a missing unit,
``Failed to get unit file state for X.service: No such file or directory`` on stderr (exit 1);
``rpm -q P`` prints ``P-V-R.A`` or ``package P is not installed``; ``getent hosts`` exits 0 when a
name resolves, 2 when not. No shell anywhere: every command is an argv.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from activities.runtime_migration.models import NodeObject
from workflows.kit.plan import order_name, order_nodes
from workflows.shared.glusterfs.models import Assessment
from workflows.runtime_migration.models import NodeRecordView, PackageFinding

#: The comment 3.x's NetworkManager dispatcher (o-a 99-origin-dns.sh) writes into /etc/resolv.conf.
ORIGIN_DNS_MARK = "99-origin-dns.sh"
UPSTREAM_RESOLV = "/etc/origin/node/resolv.conf"
BOOT_ID = ["cat", "/proc/sys/kernel/random/boot_id"]
BOOTSTRAP_GREP = ["grep", "BOOTSTRAP_CONFIG", "/etc/sysconfig/atomic-openshift-node"]
#: name and version-release of every package, one per line (rpm's --queryformat).
RPM_QA = ["rpm", "-qa", "--qf", "%{NAME} %{VERSION}-%{RELEASE}\\n"]
RUNTIME_PACKAGES = ["docker", "cri-o", "atomic-openshift-node"]
RUNTIME_UNITS = ["crio", "docker", "atomic-openshift-node"]
#: External step → the namespaces whose objects it is documented to create, read before and
#: after the step (procedures-spec §6.1: ``openshift_node_group.yml`` ensures the Namespace
#: ``openshift-node`` and a ConfigMap per node group). The scale-up writes the Node (named as
#: the node's) and the host (named as ``host NAME``), nothing of its own to read.
EXTERNAL_WRITES: dict[str, list[str]] = {"node-group": ["openshift-node"]}
RUNTIME_SOCKETS = ["/var/run/crio/crio.sock", "/var/run/docker.sock"]
CRIO_LABEL = ("runtime", "cri-o")


# --- node order ---------------------------------------------------------------------------------


def migration_order(nodes: Sequence[str], node_order: str | Sequence[str] | None,
                    read: Mapping[str, NodeObject]) -> tuple[str, list[str]]:
    """The order's name and the nodes to migrate in it: ``node_order`` None keeps ``nodes`` as
    given (``as-listed``, the only order before issue 40); otherwise
    :func:`workflows.kit.plan.order_nodes` over the Nodes the preflight ``read`` (zone label,
    creationTimestamp; a node not read sorts as one without either)."""
    if node_order is None:
        return "as-listed", list(nodes)
    objs = [read.get(n) or NodeObject(name=n) for n in nodes]
    return order_name(node_order), [o.name for o in order_nodes(objs, node_order)]


# --- reading outputs ----------------------------------------------------------------------------


def units_down(is_active_out: str, is_enabled_out: str, units: list[str]) -> list[str]:
    """The units of ``units`` still active or enabled, from ``systemctl is-active U...`` and
    ``systemctl is-enabled U...`` stdout (one line per unit in order; a missing unit prints
    ``unknown`` for is-active and nothing on stdout for is-enabled). Empty = all down."""
    active = [ln.strip() for ln in is_active_out.splitlines() if ln.strip()]
    enabled = {ln.strip() for ln in is_enabled_out.splitlines() if ln.strip()}
    left = [u for u, state in zip(units, active, strict=False) if state == "active"]
    if len(active) < len(units):  # output we do not understand: treat as not done
        return list(units)
    # is-enabled prints nothing for missing units, so its lines cannot be matched by position;
    # one "enabled" line means some unit is still enabled.
    if "enabled" in enabled:
        left += [u for u in units if u not in left]
    return left


def packages_installed(rpm_q_out: str, packages: list[str]) -> list[str]:
    """The packages ``rpm -q P...`` reports installed (every line that is not ``package P is not
    installed``, mapped back to the names asked)."""
    missing = {ln.split()[1] for ln in rpm_q_out.splitlines() if ln.startswith("package ") and ln.rstrip().endswith("is not installed")}
    return [p for p in packages if p not in missing]


def parse_rpm_qa(out: str) -> dict[str, str]:
    """``rpm -qa --qf '%{NAME} %{VERSION}-%{RELEASE}\\n'`` → name → version-release."""
    pkgs: dict[str, str] = {}
    for ln in out.splitlines():
        parts = ln.split()
        if parts:
            pkgs[parts[0]] = parts[1] if len(parts) > 1 else ""
    return pkgs


def resolv_conf_problem(resolv_conf: str, node_ips: Iterable[str]) -> str | None:
    """Why ``/etc/resolv.conf`` still depends on dnsmasq (None: it does not): the dispatcher's
    watermark, or a ``nameserver`` that is one of the node's own addresses."""
    if ORIGIN_DNS_MARK in resolv_conf:
        return f"/etc/resolv.conf carries the {ORIGIN_DNS_MARK} watermark (points at dnsmasq)"
    ips = set(node_ips)
    for ln in resolv_conf.splitlines():
        parts = ln.split()
        if len(parts) >= 2 and parts[0] == "nameserver" and parts[1] in ips:
            return f"/etc/resolv.conf uses nameserver {parts[1]}, the node itself (dnsmasq)"
    return None


def bootstrap_group(grep_out: str) -> str:
    """``BOOTSTRAP_CONFIG_NAME=node-config-infra-crio`` → ``node-config-infra-crio`` ("" if absent)."""
    for ln in grep_out.splitlines():
        if ln.strip().startswith("BOOTSTRAP_CONFIG_NAME="):
            return ln.split("=", 1)[1].strip()
    return ""


def docker_group(group: str) -> str:
    """The Docker variant of a CRI-O node group (``node-config-infra-crio`` → ``node-config-infra``)."""
    return group[: -len("-crio")] if group.endswith("-crio") else group


# --- commands -----------------------------------------------------------------------------------


def wipe_commands(paths: list[str], dir_contents: list[str]) -> list[list[str]]:
    """The wipe as argv lists: ``rm -rf PATH...`` and, per directory, ``find DIR -mindepth 1
    -maxdepth 1 -exec rm -rf {} +`` (no shell glob: the executors quote every argument)."""
    cmds = [["rm", "-rf", *paths]] if paths else []
    cmds += [["find", d, "-mindepth", "1", "-maxdepth", "1", "-exec", "rm", "-rf", "{}", "+"] for d in dir_contents]
    return cmds


def expand_argv(argv: list[str], node: str, group: str) -> list[str]:
    """An external step's argv for one node: ``{node}`` → the node name, ``{group}`` → its
    Docker node group (the same command line serves every node)."""
    return [a.replace("{node}", node).replace("{group}", docker_group(group)) for a in argv]


def inventory_change(node: str, group: str) -> str:
    """The exact inventory edit a person makes when no inventory hook is configured (seed 003)."""
    target = docker_group(group) or "<the node group without -crio>"
    return (f"In the Ansible inventory: move host {node} from [nodes] to [new_nodes] (a child of OSEv3, not of nodes); "
            f"set on it openshift_use_crio=False and openshift_node_group_name={target} (was {group or 'unknown'}); "
            f"keep the OpenShift and OCS versions pinned. Approve once saved.")


def inventory_restore(node: str, group: str) -> str:
    """The edit that moves the host back after its migration."""
    return (f"In the Ansible inventory: move host {node} out of [new_nodes] back into its original group "
            f"(keep openshift_use_crio=False, openshift_node_group_name={docker_group(group) or 'the docker group'}). "
            f"Approve once saved.")


def expected_labels(recorded: dict[str, str], configured: dict[str, str] | None) -> dict[str, str]:
    """The labels the re-registered Node must carry: ``configured``, or the recorded ones minus
    ``runtime=cri-o`` and the per-boot ones a new Node gets anyway."""
    if configured is not None:
        return dict(configured)
    return {k: v for k, v in recorded.items() if (k, v) != CRIO_LABEL}


def label_problems(labels: dict[str, str], expected: dict[str, str]) -> list[str]:
    """``label k=v missing`` / ``label k is X, expected v`` / ``label runtime=cri-o still set``."""
    out = []
    for k, v in sorted(expected.items()):
        if k not in labels:
            out.append(f"label {k}={v} missing")
        elif labels[k] != v:
            out.append(f"label {k} is {labels[k]!r}, expected {v!r}")
    if labels.get(CRIO_LABEL[0]) == CRIO_LABEL[1]:
        out.append("label runtime=cri-o still set")
    return out


# --- the record ConfigMap ---------------------------------------------------------------------


def record_data(node: str, record: NodeRecordView, state: str) -> dict[str, str]:
    """The ConfigMap keys of one node: ``<node>.json`` (the record: uid, labels, runtime,
    bootstrap config, boot_id, packages, addresses and the full Node object without
    ``managedFields``, as JSON) and ``<node>.state`` (one line: where the node is, e.g.
    ``recorded before the destructive steps``)."""
    obj = dict(record.node_object or {})
    if obj.get("metadata"):
        obj["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    body = record.model_dump(exclude={"node_object"})
    body["node_object"] = obj or None
    return {f"{node}.json": json.dumps(body, indent=1, sort_keys=True), f"{node}.state": state}


# --- GlusterFS ----------------------------------------------------------------------------------


def node_down_safety(assessment: Assessment, node: str, node_hosts: Iterable[str] = ()) -> list[str]:
    """Procedures-spec §6.3 step 1: taking ``node`` down (all its bricks) must leave every replica
    set of every volume with a brick there with at most one brick down. Returns the reasons it
    would not (empty = safe). A brick is ``node``'s when the assessment mapped it to the node or
    its host is one of ``node_hosts`` (the node's addresses)."""
    hosts = set(node_hosts)
    out = list(assessment.fatal)
    for va in assessment.volumes:
        mine = {b.name for b in va.bricks if b.node == node or b.host in hosts}
        if not mine:
            continue
        offline_other = [b for b in va.offline if b not in mine]
        for i, rs in enumerate(va.replica_sets or [[b.name for b in va.bricks]]):
            down = [b for b in rs if b in mine or b in offline_other]
            if len(down) > 1:
                out.append(f"volume {va.name} replica set {i}: taking {node} down leaves {len(down)} bricks down "
                           f"({', '.join(down)})")
        if offline_other and not va.replica_sets:
            out.append(f"volume {va.name}: bricks already offline ({', '.join(offline_other)})")
    return out


# --- post-check ---------------------------------------------------------------------------------


ROLE_PREFIX = "node-role.kubernetes.io/"


def node_group(labels: dict[str, str]) -> str:
    """A node's group for the post-check: its roles from the ``node-role.kubernetes.io/<role>``
    labels (3.11 node groups set them: ``node-config-infra`` → ``infra``), sorted and joined
    with ``,`` ("" when it has none)."""
    return ",".join(sorted(k[len(ROLE_PREFIX):] for k in labels if k.startswith(ROLE_PREFIX)))


def group_peers(node: str, groups: dict[str, str] | None, migrated: list[str], peers: list[str]) -> list[str]:
    """The nodes ``node`` is compared with: the peers in its group (``groups``: node → group;
    None = every peer). A group without peers falls back to the other migrated nodes of it."""
    if groups is None:
        return list(peers)
    g = groups.get(node, "")
    same = [p for p in peers if groups.get(p, "") == g and p != node]
    return same or [m for m in migrated if m != node and groups.get(m, "") == g]


def package_findings(
    baseline: dict[str, dict[str, str]],
    now: dict[str, dict[str, str]],
    migrated: list[str],
    peers: list[str],
    ignore: Iterable[str] = (),
    groups: dict[str, str] | None = None,
    node_versions: dict[str, dict[str, str]] | None = None,
) -> list[PackageFinding]:
    """Procedures-spec §6.3 post-check, per node group (:func:`group_peers`: a migrated infra
    node is compared with the infra peers, never with compute or master nodes).

    - missing: a package present on a migrated node before (``baseline``) or on most of its
      group's peers now, missing on that node now (``ignore``d packages aside: the CRI-O ones go
      on purpose).
    - version: a package on the migrated node whose version differs from the version every
      group peer that has it agrees on; the same for ``node_versions``' ``kubelet`` (Node
      ``status.nodeInfo.kubeletVersion``) and ``runtime`` (``containerRuntimeVersion``, compared
      only with peers running the same runtime: ``docker://`` with ``docker://``).
    ``baseline``/``now``: node → name → version-release; ``node_versions``: node → {kubelet, runtime}."""
    skip = set(ignore)
    out: list[PackageFinding] = []
    versions_of = node_versions or {}
    for node in migrated:
        ref = group_peers(node, groups, migrated, peers)
        group = (groups or {}).get(node, "")
        where_g = f" of group {group}" if groups is not None else ""
        peer_now = {p: now.get(p, {}) for p in ref if p in now}
        before, after = baseline.get(node, {}), now.get(node, {})
        candidates = set(before) | {pk for pkgs in peer_now.values() for pk in pkgs}
        for pkg in sorted(candidates - set(after) - skip):
            having = [p for p, pkgs in peer_now.items() if pkg in pkgs]
            if pkg not in before and len(having) < max(1, (len(peer_now) + 1) // 2):
                continue  # a package a minority of peers has is not a finding for this node
            where = "present before migration" if pkg in before else "not present before migration"
            out.append(PackageFinding(kind="missing", node=node, package=pkg, group=group,
                                      message=f"package {pkg} {where} on {node} and on {len(having)}/{len(peer_now)} peers{where_g}, missing now"))
        for pkg in sorted(set(after) - skip):
            versions = {pkgs[pkg] for pkgs in peer_now.values() if pkg in pkgs}
            if len(versions) == 1 and after[pkg] not in versions:
                out.append(PackageFinding(kind="version", node=node, package=pkg, group=group,
                                          message=f"package {pkg} is {after[pkg]} on {node}, {next(iter(versions))} on the peers{where_g}"))
        mine = versions_of.get(node, {})
        for what in ("kubelet", "runtime"):
            v = mine.get(what, "")
            if not v:
                continue
            kind = v.split("://", 1)[0] + "://" if what == "runtime" else ""
            peer_vs = {versions_of[p][what] for p in ref if versions_of.get(p, {}).get(what, "").startswith(kind)}
            if len(peer_vs) == 1 and v not in peer_vs:
                label = "kubelet" if what == "kubelet" else "container runtime"
                out.append(PackageFinding(kind="version", node=node, package=what, group=group,
                                          message=f"{label} is {v} on {node}, {next(iter(peer_vs))} on the peers{where_g}"))
    return out
