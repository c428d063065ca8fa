"""Pure parsers of the GlusterFS CLI's output (text and ``--xml``), glusterfs 3.12 formats.

Formats and their sources are quoted in procedures-spec §2.3-§2.6:

- ``volume status``: ``cli/src/cli-rpc-ops.c::gf_cli_status_cbk`` and
  ``cli/src/cli-cmd-volume.c::cli_print_brick_status`` (43-character name chunks,
  ``CLI_VOL_STATUS_BRICK_LEN``); XML from ``cli/src/cli-xml-output.c``.
- ``volume info``: ``gf_cli_get_volume_cbk``; XML ``cli_xml_output_vol_info``.
- ``volume heal VOL info``: ``heal/src/glfs-heal.c`` (``Brick h:/p``, entry lines, ``Status:``,
  ``Number of entries:``); ``statistics heal-count`` prints ``Status: Brick is not connected``.
- ``peer status``: ``gf_cli_output_peer_status``.

The text parser of ``volume status`` never relies on column positions: real outputs wrap at
43 (upstream) or 44 (seed 002) characters and print an offline brick either as
``N/A N/A N N/A`` or as ``49152 0 N`` with no pid. It joins a process's fragments until they end
in the ``TCP RDMA Online [Pid]`` columns (the algorithm procedures-spec §2.3 checked on both).

XML is read with the standard library's ElementTree (expat refuses entity expansion attacks
since 2.4.1); the input is the CLI's own output. Every parser raises :class:`GlusterParseError`
for output it cannot read, and :func:`xml_error` / :func:`classify_error` name the CLI's
failures (§2.6).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Literal

from activities.gluster.models import (
    Brick,
    BrickStatus,
    DaemonStatus,
    HealBrick,
    HealEntry,
    HealInfo,
    Peer,
    VolumeInfo,
    VolumeStatus,
)


class GlusterParseError(ValueError):
    """The output does not have the expected shape (message says where)."""


# --- failures ------------------------------------------------------------------------------------

TRANSACTION_IN_PROGRESS = "Another transaction is in progress"
CONNECTION_FAILED = "Connection failed. Please check if gluster daemon is operational"
NO_VOLUMES = ("No volumes present in cluster", "No volumes present")

ErrorKind = Literal["transaction", "connection", "peer", "no-volumes", "not-found"]


def classify_error(text: str) -> ErrorKind | None:
    """What a failed CLI call's output means (procedures-spec §2.6): ``transaction`` (a volume
    lock is held: retry with backoff), ``connection`` (this pod's glusterd is down: use another
    pod), ``peer`` (``Locking/Staging failed on <host>``), ``no-volumes``, ``not-found``
    (``... does not exist``), or None for anything else."""
    if TRANSACTION_IN_PROGRESS in text:
        return "transaction"
    if CONNECTION_FAILED in text:
        return "connection"
    if re.search(r"\b(Locking|Staging|Commit) failed on\b", text):
        return "peer"
    if any(s in text for s in NO_VOLUMES):
        return "no-volumes"
    if re.search(r"Volume \S+ does not exist", text):
        return "not-found"
    return None


def xml_error(text: str) -> str | None:
    """The ``opErrstr`` of an XML answer whose ``opRet`` is not 0, None when it succeeded or is
    not XML (then the text itself carries any error)."""
    root = _xml_root(text, strict=False)
    if root is None:
        return None
    ret = (root.findtext("opRet") or "0").strip()
    if ret in ("", "0"):
        return None
    return (root.findtext("opErrstr") or "").strip() or f"opRet {ret}"


def _xml_root(text: str, *, strict: bool = True) -> ET.Element | None:
    body = text.strip()
    if not body.startswith("<"):
        if strict:
            raise GlusterParseError(f"not XML: {body[:80]!r}")
        return None
    try:
        return ET.fromstring(body)
    except ET.ParseError as exc:
        if strict:
            raise GlusterParseError(f"bad XML: {exc}") from None
        return None


def _xml_checked(text: str) -> ET.Element:
    root = _xml_root(text)
    assert root is not None
    err = xml_error(text)
    if err is not None:
        raise GlusterParseError(f"the CLI failed: {err}")
    return root


def _int(value: str | None) -> int | None:
    """``"49152"`` → 49152; ``N/A``, ``-``, empty or None → None."""
    value = (value or "").strip()
    return int(value) if value.lstrip("-").isdigit() and value != "-" else None


# --- volume list ---------------------------------------------------------------------------------


def parse_volume_list(text: str) -> list[str]:
    """``gluster volume list``: one name per line; ``No volumes present in cluster`` → []."""
    if any(s in text for s in NO_VOLUMES):
        return []
    return [line.strip() for line in text.splitlines() if line.strip()]


def parse_uuid_get(text: str) -> str | None:
    """``gluster system:: uuid get`` → the local glusterd's UUID (``UUID: <uuid>``), or None."""
    m = re.search(r"^UUID:\s*(\S+)", text, re.M)
    return m.group(1) if m else None


# --- volume status -------------------------------------------------------------------------------

_PROCESS_END = re.compile(
    r"^(?P<name>.*?)\s+(?P<tcp>\d+|N/A)\s+(?P<rdma>\d+|N/A)\s+(?P<online>[YN])(?:\s+(?P<pid>\d+|N/A))?\s*$"
)
_STATUS_HEADER = re.compile(r"^Status of volume:\s*(?P<name>\S+)")


def _process(name: str, tcp: str, rdma: str, online: str, pid: str | None) -> BrickStatus | DaemonStatus:
    up = online == "Y"
    if name.startswith("Brick "):
        host, sep, path = name[len("Brick ") :].partition(":")
        if not sep:
            raise GlusterParseError(f"brick without host:path: {name!r}")
        return BrickStatus(host=host, path=path, online=up, port=_int(tcp), rdma_port=_int(rdma), pid=_int(pid))
    daemon, _, host = name.rpartition(" on ")
    return DaemonStatus(daemon=daemon.strip(), host=host.strip(), online=up, pid=_int(pid))


def parse_volume_status_text(text: str) -> list[VolumeStatus]:
    """``gluster volume status [VOL|all]`` (text) → one :class:`VolumeStatus` per volume.

    Wrapped process names are joined (see the module doc); the header, dash lines, blank lines
    and the task block are skipped. ``No volumes present`` → []. Raises
    :class:`GlusterParseError` when a process line never reaches its columns."""
    volumes: list[VolumeStatus] = []
    current: VolumeStatus | None = None
    buffer = ""
    in_tasks = False
    for raw in text.splitlines():
        line = raw.rstrip()
        m = _STATUS_HEADER.match(line)
        if m:
            if buffer:
                raise GlusterParseError(f"unfinished process line {buffer!r}")
            current = VolumeStatus(name=m.group("name"))
            volumes.append(current)
            in_tasks = False
            continue
        stripped = line.strip()
        if current is None or in_tasks:
            continue
        if not stripped or stripped.startswith("Gluster process") or set(stripped) == {"-"}:
            continue
        if stripped.startswith("Task Status of Volume"):
            in_tasks = True
            continue
        if stripped.startswith("Brick ") or " on " in stripped:
            if buffer:
                raise GlusterParseError(f"unfinished process line {buffer!r}")
            buffer = stripped
        elif buffer:
            buffer += stripped  # a chunk of a wrapped name (cut mid-path, no separator)
        else:
            continue
        end = _PROCESS_END.match(buffer)
        if end:
            proc = _process(end["name"].strip(), end["tcp"], end["rdma"], end["online"], end["pid"])
            (current.bricks if isinstance(proc, BrickStatus) else current.daemons).append(proc)  # type: ignore[arg-type]
            buffer = ""
    if buffer:
        raise GlusterParseError(f"unfinished process line {buffer!r}")
    return volumes


def parse_volume_status_xml(text: str) -> list[VolumeStatus]:
    """``gluster volume status [VOL|all] --xml`` → one :class:`VolumeStatus` per ``<volume>``.

    A ``<node>`` whose ``path`` is a directory is a brick; otherwise it is a daemon (``hostname``
    the daemon name, ``path`` the host). Raises :class:`GlusterParseError` for bad XML or a
    failed call (``opRet`` != 0)."""
    root = _xml_checked(text)
    out: list[VolumeStatus] = []
    for vol in root.iterfind("./volStatus/volumes/volume"):
        vs = VolumeStatus(name=(vol.findtext("volName") or "").strip())
        for node in vol.iterfind("node"):
            hostname = (node.findtext("hostname") or "").strip()
            path = (node.findtext("path") or "").strip()
            online = (node.findtext("status") or "0").strip() == "1"
            pid = _int(node.findtext("pid"))
            if path.startswith("/"):
                vs.bricks.append(BrickStatus(
                    host=hostname, path=path, online=online, port=_int(node.findtext("ports/tcp") or node.findtext("port")),
                    rdma_port=_int(node.findtext("ports/rdma")), pid=pid if pid and pid > 0 else None,
                    peerid=(node.findtext("peerid") or "").strip() or None,
                ))
            else:
                vs.daemons.append(DaemonStatus(daemon=hostname, host=path, online=online, pid=pid if pid and pid > 0 else None))
        out.append(vs)
    return out


# --- volume info ---------------------------------------------------------------------------------

_ARBITER_FORM = re.compile(r"^(\d+)\s*x\s*\((\d+)\s*\+\s*(\d+)\)\s*=\s*(\d+)$")
_REPLICA_FORM = re.compile(r"^(\d+)\s*x\s*(\d+)\s*=\s*(\d+)$")
_BRICK_LINE = re.compile(r"^Brick(\d+):\s*(?P<name>\S+?)(?P<arbiter>\s+\(arbiter\))?$")


def _counts(vi: VolumeInfo, value: str) -> None:
    """``Number of Bricks:`` → counts: ``3``, ``1 x 3 = 3``, ``1 x (2 + 1) = 3`` (arbiter;
    for a Disperse type the same shape means data + redundancy)."""
    value = value.strip()
    if m := _ARBITER_FORM.match(value):
        dist, data, extra, total = (int(g) for g in m.groups())
        vi.dist_count, vi.brick_count = dist, total
        if "Disperse" in vi.type:
            vi.disperse_count = data + extra
        else:
            vi.replica_count, vi.arbiter_count = data + extra, extra
    elif m := _REPLICA_FORM.match(value):
        dist, replica, total = (int(g) for g in m.groups())
        vi.dist_count, vi.replica_count, vi.brick_count = dist, replica, total
    elif value.isdigit():
        vi.brick_count = vi.dist_count = int(value)
    else:
        raise GlusterParseError(f"volume {vi.name}: unreadable 'Number of Bricks: {value}'")


def _split_brick(name: str) -> tuple[str, str]:
    host, sep, path = name.partition(":")
    if not sep or not path:
        raise GlusterParseError(f"brick without host:path: {name!r}")
    return host, path


def parse_volume_info_text(text: str) -> list[VolumeInfo]:
    """``gluster volume info [VOL|all]`` (text) → :class:`VolumeInfo` per volume, bricks in
    ``Brick1..N`` order with ``(arbiter)`` marks. ``No volumes present`` → []."""
    out: list[VolumeInfo] = []
    current: VolumeInfo | None = None
    in_options = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        key, sep, value = line.partition(":")
        if line.startswith("Volume Name:"):
            current = VolumeInfo(name=value.strip())
            out.append(current)
            in_options = False
            continue
        if current is None or in_options:
            continue
        if m := _BRICK_LINE.match(line):
            host, path = _split_brick(m["name"])
            current.bricks.append(Brick(host=host, path=path, arbiter=bool(m["arbiter"])))
        elif key == "Type":
            current.type = value.strip()
        elif key == "Volume ID":
            current.id = value.strip()
        elif key == "Status":
            current.status = value.strip()
        elif key == "Number of Bricks":
            _counts(current, value)
        elif key == "Options Reconfigured":
            in_options = True
    for vi in out:
        if vi.brick_count and vi.brick_count != len(vi.bricks):
            raise GlusterParseError(f"volume {vi.name}: {len(vi.bricks)} bricks listed, {vi.brick_count} counted")
        vi.brick_count = len(vi.bricks)
    return out


def parse_volume_info_xml(text: str) -> list[VolumeInfo]:
    """``gluster volume info [VOL|all] --xml`` → :class:`VolumeInfo` per ``<volume>``.

    The distribute count is derived (bricks / replica) rather than read from ``distCount``,
    whose meaning changed between releases."""
    root = _xml_checked(text)
    out: list[VolumeInfo] = []
    for vol in root.iterfind("./volInfo/volumes/volume"):
        bricks = []
        for b in vol.iterfind("bricks/brick"):
            name = (b.findtext("name") or b.text or "").strip()
            host, path = _split_brick(name)
            bricks.append(Brick(host=host, path=path, arbiter=(b.findtext("isArbiter") or "0").strip() == "1",
                                host_uuid=(b.findtext("hostUuid") or b.get("uuid") or "").strip() or None))
        replica = max(1, _int(vol.findtext("replicaCount")) or 1)
        disperse = _int(vol.findtext("disperseCount")) or 0
        per_subvol = replica if replica > 1 else (disperse or 1)
        out.append(VolumeInfo(
            name=(vol.findtext("name") or "").strip(), id=(vol.findtext("id") or "").strip(),
            type=(vol.findtext("typeStr") or "").strip(), status=(vol.findtext("statusStr") or "").strip(),
            brick_count=len(bricks), dist_count=max(1, len(bricks) // per_subvol), replica_count=replica,
            arbiter_count=_int(vol.findtext("arbiterCount")) or 0, disperse_count=disperse, bricks=bricks,
        ))
    return out


# --- heal info -----------------------------------------------------------------------------------

_SPLIT_BRAIN = " - Is in split-brain"
_HEALING = " - Possibly undergoing heal"
_VOLUME_ERRORS = (
    re.compile(r"^Volume \S+ is not started"),
    re.compile(r"^Volume \S+ does not exist"),
    re.compile(r"is not of type replicate/disperse"),
    re.compile(r"^Volume heal failed"),
    re.compile(r"^Launching heal operation to perform index self heal on volume \S+ has been unsuccessful"),
)


def _entry(line: str) -> HealEntry:
    if line.endswith(_SPLIT_BRAIN):
        return HealEntry(path=line[: -len(_SPLIT_BRAIN)].strip(), state="split-brain")
    if line.endswith(_HEALING):
        return HealEntry(path=line[: -len(_HEALING)].strip(), state="possibly-healing")
    return HealEntry(path=line.strip(), state="heal")


def parse_heal_info_text(volume: str, text: str) -> HealInfo:
    """``gluster volume heal VOL info`` (also ``info split-brain`` and ``statistics heal-count``)
    → :class:`HealInfo`.

    Per brick block: ``Brick h:/p``, entry lines (suffix ``- Is in split-brain`` /
    ``- Possibly undergoing heal``), ``Status: ...`` (``Connected``, a strerror, or ``Brick is not
    connected``), ``Number of entries: N`` or ``-``. A block without a ``Status:`` line (heal-count
    form) is connected when it has a number. Whole-volume errors land in ``error``. The exit
    code is not used (procedures-spec §2.5: parse the output)."""
    info = HealInfo(volume=volume)
    current: HealBrick | None = None
    errors: list[str] = []
    for raw in text.splitlines():
        line = raw.rstrip("\n")
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("Brick "):
            host, path = _split_brick(stripped[len("Brick ") :].strip())
            current = HealBrick(host=host, path=path, status="")
            info.bricks.append(current)
            continue
        if any(p.search(stripped) for p in _VOLUME_ERRORS):
            errors.append(stripped)
            continue
        if current is None:
            continue  # heal-count's "Gathering count of entries ..." header
        if stripped.startswith("Status:"):
            current.status = stripped[len("Status:") :].strip()
        elif re.match(r"^(Total )?Number of entries( in split-brain)?:", stripped):
            current.entries = _int(stripped.rpartition(":")[2])
        elif re.match(r"^Number of entries (in heal pending|possibly healing):", stripped):
            continue  # heal info summary detail lines; the total counts
        else:
            current.files.append(_entry(line))
    for b in info.bricks:
        if not b.status:
            b.status = "Connected" if b.entries is not None else "unknown (no Status line)"
    if errors and not info.bricks:
        info.error = " ".join(errors)
    elif not info.bricks and text.strip():
        info.error = text.strip().splitlines()[0]
    return info


def parse_heal_info_xml(volume: str, text: str) -> HealInfo:
    """``gluster volume heal VOL info --xml`` → :class:`HealInfo`. The XML form has no entry
    status, so split-brain needs the text form or ``info split-brain``; a failed call
    (``opRet`` != 0) becomes ``error``."""
    root = _xml_root(text)
    assert root is not None
    err = xml_error(text)
    if err is not None:
        return HealInfo(volume=volume, error=err)
    info = HealInfo(volume=volume)
    for b in root.iterfind("./healInfo/bricks/brick"):
        host, path = _split_brick((b.findtext("name") or "").strip())
        info.bricks.append(HealBrick(
            host=host, path=path, status=(b.findtext("status") or "").strip() or "unknown",
            entries=_int(b.findtext("numberOfEntries") or b.findtext("totalNumberOfEntries")),
            files=[HealEntry(path=(f.text or "").strip()) for f in b.iterfind("file")],
        ))
    return info


# --- peer status ---------------------------------------------------------------------------------


def parse_peer_status_text(text: str) -> list[Peer]:
    """``gluster peer status`` → the other peers: ``Hostname:``, ``Uuid:``, ``State: Peer in
    Cluster (Connected|Disconnected)``; ``connected`` only for ``(Connected)``."""
    peers: list[Peer] = []
    current: Peer | None = None
    for raw in text.splitlines():
        key, sep, value = raw.strip().partition(":")
        if not sep:
            continue
        value = value.strip()
        if key == "Hostname":
            current = Peer(hostname=value)
            peers.append(current)
        elif current is not None and key == "Uuid":
            current.uuid = value
        elif current is not None and key == "State":
            current.state = value
            current.connected = value.endswith("(Connected)")
    return peers


def parse_peer_status_xml(text: str) -> list[Peer]:
    """``gluster peer status --xml`` → the other peers (``connected`` 1/0)."""
    root = _xml_checked(text)
    return [
        Peer(hostname=(p.findtext("hostname") or "").strip(), uuid=(p.findtext("uuid") or "").strip(),
             state=(p.findtext("stateStr") or "").strip(), connected=(p.findtext("connected") or "0").strip() == "1")
        for p in root.iterfind("./peerStatus/peer")
    ]
