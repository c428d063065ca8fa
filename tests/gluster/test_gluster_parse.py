"""The GlusterFS CLI parsers, table-tested on real outputs (seed 002, procedures-spec §2.3-§2.6)."""

from __future__ import annotations

import pytest

from activities.gluster.parse import (
    GlusterParseError,
    classify_error,
    parse_heal_info_text,
    parse_heal_info_xml,
    parse_peer_status_text,
    parse_peer_status_xml,
    parse_uuid_get,
    parse_volume_info_text,
    parse_volume_info_xml,
    parse_volume_list,
    parse_volume_status_text,
    parse_volume_status_xml,
    xml_error,
)

# Seed 002, verbatim (44-character wrap, trailing spaces, offline brick "49152 0 N" without pid).
SEED_STATUS = """Status of volume: glusterfs-registry-volume                                 
Gluster process                             TCP Port  RDMA Port  Online  Pid  
------------------------------------------------------------------------------
Brick 10.0.0.11:/var/lib/heketi/mounts/vg_61                                 
bc5a26248cc6ea9fb7ffaae4edbe93/brick_128dfe                                 
b5436dad25702e689d3d6f4b8a/brick            49152     0          Y       204
Brick 10.0.0.12:/var/lib/heketi/mounts/vg_5e                                   
cf67ed85f71cf28090d7db1acc6433/brick_d36469                                 
4c7034276c22e264eb2576413b/brick            49152     0          N
Brick 10.0.0.10:/var/lib/heketi/mounts/vg_49                                   
e81b0f4c91942c7657e9b7ffff7834/brick_8717e0                                 
992390a7c04431890ba56b7656/brick            49152     0          Y       224
Self-heal Daemon on localhost               N/A       N/A        Y       215
Self-heal Daemon on 10.0.0.11               N/A       N/A        Y       163  
Self-heal Daemon on 10.0.0.12               N/A       N/A        Y       172  
                                                                            
Task Status of Volume glusterfs-registry-volume                             
------------------------------------------------------------------------------
There are no active volume tasks
"""

# procedures-spec §2.3: upstream printing (43-character chunks, N/A columns, "%-5s" trailing spaces).
UPSTREAM_STATUS = (
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
    "Task                 : Rebalance           \n"
    "ID                   : 4f1c0e5c-2d45-4e8e-9d2b-1f5f0c1a2b3c\n"
    "Status               : completed           \n"
    " \n"
    "Status of volume: heketidbstorage\n"
    "Gluster process                             TCP Port  RDMA Port  Online  Pid\n"
    + "-" * 78 + "\n"
    "Brick node1.example.com:/bricks/b1          49153     0          Y       301  \n"
    " \n"
    "Task Status of Volume heketidbstorage\n"
    + "-" * 78 + "\n"
    "There are no active volume tasks\n"
    " \n"
)

REG1 = "/var/lib/heketi/mounts/vg_61bc5a26248cc6ea9fb7ffaae4edbe93/brick_128dfeb5436dad25702e689d3d6f4b8a/brick"
REG2 = "/var/lib/heketi/mounts/vg_5ecf67ed85f71cf28090d7db1acc6433/brick_d364694c7034276c22e264eb2576413b/brick"
REG3 = "/var/lib/heketi/mounts/vg_49e81b0f4c91942c7657e9b7ffff7834/brick_8717e0992390a7c04431890ba56b7656/brick"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (SEED_STATUS, [("10.0.0.11", REG1, True, 49152, 204), ("10.0.0.12", REG2, False, 49152, None),
                       ("10.0.0.10", REG3, True, 49152, 224)]),
        (UPSTREAM_STATUS, [("10.0.0.11", REG1, True, 49152, 204), ("10.0.0.12", REG2, False, None, None)]),
    ],
    ids=["seed-44-wrap", "upstream-43-wrap"],
)
def test_volume_status_text_joins_wrapped_bricks(text: str, expected: list[tuple]) -> None:
    vols = parse_volume_status_text(text)
    assert vols[0].name == "glusterfs-registry-volume"
    got = [(b.host, b.path, b.online, b.port, b.pid) for b in vols[0].bricks]
    assert got == expected
    assert vols[0].daemons[0].daemon == "Self-heal Daemon" and vols[0].daemons[0].host == "localhost"
    assert vols[0].daemons[0].pid == 215


def test_volume_status_text_many_volumes_and_tasks() -> None:
    vols = parse_volume_status_text(UPSTREAM_STATUS)
    assert [v.name for v in vols] == ["glusterfs-registry-volume", "heketidbstorage"]
    assert [(b.name, b.online) for b in vols[1].bricks] == [("node1.example.com:/bricks/b1", True)]
    assert parse_volume_status_text("No volumes present\n") == []


def test_volume_status_text_unfinished_line_is_an_error() -> None:
    with pytest.raises(GlusterParseError, match="unfinished"):
        parse_volume_status_text("Status of volume: v\nBrick 10.0.0.1:/var/lib/heketi/mounts/vg_0\n")


STATUS_XML = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<cliOutput>
  <opRet>0</opRet>
  <opErrno>0</opErrno>
  <opErrstr/>
  <volStatus>
    <volumes>
      <volume>
        <volName>vol_x</volName>
        <nodeCount>3</nodeCount>
        <node>
          <hostname>10.0.0.11</hostname>
          <path>/var/lib/heketi/mounts/vg_a/brick_b/brick</path>
          <peerid>73b73a0f-ad3a-5d42-a00f-9ed0b77662d4</peerid>
          <status>1</status>
          <port>49152</port>
          <ports>
            <tcp>49152</tcp>
            <rdma>N/A</rdma>
          </ports>
          <pid>204</pid>
        </node>
        <node>
          <hostname>10.0.0.12</hostname>
          <path>/var/lib/heketi/mounts/vg_c/brick_d/brick</path>
          <peerid>a907eab5-9fbf-5ae4-afad-4974d6e6adc7</peerid>
          <status>0</status>
          <port>N/A</port>
          <ports>
            <tcp>N/A</tcp>
            <rdma>N/A</rdma>
          </ports>
          <pid>-1</pid>
        </node>
        <node>
          <hostname>Self-heal Daemon</hostname>
          <path>localhost</path>
          <peerid>53552b22-1121-58c5-a255-ad4161bec516</peerid>
          <status>1</status>
          <port>N/A</port>
          <ports>
            <tcp>N/A</tcp>
            <rdma>N/A</rdma>
          </ports>
          <pid>215</pid>
        </node>
        <tasks/>
      </volume>
    </volumes>
  </volStatus>
</cliOutput>
"""


def test_volume_status_xml() -> None:
    (vol,) = parse_volume_status_xml(STATUS_XML)
    assert vol.name == "vol_x"
    assert [(b.host, b.online, b.port, b.pid, b.peerid[:8]) for b in vol.bricks] == [
        ("10.0.0.11", True, 49152, 204, "73b73a0f"), ("10.0.0.12", False, None, None, "a907eab5")]
    assert [(d.daemon, d.host, d.online) for d in vol.daemons] == [("Self-heal Daemon", "localhost", True)]


ERROR_XML = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<cliOutput>
  <opRet>-1</opRet>
  <opErrno>0</opErrno>
  <opErrstr>Another transaction is in progress for vol_x. Please try again after some time.</opErrstr>
</cliOutput>
"""


def test_xml_failure_is_named_and_classified() -> None:
    assert xml_error(ERROR_XML).startswith("Another transaction is in progress")
    assert classify_error(xml_error(ERROR_XML)) == "transaction"
    assert xml_error(STATUS_XML) is None
    assert xml_error("plain text") is None
    with pytest.raises(GlusterParseError, match="the CLI failed"):
        parse_volume_status_xml(ERROR_XML)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Another transaction is in progress for heketidbstorage. Please try again after sometime.", "transaction"),
        ("Another transaction is in progress. Please try again after some time.", "transaction"),
        ("Connection failed. Please check if gluster daemon is operational.", "connection"),
        ("Locking failed on 10.0.0.12. Please check log file for details.", "peer"),
        ("Staging failed on node2. Error: Volume vol1 is not started", "peer"),
        ("No volumes present in cluster", "no-volumes"),
        ("Volume vol9 does not exist", "not-found"),
        ("volume start: v: success", None),
    ],
)
def test_classify_error(text: str, kind: str | None) -> None:
    assert classify_error(text) == kind


INFO_TEXT = """ 
Volume Name: glusterfs-registry-volume
Type: Replicate
Volume ID: bad741e1-a97a-549f-a791-f0b2e0d71e86
Status: Started
Snapshot Count: 0
Number of Bricks: 1 x 3 = 3
Transport-type: tcp
Bricks:
Brick1: 10.0.0.11:/var/lib/heketi/mounts/vg_a/brick_1/brick
Brick2: 10.0.0.12:/var/lib/heketi/mounts/vg_b/brick_2/brick
Brick3: 10.0.0.10:/var/lib/heketi/mounts/vg_c/brick_3/brick
Options Reconfigured:
transport.address-family: inet
nfs.disable: on
 
Volume Name: vol_arb
Type: Distributed-Replicate
Volume ID: 11111111-2222-3333-4444-555555555555
Status: Started
Snapshot Count: 0
Number of Bricks: 2 x (2 + 1) = 6
Transport-type: tcp
Bricks:
Brick1: 10.0.0.10:/b/1
Brick2: 10.0.0.11:/b/2
Brick3: 10.0.0.12:/b/3 (arbiter)
Brick4: 10.0.0.11:/b/4
Brick5: 10.0.0.12:/b/5
Brick6: 10.0.0.10:/b/6 (arbiter)
Options Reconfigured:
Brick7: not.a.brick:/options/are/skipped
 
Volume Name: plain
Type: Distribute
Volume ID: 66666666-2222-3333-4444-555555555555
Status: Stopped
Snapshot Count: 0
Number of Bricks: 2
Transport-type: tcp
Bricks:
Brick1: h1:/p1
Brick2: h2:/p2
"""


def test_volume_info_text_replica_arbiter_distribute() -> None:
    reg, arb, plain = parse_volume_info_text(INFO_TEXT)
    assert (reg.name, reg.type, reg.status, reg.replica_count, reg.brick_count) == (
        "glusterfs-registry-volume", "Replicate", "Started", 3, 3)
    assert [b.host for b in reg.bricks] == ["10.0.0.11", "10.0.0.12", "10.0.0.10"]
    assert (arb.dist_count, arb.replica_count, arb.arbiter_count, arb.brick_count) == (2, 3, 1, 6)
    sets = arb.replica_sets()
    assert [[b.path for b in s] for s in sets] == [["/b/1", "/b/2", "/b/3"], ["/b/4", "/b/5", "/b/6"]]
    assert [b.arbiter for b in arb.bricks] == [False, False, True, False, False, True]
    assert (plain.replica_count, plain.brick_count, plain.status, plain.replicated) == (1, 2, "Stopped", False)
    assert len(plain.replica_sets()) == 2


def test_volume_info_text_count_mismatch() -> None:
    with pytest.raises(GlusterParseError, match="bricks listed"):
        parse_volume_info_text("Volume Name: v\nType: Replicate\nNumber of Bricks: 1 x 3 = 3\nBricks:\nBrick1: h:/p\n")


INFO_XML = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<cliOutput>
  <opRet>0</opRet>
  <opErrno>0</opErrno>
  <opErrstr/>
  <volInfo>
    <volumes>
      <volume>
        <name>vol_arb</name>
        <id>11111111-2222-3333-4444-555555555555</id>
        <status>1</status>
        <statusStr>Started</statusStr>
        <snapshotCount>0</snapshotCount>
        <brickCount>3</brickCount>
        <distCount>3</distCount>
        <stripeCount>1</stripeCount>
        <replicaCount>3</replicaCount>
        <arbiterCount>1</arbiterCount>
        <disperseCount>0</disperseCount>
        <redundancyCount>0</redundancyCount>
        <type>2</type>
        <typeStr>Replicate</typeStr>
        <transport>0</transport>
        <bricks>
          <brick uuid="u1">10.0.0.10:/b/1<name>10.0.0.10:/b/1</name><hostUuid>u1</hostUuid><isArbiter>0</isArbiter></brick>
          <brick uuid="u2">10.0.0.11:/b/2<name>10.0.0.11:/b/2</name><hostUuid>u2</hostUuid><isArbiter>0</isArbiter></brick>
          <brick uuid="u3">10.0.0.12:/b/3<name>10.0.0.12:/b/3</name><hostUuid>u3</hostUuid><isArbiter>1</isArbiter></brick>
        </bricks>
        <optCount>1</optCount>
        <options>
          <option>
            <name>nfs.disable</name>
            <value>on</value>
          </option>
        </options>
      </volume>
      <count>1</count>
    </volumes>
  </volInfo>
</cliOutput>
"""


def test_volume_info_xml_arbiter() -> None:
    (vi,) = parse_volume_info_xml(INFO_XML)
    assert (vi.name, vi.type, vi.status, vi.replica_count, vi.arbiter_count, vi.dist_count) == (
        "vol_arb", "Replicate", "Started", 3, 1, 1)
    assert [(b.name, b.arbiter, b.host_uuid) for b in vi.bricks] == [
        ("10.0.0.10:/b/1", False, "u1"), ("10.0.0.11:/b/2", False, "u2"), ("10.0.0.12:/b/3", True, "u3")]


HEAL_TEXT = """Brick 192.168.124.233:/var/lib/heketi/mounts/vg_1/brick_a/brick
/dir/file1 
<gfid:5b6d0ed3-8b5c-4c43-a2a4-1b0d9d6a1c11> 
/dir/file2 - Possibly undergoing heal

Status: Connected
Number of entries: 3

Brick 192.168.124.234:/var/lib/heketi/mounts/vg_2/brick_b/brick
/dir/file3 - Is in split-brain

Status: Connected
Number of entries: 1

Brick 192.168.124.235:/var/lib/heketi/mounts/vg_3/brick_c/brick
Status: Transport endpoint is not connected
Number of entries: -

"""


def test_heal_info_text_entries_split_brain_not_connected() -> None:
    hi = parse_heal_info_text("vol_x", HEAL_TEXT)
    assert [(b.host, b.status, b.entries) for b in hi.bricks] == [
        ("192.168.124.233", "Connected", 3), ("192.168.124.234", "Connected", 1),
        ("192.168.124.235", "Transport endpoint is not connected", None)]
    assert [(f.path, f.state) for f in hi.bricks[0].files] == [
        ("/dir/file1", "heal"), ("<gfid:5b6d0ed3-8b5c-4c43-a2a4-1b0d9d6a1c11>", "heal"), ("/dir/file2", "possibly-healing")]
    assert hi.split_brain() == ["192.168.124.234:/var/lib/heketi/mounts/vg_2/brick_b/brick: /dir/file3"]
    assert hi.total_entries is None
    problems = hi.problems(expected_bricks=3)
    assert any("3 entries" in p for p in problems) and any("not connected" in p for p in problems)
    assert any(p.startswith("split-brain") for p in problems)


def test_heal_info_clean_and_brick_count_mismatch() -> None:
    clean = "Brick h1:/p1\nStatus: Connected\nNumber of entries: 0\n\nBrick h2:/p2\nStatus: Connected\nNumber of entries: 0\n\n"
    hi = parse_heal_info_text("v", clean)
    assert hi.problems(expected_bricks=2) == [] and hi.total_entries == 0
    assert hi.problems(expected_bricks=3) == ["heal info lists 2 bricks, volume info 3"]


def test_heal_count_brick_is_not_connected() -> None:
    text = ("Gathering count of entries to be healed on volume v has been successful \n\n"
            "Brick h1:/p1\nNumber of entries: 4\n\nBrick h2:/p2\nStatus: Brick is not connected\n")
    hi = parse_heal_info_text("v", text)
    assert [(b.connected, b.entries, b.status) for b in hi.bricks] == [
        (True, 4, "Connected"), (False, None, "Brick is not connected")]
    assert "brick h2:/p2: Brick is not connected" in hi.problems(2)


@pytest.mark.parametrize(
    "text",
    [
        "Volume v is not started (Or) All the bricks are not running.\n",
        "Volume v does not exist\n",
        "This command is supported for only volumes of replicate/disperse type. Volume v is not of type replicate/disperse\nVolume heal failed.\n",
    ],
)
def test_heal_info_volume_errors(text: str) -> None:
    hi = parse_heal_info_text("v", text)
    assert hi.bricks == [] and hi.error and hi.problems() == [hi.error]


HEAL_XML = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<cliOutput>
  <healInfo>
    <bricks>
      <brick hostUuid="u1">
        <name>10.0.0.10:/b/1</name>
        <file gfid="g1">/dir/a</file>
        <status>Connected</status>
        <numberOfEntries>1</numberOfEntries>
      </brick>
      <brick hostUuid="-">
        <name>10.0.0.12:/b/3</name>
        <status>Transport endpoint is not connected</status>
        <numberOfEntries>-</numberOfEntries>
      </brick>
    </bricks>
  </healInfo>
  <opRet>0</opRet>
  <opErrno>0</opErrno>
  <opErrstr/>
</cliOutput>
"""


def test_heal_info_xml() -> None:
    hi = parse_heal_info_xml("v", HEAL_XML)
    assert [(b.name, b.connected, b.entries, [f.path for f in b.files]) for b in hi.bricks] == [
        ("10.0.0.10:/b/1", True, 1, ["/dir/a"]), ("10.0.0.12:/b/3", False, None, [])]
    assert parse_heal_info_xml("v", ERROR_XML).error.startswith("Another transaction")


PEERS = """Number of Peers: 2

Hostname: 10.0.0.11
Uuid: 73b73a0f-ad3a-5d42-a00f-9ed0b77662d4
State: Peer in Cluster (Connected)

Hostname: 10.0.0.12
Uuid: a907eab5-9fbf-5ae4-afad-4974d6e6adc7
State: Peer in Cluster (Disconnected)
Other names:
master03.example.com
"""

PEERS_XML = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<cliOutput>
  <opRet>0</opRet>
  <opErrno>0</opErrno>
  <opErrstr/>
  <peerStatus>
    <peer>
      <uuid>u2</uuid>
      <hostname>10.0.0.11</hostname>
      <hostnames>
        <hostname>10.0.0.11</hostname>
      </hostnames>
      <connected>0</connected>
      <state>3</state>
      <stateStr>Peer in Cluster</stateStr>
    </peer>
  </peerStatus>
</cliOutput>
"""


def test_peer_status() -> None:
    peers = parse_peer_status_text(PEERS)
    assert [(p.hostname, p.uuid[:8], p.connected) for p in peers] == [
        ("10.0.0.11", "73b73a0f", True), ("10.0.0.12", "a907eab5", False)]
    assert [(p.hostname, p.connected) for p in parse_peer_status_xml(PEERS_XML)] == [("10.0.0.11", False)]


def test_volume_list() -> None:
    assert parse_volume_list("heketidbstorage\nvol_a\n") == ["heketidbstorage", "vol_a"]
    assert parse_volume_list("No volumes present in cluster\n") == []
    assert parse_uuid_get("UUID: 53552b22-1121-58c5-a255-ad4161bec516\n") == "53552b22-1121-58c5-a255-ad4161bec516"
