"""``df`` inside a GlusterFS pod: the pod's mounts plus one heketi brick LV per local brick.

openshift-ansible 3.11's ``check_bricks`` (``glusterfs_check_containerized.py``) runs
``df -kh`` in every GlusterFS pod and fails when a ``/var/lib/heketi`` mount's ``Use%``
(fifth column) is above 96% (procedures-spec §2.2).

Format (GNU coreutils ``df``): a header ``Filesystem Size Used Avail Use% Mounted on``; columns
separated by one space and padded to the widest cell, Filesystem and Mounted on left-aligned,
numbers right-aligned, the last column unpadded. ``-h`` prints powers of 1024 rounded up, with
one decimal below 10 (``2.0G``, ``33M``); without ``-h`` sizes are 1K-blocks.
"""

from __future__ import annotations

import math

from clustersim.gluster.model import GlusterState, Peer

GIB_K = 1024 * 1024  # KiB per GiB


def human(kib: int) -> str:
    """``df -h`` size of ``kib`` KiB: ``0``, ``33M``, ``2.0G``, ``10G`` (ceiling, as GNU df rounds)."""
    if kib == 0:
        return "0"
    value = float(kib)
    for suffix in "KMGTP":
        if value < 1024 or suffix == "P":
            if value < 10:
                return f"{math.ceil(value * 10) / 10:.1f}{suffix}"
            return f"{math.ceil(value):d}{suffix}"
        value /= 1024
    raise AssertionError("unreachable")


def mounts(state: GlusterState, local: Peer) -> list[tuple[str, int, int, str]]:
    """(filesystem, size KiB, used KiB, mount point) for the pod on ``local``."""
    rows = [("overlay", 40 * GIB_K, 9 * GIB_K + 311 * 1024, "/"),
            ("tmpfs", 8 * GIB_K, 0, "/dev"),
            ("/dev/mapper/atomicos-root", 40 * GIB_K, 9 * GIB_K + 311 * 1024, "/var/lib/glusterd")]
    for vol in state.volumes.values():
        for b in vol.bricks:
            if b.peer is not local:
                continue
            mount = b.path.removesuffix("/brick")
            vg, _, lv = mount.removeprefix("/var/lib/heketi/mounts/").partition("/")
            size = int(vol.size_gib * GIB_K)
            used = math.floor(size * vol.used_percent / 100)
            rows.append((f"/dev/mapper/{vg}-{lv}", size, used, mount))
    return rows


def run_df(state: GlusterState, local: Peer, argv: list[str]) -> tuple[str, str, int]:
    """``df [-k] [-h]`` in ``local``'s GlusterFS pod -> (stdout, stderr, exit code)."""
    flags = "".join(a[1:] for a in argv[1:] if a.startswith("-") and not a.startswith("--"))
    unknown = sorted(set(flags) - set("kh"))
    if unknown or any(not a.startswith("-") for a in argv[1:]):
        bad = unknown[0] if unknown else argv[1]
        return "", f"df: invalid option -- '{bad}'\nTry 'df --help' for more information.\n", 1
    human_sizes = "h" in flags
    table = [["Filesystem", "Size" if human_sizes else "1K-blocks", "Used", "Avail", "Use%", "Mounted on"]]
    for fs, size, used, mount in mounts(state, local):
        avail = size - used
        pct = f"{math.ceil(used * 100 / size)}%" if size else "-"
        fmt = human if human_sizes else str
        table.append([fs, fmt(size), fmt(used), fmt(avail), pct, mount])
    widths = [max(len(r[i]) for r in table) for i in range(5)]
    lines = []
    for r in table:
        cells = [r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in range(1, 5)] + [r[5]]
        lines.append(" ".join(cells))
    return "\n".join(lines) + "\n", "", 0
