"""Runs that produce the stored histories of the drain and etcd workflows (test_replay.py replays
them, tests/support/replay.py stores them with ``LOCKKEEPER_WRITE_HISTORY=1``), with fake
activities registered by the real activity names. Each test runs the procedure through its gates
and checks the outcome.

The drain runs on the dev server (search attributes registered, so its history has the upsert);
the etcd procedures on the time-skipping server (gate timeouts are skipped, not waited), which
cannot register search attributes, so they run with ``search_attributes=False``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from tests.support.etcd_fakes import FakeEtcd, etcd_members
from tests.support.replay import record
from temporalio import activity
from temporalio.client import WorkflowHandle
from temporalio.worker import Worker
from tests.machineconfig.test_blocked_drain import DecisionFake
from tests.support.wf_fakes import preflight_activity, r2_block_report

from activities.host.models import CommandResult, RunCommandInput
from activities.cluster.models import NodeInfo, ReadNodeInput
from workflows import WORKFLOWS
from workflows.etcd.backup import EtcdBackupWorkflow
from workflows.etcd.models import EtcdBackupInput, EtcdBackupResult, EtcdRestoreInput, EtcdRestoreResult
from workflows.etcd.restore import EtcdQuorumRestoreWorkflow
from workflows.kit.models import ApproveInput, DecideInput, DrainDecision
from workflows.drain.models import NodeDrainInput, NodeDrainResult
from workflows.drain import NodeDrainWorkflow

DRAIN_ID = "drain-history"
BACKUP_ID = "etcd-backup-history"
RESTORE_ID = "etcd-restore-history"
RESTORE_TIMEOUT_ID = "etcd-restore-timeout-history"


async def poll_status(handle: WorkflowHandle, pred: Callable[[dict[str, Any]], bool], timeout: float = 30) -> dict[str, Any]:
    """Poll the ``status`` query (as JSON-ish dict, whatever the procedure's model) until ``pred``."""
    loop = asyncio.get_running_loop()
    end, last = loop.time() + timeout, None
    while loop.time() < end:
        last = await handle.query("status", result_type=dict)
        if pred(last):
            return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"condition not reached; last status: {last}")


def gate_waiting(gate_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda s: any(g["id"] == gate_id and g["state"] == "waiting" for g in s.get("gates", []))


class RebootFake(DecisionFake):
    """DecisionFake plus ``run_node_command``: the command makes the node NotReady for
    ``not_ready_reads`` reads of ``read_node``."""

    def __init__(self, *a: Any, not_ready_reads: int = 1, session_lost: bool = False, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.not_ready_reads = not_ready_reads
        self.session_lost = session_lost  # the command's session goes down with the host: no exit status
        self.exit_code = 0  # the command's exit status when its session stays up
        self.rebooted = 0
        self.failing_checks: dict[str, str] = {}  # precondition kind or subject -> why it fails

    def activities(self):
        fake = self

        @activity.defn(name="run_node_command")
        async def run_node_command(inp: RunCommandInput) -> CommandResult:
            fake.calls.append(("run_node_command", inp))
            fake.rebooted += 1
            return CommandResult(argv=inp.argv, exit_code=None if fake.session_lost else fake.exit_code, stdout="rebooting")

        @activity.defn(name="read_node")
        async def read_node(inp: ReadNodeInput) -> NodeInfo:
            fake.calls.append(("read_node", inp))
            node = fake.nodes[inp.node].model_copy(update={"boot_id": f"boot-{fake.rebooted}"})
            if fake.rebooted and fake.not_ready_reads > 0:
                fake.not_ready_reads -= 1
                node.ready = False
            return node

        base = [a for a in super().activities() if a.__name__ != "read_node"]  # replaced by the one above
        self.preflight = preflight_activity(self.failing_checks)  # the reboot command's program on the host
        return [*base, read_node, run_node_command, self.preflight]


async def test_record_drain_blocked_decided_rebooted_uncordoned(temporal_client, task_queue):
    """Cordon, a blocked drain, the decision gate (four-eyes delete-pod by bob), the reboot
    command, NotReady then Ready, uncordon; search attributes upserted."""
    fake = RebootFake({"worker": 1})
    fake.drain_blocked["worker-0"] = r2_block_report("worker-0")
    async with Worker(temporal_client, task_queue=task_queue, workflows=WORKFLOWS, activities=fake.activities()):
        handle = await temporal_client.start_workflow(
            NodeDrainWorkflow.run,
            NodeDrainInput(node="worker-0", cluster="c1", approvals={"requested_by": "alice", "four_eyes": True}, uncordon_after=True,
                           reboot_command=["systemctl", "reboot"],
                           drain={"decide_after_seconds": 1, "wait_seconds": 0.5, "backoff_initial_seconds": 0.5,
                                  "backoff_max_seconds": 1}),
            id=DRAIN_ID, task_queue=task_queue, result_type=NodeDrainResult,
        )
        await poll_status(handle, lambda s: (g := s["node"].get("decision_gate")) is not None and g["state"] == "waiting")
        await handle.execute_update(NodeDrainWorkflow.decide, DecideInput(node="worker-0", decision=DrainDecision.DELETE_POD, identity="bob"))
        result = await handle.result()
        await record(handle, "NodeDrainWorkflow.blocked-decided")
    assert result.outcome == "completed" and result.drained and result.uncordoned
    assert [r.action for r in result.gate_history] == ["opened", "decided"]
    assert fake.rebooted == 1 and fake.not_ready_reads == 0
    assert not fake.nodes["worker-0"].unschedulable


async def test_record_drain_reboot_session_lost_judged_by_boot(temporal_client, task_queue):
    """The reboot command's session goes down with the host (no exit status): the drain reads
    the bootID before, then waits for another bootID and Ready before it uncordons."""
    fake = RebootFake({"worker": 1}, session_lost=True)
    async with Worker(temporal_client, task_queue=task_queue, workflows=WORKFLOWS, activities=fake.activities()):
        handle = await temporal_client.start_workflow(
            NodeDrainWorkflow.run,
            NodeDrainInput(node="worker-0", cluster="c1", approvals={"requested_by": "alice"}, uncordon_after=True,
                           reboot_command=["systemctl", "reboot"], drain={"wait_seconds": 0.5}),
            id=DRAIN_ID, task_queue=task_queue, result_type=NodeDrainResult,
        )
        result = await handle.result()
        await record(handle, "NodeDrainWorkflow.session-lost")
    assert result.outcome == "completed" and result.uncordoned, result.message
    assert "rebooted (bootID boot-0 -> boot-1)" in result.message
    assert fake.rebooted == 1 and fake.not_ready_reads == 0
    assert [p.kind for c in fake.preflight.calls for p in c.preconditions] == ["host-executable"]
    names = [c[0] for c in fake.calls if c[0] in ("read_node", "run_node_command")]
    assert names[names.index("run_node_command") - 1] == "read_node"  # the bootID read just before the command


async def test_record_etcd_backup_names_failed_member(time_skipping_env, wf_task_queue):
    """Every member snapshotted concurrently; etcd-2 fails both attempts and is named."""
    env, members = time_skipping_env, etcd_members(3)
    fake = FakeEtcd(members)
    fake.backup_fails.add("etcd-2")
    async with Worker(env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=[*fake.activities(), preflight_activity()]):
        handle = await env.client.start_workflow(
            EtcdBackupWorkflow.run, EtcdBackupInput(members=members, attempts=2, search_attributes=False), id=BACKUP_ID,
            task_queue=wf_task_queue, result_type=EtcdBackupResult,
        )
        result = await handle.result()
        await record(handle, "EtcdBackupWorkflow.failed-member")
    assert not result.ok and list(result.failed) == ["etcd-2"] and "etcd-2" in result.message
    assert sorted(s.member for s in result.snapshots) == ["etcd-0", "etcd-1"]
    assert len([c for c in fake.called("etcd_snapshot_save") if c.member.name == "etcd-2"]) == 2


async def test_record_etcd_restore_force_new_cluster_approved(time_skipping_env, wf_task_queue):
    """force-new-cluster on etcd-0; each gate (stop-members, move-data/etcd-1, move-data/etcd-2)
    approved by bob under four-eyes (alice asked); verified."""
    env, members = time_skipping_env, etcd_members(3)
    fake = FakeEtcd(members)
    async with Worker(env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=[*fake.activities(), preflight_activity()]):
        handle = await env.client.start_workflow(
            EtcdQuorumRestoreWorkflow.run,
            EtcdRestoreInput(members=members, approvals={"requested_by": "alice", "four_eyes": True}, search_attributes=False),
            id=RESTORE_ID, task_queue=wf_task_queue, result_type=EtcdRestoreResult,
        )
        for gate in ("stop-members", "move-data/etcd-1", "move-data/etcd-2"):
            await poll_status(handle, gate_waiting(gate))
            await handle.execute_update(EtcdQuorumRestoreWorkflow.approve, ApproveInput(gate_id=gate, identity="bob"))
        result = await handle.result()
        await record(handle, "EtcdQuorumRestoreWorkflow.force-new-cluster")
    assert result.outcome == "completed", result.message
    assert [(r.gate_id, r.action) for r in result.gate_history if r.action != "opened"] == [
        ("stop-members", "approved"), ("move-data/etcd-1", "approved"), ("move-data/etcd-2", "approved")]
    assert all(m.state == "joined" for m in result.members.values())
    assert len(fake.called("etcd_member_add")) == 2


async def test_record_etcd_restore_gate_timeout(time_skipping_env, wf_task_queue):
    """A gate nobody answers within gates.timeout_seconds: the restore stops before stopping
    anything (today's behaviour: a timeout rejects), recorded as a timeout."""
    env, members = time_skipping_env, etcd_members(3)
    fake = FakeEtcd(members)
    async with Worker(env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=[*fake.activities(), preflight_activity()]):
        handle = await env.client.start_workflow(
            EtcdQuorumRestoreWorkflow.run,
            EtcdRestoreInput(members=members, approvals={"requested_by": "alice"}, gates={"timeout_seconds": 300}, search_attributes=False),
            id=RESTORE_TIMEOUT_ID, task_queue=wf_task_queue, result_type=EtcdRestoreResult,
        )
        result = await handle.result()
        await record(handle, "EtcdQuorumRestoreWorkflow.gate-timeout")
    assert result.outcome == "rejected" and "timed out" in result.message
    assert [r.action for r in result.gate_history] == ["opened", "timeout"]
    assert not fake.called("etcd_stop_member")


async def test_a_drain_whose_reboot_command_fails_names_the_node_it_leaves_cordoned(temporal_client, task_queue):
    """The reboot command exits 1 after the drain: the run fails (RebootCommandFailed) and the
    run template names what stays changed, the node this run cordoned, with its undo command,
    in the failure and in ``status``; the lease is released."""
    from temporalio.client import WorkflowFailureError

    fake = RebootFake({"worker": 1})
    fake.exit_code = 1
    async with Worker(temporal_client, task_queue=task_queue, workflows=WORKFLOWS, activities=fake.activities()):
        handle = await temporal_client.start_workflow(
            NodeDrainWorkflow.run,
            NodeDrainInput(node="worker-0", cluster="c1", approvals={"requested_by": "alice"}, uncordon_after=True,
                           reboot_command=["systemctl", "reboot"], drain={"wait_seconds": 0.5}),
            id=f"{DRAIN_ID}-fails", task_queue=task_queue, result_type=NodeDrainResult,
        )
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
        st = await handle.query("status", result_type=dict)
    cause = info.value.cause
    assert getattr(cause, "type", None) == "RebootCommandFailed", cause
    assert "node left cordoned; left changed: Node worker-0: cordoned by this run" in str(cause), str(cause)
    assert "kubectl uncordon worker-0" in str(cause)
    assert st["phase"] == "failed" and [i["target"] for i in st["left_changed"]] == ["Node worker-0"]
    assert st["node"]["phase"] == "failed" and not fake.called("uncordon_node")


async def test_drain_whose_reboot_program_is_missing_is_refused_before_the_cordon(temporal_client, task_queue):
    """Issue 39 case 1 for the drain: the reboot command's program is not on the host, so the run
    ends ``refused`` with the problem line, and nothing is written (no cordon, no eviction, no
    command) and its status phase is ``aborted``; a dry run of the same input says so too, takes no lease and writes nothing."""
    fake = RebootFake({"worker": 1})
    fake.failing_checks["host-executable"] = "not found on the host's PATH (command -v exited 1)"
    inp = NodeDrainInput(node="worker-0", cluster="c1", approvals={"requested_by": "alice"}, reboot_command=["ansible-playbook", "x.yml"])
    async with Worker(temporal_client, task_queue=task_queue, workflows=WORKFLOWS, activities=fake.activities()):
        result = await temporal_client.execute_workflow(NodeDrainWorkflow.run, inp, id=f"{DRAIN_ID}-refused",
                                                        task_queue=task_queue, result_type=NodeDrainResult)
        refused_status = await temporal_client.get_workflow_handle(f"{DRAIN_ID}-refused").query("status", result_type=dict)
        dry = await temporal_client.execute_workflow(
            NodeDrainWorkflow.run, inp.model_copy(update={"dry_run": True, "node": "nosuch"}), id=f"{DRAIN_ID}-dry",
            task_queue=task_queue, result_type=NodeDrainResult)
    assert result.outcome == "refused", result.message
    assert result.problems and "ansible-playbook on worker-0" in result.problems[0]
    # A refusal ends the drain aborted (kit_outcome_phase), not failed: nothing was written.
    assert refused_status["phase"] == "aborted" and refused_status["preflight"] == "refused", refused_status["phase"]
    assert [r.state for r in result.preconditions] == ["failed"]
    assert not fake.called("cordon_node") and not fake.called("drain_node") and fake.rebooted == 0
    assert not fake.nodes["worker-0"].unschedulable
    assert dry.outcome == "dry-run" and [r.precondition.kind for r in dry.preconditions] == ["names-exist", "host-executable"]
