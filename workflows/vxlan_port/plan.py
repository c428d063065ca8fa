"""Pure decisions of the VXLAN port change (procedures-spec §7): commands, the master-config
edit, the restart order, preflight verdicts, intervals and the reverse input. No I/O; table-tested.
"""

from __future__ import annotations

import re
from datetime import datetime

from activities.vxlan_port.models import PreflightResult
from workflows.vxlan_port.models import ApiInterval, VxlanPortChangeInput


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
    return None if port == 4789 else port


def restart_order(masters: list[str], leader: str | None, explicit: list[str] | None = None) -> list[str]:
    """Masters in restart order: ``explicit`` when given, else ``masters`` as listed; the
    current controllers ``leader`` always last (procedures-spec §7.3 hazard)."""
    order = list(explicit or masters)
    if leader in order:
        order.remove(leader)  # type: ignore[arg-type]
        order.append(leader)  # type: ignore[arg-type]
    return order


def preflight_problems(pre: PreflightResult, ports: dict[str, int | None], inp: VxlanPortChangeInput) -> list[str]:
    """Why phase A refuses to go on (empty: go): nodes not Ready, SDN pods missing or not Ready,
    ClusterNetwork missing or not on the old port, nodes not on the old port, nodes without host
    access, a DaemonSet that is not OnDelete."""
    problems: list[str] = []
    not_ready = [n for n, ok in pre.nodes.items() if not ok]
    if not_ready:
        problems.append(f"nodes not Ready: {', '.join(sorted(not_ready))}")
    no_pod = [n for n in pre.nodes if n not in pre.sdn_pods]
    if no_pod:
        problems.append(f"no sdn pod on: {', '.join(sorted(no_pod))}")
    pod_not_ready = [n for n, p in pre.sdn_pods.items() if not p.ready]
    if pod_not_ready:
        problems.append(f"sdn pod not Ready on: {', '.join(sorted(pod_not_ready))}")
    cn = pre.cluster_network
    if not cn.exists:
        problems.append("ClusterNetwork default does not exist")
    elif cn.vxlan_port != inp.old_port:
        problems.append(f"ClusterNetwork default has vxlanPort {cn.vxlan_port}, not the old port {inp.old_port}")
    wrong = {n: p for n, p in ports.items() if p != inp.old_port}
    if wrong:
        problems.append("nodes not on the old port: " + ", ".join(f"{n}={p}" for n, p in sorted(wrong.items(), key=lambda kv: kv[0])))
    no_access = [n for n in pre.nodes if n not in inp.host_access]
    if no_access:
        problems.append(f"no host access for: {', '.join(sorted(no_access))}")
    if pre.daemonset.update_strategy != "OnDelete":
        problems.append(f"daemonset {pre.daemonset.name} updateStrategy is {pre.daemonset.update_strategy}, expected OnDelete")
    return problems


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


def record_configmap_name(workflow_id: str) -> str:
    """``lockkeeper-record-<workflow id>`` as a DNS-1123 name (lower case, other characters
    as ``-``, at most 253)."""
    body = re.sub(r"[^a-z0-9.-]+", "-", workflow_id.lower()).strip("-.")
    return f"lockkeeper-record-{body}"[:253].rstrip("-.")


def reverse_input(inp: VxlanPortChangeInput, workflow_id: str) -> VxlanPortChangeInput:
    """The input of ``revert --full``: the same change with the ports swapped (fan-out back,
    masters and ClusterNetwork to the old port, the DaemonSet restored at the end)."""
    return inp.model_copy(update={"new_port": inp.old_port, "old_port": inp.new_port, "reverse_of": workflow_id, "dry_run": False})


def inventory_reminder(port: int) -> str:
    """What to set so the next openshift-ansible run keeps the port (§7.1 Config)."""
    if port == 4789:
        return "remove openshift_sdn_vxlan_port from the inventory (or set it to 4789), so the next playbook run keeps 4789"
    return (f"set openshift_sdn_vxlan_port={port} in the inventory, so the next playbook run does not put "
            f"master-config.yaml and the node firewalls back to 4789; the old port's firewall rule may then be removed")
