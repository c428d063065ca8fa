"""Pure decisions of the VXLAN port change (procedures-spec §7): commands, the master-config
edit, the restart order, the preconditions, intervals and the reverse input. No I/O; table-tested.
"""

from __future__ import annotations

from datetime import datetime

from activities.preflight.models import HostExecutable, InputCheck, NamesExist, PortFree, Precondition
from activities.vxlan_port.models import CheckResult, NodeSwitch, PreflightResult
from workflows.kit.records import record_configmap_name as record_configmap_name  # the kit's record ConfigMap name
from workflows.vxlan_port.models import ApiInterval, VxlanPortChangeInput

#: The OpenShift SDN's VXLAN port when ``networkConfig.vxlanPort`` is unset (origin 3.11).
SDN_DEFAULT_PORT = 4789


def firewall_rule(chain: str, port: int) -> list[str]:
    """The seed's rule spec, as o-a ``os_firewall_manage_iptables`` builds it:
    ``CHAIN -p udp -m state --state NEW -m udp --dport PORT -j ACCEPT``."""
    return [chain, "-p", "udp", "-m", "state", "--state", "NEW", "-m", "udp", "--dport", str(port), "-j", "ACCEPT"]


def iptables(op: str, chain: str, port: int) -> list[str]:
    """``iptables -C|-A|-D <rule>`` (``-C`` exits 1 with "Bad rule" when it is absent)."""
    return ["iptables", op, *firewall_rule(chain, port)]


def saved_rule_check(port: int, path: str) -> list[str]:
    """``grep -F 'udp --dport PORT -j ACCEPT' /etc/sysconfig/iptables``: the rule is in the
    saved file, so it survives a reboot (a fixed string of the rule's tail; a pattern that does
    not start with ``-`` needs no ``--``)."""
    return ["grep", "-F", f"udp --dport {port} -j ACCEPT", path]


def set_vxlan_port(text: str, port: int | None) -> str:
    """master-config.yaml with ``networkConfig.vxlanPort: PORT`` (a line-level edit, so comments
    and key order stay): the line under ``networkConfig:`` is replaced when present, else
    inserted as the block's first key with the block's indentation. ``port`` None removes it
    (what o-a writes for 4789). Raises ValueError when there is no top-level ``networkConfig:``.
    """
    lines = text.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if ln.rstrip() == "networkConfig:"), None)
    if start is None:
        raise ValueError("no top-level networkConfig: block")
    end, indent = len(lines), None
    for j in range(start + 1, len(lines)):
        ln = lines[j]
        if not ln.strip() or ln.lstrip().startswith("#"):
            continue
        width = len(ln) - len(ln.lstrip(" "))
        if width == 0:
            end = j
            break
        if indent is None:
            indent = width
    pad = " " * (indent or 2)
    out = list(lines)
    for j in range(start + 1, end):
        if lines[j].startswith(pad + "vxlanPort:") and (len(lines[j]) - len(lines[j].lstrip(" "))) == len(pad):
            if port is None:
                del out[j]
            else:
                out[j] = f"{pad}vxlanPort: {port}\n"
            return "".join(out)
    if port is None:
        return text
    if not out[start].endswith("\n"):
        out[start] += "\n"
    out.insert(start + 1, f"{pad}vxlanPort: {port}\n")
    return "".join(out)


def config_port(port: int) -> int | None:
    """The ``vxlanPort`` o-a writes: none for the default 4789 (``templates/master.yaml.v1.j2``)."""
    return None if port == SDN_DEFAULT_PORT else port


def restart_order(masters: list[str], leader: str | None, explicit: list[str] | None = None) -> list[str]:
    """Masters in restart order: ``explicit`` when given, else ``masters`` as listed; the
    current controllers ``leader`` always last (procedures-spec §7.3 hazard)."""
    order = list(explicit or masters)
    if leader in order:
        order.remove(leader)  # type: ignore[arg-type]
        order.append(leader)  # type: ignore[arg-type]
    return order


def preconditions(inp: VxlanPortChangeInput, pre: PreflightResult, ports: dict[str, NodeSwitch], api: dict[str, CheckResult],
                  *, forward_record: bool | None = None) -> list[Precondition]:
    """Everything the change needs before its first write (issue 39), as the kit's preconditions
    (:mod:`workflows.kit.preflight`): the names the operator gave (``names-exist``); the cluster as
    phase A read it in ``pre`` (every node in the run, Ready, its sdn pod Ready, host access, the
    DaemonSet OnDelete, ClusterNetwork ``default`` on the old port); each node's ``vxlan0``
    dst_port as ``ovs-vsctl`` reads it through the executor the fan-out will use (``ports``: the
    read-only fan-out's rows; a node without a row was not read); the new port free on every node
    that is not on it yet (``port-free``, UDP and TCP: firewall and underlay rules are kept by port
    number, so the VXLAN port may not share its number with a cluster service; the well-known
    table refuses 53, 10250, ... ; 4789 is the SDN's own and taken back knowingly); every program
    the run starts on a host (``host-executable`` through the node's access); each master's own
    API ``/healthz/ready`` (``api``: the answers of ``check_master_api``). A reverse run
    (``reverse_of``) accepts nodes and the ClusterNetwork on either port, and needs the DaemonSet's
    original from the record ConfigMap of the run it reverses when the DaemonSet lost its triggers
    annotation (``forward_record``: whether that record was read; None: not a reverse run)."""
    nodes = inp.nodes or sorted(pre.nodes)
    known = [n for n in nodes if n in pre.nodes]
    reverse = inp.reverse_of is not None
    allowed = {inp.old_port, inp.new_port} if reverse else {inp.old_port}
    ports_word = " or ".join(str(p) for p in sorted(allowed))
    out: list[Precondition] = []
    if inp.nodes:
        out.append(NamesExist(names=list(inp.nodes), role="node", why="the nodes to switch (--node)"))
    out.append(NamesExist(names=[m.name for m in inp.masters], role="master", label="node-role.kubernetes.io/master",
                          why="the masters whose config is edited and whose API and controllers restart (--master)"))

    def check(about: str, bad: list[str] | str, ok_detail: str, why: str) -> None:
        detail = bad if isinstance(bad, str) else ", ".join(bad)
        out.append(InputCheck(about=about, ok=not bad, detail=detail or ok_detail, why=why))

    left_out = sorted(set(pre.nodes) - set(nodes))
    check("every node in the run", f"left out: {', '.join(left_out)}" if left_out else "", f"{len(nodes)} nodes",
          "every node runs the SDN: a node left out stays on the old port and loses cross-node traffic")
    no_access = [n for n in known if n not in inp.host_access]
    check("host access", f"none for {', '.join(no_access)}" if no_access else "", f"{len(known)} nodes",
          "the pull, the firewall rule and the ssh switch run on every node's host")
    not_ready = [n for n in known if not pre.nodes[n]]
    check("nodes Ready", f"not Ready: {', '.join(not_ready)}" if not_ready else "", f"{len(known)} Ready",
          "a node that is not Ready cannot take the new port")
    pods = [f"{n} (none)" if n not in pre.sdn_pods else f"{n} ({pre.sdn_pods[n].name} not Ready)"
            for n in known if n not in pre.sdn_pods or not pre.sdn_pods[n].ready]
    check("sdn pods Ready", f"not Ready: {', '.join(pods)}" if pods else "", f"{len(known)} Ready",
          "the switch runs in each node's sdn pod and the pods are replaced node by node")
    ds = pre.daemonset
    check(f"DaemonSet {ds.namespace}/{ds.name}", "" if ds.update_strategy == "OnDelete" else f"updateStrategy {ds.update_strategy}",
          f"OnDelete, image {ds.image}", "an OnDelete DaemonSet changes no pod until the procedure replaces it")
    cn = pre.cluster_network
    cn_bad = "absent" if not cn.exists else "" if cn.vxlan_port in allowed else f"vxlanPort {cn.vxlan_port}, not {ports_word}"
    check("ClusterNetwork default", cn_bad, f"vxlanPort {cn.vxlan_port}", "the SDN master's network config this change moves")
    if forward_record is not None:
        lost = not forward_record and ds.triggers is None
        check(f"record of {inp.reverse_of}", f"gone, and DaemonSet {ds.name} has no triggers annotation: its original is unknown"
              if lost else "", "read" if forward_record else "not needed: the DaemonSet keeps its triggers annotation",
              "the DaemonSet is put back as the run it reverses found it")
    via = {"pod-exec": "exec in the sdn pod", "ssh": "docker exec over SSH"}[inp.fanout.switch_via]
    for n in known:
        row = ports.get(n)
        read = "not read (no Ready sdn pod or no target)" if row is None else (
            f"dst_port {row.before}" if row.before is not None else f"unreadable: {row.error}")
        good = row is not None and row.before in allowed
        check(f"vxlan0 on {n}", "" if good else f"{read}, want {ports_word}", f"{read} ({via})",
              f"ovs-vsctl reaches vxlan0 through the fan-out's executor ({via}) and the node is on {ports_word}")
    gluster = set(pre.glusterfs_nodes)
    why_port = "the new VXLAN port: nothing else may use its number on any node"
    for n in known:
        if ports.get(n) is not None and ports[n].before == inp.new_port:
            continue  # already on it: the listener is the SDN's own
        for proto in ("udp", "tcp"):
            out.append(PortFree(port=inp.new_port, protocol=proto, node=n, access=inp.host_access.get(n), glusterfs=n in gluster,
                                allow_well_known=inp.new_port == SDN_DEFAULT_PORT, why=why_port))
    programs = [inp.images.present_cmd[0], inp.images.pull_cmd[0], "iptables"]
    if inp.firewall.persist:
        programs += [inp.firewall.save_cmd[0], "grep"]
    if inp.fanout.switch_via == "ssh":
        programs.append("docker")
    for n in known:
        if n in inp.host_access:
            out += [HostExecutable(program=p, node=n, access=inp.host_access[n], why="phases B and D run it on every node")
                    for p in dict.fromkeys(programs)]
    for m in inp.masters:
        out.append(HostExecutable(program=inp.master.restart_cmd, node=m.name, access=m.access,
                                  why="phase F restarts the master's API and controllers with it"))
        answer = api.get(m.name)
        check(f"API of {m.name}", "" if answer is not None and answer.ok else f"{m.api_url}: {answer.detail if answer else 'not asked'}",
              f"{m.api_url} /healthz/ready: {answer.detail if answer else ''}", "each master's API is checked before and after its restart")
    return out


def all_down(intervals: list[ApiInterval], masters: list[str], now: datetime) -> list[ApiInterval]:
    """Sub-intervals during which every master in ``masters`` was in one of its not-ready
    ``intervals`` at once (an open interval ends at ``now``): the API through the load balancer
    was down then."""
    points: list[tuple[datetime, int]] = []
    for iv in intervals:
        if iv.master not in masters:
            continue
        points += [(iv.start, 1), (iv.end or now, -1)]
    points.sort(key=lambda p: (p[0], p[1]))
    out, depth, opened = [], 0, None
    for t, d in points:
        depth += d
        if depth == len(masters) and opened is None:
            opened = t
        elif depth < len(masters) and opened is not None:
            out.append(ApiInterval(master="all", start=opened, end=t, seconds=(t - opened).total_seconds()))
            opened = None
    return out


def reverse_input(inp: VxlanPortChangeInput, workflow_id: str) -> VxlanPortChangeInput:
    """The input of ``revert --full`` of the ended run ``workflow_id``: the same change with the
    ports swapped (fan-out back, masters and ClusterNetwork to the old port), which at its end
    puts the DaemonSet back as ``workflow_id`` found it (from that run's record ConfigMap), read
    back."""
    return inp.model_copy(update={"new_port": inp.old_port, "old_port": inp.new_port, "reverse_of": workflow_id, "dry_run": False})


def inventory_reminder(port: int) -> str:
    """What to set so the next openshift-ansible run keeps the port (§7.1 Config)."""
    if port == SDN_DEFAULT_PORT:
        return "remove openshift_sdn_vxlan_port from the inventory (or set it to 4789), so the next playbook run keeps 4789"
    return (f"set openshift_sdn_vxlan_port={port} in the inventory, so the next playbook run does not put "
            f"master-config.yaml and the node firewalls back to 4789; the old port's firewall rule may then be removed")
