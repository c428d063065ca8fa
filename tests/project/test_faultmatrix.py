"""The fault matrices' coverage check on its own (tests/support/faultmatrix.py): the kinds of write it
derives from requests and host commands, and what it reports a matrix misses. No simulator:
the writes are given."""

from __future__ import annotations

from clustersim import traps
from tests.support.faultmatrix import Step, Writes, command_kind, host_writes, uncovered


def test_command_kind_names_the_action_not_the_arguments() -> None:
    assert command_kind(["/usr/bin/systemctl", "stop", "crio"]) == "systemctl stop"
    assert command_kind(["yum", "-y", "remove", "cri-o"]) == "yum remove"
    assert command_kind(["iptables", "-w", "-A", "OS_FIREWALL_ALLOW", "-p", "udp"]) == "iptables -A"
    # a file tool's kind is the directory it writes: per-run names make no new kind
    assert command_kind(["mv", "-T", "/data/m2", "/data/m2.lockkeeper-20261129T2122Z"]) == "mv /data"
    assert command_kind(["tee", "/etc/origin/node/pods/apiserver.yaml"]) == "tee /etc/origin/node/pods/apiserver.yaml"


def test_reads_are_not_writes() -> None:
    w = host_writes([("n1", ["systemctl", "is-active", "crio"], "ssh"), ("n1", ["cat", "/etc/resolv.conf"], "ssh"),
                     ("n1", ["etcdctl", "--endpoints=x", "member", "list", "-w", "json"], "shim"),
                     ("n1", ["systemctl", "stop", "crio"], "ssh")])
    assert w.kinds() == ["host: systemctl stop"]


def test_uncovered_names_a_missed_kind_a_stale_within_and_a_step_that_is_none() -> None:
    writes = host_writes([("n1", ["systemctl", "stop", "crio"], "ssh"), ("n1", ["systemctl", "disable", "crio"], "ssh")])
    writes.api["create pods/eviction"] = [("create", "pods", "", "ns", "", "eviction")]
    writes.api["patch nodes"] = [("patch", "nodes", "", "", "n1", "")]
    steps = {"cordon": Step("cordon", traps.api("patch", "nodes", name="n2")),  # names do not make a kind
             "stop": Step("stop", traps.host(r"^systemctl stop ", host="n1")),
             "reboot": Step("reboot", traps.host(r"^systemctl reboot", host="n1"))}
    within = {"host: systemctl disable": ("stop", "stopped then disabled in the same step"),
              "host: rm /etc": ("wipe", "no such step")}
    problems = uncovered(steps, writes, within)
    assert problems == [
        "no step catches 'create pods/eviction' (first: create pods/eviction ns/)",
        "'host: rm /etc' is said to fall inside step 'wipe', which the matrix does not have (no such step)",
        "'host: rm /etc' (inside 'wipe': no such step) was not sent by the run",
        "step 'reboot' catches none of the run's writes",
    ]


def test_a_covered_run_has_no_problems() -> None:
    writes = Writes(api={"delete pods": [("delete", "pods", "", "ns", "p1", "")]})
    assert uncovered({"delete-pod": Step("delete-pod", traps.api("delete", "pods", name="p0"))}, writes) == []
