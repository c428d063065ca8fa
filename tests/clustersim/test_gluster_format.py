"""The gluster CLI formats, table-tested against procedures-spec §2.3-§2.6 and seed 002.

The seed's output lines are kept in ``tests/support/fixtures/field_reports/r3-seed-002/`` (see the
README there). Seed 002 shows ``gluster volume status`` as pasted into a blog: indented by four spaces, lines
padded with terminal spaces, and the first brick-name chunk 44 characters wide. glusterfs prints
43-character chunks (``CLI_VOL_STATUS_BRICK_LEN``); the spec says the simulator keeps 43, so the
seed comparison joins wrapped names and right-strips lines, and a separate test pins the 43 wrap.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from clustersim.gluster.cli import run_gluster
from clustersim.gluster.config import FaultCfg, parse_section
from clustersim.gluster.model import GlusterState
from clustersim.gluster.textfmt import (
    HealBrick,
    HealEntry,
    PeerRow,
    StatusRow,
    format_heal_count,
    format_heal_info,
    format_peer_status,
    format_pool_list,
    format_process,
    format_volume_info,
    format_volume_status,
    number_of_bricks,
)

#: Seed 002's ``gluster volume status`` output, verbatim (blog indentation and padding included).
SEED_STATUS = Path(__file__).resolve().parents[1] / "support" / "fixtures" / "field_reports" / "r3-seed-002" / "gluster-volume-status.txt"
REG = "glusterfs-registry-volume"
P11 = "/var/lib/heketi/mounts/vg_61bc5a26248cc6ea9fb7ffaae4edbe93/brick_128dfeb5436dad25702e689d3d6f4b8a/brick"
P12 = "/var/lib/heketi/mounts/vg_5ecf67ed85f71cf28090d7db1acc6433/brick_d364694c7034276c22e264eb2576413b/brick"
P10 = "/var/lib/heketi/mounts/vg_49e81b0f4c91942c7657e9b7ffff7834/brick_8717e0992390a7c04431890ba56b7656/brick"
ROW_END = re.compile(r"\s(\d+|N/A)\s+(\d+|N/A)\s+([YN])(\s+(\d+|N/A))?\s*$")


def seed_state(style: str = "seed") -> GlusterState:
    """The seed's CNS cluster: three masters, the registry volume with seed paths and pids."""
    sec = {"status_style": style, "hosts": [
        {"node": "master01.example.com", "address": "10.0.0.10", "shd_pid": 215},
        {"node": "master02.example.com", "address": "10.0.0.11", "shd_pid": 163},
        {"node": "master03.example.com", "address": "10.0.0.12", "shd_pid": 172}],
        "volumes": [{"name": REG, "bricks": [{"host": "10.0.0.11", "path": P11, "pid": 204},
                                             {"host": "10.0.0.12", "path": P12},
                                             {"host": "10.0.0.10", "path": P10, "pid": 224}]}]}
    st = GlusterState(parse_section(sec))
    st.apply_fault(FaultCfg(kind="brick_start_failure", volume=REG, brick="10.0.0.12", immediate=True), 0)
    return st


def seed_status_block() -> list[str]:
    """The seed's ``gluster volume status`` lines, without the blog's indentation."""
    lines = SEED_STATUS.read_text().split("\n")
    assert lines[-1] == "", f"{SEED_STATUS} must end with a newline"
    return [line[4:] if line.startswith("    ") else line.strip() for line in lines[:-1]]


def join_wrapped(lines: list[str]) -> list[str]:
    """Right-strip lines and join wrapped process names (the spec's joining rule, §2.3)."""
    out: list[str] = []
    buf = ""
    for line in (raw.rstrip() for raw in lines):
        if buf or (line.startswith("Brick ") and not ROW_END.search(line)):
            buf += line
            if ROW_END.search(buf):
                name, cols = re.split(r"\s{2,}", buf, maxsplit=1)
                out.append(f"{name}  {cols}")
                buf = ""
            continue
        out.append(line)
    assert not buf
    return out


def test_seed_volume_status_reproduced_except_the_wrap() -> None:
    st = seed_state()
    out, err, code = run_gluster(st, st.peer("master01.example.com"), ["gluster", "volume", "status"], 0)
    assert (code, err) == (0, "")
    mine = out.split("\n")
    assert mine[-1] == ""  # ends with a newline
    # Identical once the blog's trailing padding is stripped and wrapped brick names are joined.
    assert join_wrapped(mine[:-1]) == join_wrapped(seed_status_block() + [" "])
    # Line for line, the non-brick lines are byte-identical (modulo the blog's padding).
    seed = [x.rstrip() for x in seed_status_block()]
    assert [x for x in mine if not x.startswith("Brick ") and "heketi" not in x and "/brick" not in x][:11] == [
        "Status of volume: glusterfs-registry-volume", seed[1], seed[2],
        seed[12] + "  ", seed[13] + "  ", seed[14] + "  ", " ", seed[16], seed[17], seed[18], " "]
    # The seed's offline brick: port and RDMA port shown, no pid.
    assert mine[8].rstrip() == "94c7034276c22e264eb2576413b/brick           49152     0          N"
    assert seed[8].endswith("/brick            49152     0          N")


def test_brick_names_wrap_at_43_characters() -> None:
    st = seed_state()
    out, _, _ = run_gluster(st, st.peer("10.0.0.10"), ["gluster", "volume", "status", REG], 0)
    lines = out.split("\n")
    assert lines[3] == "Brick 10.0.0.11:/var/lib/heketi/mounts/vg_6"
    assert lines[4] == "1bc5a26248cc6ea9fb7ffaae4edbe93/brick_128df"
    assert lines[5] == "eb5436dad25702e689d3d6f4b8a/brick           49152     0          Y       204  "
    for n, expected in ((43, 1), (44, 2), (86, 2), (87, 3)):
        got = format_process(StatusRow("B" * n, 49152, 0, True, 1))
        assert len(got) == expected
        assert all(len(x) == 43 for x in got[:-1])
        assert got[-1][44:] == "49152     0          Y       1    "


def test_upstream_offline_form_matches_spec_example() -> None:
    """procedures-spec §2.3 example, trailing spaces included (``%-5s``)."""
    rows = [StatusRow(f"Brick 10.0.0.11:{P11.replace('vg_61', 'vg_61')}", 49152, 0, True, 204),
            StatusRow(f"Brick 10.0.0.12:{P12}", 49152, 0, False, -1),
            StatusRow("Self-heal Daemon on localhost", 0, 0, True, 215)]
    got = format_volume_status(REG, rows)
    expected = (
        "Status of volume: glusterfs-registry-volume\n"
        "Gluster process                             TCP Port  RDMA Port  Online  Pid\n"
        + "-" * 78 + "\n"
        "Brick 10.0.0.11:/var/lib/heketi/mounts/vg_6\n"
        "1bc5a26248cc6ea9fb7ffaae4edbe93/brick_128df\n"
        "eb5436dad25702e689d3d6f4b8a/brick           49152     0          Y       204  \n"
        "Brick 10.0.0.12:/var/lib/heketi/mounts/vg_5\n"
        "ecf67ed85f71cf28090d7db1acc6433/brick_d3646\n"
        "94c7034276c22e264eb2576413b/brick           N/A       N/A        N       N/A  \n"
        "Self-heal Daemon on localhost               N/A       N/A        Y       215  \n"
        " \n"
        "Task Status of Volume glusterfs-registry-volume\n"
        + "-" * 78 + "\n"
        "There are no active volume tasks\n"
        " \n")
    assert got == expected


def test_status_all_in_name_order_and_missing_bricks_of_a_down_glusterd() -> None:
    st = seed_state("upstream")
    sec = st.cfg.model_copy(update={"volumes": [*st.cfg.volumes, *parse_section({
        "hosts": [h.model_dump() for h in st.cfg.hosts],
        "volumes": [{"name": "heketidbstorage", "bricks": ["10.0.0.10", "10.0.0.11", "10.0.0.12"]}]}).volumes]})
    st = GlusterState(sec)
    st.apply_fault(FaultCfg(kind="glusterd_down", host="10.0.0.11"), 0)
    out, _, code = run_gluster(st, st.peer("10.0.0.10"), ["gluster", "--mode=script", "volume", "status", "all"], 0)
    assert code == 0
    assert [x for x in out.split("\n") if x.startswith("Status of volume")] == [
        f"Status of volume: {REG}", "Status of volume: heketidbstorage"]
    assert "Brick 10.0.0.11:" not in out and "on 10.0.0.11" not in out  # absent, not N
    assert out.count("Brick 10.0.0.12:") == 2
    peers, _, _ = run_gluster(st, st.peer("10.0.0.10"), ["gluster", "peer", "status"], 0)
    assert "Hostname: 10.0.0.11\nUuid: " in peers and "State: Peer in Cluster (Disconnected)" in peers
    own, _, code = run_gluster(st, st.peer("10.0.0.11"), ["gluster", "volume", "status"], 0)
    assert (own, code) == ("Connection failed. Please check if gluster daemon is operational.\n", 1)


def test_status_xml_shape() -> None:
    st = seed_state()
    out, _, code = run_gluster(st, st.peer("10.0.0.10"), ["gluster", "volume", "status", "all", "--xml"], 0)
    assert code == 0 and out.startswith('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<cliOutput>\n  <opRet>0</opRet>')
    root = ET.fromstring(out)
    vol = root.find("volStatus/volumes/volume")
    assert vol is not None and vol.findtext("volName") == REG and vol.findtext("nodeCount") == "6"
    nodes = vol.findall("node")
    assert [(n.findtext("hostname"), n.findtext("status"), n.findtext("port"), n.findtext("pid")) for n in nodes] == [
        ("10.0.0.11", "1", "49152", "204"), ("10.0.0.12", "0", "N/A", "-1"), ("10.0.0.10", "1", "49152", "224"),
        ("Self-heal Daemon", "1", "N/A", "215"), ("Self-heal Daemon", "1", "N/A", "163"), ("Self-heal Daemon", "1", "N/A", "172")]
    assert nodes[1].findtext("ports/tcp") == "N/A" and nodes[0].findtext("ports/rdma") == "N/A"
    assert nodes[3].findtext("path") == "localhost" and nodes[4].findtext("path") == "10.0.0.11"
    assert vol.find("tasks") is not None and "<tasks/>" in out


def test_volume_info_text_and_xml_with_arbiter() -> None:
    text = format_volume_info("vol_a", "6276421b-b28e-406e-a1a4-745c90f8723c", "Distributed-Replicate", True, 2, 3, 1,
                              [("h1:/b1", False), ("h2:/b2", False), ("h3:/b3", True),
                               ("h1:/b4", False), ("h2:/b5", False), ("h3:/b6", True)], {"nfs.disable": "on"})
    assert text == (" \nVolume Name: vol_a\nType: Distributed-Replicate\nVolume ID: 6276421b-b28e-406e-a1a4-745c90f8723c\n"
                    "Status: Started\nSnapshot Count: 0\nNumber of Bricks: 2 x (2 + 1) = 6\nTransport-type: tcp\nBricks:\n"
                    "Brick1: h1:/b1\nBrick2: h2:/b2\nBrick3: h3:/b3 (arbiter)\nBrick4: h1:/b4\nBrick5: h2:/b5\n"
                    "Brick6: h3:/b6 (arbiter)\nOptions Reconfigured:\nnfs.disable: on\n")
    assert number_of_bricks(3, 1, 3, 0) == "1 x 3 = 3" and number_of_bricks(2, 2, 1, 0) == "2"
    st = GlusterState(parse_section({"hosts": [{"node": f"n{i}", "address": f"10.0.0.{i}"} for i in (1, 2, 3)],
                                     "volumes": [{"name": "vol_a", "arbiter": 1, "bricks": ["10.0.0.1", "10.0.0.2", "10.0.0.3"]}]}))
    out, _, code = run_gluster(st, st.peer("n1"), ["gluster", "volume", "info", "vol_a", "--xml"], 0)
    root = ET.fromstring(out)
    vol = root.find("volInfo/volumes/volume")
    assert vol is not None and code == 0
    assert [vol.findtext(k) for k in ("replicaCount", "arbiterCount", "distCount", "typeStr", "brickCount")] == ["3", "1", "1", "Replicate", "3"]
    bricks = vol.findall("bricks/brick")
    assert [b.findtext("isArbiter") for b in bricks] == ["0", "0", "1"]
    assert bricks[0].text == bricks[0].findtext("name") and bricks[0].get("uuid") == bricks[0].findtext("hostUuid")
    assert root.findtext("volInfo/volumes/count") == "1"
    text, _, _ = run_gluster(st, st.peer("n1"), ["gluster", "volume", "info"], 0)
    assert "Number of Bricks: 1 x (2 + 1) = 3" in text and "Brick3: 10.0.0.3:/var/lib/heketi/mounts/vg_" in text
    assert re.search(r"Brick1: 10\.0\.0\.1:/var/lib/heketi/mounts/vg_[0-9a-f]{32}/brick_[0-9a-f]{32}/brick\n", text)


def test_heal_info_formats() -> None:
    bricks = [HealBrick("192.168.124.233:/b", True, (HealEntry("/dir/file1"), HealEntry("<gfid:5b6d>"),
                                                     HealEntry("/dir/file2", "possibly-healing"))),
              HealBrick("192.168.124.234:/b", False),
              HealBrick("192.168.124.235:/b", True, (HealEntry("/x", "split-brain"),))]
    assert format_heal_info(bricks) == (
        "Brick 192.168.124.233:/b\n/dir/file1 \n<gfid:5b6d> \n/dir/file2 - Possibly undergoing heal\n"
        "Status: Connected\nNumber of entries: 3\n\n"
        "Brick 192.168.124.234:/b\nStatus: Transport endpoint is not connected\nNumber of entries: -\n\n"
        "Brick 192.168.124.235:/b\n/x - Is in split-brain\nStatus: Connected\nNumber of entries: 1\n\n")
    assert format_heal_info(bricks, "split-brain").split("\n")[:3] == [
        "Brick 192.168.124.233:/b", "Status: Connected", "Number of entries in split-brain: 0"]
    assert "/x\nStatus: Connected\nNumber of entries in split-brain: 1\n" in format_heal_info(bricks, "split-brain")
    assert format_heal_count("v", bricks) == (
        "Gathering count of entries to be healed on volume v has been successful \n\n"
        "Brick 192.168.124.233:/b\nNumber of entries: 3\n\nBrick 192.168.124.234:/b\nStatus: Brick is not connected\n\n"
        "Brick 192.168.124.235:/b\nNumber of entries: 1\n")


def test_peer_status_and_pool_list() -> None:
    peers = [PeerRow("10.0.0.11", "u1", True), PeerRow("10.0.0.12", "u2", False)]
    assert format_peer_status(peers) == ("Number of Peers: 2\n\nHostname: 10.0.0.11\nUuid: u1\n"
                                         "State: Peer in Cluster (Connected)\n\nHostname: 10.0.0.12\nUuid: u2\n"
                                         "State: Peer in Cluster (Disconnected)\n")
    assert format_pool_list([*peers, PeerRow("localhost", "u0", True)]) == (
        "UUID\t\t\t\t\tHostname \tState\nu1\t10.0.0.11\tConnected \nu2\t10.0.0.12\tDisconnected \n"
        "u0\tlocalhost\tConnected \n")


@pytest.mark.parametrize(("argv", "stdout", "stderr", "code"), [
    (["volume", "status", "nope"], "", "Volume nope does not exist\n", 1),
    (["volume", "info", "nope"], "", "Volume nope does not exist\n", 1),
    (["volume", "heal", "nope", "info"], "Volume nope does not exist\n", "", 1),
    (["volume", "list"], f"{REG}\n", "", 0),
    (["volume", "start", REG], "", f"volume start: {REG}: failed: Volume {REG} already started\n", 1),
    (["bogus"], "", "unrecognized word: bogus (position 0)\n", 1),
])
def test_cli_errors_and_exit_codes(argv: list[str], stdout: str, stderr: str, code: int) -> None:
    st = seed_state()
    assert run_gluster(st, st.peer("10.0.0.10"), ["gluster", *argv], 0) == (stdout, stderr, code)


def test_transaction_in_progress_fault_counts_calls() -> None:
    st = seed_state()
    st.apply_fault(FaultCfg(kind="transaction_in_progress", n=2), 0)
    local = st.peer("10.0.0.10")
    assert run_gluster(st, local, ["gluster", "volume", "status", REG], 0) == (
        "", f"Another transaction is in progress for {REG}. Please try again after some time.\n", 1)
    assert run_gluster(st, local, ["gluster", "peer", "status"], 0) == (
        "", "Another transaction is in progress. Please try again after some time.\n", 1)
    assert run_gluster(st, local, ["gluster", "volume", "status", REG], 0)[2] == 0


def test_df_kh_in_a_gluster_pod() -> None:
    from clustersim.gluster.df import human, run_df

    assert [human(k) for k in (0, 33 * 1024, 2 * 1024 * 1024, 10 * 1024 * 1024, 9 * 1024 * 1024 + 311 * 1024)] == [
        "0", "33M", "2.0G", "10G", "9.4G"]
    st = seed_state()
    st.apply_fault(FaultCfg(kind="brick_usage", volume=REG, percent=97), 0)
    out, err, code = run_df(st, st.peer("10.0.0.10"), ["df", "-kh"])
    assert (err, code) == ("", 0)
    lines = out.split("\n")
    assert lines[0].split() == ["Filesystem", "Size", "Used", "Avail", "Use%", "Mounted", "on"]
    assert lines[0].index("Use%") + 4 == lines[1].index("% /") + 1  # right-aligned columns
    brick = [x.split() for x in lines if "/var/lib/heketi" in x]
    assert brick == [["/dev/mapper/vg_49e81b0f4c91942c7657e9b7ffff7834-brick_8717e0992390a7c04431890ba56b7656",
                      "2.0G", "2.0G", "62M", "97%", P10.removesuffix("/brick")]]
    assert run_df(st, st.peer("10.0.0.10"), ["df", "-x"])[2] == 1


def test_heal_info_xml() -> None:
    st = seed_state()
    st.apply_fault(FaultCfg(kind="split_brain", volume=REG, n=1), 0)
    st.advance(3)  # 3 writes while 10.0.0.12 is down
    out, _, code = run_gluster(st, st.peer("10.0.0.10"), ["gluster", "volume", "heal", REG, "info", "--xml"], 3)
    root = ET.fromstring(out)
    assert code == 0 and root.findtext("opRet") == "0"
    bricks = root.findall("healInfo/bricks/brick")
    assert [(b.findtext("status"), b.findtext("numberOfEntries")) for b in bricks] == [
        ("Connected", "4"), ("Transport endpoint is not connected", "-"), ("Connected", "4")]
    assert bricks[0].get("hostUuid") == st.peer("10.0.0.11").uuid
    files = bricks[0].findall("file")
    assert files[0].text == "/split-brain/file-0001" and files[1].text == f"<gfid:{files[1].get('gfid')}>"
    out, _, _ = run_gluster(st, st.peer("10.0.0.10"), ["gluster", "volume", "heal", REG, "info", "split-brain", "--xml"], 3)
    assert [b.findtext("numberOfEntries") for b in ET.fromstring(out).findall("healInfo/bricks/brick")] == ["1", "-", "1"]
    assert bricks[1].get("hostUuid") == "-"
    out, _, _ = run_gluster(st, st.peer("10.0.0.10"), ["gluster", "volume", "heal", REG, "info", "summary", "--xml"], 3)
    summary = ET.fromstring(out).findall("healInfo/bricks/brick")
    assert [[b.findtext(k) for k in ("totalNumberOfEntries", "numberOfEntriesInHealPending", "numberOfEntriesInSplitBrain",
                                     "numberOfEntriesPossiblyHealing")] for b in summary] == [
        ["4", "3", "1", "0"], ["-", "-", "-", "-"], ["4", "3", "1", "0"]]
    text, _, _ = run_gluster(st, st.peer("10.0.0.10"), ["gluster", "volume", "heal", REG, "info", "summary"], 3)
    assert text.split("\n")[:6] == ["Brick 10.0.0.11:" + P11, "Status: Connected", "Total Number of entries: 4",
                                    "Number of entries in heal pending: 3", "Number of entries in split-brain: 1",
                                    "Number of entries possibly healing: 0"]


def test_distribute_volume_heal_and_peer_status_xml() -> None:
    st = GlusterState(parse_section({"hosts": [{"node": f"n{i}", "address": f"10.0.0.{i}"} for i in (1, 2)],
                                     "volumes": [{"name": "dist", "replica": 1, "bricks": ["10.0.0.1", "10.0.0.2"]}]}))
    out, _, code = run_gluster(st, st.peer("n1"), ["gluster", "volume", "heal", "dist", "info"], 0)
    assert code == 1 and out == ("This command is supported for only volumes of replicate/disperse type. Volume dist "
                                 "is not of type replicate/disperse\nVolume heal failed.\n")
    text, _, _ = run_gluster(st, st.peer("n1"), ["gluster", "volume", "info", "dist"], 0)
    assert "Type: Distribute\n" in text and "Number of Bricks: 2\n" in text
    status, _, _ = run_gluster(st, st.peer("n1"), ["gluster", "volume", "status", "dist"], 0)
    assert "Self-heal Daemon" not in status  # no self-heal daemon for a pure distribute volume
    st.apply_fault(FaultCfg(kind="glusterd_down", host="n2"), 0)
    out, _, code = run_gluster(st, st.peer("n1"), ["gluster", "peer", "status", "--xml"], 0)
    peer = ET.fromstring(out).find("peerStatus/peer")
    assert code == 0 and peer is not None
    assert [peer.findtext(k) for k in ("hostname", "connected", "stateStr")] == ["10.0.0.2", "0", "Peer in Cluster"]
    assert run_gluster(st, st.peer("n1"), ["gluster", "system::", "uuid", "get"], 0)[0] == f"UUID: {st.peer('n1').uuid}\n"


@pytest.mark.parametrize("opts", [["--mode=script"], ["--mode=script", "--timeout=600"], ["--timeout", "600"]])
def test_global_options_are_accepted(opts: list[str]) -> None:
    st = seed_state()
    out, _, code = run_gluster(st, st.peer("10.0.0.10"), ["gluster", *opts, "volume", "info", REG, "--xml"], 0)
    assert code == 0 and ET.fromstring(out).findtext("volInfo/volumes/volume/name") == REG
