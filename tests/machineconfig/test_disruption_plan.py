"""lockkeeper's own node disruption rules (workflows.machineconfig.disruption, MCO release-4.21),
the plan that carries them, and MachineConfigNode phase names (workflows.machineconfig.mcnphase)."""

from __future__ import annotations

from typing import Any

import pytest

from activities.cluster.models import NodeInfo
from activities.machineconfig.models import ConfigChange, DisruptionFacts, PoolInfo
from lockkeeper.output import disruption_lines
from workflows.kit.models import NodePhase, NodeStatus
from workflows.machineconfig.disruption import actions_for_changes, plan_disruption, registries_conf_change_is_safe
from workflows.machineconfig.mcnphase import mcn_phase
from workflows.machineconfig.models import NodeStep, RolloutStatus
from workflows.machineconfig.plan import plan_rollout

CRIO = {"type": "Reload", "reload": {"serviceName": "crio.service"}}
#: MachineConfiguration/cluster clusterPolicies as a 4.21 operator writes them with no spec policy.
DEFAULTS: dict[str, Any] = {
    "files": [
        {"path": "/var/lib/kubelet/config.json", "actions": [{"type": "None"}]},
        {"path": "/etc/machine-config-daemon/no-reboot/containers-gpg.pub", "actions": [CRIO]},
        {"path": "/etc/containers/policy.json", "actions": [CRIO]},
        {"path": "/etc/containers/registries.conf", "actions": [{"type": "Special"}]},
        {"path": "/etc/containers/registries.d", "actions": [CRIO]},
        {"path": "/etc/crio/policies", "actions": [CRIO]},
        {"path": "/etc/nmstate/openshift", "actions": [{"type": "None"}]},
        {"path": "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
         "actions": [{"type": "Restart", "restart": {"serviceName": "coreos-update-ca-trust.service"}},
                     {"type": "Restart", "restart": {"serviceName": "crio.service"}}]},
    ],
    "sshkey": {"actions": [{"type": "None"}]},
}


def _texts(files: list[str], units: list[str] = [], ssh: bool = False, pol: dict[str, Any] = DEFAULTS) -> list[str]:  # noqa: B006
    return [a.text() for a in actions_for_changes(ssh, files, units, pol)[0]]


def test_files_take_the_closest_policy_and_unlisted_means_reboot() -> None:
    assert _texts(["/etc/containers/registries.d/99-mirror.yaml"]) == ["Reload crio.service"]
    assert _texts(["/etc/containers/registries.dx"]) == ["Reboot"]
    assert _texts(["/var/lib/kubelet/config.json"]) == ["None"]
    assert _texts(["/var/lib/kubelet/config.json"], ssh=True) == ["None"]  # several None are one
    assert _texts(["/var/lib/kubelet/config.json", "/etc/containers/policy.json"]) == ["Reload crio.service"]
    assert _texts(["/etc/containers/policy.json", "/etc/sysctl.d/x.conf"]) == ["Reboot"]
    assert _texts([], ["kubelet.service"]) == ["Reboot"]
    assert _texts(["/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"]) == [
        "Restart coreos-update-ca-trust.service", "Restart crio.service"]
    nested = {"files": [*DEFAULTS["files"], {"path": "/etc/containers/registries.d/x.yaml", "actions": [{"type": "Drain"}]}]}
    assert _texts(["/etc/containers/registries.d/x.yaml"], pol=nested) == ["Drain"]  # the longest path wins


def test_any_reboot_wins() -> None:
    pol = {**DEFAULTS, "units": [{"name": "a.service", "actions": [{"type": "Reboot"}]}]}
    assert _texts(["/etc/containers/policy.json"], ["a.service"], pol=pol) == ["Reboot"]


@pytest.mark.parametrize(("change", "drain", "reboot", "acts"), [
    (ConfigChange(from_config="a", to_config="b", file_paths=["/etc/containers/registries.d/99.yaml"]),
     False, False, ["Reload crio.service"]),
    (ConfigChange(from_config="a", to_config="b", file_paths=["/etc/sysctl.d/99.conf"]), True, True, ["Reboot"]),
    (ConfigChange(from_config="a", to_config="b", file_paths=["/etc/containers/policy.json"], kargs=True),
     True, True, ["Reboot"]),
    (ConfigChange(from_config="a", to_config="b"), False, False, ["None"]),
    (ConfigChange(from_config="a", to_config="b", missing=True), True, True, ["Reboot"]),
])
def test_plan_disruption(change: ConfigChange, drain: bool, reboot: bool, acts: list[str]) -> None:
    d = plan_disruption(change, DEFAULTS)
    assert (d.drain, d.reboot, [a.text() for a in d.actions]) == (drain, reboot, acts), d.why


def test_registries_conf_special_drains_unless_safe() -> None:
    base = '[[registry]]\nprefix = "r.example"\nlocation = "r.example"\n'
    safe = base + '[[registry.mirror]]\nlocation = "m.example"\npull-from-mirror = "digest-only"\n'
    unsafe = base.replace('location = "r.example"', 'location = "o.example"')
    assert registries_conf_change_is_safe(base, safe) and not registries_conf_change_is_safe(base, unsafe)
    change = ConfigChange(from_config="a", to_config="b", file_paths=["/etc/containers/registries.conf"],
                          registries_conf_old=base, registries_conf_new=safe)
    d = plan_disruption(change, DEFAULTS)
    assert (d.drain, d.reboot, [a.text() for a in d.actions]) == (False, False, ["Special crio"])
    d = plan_disruption(change.model_copy(update={"registries_conf_new": unsafe}), DEFAULTS)
    assert (d.drain, d.reboot) == (True, False)


def _node(name: str, cur: str) -> NodeInfo:
    return NodeInfo(name=name, ready=True, current_config=cur, desired_config=cur, state="Done",
                    labels={"topology.kubernetes.io/zone": "a"})


def test_the_plan_carries_the_decision_and_the_view_names_it() -> None:
    facts = DisruptionFacts(cluster_policies=DEFAULTS, changes=[
        ConfigChange(from_config="rendered-worker-a", to_config="rendered-worker-b", nodes=["w1", "w2"],
                     file_paths=["/etc/containers/registries.d/99.yaml"])])
    pool = PoolInfo(name="worker", target_config="rendered-worker-b", nodes=[_node("w1", "rendered-worker-a"),
                                                                            _node("w2", "rendered-worker-a")],
                    disruption=facts)
    plan = plan_rollout([pool], machine_config_nodes=True)
    [d] = plan.pools[0].disruption
    assert (d.nodes, d.drain, d.reboot, d.text()) == (["w1", "w2"], False, False, "Reload crio.service; no drain, no reboot")
    [line, note] = disruption_lines(plan)
    assert "rendered-worker-a -> rendered-worker-b (2 node(s): w1, w2): Reload crio.service; no drain, no reboot" in line.plain
    assert "MachineConfigNode" in note.plain
    assert plan_rollout([pool.model_copy(update={"disruption": None})]).pools[0].disruption == []

    st = RolloutStatus(plan=plan, nodes={
        "w1": NodeStatus(name="w1", pool="worker", phase=NodePhase.RUNNING, step=NodeStep.WAIT_REBOOT),
        "w2": NodeStatus(name="w2", pool="worker", phase=NodePhase.PENDING)})
    assert st.mcn_phases == {"w1": "UpdatePostActionComplete"}  # no reboot planned for w1
    assert RolloutStatus.model_validate_json(st.model_dump_json()).mcn_phases == {"w1": "UpdatePostActionComplete"}
    assert RolloutStatus(plan=plan.model_copy(update={"machine_config_nodes": False}), nodes=st.nodes).mcn_phases == {}


@pytest.mark.parametrize(("phase", "step", "reboot", "want"), [
    (NodePhase.RUNNING, NodeStep.WAIT_DRAIN_REQUEST, True, "UpdatePrepared"),
    (NodePhase.RUNNING, NodeStep.CORDON, True, "UpdateExecuted/Cordoned"),
    (NodePhase.BLOCKED, "drain", True, "UpdateExecuted/Drained"),
    (NodePhase.RUNNING, NodeStep.WAIT_REBOOT, True, "UpdateExecuted/RebootedNode"),
    (NodePhase.RUNNING, NodeStep.HAND_OFF_UNCORDON, True, "UpdateComplete/Uncordoned"),
    (NodePhase.RUNNING, NodeStep.WAIT_DONE, False, "Resumed"),
    (NodePhase.DONE, NodeStep.FINISHED, True, "Updated"),
    (NodePhase.DEGRADED, NodeStep.WAIT_REBOOT, True, "NodeDegraded"),
    (NodePhase.PENDING, None, True, None),
])
def test_mcn_phase_names(phase: NodePhase, step: str | None, reboot: bool, want: str | None) -> None:
    assert mcn_phase(phase, step, reboot) == want


def test_every_handshake_step_has_a_name() -> None:
    from workflows.machineconfig.mcnphase import _BY_STEP, WAIT_REBOOT

    assert set(_BY_STEP) | {WAIT_REBOOT, NodeStep.ROLLBACK, NodeStep.FINISHED} == {str(s) for s in NodeStep}


def test_a_node_with_irreconcilable_changes_gets_a_gate_before_it() -> None:
    pool = PoolInfo(name="worker", target_config="rendered-worker-b",
                    nodes=[_node("w1", "rendered-worker-a"), _node("w2", "rendered-worker-a"),
                           _node("w3", "rendered-worker-b")],
                    irreconcilable={"w2": ["spec.config.storage.disks"], "w3": ["spec.config.storage.disks"]})
    pp = plan_rollout([pool]).pools[0]
    assert [(g.id, g.before_node) for g in pp.gates] == [("irreconcilable/w2", "w2")]  # w3 is at target already
    assert pp.irreconcilable == {"w2": ["spec.config.storage.disks"]}
    lines = " ".join(t.plain for t in disruption_lines(plan_rollout([pool])))
    assert "irreconcilable worker/w2: spec.config.storage.disks" in lines and "gate irreconcilable/w2" in lines
    from workflows.kit.plan import ApprovalPolicy

    both = plan_rollout([pool], approval=ApprovalPolicy.NODE).pools[0]
    assert [g.id for g in both.gates] == ["node/w1", "node/w2", "irreconcilable/w2"]


def test_an_unpaused_machine_health_check_over_rebooting_nodes_warns_and_gates() -> None:
    from activities.machineconfig.models import HealthCheckFact
    from workflows.kit.plan import ApprovalPolicy

    mhc = HealthCheckFact(namespace="openshift-machine-api", name="workers", nodes=["w1", "w2"],
                          unhealthy_conditions=["Ready=False for 300s"], max_unhealthy="40%")
    nodes = [_node("w1", "rendered-worker-a"), _node("w2", "rendered-worker-a")]
    reboot = DisruptionFacts(cluster_policies=DEFAULTS, changes=[ConfigChange(
        from_config="rendered-worker-a", to_config="rendered-worker-b", nodes=["w1", "w2"], file_paths=["/etc/x.conf"])])
    pool = PoolInfo(name="worker", target_config="rendered-worker-b", nodes=nodes, health_checks=[mhc], disruption=reboot)
    pp = plan_rollout([pool]).pools[0]
    assert [(g.id, g.kind, g.before_node) for g in pp.gates] == [("machinehealthcheck/worker", "pool", "w1")]
    assert [h.name for h in pp.health_checks] == ["workers"]
    text = " ".join(t.plain for t in disruption_lines(plan_rollout([pool])))
    assert "machinehealthcheck openshift-machine-api/workers (not paused)" in text and "Ready=False for 300s" in text
    assert "gate machinehealthcheck/worker before the pool" in text
    # Without facts every node is taken to reboot; with --approve-each a person approves already.
    assert [g.id for g in plan_rollout([pool.model_copy(update={"disruption": None})]).pools[0].gates] == [
        "machinehealthcheck/worker"]
    assert [g.id for g in plan_rollout([pool], approval=ApprovalPolicy.POOL).pools[0].gates] == ["pool/worker"]
    # Paused, or nothing reboots: no warning, no gate.
    paused = pool.model_copy(update={"health_checks": [mhc.model_copy(update={"paused": True})]})
    assert plan_rollout([paused]).pools[0].gates == [] and plan_rollout([paused]).pools[0].health_checks == []
    quiet = reboot.model_copy(update={"changes": [reboot.changes[0].model_copy(
        update={"file_paths": ["/etc/containers/registries.d/a.yaml"]})]})
    assert plan_rollout([pool.model_copy(update={"disruption": quiet})]).pools[0].gates == []


def test_the_waits_say_what_the_plan_expects_of_the_daemon() -> None:
    from workflows.machineconfig.node import after_drain_text, first_request_text
    from workflows.machineconfig.models import DisruptionAction, NodeDisruption, NodeRolloutInput

    inp = NodeRolloutInput(node="w1", pool="worker", target="rendered-worker-b", parent_id="p", owner="o")
    assert first_request_text(inp) == "daemon to set desiredDrain=drain-rendered-worker-b, then cordon and drain"
    assert after_drain_text(inp) == "reboot"
    quiet = inp.model_copy(update={"disruption": NodeDisruption(
        from_config="a", actions=[DisruptionAction(type="Reload", service="crio.service")], drain=False, reboot=False)})
    assert first_request_text(quiet) == ("daemon to apply the files, Reload crio.service (no drain, no reboot planned), "
                                         "then set desiredDrain=uncordon-rendered-worker-b")
    drain_only = inp.model_copy(update={"disruption": NodeDisruption(
        from_config="a", actions=[DisruptionAction(type="Drain")], drain=True, reboot=False)})
    assert first_request_text(drain_only).startswith("daemon to set desiredDrain=drain-")
    assert after_drain_text(drain_only) == "run no action (no reboot planned)"


def test_the_status_view_names_machine_config_node_phases_and_the_disruption() -> None:
    from rich.console import Console

    from lockkeeper.output import status_view
    from workflows.machineconfig.models import RolloutPlan

    facts = DisruptionFacts(cluster_policies=DEFAULTS, changes=[ConfigChange(
        from_config="rendered-worker-a", to_config="rendered-worker-b", nodes=["w1"], file_paths=["/etc/sysctl.d/x.conf"])])
    pool = PoolInfo(name="worker", target_config="rendered-worker-b", nodes=[_node("w1", "rendered-worker-a")],
                    disruption=facts)
    nodes = {"w1": NodeStatus(name="w1", pool="worker", phase=NodePhase.RUNNING, step=NodeStep.WAIT_REBOOT)}

    def render(plan: RolloutPlan) -> str:
        console = Console(width=400, record=True)
        console.print(status_view(RolloutStatus(workflow_id="r", plan=plan, nodes=nodes)))
        return console.export_text()

    text = render(plan_rollout([pool], machine_config_nodes=True))
    assert "MachineConfigNode phase" in text and "UpdateExecuted/RebootedNode (wait-reboot)" in text
    assert "Reboot; drain, reboot (no policy for file /etc/sysctl.d/x.conf)" in text
    older = render(plan_rollout([pool.model_copy(update={"disruption": None})]))
    assert "MachineConfigNode phase" not in older and "RebootedNode" not in older and "wait-reboot" in older
