"""The pure assessment of a GlusterFS read (procedures-spec §3.2 step 3, §2.7).

:func:`assess` turns one :class:`GlusterReport` (volume info, volume status, peers, pods,
nodes, heal info) into an :class:`Assessment`:

- per volume its replica sets (consecutive ``replica_count`` bricks in ``Brick1..N`` order) and
  its offline bricks: ``Online N``, or listed in ``volume info`` but missing from ``volume
  status`` (a down glusterd's bricks are absent, not ``N``), or on a disconnected peer;
- the fatal volumes: more offline bricks than the quorum rule allows (``per-volume``: more than
  one in the volume, seed 002 "if multiple bricks of the same volume are down, your entire
  volume is down"; ``per-replica-set``: more than one in any replica set). Each message names
  every offline brick;
- the hosts to restart (every brick host with an offline brick: one pod restart brings back
  every brick of that host, in every volume), mapped to a node and pod (§2.7: pod IP / host IP,
  then a node address, else unmapped);
- whether restarting each host is safe: a restart takes ALL of that host's bricks down at once,
  so it is allowed only if, for every volume with a brick there, the offline bricks plus that
  host's bricks still satisfy the quorum rule.

Deterministic and free of I/O: the workflow calls it on activity results.
"""

from __future__ import annotations

from collections.abc import Iterable

from activities.gluster.models import Brick, GlusterPod, GlusterReport, NodeAddresses, VolumeInfo
from workflows.shared.glusterfs.models import Assessment, BrickState, HostPlan, QuorumRule, VolumeAssessment


def map_host(host: str, pods: Iterable[GlusterPod], nodes: Iterable[NodeAddresses], *, host_uuid: str | None = None,
             pod_uuids: dict[str, str] | None = None) -> tuple[str | None, GlusterPod | None]:
    """The node and GlusterFS pod of brick host ``host`` (IP or hostname), after §2.7: a pod
    whose pod IP or host IP is ``host`` (hostNetwork: the seed's method), else the node with
    that address (or name) and the pod on it, else the pod whose glusterd UUID (``pod_uuids``,
    from ``system:: uuid get``) is the brick's ``host_uuid`` (a storage network). Among several
    pods on a node the healthy, then the newest, wins. Returns (None, None) when nothing matches."""
    pods = list(pods)

    def best(cands: list[GlusterPod]) -> GlusterPod | None:
        if not cands:
            return None
        return sorted(cands, key=lambda p: (not p.healthy, p.terminating, -(p.created_at.timestamp() if p.created_at else 0), p.name))[0]

    by_ip = best([p for p in pods if host in (p.pod_ip, p.host_ip)])
    if by_ip is not None:
        return by_ip.node or None, by_ip
    for n in nodes:
        if host == n.name or host in n.addresses:
            return n.name, best([p for p in pods if p.node == n.name])
    if host_uuid and pod_uuids:
        by_uuid = best([p for p in pods if pod_uuids.get(p.name) == host_uuid])
        if by_uuid is not None:
            return by_uuid.node or None, by_uuid
    return None, None


def _host_uuids(report: GlusterReport) -> dict[str, str]:
    """Brick host → the glusterd UUID volume info gave for it."""
    return {b.host: b.host_uuid for v in report.info for b in v.bricks if b.host_uuid}


def _too_many(down: set[str], vol: VolumeAssessment, rule: QuorumRule) -> list[str] | None:
    """The offending bricks when ``down`` breaks ``rule`` for ``vol``, else None."""
    if rule == "per-volume":
        hit = [b.name for b in vol.bricks if b.name in down]
        return hit if len(hit) > 1 else None
    for rs in vol.replica_sets:
        hit = [b for b in rs if b in down]
        if len(hit) > 1:
            return hit
    return None


def _volume(vi: VolumeInfo, report: GlusterReport, disconnected: set[str]) -> VolumeAssessment:
    status = next((s for s in report.status if s.name == vi.name), None)
    listed = {b.name: b for b in status.bricks} if status else {}
    va = VolumeAssessment(name=vi.name, type=vi.type, status=vi.status, replica_count=vi.replica_count,
                          arbiter_count=vi.arbiter_count)
    sets = vi.replica_sets()
    va.replica_sets = [[b.name for b in rs] for rs in sets]
    for index, rs in enumerate(sets):
        for b in rs:
            va.bricks.append(_brick(vi, b, index, listed, disconnected, report, stopped=vi.status not in ("", "Started")))
    # A stopped volume's bricks are down on purpose (a person stopped it): shown, not counted.
    va.offline = [b.name for b in va.bricks if not b.online] if vi.status in ("", "Started") else []
    heal = report.heal.get(vi.name)
    if heal is not None:
        va.heal_skipped = heal.skipped
        va.heal_entries = heal.known_entries  # an unreachable brick's '-' shows in heal_problems
        va.heal_problems = heal.problems(expected_bricks=len(vi.bricks))
        va.split_brain = heal.split_brain()
    return va


def _brick(vi: VolumeInfo, b: Brick, index: int, listed: dict, disconnected: set[str], report: GlusterReport,
           *, stopped: bool) -> BrickState:
    node, pod = map_host(b.host, report.pods, report.nodes, host_uuid=b.host_uuid, pod_uuids=report.pod_uuids)
    st = BrickState(volume=vi.name, name=b.name, host=b.host, path=b.path, replica_set=index, arbiter=b.arbiter,
                    node=node, pod=pod.name if pod else None)
    seen = listed.get(b.name)
    peer_down = b.host in disconnected or (b.host_uuid is not None and b.host_uuid in disconnected)
    if stopped:
        st.online, st.reason = False, f"volume {vi.status or 'not started'}"
    elif seen is not None:
        st.online, st.port, st.pid = seen.online, seen.port, seen.pid
        st.reason = None if seen.online else "Online N"
    elif peer_down:
        st.online, st.reason = False, "peer disconnected (missing from volume status)"
    else:
        st.online, st.reason = False, "missing from volume status"
    return st


def assess(report: GlusterReport, rule: QuorumRule = "per-volume") -> Assessment:
    """Assess ``report`` under ``rule`` (see the module doc). Stopped volumes are reported with
    their bricks offline but neither fatal nor a reason to restart a host (a person stopped them)."""
    disconnected = {p.hostname for p in report.peers if not p.connected} | {p.uuid for p in report.peers if not p.connected and p.uuid}
    out = Assessment(at=report.at, exec_pod=report.exec_pod, rule=rule, pods=list(report.pods),
                     disconnected_peers=sorted(p.hostname for p in report.peers if not p.connected))
    for vi in report.info:
        out.volumes.append(_volume(vi, report, disconnected))
    started = [v for v in out.volumes if v.status in ("", "Started")]
    for va in started:
        hit = _too_many(set(va.offline), va, rule)
        if hit is not None:
            where = "volume" if rule == "per-volume" else "replica set"
            va.fatal = (f"volume {va.name} has {len(va.offline)} bricks down: {', '.join(va.offline)}; "
                        f"more than one brick of a {where} is down, so the volume is down: do not continue, "
                        f"recover it by hand")
            out.fatal.append(va.fatal)
    for va in out.volumes:
        if va.split_brain:
            out.fatal.append(f"volume {va.name} has entries in split-brain: {'; '.join(va.split_brain)}; "
                             f"resolve them by hand")
    order: list[str] = []
    for va in started:
        for b in va.bricks:
            if not b.online and b.host not in order:
                order.append(b.host)
    for host in order:
        node, pod = map_host(host, report.pods, report.nodes, host_uuid=_host_uuids(report).get(host), pod_uuids=report.pod_uuids)
        plan = HostPlan(host=host, node=node, pod=pod.name if pod else None, pod_uid=pod.uid if pod else None)
        plan.offline_bricks = [f"{va.name}: {b.name}" for va in started for b in va.bricks if b.host == host and not b.online]
        plan.volumes = [va.name for va in started if any(b.host == host for b in va.bricks)]
        plan.safe, plan.unsafe_reason = restart_safety(host, started, rule)
        if node is None or pod is None:
            out.unmapped.append(f"brick host {host} maps to no node" if node is None else f"brick host {host} (node {node}) has no GlusterFS pod")
        out.hosts.append(plan)
    return out


def restart_safety(host: str, volumes: Iterable[VolumeAssessment], rule: QuorumRule) -> tuple[bool, str | None]:
    """Whether restarting ``host``'s pod keeps every volume within ``rule``: for each volume with
    a brick on ``host``, its offline bricks plus all of ``host``'s bricks. Returns (safe,
    reason naming the volume and the bricks that would be down together)."""
    for va in volumes:
        mine = {b.name for b in va.bricks if b.host == host}
        if not mine:
            continue
        down = set(va.offline) | mine
        hit = _too_many(down, va, rule)
        if hit is not None:
            others = [b for b in hit if b not in mine]
            return False, (f"restarting {host} would take {len(hit)} bricks of volume {va.name} down at once "
                           f"({', '.join(hit)}); {', '.join(others) or 'another brick'} is already down")
    return True, None
