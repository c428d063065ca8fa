"""The ``gluster`` command-line emulator: argv in, (stdout, stderr, exit code) out.

``run_gluster(state, local, argv, now)`` answers as the CLI inside the GlusterFS pod of peer
``local`` would (``localhost`` is that peer). Supported (``--mode=script`` and ``--timeout=N``
are accepted and ignored; ``--xml`` anywhere switches to XML where glusterfs has it):

- ``volume list``; ``volume info [VOL|all]``; ``volume status [VOL|all]``;
- ``volume heal VOL info [summary|split-brain]``; ``volume heal VOL statistics heal-count``;
- ``volume start VOL [force]``; ``peer status``; ``pool list``; ``system:: uuid get``.

Failure strings and where they come from (procedures-spec §2.6):
- ``Connection failed. Please check if gluster daemon is operational.`` on stdout, exit 1, when
  the local glusterd is down (``cli/src/cli.c`` RPC_CLNT_DISCONNECT);
- ``Another transaction is in progress for VOL. Please try again after some time.`` on stderr,
  exit 1, under the ``transaction_in_progress`` fault (``glusterd-handler.c``; without a volume
  the ``glusterd-mgmt.c`` wording without ``for VOL``);
- ``Volume VOL does not exist`` on stderr, exit 1.
"""

from __future__ import annotations

from clustersim.gluster.model import GlusterState, Peer, Volume
from clustersim.gluster.textfmt import (
    HealBrick,
    HealEntry,
    PeerRow,
    StatusRow,
    format_heal_count,
    format_heal_info,
    format_heal_summary,
    format_peer_status,
    format_pool_list,
    format_volume_info,
    format_volume_status,
)
from clustersim.gluster.xmlfmt import (
    XmlNode,
    XmlVolumeInfo,
    XmlVolumeStatus,
    error_xml,
    heal_info_xml,
    peer_status_xml,
    volume_info_xml,
    volume_status_xml,
)

CONNECTION_FAILED = "Connection failed. Please check if gluster daemon is operational."
Result = tuple[str, str, int]


def _failed(msg: str, xml: bool) -> Result:
    """A command that failed with ``msg``: the CLI prints it on stderr and exits 1; with
    ``--xml`` it prints the ``cliOutput`` error document on stdout instead."""
    return (error_xml(msg), "", 1) if xml else ("", msg + "\n", 1)


def _tx_message(volume: str | None) -> str:
    if volume:
        return f"Another transaction is in progress for {volume}. Please try again after some time."
    return "Another transaction is in progress. Please try again after some time."


# ---------------------------------------------------------------------- views


def status_rows(state: GlusterState, local: Peer, vol: Volume) -> list[tuple[StatusRow, XmlNode]]:
    """What ``volume status VOL`` lists from ``local``: bricks of reachable peers in Brick1..N
    order (a peer whose glusterd is down contributes nothing), then the self-heal daemons of
    ``localhost`` and of the other reachable peers, in peer order."""
    rows = []
    for b in vol.bricks:
        if b.peer is not local and not state.reachable(b.peer):
            continue
        rows.append((StatusRow(f"Brick {b.name}", b.port, 0, b.online, b.pid),
                     XmlNode(b.host, b.path, b.peer.uuid, b.online, b.port, 0, b.pid)))
    if vol.replica > 1:
        for p in [local, *(p for p in state.peers if p is not local)]:
            if p is not local and not state.reachable(p):
                continue
            where = "localhost" if p is local else p.address
            up = p.runnable and p.shd_pid != -1
            pid = p.shd_pid if up else -1
            rows.append((StatusRow(f"Self-heal Daemon on {where}", 0, 0, up, pid),
                         XmlNode("Self-heal Daemon", where, p.uuid, up, 0, 0, pid)))
    return rows


def heal_bricks(state: GlusterState, vol: Volume) -> list[HealBrick]:
    """``heal info`` blocks for every brick of ``vol``: offline bricks are not connected; while a
    replica set heals, its oldest entry is shown as possibly undergoing heal."""
    out = []
    for b in vol.bricks:
        if not b.online:
            out.append(HealBrick(b.name, False))
            continue
        rs = state.set_of(b)
        entries = [HealEntry(p, "split-brain") for p in rs.split_brain]
        pending = [f for f, holders in rs.entries.items() if b.index in holders]
        healing = rs.all_online and state.cfg.heal_rate > 0
        entries += [HealEntry(f, "possibly-healing" if healing and i == 0 else "heal") for i, f in enumerate(pending)]
        out.append(HealBrick(b.name, True, tuple(entries)))
    return out


def _peer_rows(state: GlusterState, local: Peer) -> list[PeerRow]:
    return [PeerRow(p.address, p.uuid, state.reachable(p)) for p in state.peers if p is not local]


# ---------------------------------------------------------------------- commands


def _volume_status(state: GlusterState, local: Peer, words: list[str], xml: bool) -> Result:
    target = words[2] if len(words) > 2 else "all"
    if target == "all":
        vols = [v for v in state.sorted_volumes() if v.started]
        if not vols:
            return (volume_status_xml([]), "", 0) if xml else ("", "No volumes present\n", 0)
    else:
        vol = state.volumes.get(target)
        if vol is None:
            msg = f"Volume {target} does not exist"
            return _failed(msg, xml)
        if not vol.started:
            msg = f"Volume {target} is not started"
            return _failed(msg, xml)
        vols = [vol]
    if xml:
        return volume_status_xml([XmlVolumeStatus(v.name, [x for _, x in status_rows(state, local, v)])
                                  for v in vols]), "", 0
    text = "".join(format_volume_status(v.name, [r for r, _ in status_rows(state, local, v)], state.cfg.status_style)
                   for v in vols)
    return text, "", 0


def _volume_info(state: GlusterState, words: list[str], xml: bool) -> Result:
    target = words[2] if len(words) > 2 else "all"
    if target == "all":
        vols = state.sorted_volumes()
        if not vols and not xml:
            return "", "No volumes present\n", 0
    else:
        vol = state.volumes.get(target)
        if vol is None:
            msg = f"Volume {target} does not exist"
            return _failed(msg, xml)
        vols = [vol]
    if xml:
        return volume_info_xml([XmlVolumeInfo(v.name, v.id, v.started, v.dist_count, v.replica, v.arbiter, v.type_id,
                                              v.type_str, [(b.name, b.peer.uuid, b.arbiter) for b in v.bricks], v.options)
                                for v in vols]), "", 0
    return "".join(format_volume_info(v.name, v.id, v.type_str, v.started, v.dist_count, v.replica, v.arbiter,
                                      [(b.name, b.arbiter) for b in v.bricks], v.options) for v in vols), "", 0


def _volume_heal(state: GlusterState, words: list[str], xml: bool) -> Result:
    if len(words) < 4:
        return "", "Usage: volume heal <VOLNAME> [enable | disable | full |statistics [heal-count ...]] |info [summary | split-brain] ...\n", 1
    name, op = words[2], words[3:]
    vol = state.volumes.get(name)
    if vol is None:
        return f"Volume {name} does not exist\n", "", 1
    if vol.replica <= 1:
        return (f"This command is supported for only volumes of replicate/disperse type. Volume {name} is not of "
                f"type replicate/disperse\nVolume heal failed.\n", "", 1)
    if not vol.started or not any(b.online for b in vol.bricks):
        return f"Volume {name} is not started (Or) All the bricks are not running.\n", "", 1
    bricks = heal_bricks(state, vol)
    if op == ["statistics", "heal-count"]:
        return format_heal_count(name, bricks), "", 0
    if op[0] != "info" or len(op) > 2 or (len(op) == 2 and op[1] not in ("summary", "split-brain")):
        return "", f"Usage: volume heal {name} info [summary | split-brain]\n", 1
    mode = op[1] if len(op) == 2 else "info"
    if xml:
        return heal_info_xml([(hb, b.peer.uuid) for hb, b in zip(bricks, vol.bricks, strict=True)], mode), "", 0
    if mode == "summary":
        return format_heal_summary(bricks), "", 0
    return format_heal_info(bricks, "split-brain" if mode == "split-brain" else "info"), "", 0


def _volume_start(state: GlusterState, words: list[str], now: float) -> Result:
    if len(words) < 3:
        return "", "Usage: volume start <VOLNAME> [force]\n", 1
    name = words[2]
    vol = state.volumes.get(name)
    if vol is None:
        return "", f"volume start: {name}: failed: Volume {name} does not exist\n", 1
    force = words[3:] == ["force"]
    if vol.started and not force:
        return "", f"volume start: {name}: failed: Volume {name} already started\n", 1
    state.start_force(name, now)
    return f"volume start: {name}: success\n", "", 0


def run_gluster(state: GlusterState, local: Peer, argv: list[str], now: float) -> Result:
    """Run one ``gluster ...`` command as the CLI in ``local``'s pod at simulated time ``now``.

    ``argv[0]`` is ``gluster`` (or a path ending in it). Returns (stdout, stderr, exit code)."""
    state.advance(now)
    xml = "--xml" in argv
    words: list[str] = []
    rest = iter(argv[1:])
    for a in rest:
        if a == "--timeout":
            next(rest, None)  # "--timeout N": N belongs to the option
        elif a != "--xml" and not a.startswith(("--mode=", "--timeout=")):
            words.append(a)
    if not state.usable_locally(local):
        return CONNECTION_FAILED + "\n", "", 1
    volname = None
    if len(words) >= 3 and words[0] == "volume" and words[2] != "all":
        volname = words[2]
    if state.take_transaction_fault():
        msg = _tx_message(volname)
        return _failed(msg, xml)
    head = words[:2]
    if head == ["volume", "list"]:
        names = sorted(state.volumes)
        return ("\n".join(names) + "\n", "", 0) if names else ("", "No volumes present in cluster\n", 0)
    if head == ["volume", "status"]:
        return _volume_status(state, local, words, xml)
    if head == ["volume", "info"]:
        return _volume_info(state, words, xml)
    if head == ["volume", "heal"]:
        return _volume_heal(state, words, xml)
    if head == ["volume", "start"]:
        return _volume_start(state, words, now)
    if head == ["peer", "status"]:
        rows = _peer_rows(state, local)
        return (peer_status_xml(rows), "", 0) if xml else (format_peer_status(rows), "", 0)
    if head == ["pool", "list"]:
        return format_pool_list([*_peer_rows(state, local), PeerRow("localhost", local.uuid, True)]), "", 0
    if words[:3] == ["system::", "uuid", "get"]:
        return f"UUID: {local.uuid}\n", "", 0
    word = words[0] if words else ""
    return "", f"unrecognized word: {word} (position 0)\n" if word else "unrecognized command\n", 1
