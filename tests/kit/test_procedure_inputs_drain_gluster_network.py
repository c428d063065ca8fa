"""Issue 36 for the standalone drain, the GlusterFS check and recovery and the network migration:
their inputs are the kit's :class:`ProcedureInput` (nested approvals, gate policy, call timeouts;
the drain's :class:`DrainPolicy`; the migration's ``MaxUnavailable``), their start flags are
aliases of those fields, and ``-f input.yaml`` / ``--set KEY=VALUE`` build the same input. The
start is stopped where it would contact Temporal: the test reads the validated input it would send."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from tests.support.startcapture import refused, start, write

from activities.host.models import ExecBackend
from activities.network_migration.models import NodeState
from workflows.drain.models import NodeDrainInput
from workflows.gluster.models import GlusterRecoveryInput
from workflows.kit.inputs import DrainPolicy, ProcedureInput
from workflows.kit.models import DrainDecision, GateTimeoutOutcome
from workflows.network_migration.models import NetworkMigrationInput
from workflows.network_migration.plan import reboot_batches
from workflows.shared.glusterfs.models import GlusterHealthParams

FLAT = ("requested_by", "four_eyes", "allowed_approvers", "gate_timeout_seconds", "gate_timeout_s", "activity_timeout_seconds",
        "activity_heartbeat_timeout_seconds", "decide_after_seconds", "drain_wait_seconds", "unknown_outcome_gate_seconds")


@pytest.mark.parametrize("model", [NodeDrainInput, GlusterRecoveryInput, NetworkMigrationInput])
def test_the_three_inputs_are_procedure_inputs_without_their_flat_copies(model: type) -> None:
    assert issubclass(model, ProcedureInput)
    for flat in FLAT:
        assert flat not in model.model_fields, (model, flat)
    with pytest.raises(ValidationError, match="requested_by"):  # a flat copy is refused, never ignored
        model.model_validate({"node": "n1", "requested_by": "alice"})


def test_the_procedure_defaults_of_before_are_kept_as_nested_defaults() -> None:
    drain = NodeDrainInput(node="n1")
    assert (drain.drain.wait_seconds, drain.drain.backoff_initial_seconds, drain.drain.backoff_max_seconds) == (30.0, 5.0, 60.0)
    assert drain.drain.decide_after_seconds == 600.0 and drain.calls.short_call_seconds == 10.0
    # a partial drain policy keeps the drain's own defaults for the rest
    assert NodeDrainInput(node="n1", drain={"wait_seconds": 2}).drain.backoff_max_seconds == 60.0
    assert GlusterRecoveryInput().calls.short_call_seconds == 30.0
    assert GlusterRecoveryInput(calls={"heartbeat_seconds": 5}).calls.short_call_seconds == 30.0
    assert NetworkMigrationInput().calls.short_call_seconds == 30.0


def test_the_standalone_drain_refuses_a_drain_timeout_it_would_not_apply() -> None:
    with pytest.raises(ValidationError, match="never gives a drain up"):
        NodeDrainInput(node="n1", drain={"timeout_seconds": 60, "on_timeout": "proceed"})
    with pytest.raises(ValidationError, match="delete-pod needs a person"):
        NodeDrainInput(node="n1", drain={"decision_timeout_outcome": "delete-pod"})


def test_the_gluster_health_wait_has_one_name_per_duration() -> None:
    with pytest.raises(ValidationError, match="gate_timeout_s"):  # the gate waits as the procedure's gates say
        GlusterHealthParams(gate_timeout_s=5)
    with pytest.raises(ValidationError, match="timeout_s"):
        GlusterHealthParams(timeout_s=5)


def test_drain_takes_its_node_from_set(sent: list[Any]) -> None:
    assert start("drain", "--set", "node=n3").exit_code == 0
    assert sent[0].node == "n3"


def test_drain_flags_are_aliases_of_the_nested_fields(sent: list[Any]) -> None:
    res = start("drain", "--node", "n1", "--cluster", "c1", "--four-eyes", "--allowed-approver", "bob", "--decide-after", "120",
                "--decision-timeout", "300", "--decision-timeout-outcome", "skip", "--reboot-command", "systemctl reboot",
                "--exec-via", "ssh", "--ssh-host", "10.0.0.7", "--ssh-port", "2222", "--uncordon-after")
    assert res.exit_code == 0, res.output
    (inp,) = sent
    assert isinstance(inp, NodeDrainInput) and inp.node == "n1" and inp.cluster == "c1" and inp.uncordon_after
    assert (inp.approvals.requested_by, inp.approvals.four_eyes, inp.approvals.allowed_approvers) == ("alice", True, ["bob"])
    assert inp.drain == DrainPolicy(wait_seconds=30.0, backoff_initial_seconds=5.0, backoff_max_seconds=60.0,
                                    decide_after_seconds=120.0, decision_timeout_seconds=300.0,
                                    decision_timeout_outcome=DrainDecision.SKIP)
    assert inp.reboot_command == ["systemctl", "reboot"]
    access = inp.command_access()
    assert (access.backend, access.host, access.port) == (ExecBackend.SSH, "10.0.0.7", 2222)


def test_drain_without_exec_via_runs_its_command_in_a_debug_pod(sent: list[Any]) -> None:
    res = start("drain", "--node", "n1", "--reboot-command", "systemctl reboot")
    assert res.exit_code == 0, res.output
    (inp,) = sent
    assert inp.reboot_access is None and inp.command_access().backend == ExecBackend.DEBUG_POD


def test_drain_from_a_file_with_flags_and_set_over_it(sent: list[Any], tmp_path: Path) -> None:
    f = write(tmp_path, {"node": "n2", "cluster": "c9", "uncordon_after": True, "drain": {"wait_seconds": 5},
                         "gates": {"timeout_seconds": 900, "timeout_outcome": "abort"}, "reboot_command": ["reboot"]})
    res = start("drain", "-f", f, "--decide-after", "60", "--set", "drain.backoff_max_seconds=10",
                "--set", "calls.short_call_seconds=20")
    assert res.exit_code == 0, res.output
    (inp,) = sent
    assert inp.node == "n2" and inp.cluster == "c9" and inp.uncordon_after and inp.reboot_command == ["reboot"]
    assert (inp.drain.wait_seconds, inp.drain.decide_after_seconds, inp.drain.backoff_max_seconds) == (5.0, 60.0, 10.0)
    assert inp.drain.backoff_initial_seconds == 5.0  # a partial drain keeps the drain's defaults
    assert inp.gates.timeout_seconds == 900 and inp.gates.timeout_outcome == GateTimeoutOutcome.ABORT
    assert inp.calls.short_call_seconds == 20 and inp.approvals.requested_by == "alice"


@pytest.mark.parametrize(("args", "words"), [
    (["--node", "n1", "--set", "timeout_seconds=5"], "timeout_seconds: Extra inputs are not permitted"),
    (["--node", "n1", "--set", "drain.wait_seconds=0"], "drain.wait_seconds: Input should be greater than 0"),
    (["--node", "n1", "--set", "drain.timeout_seconds=60"], "never gives a drain up"),
    (["--node", "n1", "--decision-timeout-outcome", "delete-pod"], "--decision-timeout-outcome"),
    (["--node", "n1", "--exec-via", "ssh"], "--ssh-host"),
    ([], "--node"),
    (["--set", "cluster=c1"], "--node"),
])
def test_drain_refuses_a_bad_value_before_starting(sent: list[Any], args: list[str], words: str) -> None:
    assert words in refused(start("drain", *args))
    assert sent == []


def test_gluster_flags_are_aliases_of_the_nested_fields(sent: list[Any]) -> None:
    res = start("gluster-recovery", "--check-only", "--dry-run", "--namespace", "gfs", "--gluster-cluster", "a", "--gluster-cluster", "b",
                "--quorum-rule", "per-replica-set", "--no-approve-pod-delete", "--max-restarts", "3", "--heal-timeout", "60",
                "--stall-after", "30", "--gate-timeout", "900", "--four-eyes", "--cluster", "c1")
    assert res.exit_code == 0, res.output
    (inp,) = sent
    assert isinstance(inp, GlusterRecoveryInput) and inp.mode == "check" and inp.dry_run
    assert inp.namespace == "gfs" and inp.clusters == ["a", "b"]
    assert inp.quorum_rule == "per-replica-set" and not inp.approve_pod_delete and inp.max_restarts_per_host == 3
    assert (inp.heal.timeout_seconds, inp.heal.stall_after_seconds) == (60.0, 30.0)
    assert inp.gates.timeout_seconds == 900 and inp.approvals.four_eyes and inp.approvals.requested_by == "alice"
    assert inp.cluster == "c1"


def test_gluster_from_a_file_with_set_over_it(sent: list[Any], tmp_path: Path) -> None:
    f = write(tmp_path, {"mode": "recover", "namespace": "gfs", "heal": {"interval_seconds": 2}, "allow_volume_start_force": True})
    res = start("gluster-recovery", "-f", f, "--set", "read_attempts=3", "--set", "gates.timeout_outcome=abort")
    assert res.exit_code == 0, res.output
    (inp,) = sent
    assert inp.mode == "recover" and inp.namespace == "gfs" and inp.allow_volume_start_force and inp.read_attempts == 3
    assert inp.heal.interval_seconds == 2 and inp.heal.timeout_seconds == 1200  # the file's, then the defaults
    assert inp.gates.timeout_outcome == GateTimeoutOutcome.ABORT and inp.approve_pod_delete  # the flag's default: the file's


def test_gluster_refuses_the_flat_names_of_before(sent: list[Any]) -> None:
    assert "gate_timeout_s: Extra inputs are not permitted" in refused(start("gluster-recovery", "--set", "gate_timeout_s=5"))
    assert "heal.timeout_s: Extra inputs" in refused(start("gluster-recovery", "--set", "heal.timeout_s=5"))
    assert sent == []


def test_network_migration_flags_are_aliases_of_the_nested_fields(sent: list[Any], tmp_path: Path) -> None:
    ssh_map = tmp_path / "map.json"
    ssh_map.write_text(json.dumps({"n1": "127.0.0.1:2201"}))
    res = start("network-migration", "--to", "OVNKubernetes", "--reboot-via", "ssh", "--max-unavailable", "25%",
                "--stall-after", "120", "--ssh-map", str(ssh_map), "--ssh-user", "root", "--allowed-approver", "bob")
    assert res.exit_code == 0, res.output
    (inp,) = sent
    assert isinstance(inp, NetworkMigrationInput) and inp.reboot_via == "ssh" and inp.max_unavailable == "25%"
    assert inp.stall_seconds == 120 and inp.ssh_hosts == {"n1": "127.0.0.1:2201"} and inp.ssh_user == "root"
    assert inp.approvals.allowed_approvers == ["bob"] and inp.approvals.requested_by == "alice"


def test_network_migration_from_a_file_with_set_over_it(sent: list[Any], tmp_path: Path) -> None:
    f = write(tmp_path, {"to": "OVNKubernetes", "max_unavailable": 2, "gates": {"timeout_seconds": 600}})
    res = start("network-migration", "-f", f, "--set", "gates.timeout_outcome=abort", "--set", "poll_seconds=3")
    assert res.exit_code == 0, res.output
    (inp,) = sent
    assert inp.max_unavailable == 2 and inp.poll_seconds == 3
    assert inp.gates.timeout_seconds == 600 and inp.gates.timeout_outcome == GateTimeoutOutcome.ABORT


@pytest.mark.parametrize(("args", "words"), [
    (["--max-unavailable", "0"], "--max-unavailable"),
    (["--max-unavailable", "150%"], "--max-unavailable"),
    (["--set", "max_unavailable=half"], "invalid maxUnavailable 'half'"),
    (["--set", "gate_timeout_seconds=60"], "gate_timeout_seconds: Extra inputs are not permitted"),
])
def test_network_migration_refuses_a_bad_value_before_starting(sent: list[Any], args: list[str], words: str) -> None:
    assert words in refused(start("network-migration", "--to", "OVNKubernetes", *args))
    assert sent == []


def test_a_percent_max_unavailable_batches_the_nodes_outside_the_masters() -> None:
    nodes = [NodeState(name=f"w{i}", pool="worker") for i in range(8)] + [NodeState(name="m0", pool="master", master=True)]
    assert [len(b) for b in reboot_batches(nodes, "25%")] == [2, 2, 2, 2, 1]  # 25% of 8 workers, then the master alone
    assert [len(b) for b in reboot_batches(nodes, "10%")] == [1] * 9  # rounded down, at least 1
