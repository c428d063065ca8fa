"""Text output of the gluster CLI (glusterfs 3.12 / HEAD), as pure functions over plain rows.

Sources (glusterfs repository):
- ``volume status``: ``cli/src/cli-rpc-ops.c::gf_cli_status_cbk`` and
  ``cli_print_volume_status_tasks``, ``cli/src/cli-cmd-volume.c::cli_print_brick_status``,
  ``CLI_VOL_STATUS_BRICK_LEN 43`` / ``CLI_BRICK_STATUS_LINE_LEN 78`` in ``cli/src/cli.h``;
- ``volume info``: ``gf_cli_get_volume_cbk``, ``gf_cli_print_number_of_bricks``, ``print_brick_details``;
- ``volume heal VOL info``: ``heal/src/glfs-heal.c`` (``glfsh_print_hr_heal_status``,
  ``glfsh_print_hr_heal_op_status``, brick header ``Brick %s:%s``);
- ``volume heal VOL statistics heal-count``: ``cmd_heal_volume_statistics_heal_count_out``;
- ``peer status`` / ``pool list``: ``gf_cli_output_peer_status`` / ``gf_cli_output_pool_list``.
procedures-spec §2.3-§2.6 quotes these formats.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

BRICK_LEN = 43  # CLI_VOL_STATUS_BRICK_LEN
LINE_LEN = 78  # CLI_BRICK_STATUS_LINE_LEN
DASHES = "-" * LINE_LEN


@dataclass(frozen=True)
class StatusRow:
    """One process line of ``volume status``: ``name`` is ``Brick host:/path`` or
    ``Self-heal Daemon on localhost``; ``port``/``rdma`` 0 mean none; ``pid`` -1 prints N/A."""

    name: str
    port: int
    rdma: int
    online: bool
    pid: int


@dataclass(frozen=True)
class HealEntry:
    """One ``heal info`` entry: a path or ``<gfid:...>`` and its status suffix kind."""

    path: str
    kind: Literal["heal", "possibly-healing", "split-brain"] = "heal"


@dataclass(frozen=True)
class HealBrick:
    """``heal info`` for one brick: ``connected`` False prints the strerror and ``-``."""

    name: str  # host:/path
    connected: bool
    entries: Sequence[HealEntry] = field(default_factory=tuple)
    error: str = "Transport endpoint is not connected"


@dataclass(frozen=True)
class PeerRow:
    """A peer as ``peer status``/``pool list`` print it."""

    hostname: str
    uuid: str
    connected: bool


def format_process(row: StatusRow, style: Literal["upstream", "seed"] = "upstream") -> list[str]:
    """The line(s) ``cli_print_brick_status`` prints for one process (no newlines).

    Names longer than 43 characters are cut into 43-character chunks; the last chunk is padded
    to 44 columns, then ``%-10d%-11d%-8c%-5s`` (online with a port) or ``%-10s%-11s%-8c%-5s``
    with ``N/A``. ``style="seed"`` prints an offline brick with its port, RDMA port and no pid,
    as the field report (seed 002) shows it (``49152     0          N``)."""
    lines = []
    p = row.name
    while len(p) > BRICK_LEN:
        lines.append(p[:BRICK_LEN])
        p = p[BRICK_LEN:]
    pad = p + " " * (BRICK_LEN - len(p) + 1)
    yn = "Y" if row.online else "N"
    pid = "N/A" if row.pid == -1 else str(row.pid)
    if (row.port or row.rdma) and row.online:
        cols = f"{row.port:<10d}{row.rdma:<11d}{yn:<8}{pid:<5}"
    elif (row.port or row.rdma) and style == "seed":
        cols = f"{row.port:<10d}{row.rdma:<11d}{yn:<8}{'':<5}"
    else:
        cols = f"{'N/A':<10}{'N/A':<11}{yn:<8}{pid:<5}"
    lines.append(pad + cols)
    return lines


def format_volume_status(volname: str, rows: Sequence[StatusRow], style: Literal["upstream", "seed"] = "upstream") -> str:
    """``gluster volume status VOL`` for one volume with no active tasks (ends with a ``" "`` line)."""
    out = [f"Status of volume: {volname}",
           f"{'Gluster process':<{BRICK_LEN}} TCP Port  RDMA Port  Online  Pid",
           DASHES]
    for row in rows:
        out.extend(format_process(row, style))
    out += [" ", f"Task Status of Volume {volname}", DASHES, "There are no active volume tasks", " "]
    return "\n".join(out) + "\n"


def number_of_bricks(brick_count: int, dist_count: int, replica: int, arbiter: int) -> str:
    """``Number of Bricks:`` value: ``3``, ``1 x 3 = 3`` or the arbiter form ``1 x (2 + 1) = 3``."""
    if replica <= 1:
        return str(brick_count)
    if arbiter:
        return f"{dist_count} x ({replica - arbiter} + {arbiter}) = {brick_count}"
    return f"{dist_count} x {replica} = {brick_count}"


def format_volume_info(name: str, vol_id: str, type_str: str, started: bool, dist_count: int, replica: int,
                       arbiter: int, bricks: Sequence[tuple[str, bool]], options: dict[str, str]) -> str:
    """One volume of ``gluster volume info`` (starts with the ``" "`` line the CLI prints).

    ``bricks``: (``host:/path``, is_arbiter) in Brick1..N order."""
    out = [" ", f"Volume Name: {name}", f"Type: {type_str}", f"Volume ID: {vol_id}",
           f"Status: {'Started' if started else 'Stopped'}", "Snapshot Count: 0",
           f"Number of Bricks: {number_of_bricks(len(bricks), dist_count, replica, arbiter)}",
           "Transport-type: tcp", "Bricks:"]
    for i, (brick, is_arbiter) in enumerate(bricks, start=1):
        out.append(f"Brick{i}: {brick} (arbiter)" if is_arbiter else f"Brick{i}: {brick}")
    if options:
        out.append("Options Reconfigured:")
        out.extend(f"{k}: {v}" for k, v in options.items())
    return "\n".join(out) + "\n"


_SUFFIX = {"heal": " ", "possibly-healing": " - Possibly undergoing heal", "split-brain": " - Is in split-brain"}


def format_heal_info(bricks: Sequence[HealBrick], mode: Literal["info", "split-brain"] = "info") -> str:
    """``gluster volume heal VOL info`` (or ``info split-brain``): per brick ``Brick h:/p``, the
    entries, ``Status: Connected`` and ``Number of entries: N`` (``-`` when unreachable), then a
    blank line. In split-brain mode only split-brain entries are listed, without a suffix."""
    label = "Number of entries:" if mode == "info" else "Number of entries in split-brain:"
    out: list[str] = []
    for b in bricks:
        out.append(f"Brick {b.name}")
        if not b.connected:
            out += [f"Status: {b.error}", f"{label} -", ""]
            continue
        entries = [e for e in b.entries if mode == "info" or e.kind == "split-brain"]
        for e in entries:
            out.append(e.path + (_SUFFIX[e.kind] if mode == "info" else ""))
        out += ["Status: Connected", f"{label} {len(entries)}", ""]
    return "\n".join(out) + "\n" if out else ""


def format_heal_summary(bricks: Sequence[HealBrick]) -> str:
    """``gluster volume heal VOL info summary`` (glusterfs >= 4.1 / RHGS 3.4)."""
    out: list[str] = []
    for b in bricks:
        out.append(f"Brick {b.name}")
        if not b.connected:
            out += [f"Status: {b.error}", "Total Number of entries: -", "Number of entries in heal pending: -",
                    "Number of entries in split-brain: -", "Number of entries possibly healing: -", ""]
            continue
        kinds = [e.kind for e in b.entries]
        out += ["Status: Connected", f"Total Number of entries: {len(kinds)}",
                f"Number of entries in heal pending: {kinds.count('heal')}",
                f"Number of entries in split-brain: {kinds.count('split-brain')}",
                f"Number of entries possibly healing: {kinds.count('possibly-healing')}", ""]
    return "\n".join(out) + "\n" if out else ""


def format_heal_count(volname: str, bricks: Sequence[HealBrick]) -> str:
    """``gluster volume heal VOL statistics heal-count``: a disconnected brick prints
    ``Status: Brick is not connected`` (afr-self-heal.h ``SBRICK_NOT_CONNECTED``) and no count."""
    out = [f"Gathering count of entries to be healed on volume {volname} has been successful "]
    for b in bricks:
        out += ["", f"Brick {b.name}"]
        if b.connected:
            out.append(f"Number of entries: {len(b.entries)}")
        else:
            out.append("Status: Brick is not connected")
    return "\n".join(out) + "\n"


def format_peer_status(peers: Sequence[PeerRow]) -> str:
    """``gluster peer status`` (the other peers, not the local one)."""
    out = [f"Number of Peers: {len(peers)}"]
    for p in peers:
        out += ["", f"Hostname: {p.hostname}", f"Uuid: {p.uuid}",
                f"State: Peer in Cluster ({'Connected' if p.connected else 'Disconnected'})"]
    return "\n".join(out) + "\n"


def format_pool_list(peers: Sequence[PeerRow]) -> str:
    """``gluster pool list``: every peer then ``localhost`` (pass it last), tab-separated, the
    hostname column padded to the longest name (at least 8), a trailing space after the state."""
    width = max([8, *(len(p.hostname) for p in peers)])
    out = ["UUID\t\t\t\t\t" + f"{'Hostname':<{width}}" + "\tState"]
    for p in peers:
        out.append(f"{p.uuid}\t{p.hostname:<{width}}\t{'Connected' if p.connected else 'Disconnected'} ")
    return "\n".join(out) + "\n"
