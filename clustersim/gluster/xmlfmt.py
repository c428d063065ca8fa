"""``--xml`` output of the gluster CLI, pretty-printed the way libxml2 does it.

The CLI builds its documents with ``xmlTextWriter`` and dumps them with
``xmlSaveFormatFileEnc("-", doc, "UTF-8", 1)`` (``cli/src/cli-xml-output.c``): an XML
declaration with ``standalone="yes"``, two-space indentation, empty elements as ``<x/>`` and
elements with mixed content (``<brick uuid=..>host:/path<name>...</name>...</brick>``) on one line.
Element names and order follow ``cli_xml_output_vol_status_common``, ``cli_xml_output_vol_info``,
``cli_xml_output_peer_status`` and glfs-heal's XML writer (procedures-spec §2.3-§2.5).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

from clustersim.gluster.textfmt import HealBrick, PeerRow

DECL = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'


@dataclass
class El:
    """An XML element: ``children`` are strings (text) or elements."""

    tag: str
    children: list[El | str] = field(default_factory=list)
    attrs: dict[str, str] = field(default_factory=dict)


def el(tag: str, *children: El | str | int | None, **attrs: str) -> El:
    """Build an element; ints become text, None children are dropped."""
    return El(tag, [c if isinstance(c, El) else str(c) for c in children if c is not None], attrs)


def _inline(e: El) -> str:
    attrs = "".join(f" {k}={quoteattr(v)}" for k, v in e.attrs.items())
    if not e.children:
        return f"<{e.tag}{attrs}/>"
    inner = "".join(escape(c) if isinstance(c, str) else _inline(c) for c in e.children)
    return f"<{e.tag}{attrs}>{inner}</{e.tag}>"


def _pretty(e: El, depth: int, out: list[str]) -> None:
    pad = "  " * depth
    if not e.children or any(isinstance(c, str) for c in e.children):
        out.append(pad + _inline(e))  # empty, text-only or mixed content: one line
        return
    attrs = "".join(f" {k}={quoteattr(v)}" for k, v in e.attrs.items())
    out.append(f"{pad}<{e.tag}{attrs}>")
    for c in e.children:
        assert isinstance(c, El)
        _pretty(c, depth + 1, out)
    out.append(f"{pad}</{e.tag}>")


def document(root: El) -> str:
    """The serialized document (declaration, pretty-printed root, final newline)."""
    out = [DECL]
    _pretty(root, 0, out)
    return "\n".join(out) + "\n"


def _common(op_ret: int = 0, op_errno: int = 0, op_errstr: str = "") -> list[El]:
    return [el("opRet", op_ret), el("opErrno", op_errno), el("opErrstr", op_errstr or None)]


@dataclass(frozen=True)
class XmlNode:
    """One ``<node>`` of ``volume status --xml``: for bricks ``hostname``/``path`` are the brick
    host and path; for daemons ``hostname`` is the daemon name and ``path`` the host."""

    hostname: str
    path: str
    peerid: str
    online: bool
    port: int
    rdma: int
    pid: int


@dataclass(frozen=True)
class XmlVolumeStatus:
    """One ``<volume>`` of ``volume status --xml``."""

    name: str
    nodes: Sequence[XmlNode]


def _status_node(n: XmlNode) -> El:
    up = n.online
    port = str(n.port) if up and n.port else "N/A"
    if up and (n.port or n.rdma):
        ports = el("ports", el("tcp", str(n.port) if n.port else "N/A"), el("rdma", str(n.rdma) if n.rdma else "N/A"))
    else:
        ports = el("ports", el("tcp", "N/A"), el("rdma", "N/A"))
    return el("node", el("hostname", n.hostname), el("path", n.path), el("peerid", n.peerid),
              el("status", 1 if up else 0), el("port", port), ports, el("pid", n.pid))


def volume_status_xml(volumes: Sequence[XmlVolumeStatus], op_ret: int = 0, op_errstr: str = "") -> str:
    """``gluster volume status [VOL|all] --xml``; every volume sits in one ``<volumes>``."""
    vols = [el("volume", el("volName", v.name), el("nodeCount", len(v.nodes)), *(_status_node(n) for n in v.nodes),
               el("tasks")) for v in volumes]
    return document(el("cliOutput", *_common(op_ret, 0, op_errstr), el("volStatus", el("volumes", *vols))))


@dataclass(frozen=True)
class XmlVolumeInfo:
    """One ``<volume>`` of ``volume info --xml``; ``bricks``: (host:/path, host uuid, is_arbiter)."""

    name: str
    id: str
    started: bool
    dist_count: int
    replica: int
    arbiter: int
    type_id: int
    type_str: str
    bricks: Sequence[tuple[str, str, bool]]
    options: dict[str, str]


def volume_info_xml(volumes: Sequence[XmlVolumeInfo], op_ret: int = 0, op_errstr: str = "") -> str:
    """``gluster volume info [VOL|all] --xml`` (3.12 field set, with ``stripeCount``)."""
    vols = []
    for v in volumes:
        bricks = [el("brick", name, el("name", name), el("hostUuid", uuid), el("isArbiter", int(arb)), uuid=uuid)
                  for name, uuid, arb in v.bricks]
        opts = [el("option", el("name", k), el("value", val)) for k, val in v.options.items()]
        vols.append(el("volume", el("name", v.name), el("id", v.id), el("status", 1 if v.started else 2),
                       el("statusStr", "Started" if v.started else "Stopped"), el("snapshotCount", 0),
                       el("brickCount", len(v.bricks)), el("distCount", v.dist_count), el("stripeCount", 1),
                       el("replicaCount", v.replica), el("arbiterCount", v.arbiter), el("disperseCount", 0),
                       el("redundancyCount", 0), el("type", v.type_id), el("typeStr", v.type_str), el("transport", 0),
                       el("bricks", *bricks), el("optCount", len(v.options)), el("options", *opts)))
    return document(el("cliOutput", *_common(op_ret, 0, op_errstr),
                       el("volInfo", el("volumes", *vols, el("count", len(volumes))))))


def peer_status_xml(peers: Sequence[PeerRow]) -> str:
    """``gluster peer status --xml`` (state 3 = ``Peer in Cluster``)."""
    items = [el("peer", el("uuid", p.uuid), el("hostname", p.hostname), el("hostnames", el("hostname", p.hostname)),
                el("connected", int(p.connected)), el("state", 3), el("stateStr", "Peer in Cluster")) for p in peers]
    return document(el("cliOutput", *_common(), el("peerStatus", *items)))


def _gfid(path: str) -> str:
    """The gfid of a heal entry: given for ``<gfid:...>`` entries, else a stable made-up one."""
    if path.startswith("<gfid:") and path.endswith(">"):
        return path[6:-1]
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "gfid:" + path))


def heal_info_xml(bricks: Sequence[tuple[HealBrick, str]], mode: str = "info") -> str:
    """``gluster volume heal VOL info [split-brain|summary] --xml``; ``bricks``: (brick, host uuid).

    A brick that cannot be reached has ``hostUuid="-"`` (glfs-heal's node-uuid getxattr fails),
    its strerror as status and ``-`` counts."""
    items = []
    for b, uuid_ in bricks:
        if not b.connected:
            counts = (["totalNumberOfEntries", "numberOfEntriesInHealPending", "numberOfEntriesInSplitBrain",
                       "numberOfEntriesPossiblyHealing"] if mode == "summary" else ["numberOfEntries"])
            items.append(el("brick", el("name", b.name), el("status", b.error), *(el(c, "-") for c in counts),
                            hostUuid="-"))
            continue
        if mode == "summary":
            kinds = [e.kind for e in b.entries]
            items.append(el("brick", el("name", b.name), el("status", "Connected"),
                            el("totalNumberOfEntries", len(kinds)), el("numberOfEntriesInHealPending", kinds.count("heal")),
                            el("numberOfEntriesInSplitBrain", kinds.count("split-brain")),
                            el("numberOfEntriesPossiblyHealing", kinds.count("possibly-healing")), hostUuid=uuid_))
            continue
        entries = [e for e in b.entries if mode != "split-brain" or e.kind == "split-brain"]
        files = [el("file", e.path, gfid=_gfid(e.path)) for e in entries]
        items.append(el("brick", el("name", b.name), *files, el("status", "Connected"),
                        el("numberOfEntries", len(entries)), hostUuid=uuid_))
    return document(el("cliOutput", el("healInfo", el("bricks", *items)), *_common()))


def error_xml(op_errstr: str, op_ret: int = -1, op_errno: int = 0) -> str:
    """A bare failure document (``cli_xml_output_str`` shape) for errors before any output."""
    return document(el("cliOutput", *_common(op_ret, op_errno, op_errstr)))
