"""R5 pure decisions: the master-config edit, restart order, the preconditions (issue 39 case 3),
API intervals, the fan-out core against a fake runner (check first, window on one clock, resume
from an earlier attempt), and the input's refusals."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from pydantic import ValidationError

from activities.host.models import ExecBackend, HostAccess
from activities.preflight.models import HostExecutable, InputCheck, NamesExist, PortFree
from activities.vxlan_port.fanout import fan_out, parse_dst_port, set_port_argv
from activities.vxlan_port.models import (
    CheckResult,
    ClusterNetworkState,
    DaemonSetRecord,
    FanoutInput,
    NodeSwitch,
    PreflightResult,
    ReplacePodInput,
    SdnPod,
    SwitchTarget,
)
from workflows.vxlan_port import plan
from workflows.vxlan_port.models import ApiInterval, MasterAccess, VxlanPortChangeInput

CONFIG = """\
admissionConfig:
  pluginConfig: {}
kind: MasterConfig
networkConfig:
  clusterNetworks:
  - cidr: 10.128.0.0/14
    hostSubnetLength: 9
  networkPluginName: redhat/openshift-ovs-subnet
  serviceNetworkCIDR: 172.30.0.0/16
oauthConfig:
  masterPublicURL: https://ocp.example.com:8443
"""


def _inp(**kw: object) -> VxlanPortChangeInput:
    access = HostAccess(backend=ExecBackend.SSH, host="127.0.0.1", port=2222)
    fields: dict = {"new_port": 4889, "custom_image": "reg/ose-node:v3.11-custom",
                    "masters": [MasterAccess(name="m1", access=access, api_url="https://m1:8443")],
                    "host_access": {"m1": access, "n1": access}}
    fields.update(kw)
    return VxlanPortChangeInput(**fields)


@pytest.mark.parametrize(("port", "want"), [(4889, 4889), (None, None)])
def test_set_vxlan_port_inserts_under_network_config_and_keeps_the_rest(port: int | None, want: int | None) -> None:
    out = plan.set_vxlan_port(CONFIG, port)
    doc = yaml.safe_load(out)
    assert doc["networkConfig"].get("vxlanPort") == want
    assert doc["networkConfig"]["clusterNetworks"] == [{"cidr": "10.128.0.0/14", "hostSubnetLength": 9}]
    assert doc["oauthConfig"] == {"masterPublicURL": "https://ocp.example.com:8443"}
    if port is None:
        assert out == CONFIG


def test_set_vxlan_port_replaces_an_existing_line_and_is_idempotent() -> None:
    once = plan.set_vxlan_port(CONFIG, 4889)
    assert plan.set_vxlan_port(once, 4889) == once
    again = plan.set_vxlan_port(once, 5000)
    assert again.count("vxlanPort") == 1 and yaml.safe_load(again)["networkConfig"]["vxlanPort"] == 5000
    assert plan.set_vxlan_port(once, None) == CONFIG  # back to o-a's 4789 form (no key)


def test_set_vxlan_port_refuses_a_config_without_network_config() -> None:
    with pytest.raises(ValueError, match="networkConfig"):
        plan.set_vxlan_port("kind: MasterConfig\n", 4889)


@pytest.mark.parametrize(("masters", "leader", "explicit", "want"), [
    (["m1", "m2", "m3"], "m2", None, ["m1", "m3", "m2"]),
    (["m1", "m2", "m3"], "m3", None, ["m1", "m2", "m3"]),
    (["m1", "m2", "m3"], None, None, ["m1", "m2", "m3"]),
    (["m1", "m2", "m3"], "m1", ["m3", "m1", "m2"], ["m3", "m2", "m1"]),
])
def test_restart_order_puts_the_leader_last(masters: list[str], leader: str | None, explicit: list[str] | None, want: list[str]) -> None:
    assert plan.restart_order(masters, leader, explicit) == want


def test_commands_are_the_seeds_rule() -> None:
    assert plan.iptables("-C", "OS_FIREWALL_ALLOW", 4889) == [
        "iptables", "-C", "OS_FIREWALL_ALLOW", "-p", "udp", "-m", "state", "--state", "NEW", "-m", "udp", "--dport", "4889", "-j", "ACCEPT"]
    assert plan.saved_rule_check(4889, "/etc/sysconfig/iptables") == ["grep", "-F", "udp --dport 4889 -j ACCEPT", "/etc/sysconfig/iptables"]
    assert set_port_argv(4889) == ["ovs-vsctl", "set", "interface", "vxlan0", "options:dst_port=4889"]
    assert plan.config_port(4789) is None and plan.config_port(4889) == 4889


@pytest.mark.parametrize(("out", "want"), [('"4789"\n', 4789), ("4889", 4889), ("", None), ('"abc"', None)])
def test_parse_dst_port(out: str, want: int | None) -> None:
    assert parse_dst_port(out) == want


def _pre(**kw: object) -> PreflightResult:
    fields: dict = {
        "nodes": {"m1": True, "n1": True},
        "sdn_pods": {n: SdnPod(node=n, name=f"sdn-{n}", ready=True, image="stock") for n in ("m1", "n1")},
        "daemonset": DaemonSetRecord(namespace="openshift-sdn", name="sdn", uid="u", resource_version="1", container_index=0, image="stock",
                                     triggers="[]"),
        "cluster_network": ClusterNetworkState(exists=True, vxlan_port=4789, uid="c"),
    }
    fields.update(kw)
    return PreflightResult(**fields)


def _ports(**ports: int | None) -> dict[str, NodeSwitch]:
    return {n: NodeSwitch(node=n, before=p, error="" if p else "ovs-vsctl: exit 1") for n, p in ports.items()}


OK_API = {"m1": CheckResult(ok=True, detail="200 ok")}


def _failed(checks: list) -> dict[str, str]:
    """The input checks that fail: subject -> detail."""
    return {c.subject(): c.detail for c in checks if isinstance(c, InputCheck) and not c.ok}


def test_preconditions_of_a_healthy_cluster_hold_and_name_every_port_program_and_api() -> None:
    checks = plan.preconditions(_inp(), _pre(), _ports(m1=4789, n1=4789), OK_API)
    assert _failed(checks) == {}
    ports = [(c.node, c.protocol, c.allow_well_known) for c in checks if isinstance(c, PortFree)]
    assert ports == [("m1", "udp", False), ("m1", "tcp", False), ("n1", "udp", False), ("n1", "tcp", False)]
    assert {(c.node, c.program) for c in checks if isinstance(c, HostExecutable)} == {
        (n, p) for n in ("m1", "n1") for p in ("docker", "iptables", "/usr/libexec/iptables/iptables.init", "grep")
    } | {("m1", "/usr/local/bin/master-restart")}
    (masters,) = [c for c in checks if isinstance(c, NamesExist)]
    assert masters.names == ["m1"] and masters.label == "node-role.kubernetes.io/master"


def test_preconditions_name_every_problem_one_line_each() -> None:
    bad = _pre(nodes={"m1": True, "n1": False, "n2": True}, sdn_pods={"m1": SdnPod(node="m1", name="s", ready=False, image="stock")},
               cluster_network=ClusterNetworkState(exists=True, vxlan_port=4889))
    checks = plan.preconditions(_inp(host_access={}, nodes=["m1", "n1", "nosuch"]), bad, _ports(m1=4889),
                                {"m1": CheckResult(ok=False, detail="ConnectionRefusedError")})
    assert _failed(checks) == {
        "every node in the run": "left out: n2",
        "host access": "none for m1, n1",
        "nodes Ready": "not Ready: n1",
        "sdn pods Ready": "not Ready: m1 (s not Ready), n1 (none)",
        "ClusterNetwork default": "vxlanPort 4889, not 4789",
        "vxlan0 on m1": "dst_port 4889, want 4789",
        "vxlan0 on n1": "not read (no Ready sdn pod or no target), want 4789",
        "API of m1": "https://m1:8443: ConnectionRefusedError",
    }
    (nodes,) = [c for c in checks if isinstance(c, NamesExist) and c.role == "node"]
    assert nodes.names == ["m1", "n1", "nosuch"]  # the kit checks them against the API: nosuch is refused there
    assert [c.node for c in checks if isinstance(c, PortFree)] == ["n1", "n1"]  # m1 is on it already; without access: table only
    assert not [c for c in checks if isinstance(c, HostExecutable) and c.node != "m1"]


def test_preconditions_of_a_reverse_run_accept_either_port_and_take_4789_back() -> None:
    rev = plan.reverse_input(_inp(), "vxlan-port-1")
    checks = plan.preconditions(rev, _pre(cluster_network=ClusterNetworkState(exists=True, vxlan_port=4789)),
                                _ports(m1=4889, n1=4789), OK_API, forward_record=False)
    assert _failed(checks) == {}  # the DaemonSet kept its triggers annotation: the record is not needed
    assert [(c.node, c.port, c.allow_well_known) for c in checks if isinstance(c, PortFree)] == [("m1", 4789, True)] * 2
    lost = _pre(daemonset=DaemonSetRecord(namespace="openshift-sdn", name="sdn", uid="u", resource_version="1", container_index=0,
                                          image="custom", triggers=None))
    assert "original is unknown" in _failed(plan.preconditions(rev, lost, _ports(m1=4889, n1=4889), OK_API, forward_record=False))[
        "record of vxlan-port-1"]


def test_all_down_finds_only_overlaps_of_every_master() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    s = lambda x: t0 + timedelta(seconds=x)  # noqa: E731
    serial = [ApiInterval(master="m1", start=s(0), end=s(5)), ApiInterval(master="m2", start=s(6), end=s(9))]
    assert plan.all_down(serial, ["m1", "m2"], s(20)) == []
    overlap = [ApiInterval(master="m1", start=s(0), end=s(5)), ApiInterval(master="m2", start=s(3), end=None)]
    (iv,) = plan.all_down(overlap, ["m1", "m2"], s(20))
    assert (iv.start, iv.end, iv.seconds) == (s(3), s(5), 2.0)


def test_record_configmap_name_is_a_dns_name() -> None:
    assert plan.record_configmap_name("vxlan-port-4789-to-4889-20261123") == "lockkeeper-record-vxlan-port-4789-to-4889-20261123"
    assert plan.record_configmap_name("Vxlan/Port_X") == "lockkeeper-record-vxlan-port-x"
    assert len(plan.record_configmap_name("a" * 400)) == 253


def test_input_refusals() -> None:
    with pytest.raises(ValidationError, match="both 4889"):
        _inp(old_port=4889)
    with pytest.raises(ValidationError, match="restart_order"):
        _inp(master={"restart_order": ["m9"]})
    with pytest.raises(ValidationError, match="include every master"):
        _inp(nodes=["n1"])
    with pytest.raises(ValidationError, match="SSH host access"):
        _inp(fanout={"switch_via": "ssh"}, host_access={"m1": HostAccess(backend=ExecBackend.DEBUG_POD, node="m1")})
    with pytest.raises(ValidationError, match="gate_timeout_s"):  # one name per concept: the kit's gates.timeout_seconds
        _inp(gate_timeout_s=5)
    rev = plan.reverse_input(_inp(), "vxlan-port-1")
    assert (rev.new_port, rev.old_port, rev.reverse_of) == (4789, 4889, "vxlan-port-1")


class FakeNodes:
    """Per-node dst_ports; ``fail`` nodes refuse the set; ``delay`` per set (s)."""

    def __init__(self, ports: dict[str, int], fail: frozenset[str] = frozenset(), delay: float = 0.01) -> None:
        self.ports, self.fail, self.delay, self.sets = dict(ports), fail, delay, []

    async def __call__(self, target: SwitchTarget, argv: list[str], timeout: float) -> tuple[int | None, str, str]:
        if argv[1] == "get":
            return 0, f'"{self.ports[target.node]}"\n', ""
        await asyncio.sleep(self.delay)
        if target.node in self.fail:
            return 1, "", "ovs-vsctl: unix:/var/run/openvswitch/db.sock: database connection failed\n"
        self.sets.append(target.node)
        self.ports[target.node] = int(argv[-1].split("=")[1])
        return 0, "", ""


def _targets(names: list[str]) -> list[SwitchTarget]:
    return [SwitchTarget(node=n, pod=f"sdn-{n}") for n in names]


async def test_fan_out_checks_first_switches_concurrently_and_times_one_window() -> None:
    nodes = FakeNodes({"a": 4789, "b": 4789, "c": 4889, "d": 4789}, fail=frozenset({"d"}), delay=0.2)
    res = await fan_out(FanoutInput(targets=_targets(["a", "b", "c", "d"]), port=4889), nodes)
    assert sorted(nodes.sets) == ["a", "b"]  # c was already there, d refused
    assert res.failed == ["d"] and "database connection failed" in res.nodes[3].error
    assert res.nodes[2].ok and not res.nodes[2].applied
    # concurrent: the window is one delay, not three
    assert 0.15 < res.window_seconds < 0.5, res.window_seconds


async def test_fan_out_read_only_and_resume_from_an_earlier_attempt() -> None:
    nodes = FakeNodes({"a": 4889, "b": 4789})
    read = await fan_out(FanoutInput(targets=_targets(["a", "b"]), port=4889, apply=False), nodes)
    assert [r.before for r in read.nodes] == [4889, 4789] and read.failed == ["b"] and nodes.sets == []
    earlier = {"a": NodeSwitch(node="a", before=4789, after=4889, applied=True, ok=True, t_apply_start=100.0, t_apply_end=100.5)}
    res = await fan_out(FanoutInput(targets=_targets(["a", "b"]), port=4889), nodes, attempt=2, previous=earlier,
                        clock=lambda: 101.0)
    assert nodes.sets == ["b"] and res.failed == []
    assert res.nodes[0].t_apply_start == 100.0 and res.nodes[1].attempt == 2
    assert res.window_seconds == pytest.approx(1.0)  # 100.0 (first attempt) .. 101.0 (second)


async def test_fan_out_retry_bounds_nodes_switched_by_a_lost_attempt() -> None:
    nodes = FakeNodes({"a": 4889, "b": 4789})  # a: switched by an attempt whose heartbeats were lost
    res = await fan_out(FanoutInput(targets=_targets(["a", "b"]), port=4889), nodes, attempt=2, lost_since=50.0,
                        clock=lambda: 60.0)
    assert nodes.sets == ["b"] and res.failed == []
    assert res.nodes[0].lost_attempt and (res.nodes[0].t_apply_start, res.nodes[0].t_apply_end) == (50.0, 60.0)
    assert not res.window_exact and res.window_seconds == pytest.approx(10.0)


def test_pod_replacement_polls_within_its_heartbeat_timeout() -> None:
    """The replacement beats once per read of its pods: a poll longer than 5 s would look like a
    dead worker to the 10 s heartbeat timeout, so the input refuses it."""
    assert ReplacePodInput(node="n1", image="img", poll_seconds=5).poll_seconds == 5
    with pytest.raises(ValidationError, match="poll_seconds"):
        ReplacePodInput(node="n1", image="img", poll_seconds=30)


async def test_an_exec_past_the_deadline_ends_before_the_fan_out_returns_without_blocking_the_loop() -> None:
    """A pod exec still running at the deadline is reported as missed, waited for before the
    activity returns (so no set lands after it), and waited for off the event loop: the hung
    exec here ends only when a coroutine on the loop releases it, which a join that blocks the
    loop never lets run (the exec then gives up waiting, and the test sees that)."""
    import threading

    from activities.vxlan_port.activities import VxlanActivities

    ports = {"a": 4789, "slow": 4789}
    release, ended = threading.Event(), threading.Event()
    released_by_loop: list[bool] = []

    def pod_exec(target: SwitchTarget, argv: list[str], timeout: float) -> tuple[int | None, str, str]:
        if argv[1] == "get":
            return 0, f'"{ports[target.node]}"\n', ""
        if target.node == "slow":
            released_by_loop.append(release.wait(5.0))  # a hung exec, bounded by its command timeout
            ended.set()
        ports[target.node] = int(argv[-1].split("=")[1])
        return 0, "", ""

    acts = VxlanActivities(lambda: None)  # type: ignore[arg-type,return-value]
    acts._pod_exec = pod_exec  # type: ignore[method-assign]

    async def release_after_the_deadline() -> None:
        await asyncio.sleep(0.5)  # the fan-out's deadline is 0.2 s: it is joining the exec now
        release.set()

    releaser = asyncio.create_task(release_after_the_deadline())
    res = await acts.switch_vxlan_port(FanoutInput(targets=_targets(["a", "slow"]), port=4889, deadline_seconds=0.2))
    await releaser
    assert res.failed == ["slow"] and "deadline" in res.nodes[1].error
    assert ended.is_set(), "the straggling exec ended before the activity returned"
    assert released_by_loop == [True], "the event loop ran while the exec was joined"
