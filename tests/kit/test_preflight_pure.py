"""The pure parts of the preflight: the well-known port table, ``ss`` parsing (IPv4, IPv6,
wildcards, devices, old and new iproute2), who references a node label (workloads, namespaces,
master-config, with the values no mapping covers), version parsing and the kubelet skew rule,
and the models' lines and bounds."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from activities.host.models import ExecBackend, HostAccess
from activities.preflight import ports, references, versions
from activities.preflight.models import (
    CheckPreconditionsInput,
    InputCheck,
    LabelUnreferenced,
    MasterConfigError,
    NamedAccess,
    NamesExist,
    PortFree,
    Precondition,
    PreconditionResult,
    PreconditionState,
    RebootAccess,
    WorkerExecutable,
    default_node_selector,
)

# --- well-known ports ----------------------------------------------------------------------------


@pytest.mark.parametrize(("port", "proto", "owner"), [
    (53, "udp", "dnsmasq"), (53, "tcp", "dnsmasq"), (10250, "tcp", "kubelet 10250"), (10256, "tcp", "kube-proxy"),
    (4789, "udp", "VXLAN"), (6081, "udp", "Geneve"), (8443, "tcp", "3.x master API"), (6443, "tcp", "API server"),
    (2379, "tcp", "etcd"), (2380, "tcp", "etcd"), (9100, "tcp", "node exporter"), (9999, "udp", "host level"),
    (22, "tcp", "sshd"), (111, "udp", "rpcbind"), (443, "tcp", "router"), (30080, "udp", "NodePort"),
])
def test_well_known_ports_name_their_owner(port: int, proto: str, owner: str) -> None:
    entry = ports.well_known_owner(port, proto)
    assert entry is not None and owner in entry.owner, entry
    assert entry.source


@pytest.mark.parametrize(("port", "proto"), [(4889, "udp"), (4789, "tcp"), (8472, "udp"), (10000, "tcp"), (2381, "tcp"),
                                             (24007, "tcp"), (49152, "tcp")])
def test_ports_nobody_owns(port: int, proto: str) -> None:
    """The R5 seed's new port is free of the table; GlusterFS's ports count only on GlusterFS nodes."""
    assert ports.well_known_owner(port, proto) is None


def test_glusterfs_ports_count_on_glusterfs_nodes() -> None:
    glusterd = ports.well_known_owner(24007, "tcp", glusterfs=True)
    brick = ports.well_known_owner(49200, "tcp", glusterfs=True)
    assert glusterd is not None and "glusterd" in glusterd.owner and glusterd.describe().startswith("24007-24008/tcp")
    assert brick is not None and "bricks" in brick.owner
    assert ports.well_known_owner(49665, "tcp", glusterfs=True) is None


# --- ss ------------------------------------------------------------------------------------------

SS_UDP = """\
UNCONN 0      0          127.0.0.53%lo:53        0.0.0.0:*
UNCONN 0      0            10.0.0.20:53          0.0.0.0:*
UNCONN 0      0              0.0.0.0:4789        0.0.0.0:*
UNCONN 0      0                 [::]:53             [::]:*
UNCONN 0      0      [fe80::1]%eth0:123             [::]:*
"""
SS_TCP_WITH_HEADER = """\
State  Recv-Q Send-Q Local Address:Port  Peer Address:Port Process
LISTEN 0      128          0.0.0.0:22         0.0.0.0:*
LISTEN 0      4096               *:10250            *:*
LISTEN 0      128             [::1]:6060          [::]:*
"""
SS_NETID = """\
Netid State  Recv-Q Send-Q Local Address:Port Peer Address:Port Process
udp   UNCONN 0      0      0.0.0.0:4789       0.0.0.0:*
tcp   LISTEN 0      128    0.0.0.0:4789       0.0.0.0:*          users:(("nc",pid=7,fd=3))
"""
# iproute 4.11 (RHEL 7): IPv6 without brackets, IPv4 any as '*'.
SS_OLD = """\
LISTEN     0      128          *:22                       *:*
LISTEN     0      128         :::22                      :::*
"""


def test_ss_parses_ipv4_ipv6_wildcards_and_devices() -> None:
    udp = ports.parse_ss(SS_UDP)
    assert [(s.address, s.interface, s.port) for s in udp] == [
        ("127.0.0.53", "lo", 53), ("10.0.0.20", None, 53), ("0.0.0.0", None, 4789), ("::", None, 53),
        ("fe80::1", "eth0", 123)]
    assert [s.local() for s in udp] == ["127.0.0.53%lo:53", "10.0.0.20:53", "0.0.0.0:4789", "[::]:53", "[fe80::1]%eth0:123"]
    assert all(s.state == "UNCONN" and s.netid is None for s in udp)
    assert [s.local() for s in ports.listeners_on(udp, 53)] == ["127.0.0.53%lo:53", "10.0.0.20:53", "[::]:53"]
    assert ports.listeners_on(udp, 4889) == []


def test_ss_skips_the_header_and_reads_dual_stack_listeners() -> None:
    tcp = ports.parse_ss(SS_TCP_WITH_HEADER)
    assert [(s.state, s.address, s.port) for s in tcp] == [("LISTEN", "0.0.0.0", 22), ("LISTEN", "*", 10250),
                                                            ("LISTEN", "::1", 6060)]
    assert [s.local() for s in ports.listeners_on(tcp, 10250)] == ["*:10250"]


def test_ss_netid_column_filters_by_protocol() -> None:
    both = ports.parse_ss(SS_NETID)
    assert [(s.netid, s.port) for s in both] == [("udp", 4789), ("tcp", 4789)]
    assert [s.netid for s in ports.listeners_on(both, 4789, "udp")] == ["udp"]
    assert [s.netid for s in ports.listeners_on(both, 4789, "tcp")] == ["tcp"]


def test_ss_of_older_iproute2() -> None:
    old = ports.parse_ss(SS_OLD)
    assert [(s.address, s.port) for s in old] == [("*", 22), ("::", 22)]
    assert ports.split_local("*:*") == ("*", None, 0)
    with pytest.raises(ValueError):
        ports.split_local("nonsense")
    assert ports.ss_argv("udp") == ["ss", "-Huln"] and ports.ss_argv("tcp") == ["ss", "-Htln"]


#: ``ss -Htlnp`` as iproute2 6.x prints it: the process column names each socket's users; a
#: socket of another user seen without root has none.
SS_TCP_PROCESSES = """\
LISTEN 0      4096       127.0.0.1:2379       0.0.0.0:*    users:(("etcd",pid=812,fd=7))
LISTEN 0      1          127.0.0.1:2380       0.0.0.0:*    users:(("python3",pid=900,fd=3),("python3",pid=901,fd=3))
LISTEN 0      128          0.0.0.0:22         0.0.0.0:*
"""


def test_ss_processes_name_who_holds_a_port() -> None:
    socks = ports.parse_ss(SS_TCP_PROCESSES)
    assert [s.port for s in socks] == [2379, 2380, 22]
    assert [ports.processes_of(s) for s in socks] == [["etcd"], ["python3", "python3"], []]
    assert ports.ss_argv("tcp", processes=True) == ["ss", "-Htlnp"]


# --- references ----------------------------------------------------------------------------------

MASTER_CONFIG = """\
apiVersion: v1
kind: MasterConfig
projectConfig:
  defaultNodeSelector: region=primary
  projectRequestMessage: ''
"""


def dc(name: str, selector: dict[str, str] | None = None, affinity: list[dict] | None = None, kind: str = "DeploymentConfig",
       owned: bool = False) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "i"}]}
    if selector:
        spec["nodeSelector"] = selector
    if affinity:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": affinity}]}}}
    meta: dict = {"name": name, "namespace": "default"}
    if owned:
        meta["ownerReferences"] = [{"kind": "Deployment", "name": "x", "controller": True}]
    body = {"spec": {"jobTemplate": {"spec": {"template": {"spec": spec}}}}} if kind == "CronJob" else {"spec": {"template": {"spec": spec}}}
    return {"kind": kind, "metadata": meta, **body}


def test_master_config_reference_with_a_value_no_mapping_covers() -> None:
    """R3e field finding: region=primary in defaultNodeSelector, a mapping for region=infra only."""
    refs = references.scan_master_config("master01", "/etc/origin/master/master-config.yaml", MASTER_CONFIG, "region",
                                         None, ["region=infra"], rewritten=False)
    (ref,) = refs
    assert (ref.where, ref.text, ref.value, ref.covered, ref.mapped) == ("MasterConfig master01", "region=primary", "primary",
                                                                         False, False)
    assert ref.path == "/etc/origin/master/master-config.yaml#projectConfig.defaultNodeSelector"
    assert ref.line().endswith("no mapping covers it")
    assert references.uncovered_values(refs) == ["primary"]
    # A mapping for region=primary covers its value, but the procedure does not edit the file.
    (mapped,) = references.scan_master_config("m", "p", MASTER_CONFIG, "region", None, ["region=primary"], rewritten=False)
    assert not mapped.covered and mapped.mapped and references.uncovered_values([mapped]) == []
    assert "does not rewrite it here" in mapped.line()
    (rewritten,) = references.scan_master_config("m", "p", MASTER_CONFIG, "region", None, ["region"], rewritten=True)
    assert rewritten.covered
    assert references.scan_master_config("m", "p", MASTER_CONFIG, "zone", None, [], rewritten=False) == []
    assert default_node_selector("apiVersion: v1\n") == ""
    with pytest.raises(MasterConfigError):
        default_node_selector("- a list\n")


def test_workload_selectors_and_required_affinity() -> None:
    router = dc("router", {"region": "infra"})
    (ref,) = references.scan_workload("DeploymentConfig", router, "region", None, ["region=infra"])
    assert (ref.where, ref.path, ref.text, ref.covered) == ("DeploymentConfig default/router", "/spec/template/spec/nodeSelector",
                                                            "region=infra", True)
    spread = dc("spread", affinity=[{"key": "region", "operator": "In", "values": ["infra", "primary"]},
                                    {"key": "zone", "operator": "DoesNotExist"}], kind="Deployment")
    refs = references.scan_workload("Deployment", spread, "region", None, ["region=infra"])
    assert [(r.value, r.covered) for r in refs] == [("infra", True), ("primary", False)]
    assert refs[0].path == "/spec/template/spec/affinity/nodeAffinity" and refs[0].text == "region In (infra, primary)"
    assert references.uncovered_values(refs) == ["primary"]
    # One value of the label: only requirements naming it (or the key alone) count.
    assert [r.value for r in references.scan_workload("Deployment", spread, "region", "primary", [])] == ["primary"]
    # A key-only requirement is covered only by a key-wide entry.
    (zone,) = references.scan_workload("Deployment", spread, "zone", None, ["zone=default"])
    assert zone.value is None and not zone.covered and references.uncovered_values([zone]) == []
    (zone_all,) = references.scan_workload("Deployment", spread, "zone", None, ["zone"])
    assert zone_all.covered
    prune = dc("prune", {"region": "infra"}, kind="CronJob")
    (cj,) = references.scan_workload("CronJob", prune, "region", None, [])
    assert cj.path == "/spec/jobTemplate/spec/template/spec/nodeSelector" and not cj.covered
    assert references.has_controller_owner(dc("rs", kind="ReplicaSet", owned=True))
    assert not references.has_controller_owner(router)
    assert references.template_spec({"kind": "Pod", "spec": {}}) == {}


def test_namespace_annotations_use_label_selector_syntax() -> None:
    def ns(name: str, sel: str | None) -> dict:
        return {"metadata": {"name": name, "annotations": {references.NS_ANNOTATION: sel} if sel is not None else {}}}

    (ref,) = references.scan_namespace(ns("team-a", "region=primary,env!=dev"), "region", None, ["region=infra"])
    assert (ref.where, ref.text, ref.value, ref.covered) == ("Namespace team-a", "region=primary", "primary", False)
    assert references.scan_namespace(ns("plain", ""), "region", None, []) == []
    assert references.scan_namespace(ns("none", None), "region", None, []) == []
    (bad,) = references.scan_namespace(ns("broken", "region=a=(b"), "region", None, [])
    assert bad.value is None and not bad.covered
    reqs = references.parse_selector("a=1, b==2,c!=3,d in (x, y),e notin (z),f,!g")
    assert [(r.key, r.op, r.values) for r in reqs] == [
        ("a", "=", ("1",)), ("b", "=", ("2",)), ("c", "!=", ("3",)), ("d", "in", ("x", "y")), ("e", "notin", ("z",)),
        ("f", "exists", ()), ("g", "!", ())]


# --- versions ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "parsed"), [
    ("v1.10.0+b81c8f8", (1, 10, 0, "", "b81c8f8")),
    ("v1.11.0+d4cacc0", (1, 11, 0, "", "d4cacc0")),
    ("v1.9.1+a0ce1bc657", (1, 9, 1, "", "a0ce1bc657")),
    ("v1.37.0-clustersim", (1, 37, 0, "clustersim", "")),
    ("1.11", (1, 11, 0, "", "")),
    ("v1.27.8+4fab27b", (1, 27, 8, "", "4fab27b")),
])
def test_versions_parse_openshift_and_upstream_forms(text: str, parsed: tuple) -> None:
    assert tuple(versions.parse_version(text)) == parsed


def test_kubelet_may_not_be_newer_than_the_api_server_by_minor_version() -> None:
    assert versions.kubelet_too_new("v1.10.0+b81c8f8", "v1.9.1+a0ce1bc657")  # R3: 3.10 kubelets under 3.9 masters
    assert not versions.kubelet_too_new("v1.10.0+b81c8f8", "v1.10.0+b81c8f8")
    assert not versions.kubelet_too_new("v1.11.5", "v1.11.0+d4cacc0")  # same minor: within the policy
    assert not versions.kubelet_too_new("v1.9.1+a0ce1bc657", "v1.11.0+d4cacc0")  # older is allowed
    assert versions.kubelet_too_new("v2.0.0", "v1.37.0-clustersim")
    for bad in ("3.11.161-1.el7.x86_64", "latest", ""):
        with pytest.raises(ValueError, match="not a Kubernetes version"):
            versions.parse_version(bad)


# --- models --------------------------------------------------------------------------------------

SSH = HostAccess(backend=ExecBackend.SSH, host="10.0.0.20")
DEBUG = HostAccess(backend=ExecBackend.DEBUG_POD, node="node01")


def test_preconditions_round_trip_by_kind() -> None:
    adapter = TypeAdapter(list[Precondition])
    items = [WorkerExecutable(program="ansible-playbook", why="the action runs it"),
             PortFree(port=4889, node="node01", access=SSH), NamesExist(names=["a", "b", "c", "d"], role="canary"),
             LabelUnreferenced(label="region=infra", masters=[NamedAccess(name="m1", access=SSH)]),
             InputCheck(about="--action-command", ok=False, detail="no {node}")]
    back = adapter.validate_python(adapter.dump_python(items, mode="json"))
    assert back == items and [type(p).__name__ for p in back] == [type(p).__name__ for p in items]
    assert [p.subject() for p in back] == ["ansible-playbook on the worker", "port 4889/udp on node01",
                                           "canary a, b, c and 1 more", "node label region=infra", "--action-command"]
    assert (back[3].key, back[3].value) == ("region", "infra")
    with pytest.raises(ValidationError):
        adapter.validate_python([{"kind": "port-free", "port": 70000, "node": "n"}])
    with pytest.raises(ValidationError):
        adapter.validate_python([{"kind": "no-such-kind"}])


def test_result_lines_say_why_and_why_not() -> None:
    p = PortFree(port=53, node="node01", why="the new VXLAN port")
    bad = PreconditionResult(precondition=p, state=PreconditionState.FAILED, detail="a well-known cluster port: 53/tcp+udp (DNS)")
    assert bad.problem() == "port 53/udp on node01: a well-known cluster port: 53/tcp+udp (DNS) (needed: the new VXLAN port)"
    assert bad.line().startswith("FAILED   port-free") and not bad.ok
    skipped = PreconditionResult(precondition=LabelUnreferenced(label="zone"), state=PreconditionState.NOT_RUN,
                                 why_not_run="no master access given")
    assert skipped.line().endswith("node label zone: not run: no master access given")


def test_the_activity_bound_counts_rounds_and_backend_start() -> None:
    inp = CheckPreconditionsInput(preconditions=[RebootAccess(node=f"n{i}", access=DEBUG) for i in range(9)],
                                  concurrency=4, check_timeout_seconds=10)
    assert inp.check_seconds(inp.preconditions[0]) == 10 + DEBUG.startup_seconds()
    assert inp.bound_seconds() == 3 * (10 + DEBUG.startup_seconds())
    label = LabelUnreferenced(label="region", masters=[NamedAccess(name="m", access=SSH)])
    assert CheckPreconditionsInput(check_timeout_seconds=5).check_seconds(label) == 5 + SSH.startup_seconds()
    assert CheckPreconditionsInput().bound_seconds() == 1.0


@pytest.mark.parametrize(("current", "target", "problem"), [
    ("3.9", "3.10", None), ("3.9", "3.9", None), ("4.21", "4.22", None),
    ("3.9", "3.11", "3.9 -> 3.11 is 2 minor versions at once: one minor version at a time (upgrade to 3.10 first; skipped: 3.10)"),
    ("4.19", "4.22", "4.19 -> 4.22 is 3 minor versions at once: one minor version at a time (upgrade to 4.20 first; "
                     "skipped: 4.20, 4.21)"),
    ("3.10", "3.9", "3.10 -> 3.9 is a downgrade: the cluster's version only goes forward"),
    ("3.11", "4.1", "3.11 -> 4.1 changes the major version: upgrade to the last 3.x first"),
])
def test_an_update_goes_one_minor_version_at_most(current: str, target: str, problem: str | None) -> None:
    """Issue 41: the cluster-version blockers, as pure rules on release versions."""
    assert versions.update_step_problem(versions.parse_cluster_version(current), versions.parse_cluster_version(target)) == problem


def test_release_versions_and_openshift_3_from_kubernetes() -> None:
    assert versions.parse_cluster_version("v3.10.0") == (3, 10) and versions.parse_cluster_version("4.22.0-rc.1") == (4, 22)
    assert str(versions.parse_cluster_version("4.21.3")) == "4.21"
    with pytest.raises(ValueError, match="not a release version"):
        versions.parse_cluster_version("latest")
    assert versions.openshift_from_kube("v1.9.1+a0ce1bc657") == (3, 9)
    assert versions.openshift_from_kube("v1.11.0+d4cacc0") == (3, 11)
    assert versions.openshift_from_kube("v1.34.2") is None  # OpenShift 4 reports its release in ClusterVersion only
