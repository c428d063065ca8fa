"""NodeSelectorMigrationWorkflow's decisions on a time-skipping server with the cluster replaced by
an in-memory world under the real activity names: a rollout that fails opens its gate and a
rejection reverts that object from its record and removes no label; a label somebody changed
since the migration is refused at revert while the rest is restored."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from tests.support.beats import all_within, heartbeat_timeouts
from temporalio import activity
from temporalio.client import WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from tests.support.replay import record
from tests.support.wf_fakes import preflight_activity
from activities.cluster.models import (
    FieldRecord,
    FieldValue,
    ObjectRef,
    PatchObjectInput,
    PatchObjectResult,
    RestoreFieldsInput,
    RestoreFieldsResult,
    SnapshotFieldsInput,
)
from activities.node_selectors.models import PodState, PodStates, RolloutInput, RolloutState, ScanInput, ScanResult, SelectorNode, Workload
from workflows.kit.models import ApproveInput, GateState, RejectInput
from workflows.node_selectors import NodeSelectorMigrationWorkflow
from workflows.node_selectors.models import NodeSelectorMigrationInput, NodeSelectorMigrationResult, NodeSelectorMigrationStatus

pytestmark = pytest.mark.timeout(180)

PATH = "/spec/template/spec/nodeSelector"
REF = ObjectRef(kind="DeploymentConfig", name="docker-registry", namespace="default")


def _get(obj: dict[str, Any], path: str) -> tuple[bool, Any]:
    cur: Any = obj
    for part in path.strip("/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(cur, dict) or part not in cur:
            return False, None
        cur = cur[part]
    return True, cur


def _set(obj: dict[str, Any], path: str, value: Any, remove: bool = False) -> None:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in path.strip("/").split("/")]
    cur = obj
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    if remove:
        cur.pop(parts[-1], None)
    else:
        cur[parts[-1]] = value


class World:
    """One DC on region=infra, two infra nodes carrying the new label; ``rollout_fails``."""

    def __init__(self, rollout_fails: bool = False, failing: dict[str, str] | None = None) -> None:
        self.objects: dict[str, dict[str, Any]] = {
            "DeploymentConfig/docker-registry": {"spec": {"template": {"spec": {"nodeSelector": {"region": "infra"}}}}},
            "Node/n1": {"metadata": {"labels": {"region": "infra", "zone": "default", "node-role.kubernetes.io/infra": "true"}}},
            "Node/n2": {"metadata": {"labels": {"region": "infra", "zone": "default", "node-role.kubernetes.io/infra": "true"}}},
        }
        self.rollout_fails = rollout_fails
        self.version = 1
        self.preflight = preflight_activity(failing)  # the preconditions' check: ok but for ``failing``

    def obj(self, ref: ObjectRef) -> dict[str, Any]:
        return self.objects[f"{ref.kind}/{ref.name}"]

    def activities(self) -> list[Any]:
        @activity.defn(name="scan_node_selectors")
        async def scan(inp: ScanInput) -> ScanResult:
            sel = self.obj(REF)["spec"]["template"]["spec"]["nodeSelector"]
            nodes = [SelectorNode(name=k.split("/")[1], labels=dict(v["metadata"]["labels"])) for k, v in self.objects.items() if k.startswith("Node/")]
            return ScanResult(workloads=[Workload(ref=REF, node_selector=dict(sel), replicas=1, running_nodes=["n1"])], nodes=nodes)

        @activity.defn(name="read_rollout")
        async def read_rollout(inp: RolloutInput) -> RolloutState:
            if inp.after_version is None:
                return RolloutState(latest_version=self.version)
            if self.rollout_fails:
                return RolloutState(failed=True, detail="replication controller docker-registry-2 has failed progressing",
                                    latest_version=self.version + 1)
            return RolloutState(done=True, detail="NewReplicationControllerAvailable", latest_version=self.version + 1)

        @activity.defn(name="read_pod_states")
        async def read_pod_states(inp: ScanInput) -> PodStates:
            return PodStates(pods=[PodState(key="default/docker-registry-1-x", phase="Running")])

        @activity.defn(name="snapshot_fields")
        async def snapshot_fields(inp: SnapshotFieldsInput) -> FieldRecord:
            o = self.obj(inp.ref)
            return FieldRecord(ref=inp.ref, resource_version="1", fields=[FieldValue(path=p, present=_get(o, p)[0], value=_get(o, p)[1])
                                                                         for p in inp.paths])

        @activity.defn(name="patch_object")
        async def patch_object(inp: PatchObjectInput) -> PatchObjectResult:
            o = self.obj(inp.ref)
            for op in inp.ops:
                _set(o, op["path"], op.get("value"), remove=op["op"] == "remove")
            return PatchObjectResult(changed=True)

        @activity.defn(name="restore_fields")
        async def restore_fields(inp: RestoreFieldsInput) -> RestoreFieldsResult:
            o = self.obj(inp.record.ref)
            for path, want in inp.expected.items():
                if _get(o, path)[1] != want:
                    raise ApplicationError(f"{path} changed since", type="RecordChanged", non_retryable=True)
            for f in inp.record.fields:  # a removed label must still be absent
                if f.path not in inp.expected and _get(o, f.path)[0]:
                    raise ApplicationError(f"{f.path} was set again since", type="RecordChanged", non_retryable=True)
            for f in inp.record.fields:
                _set(o, f.path, f.value, remove=not f.present)
            return RestoreFieldsResult(restored=[f.path for f in inp.record.fields])

        return [scan, read_rollout, read_pod_states, snapshot_fields, patch_object, restore_fields, self.preflight]


def inp(**kw: Any) -> NodeSelectorMigrationInput:
    return NodeSelectorMigrationInput(mapping={"region=infra": {"node-role.kubernetes.io/infra": "true"}}, search_attributes=False,
                                      approve_plan=False, approve_label_removal=False, poll_seconds=1, rollout_timeout_seconds=60,
                                      pods_timeout_seconds=30, **kw)


async def start(env: Any, world: World, i: NodeSelectorMigrationInput) -> tuple[Worker, WorkflowHandle]:
    tq = f"ns-{uuid.uuid4().hex[:8]}"
    worker = Worker(env.client, task_queue=tq, workflows=[NodeSelectorMigrationWorkflow], activities=world.activities())
    handle = await env.client.start_workflow(NodeSelectorMigrationWorkflow.run, i, id=f"ns-{uuid.uuid4().hex[:6]}", task_queue=tq)
    return worker, handle


async def gate_waiting(handle: WorkflowHandle, gate_id: str) -> NodeSelectorMigrationStatus:
    """The status once gate ``gate_id`` waits (AssertionError after about 20 s)."""
    for _ in range(400):
        st: NodeSelectorMigrationStatus = await handle.query(NodeSelectorMigrationWorkflow.status)
        if any(g.id == gate_id and g.state == GateState.WAITING for g in st.gates):
            return st
        await asyncio.sleep(0.05)
    raise AssertionError(f"gate {gate_id} never waited: {st.gates}")


async def test_failed_rollout_gate_reject_reverts_that_object_and_keeps_labels(time_skipping_env: Any) -> None:
    world = World(rollout_fails=True)
    worker, handle = await start(time_skipping_env, world, inp(revert_window_seconds=0))
    async with worker:
        gate_id = None
        for _ in range(400):
            st: NodeSelectorMigrationStatus = await handle.query(NodeSelectorMigrationWorkflow.status)
            gate_id = next((g.id for g in st.gates if g.state == GateState.WAITING), None)
            if gate_id:
                break
            await asyncio.sleep(0.05)
        assert gate_id == "rollout/DeploymentConfig default/docker-registry"
        assert world.obj(REF)["spec"]["template"]["spec"]["nodeSelector"] == {"node-role.kubernetes.io/infra": "true"}
        await handle.execute_update(NodeSelectorMigrationWorkflow.reject, RejectInput(gate_id=gate_id, identity="ops"))
        result: NodeSelectorMigrationResult = await handle.result()
    assert result.outcome == "aborted"
    assert world.obj(REF)["spec"]["template"]["spec"]["nodeSelector"] == {"region": "infra"}  # reverted from its record
    assert world.objects["Node/n1"]["metadata"]["labels"]["region"] == "infra" and result.labels_removed == []


async def test_revert_restores_and_refuses_a_changed_node(time_skipping_env: Any) -> None:
    world = World()
    worker, handle = await start(time_skipping_env, world, inp(revert_window_seconds=3600))
    async with worker:
        for _ in range(400):
            st = await handle.query(NodeSelectorMigrationWorkflow.status)
            if st.step == "revert-window":
                break
            await asyncio.sleep(0.05)
        assert st.labels_removed == ["n1", "n2"]
        # the open window is visible: what it waits for, until when, and the command that reverts
        assert st.waiting_for is not None and "revert window" in st.waiting_for, st
        assert f"lockkeeper revert {handle.id} -m REASON" in st.waiting_for and st.deadline is not None
        assert "region" not in world.objects["Node/n1"]["metadata"]["labels"]
        world.objects["Node/n2"]["metadata"]["labels"]["region"] = "edge"  # somebody relabelled n2 since
        await handle.execute_update("revert", {"identity": "ops", "reason": "test"})
        result: NodeSelectorMigrationResult = await handle.result()
        await record(handle, "NodeSelectorMigrationWorkflow.reverted")
    assert result.outcome == "reverted"
    assert world.objects["Node/n1"]["metadata"]["labels"]["region"] == "infra"
    assert world.objects["Node/n2"]["metadata"]["labels"]["region"] == "edge"  # refused, not overwritten
    assert len(result.revert_refused) == 1 and result.revert_refused[0].startswith("labels/n2")
    # the kit's revert (issue 39): restored only what reads back at its originals, the refused one named
    assert result.message.startswith("reverted, NOT fully restored: test (by ops)") and "labels/n2" in result.message, result.message
    assert result.reverted == ["labels/n1", "selector/DeploymentConfig default/docker-registry"], result.reverted
    assert len(result.restored) == 2 and [e.name for e in result.open_records] == ["labels/n2"], result
    assert world.obj(REF)["spec"]["template"]["spec"]["nodeSelector"] == {"region": "infra"}
    # Both reads list the whole cluster and beat while they do: a dead worker is seen in 10 s,
    # not at their 70 s bound.
    beats = await heartbeat_timeouts(handle, {"scan_node_selectors", "read_pod_states"})
    assert all_within(beats, 10), beats


async def test_without_masters_the_dry_run_and_the_plan_gate_say_master_config_is_not_checked(time_skipping_env: Any) -> None:
    """Issue 39 case 2: with no ``--master`` nobody reads master-config.yaml's
    ``defaultNodeSelector``. The dry run and the plan gate say so, with what it risks and how to
    check it, not only a line at the bottom of ``status``."""
    worker, handle = await start(time_skipping_env, World(), inp(dry_run=True))
    async with worker:
        result: NodeSelectorMigrationResult = await handle.result()
    assert result.outcome == "dry-run"
    assert "NOT CHECKED: master-config.yaml projectConfig.defaultNodeSelector" in result.message, result.message
    assert "region or zone" in result.message and "--master" in result.message
    # Each label it removes is a declared precondition, checked before any write, with what the
    # mapping rewrites itself as covered; the dry run's result carries every check.
    checks = [r.precondition for r in result.preconditions]
    assert [(c.kind, c.label, c.covered, c.masters) for c in checks] == [  # type: ignore[union-attr]
        ("label-unreferenced", "region", ["region=infra", "zone"], []), ("label-unreferenced", "zone", ["region=infra", "zone"], [])]
    world = World()
    worker, handle = await start(time_skipping_env, world, inp(revert_window_seconds=0).model_copy(update={"approve_plan": True}))
    async with worker:
        gate = None
        for _ in range(400):
            st: NodeSelectorMigrationStatus = await handle.query(NodeSelectorMigrationWorkflow.status)
            gate = next((g for g in st.gates if g.state == GateState.WAITING), None)
            if gate:
                break
            await asyncio.sleep(0.05)
        assert gate is not None and gate.id == "plan" and "NOT CHECKED: master-config.yaml" in (gate.comment or ""), gate
        await handle.execute_update(NodeSelectorMigrationWorkflow.reject, RejectInput(gate_id="plan", identity="ops"))
        await handle.result()
    assert world.obj(REF)["spec"]["template"]["spec"]["nodeSelector"] == {"region": "infra"}, "rejected: nothing changed"


async def test_an_abort_restores_the_selectors_it_moved_and_reads_them_back(time_skipping_env: Any) -> None:
    """Issue 39: aborted at the label-removal gate (the DC's nodeSelector already moved), the run
    puts the selector back from its record, reads it back, ends ``aborted, restored`` and does
    not stay open for a revert (nothing is left to revert)."""
    from workflows.kit.models import ControlInput

    world = World()
    i = inp(revert_window_seconds=3600).model_copy(update={"approve_label_removal": True})
    worker, handle = await start(time_skipping_env, world, i)
    async with worker:
        await gate_waiting(handle, "remove-labels")
        assert world.obj(REF)["spec"]["template"]["spec"]["nodeSelector"] == {"node-role.kubernetes.io/infra": "true"}
        await handle.execute_update(NodeSelectorMigrationWorkflow.abort, ControlInput(identity="ops", reason="change window over"))
        result: NodeSelectorMigrationResult = await handle.result()
    assert result.outcome == "aborted" and result.message.startswith("aborted, restored and read back: change window over"), result.message
    assert world.obj(REF)["spec"]["template"]["spec"]["nodeSelector"] == {"region": "infra"}
    assert world.objects["Node/n1"]["metadata"]["labels"]["region"] == "infra" and result.labels_removed == []
    assert result.reverted == ["selector/DeploymentConfig default/docker-registry"]


async def test_a_label_still_selected_refuses_the_run_before_any_patch(time_skipping_env: Any) -> None:
    """Issue 39: a label the migration removes is still selected by something its mapping does
    not rewrite (here the check says so for ``region``): the dry run reports the failed check
    (the CLI then exits 2), and a real start is refused with that line before any patch."""
    detail = "still selected by Namespace payments (openshift.io/node-selector region=primary); values no mapping covers: region=primary"
    world = World(failing={"node label region": detail})
    worker, handle = await start(time_skipping_env, world, inp(dry_run=True))
    async with worker:
        result: NodeSelectorMigrationResult = await handle.result()
    assert result.outcome == "dry-run"
    assert [(r.precondition.subject(), r.state) for r in result.preconditions] == [("node label region", "failed"),
                                                                                  ("node label zone", "ok")]
    worker, handle = await start(time_skipping_env, world, inp(revert_window_seconds=0))
    async with worker:
        result = await handle.result()
    assert result.outcome == "refused" and result.problems == [f"node label region: {detail} (needed: removed from the nodes at "
                                                               "the end; a selector left on it can no longer schedule)"], result
    assert world.obj(REF)["spec"]["template"]["spec"]["nodeSelector"] == {"region": "infra"}, "nothing patched"
    assert world.objects["Node/n1"]["metadata"]["labels"]["region"] == "infra"


async def test_a_revert_during_the_run_stops_it_and_restores_what_the_records_hold(time_skipping_env: Any) -> None:
    """The kit's ``revert`` (not one of the migration's own): refused while nothing is changed
    (at the plan gate), accepted once a selector moved; the run stops at the label-removal gate,
    restores the selector from its record, reads it back and ends ``reverted``, no label removed."""
    from temporalio.client import WorkflowUpdateFailedError

    from workflows.kit.models import RevertInput

    world = World()
    i = inp(revert_window_seconds=3600).model_copy(update={"approve_plan": True, "approve_label_removal": True})
    worker, handle = await start(time_skipping_env, world, i)
    async with worker:
        await gate_waiting(handle, "plan")
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(NodeSelectorMigrationWorkflow.revert, RevertInput(identity="ops", reason="too early"))
        assert "nothing has been changed yet" in str(refused.value.cause), refused.value.cause
        await handle.execute_update(NodeSelectorMigrationWorkflow.approve, ApproveInput(gate_id="plan", identity="ops"))
        await gate_waiting(handle, "remove-labels")
        assert world.obj(REF)["spec"]["template"]["spec"]["nodeSelector"] == {"node-role.kubernetes.io/infra": "true"}
        answer = await handle.execute_update(NodeSelectorMigrationWorkflow.revert, RevertInput(identity="ops", reason="wrong map"))
        assert answer.mode == "in-run", answer
        result: NodeSelectorMigrationResult = await handle.result()
    assert result.outcome == "reverted" and result.message.startswith("reverted, restored and read back: wrong map (by ops)"), result
    assert world.obj(REF)["spec"]["template"]["spec"]["nodeSelector"] == {"region": "infra"}
    assert world.objects["Node/n1"]["metadata"]["labels"]["region"] == "infra" and result.labels_removed == []
    assert result.reverted == ["selector/DeploymentConfig default/docker-registry"] and result.open_records == []
    gate = next(g for g in result.gate_history if g.gate_id == "remove-labels" and g.action == "cancelled")
    assert "revert requested by ops" in (gate.comment or ""), result.gate_history


async def test_revert_full_of_a_completed_migration_restores_its_records_read_back(time_skipping_env: Any) -> None:
    """A migration that completed after its revert window keeps its records in ``open_records``:
    ``revert ID --full`` starts the kit's record restore over them (RevertRecordsWorkflow, what
    lockkeeper/cli/revert_full.py starts), which puts the labels and the selector back and reads
    each back; a label somebody set again since is refused, not overwritten (README note 19)."""
    from workflows.kit.reverse import RevertRecordsInput, RevertRecordsResult, RevertRecordsWorkflow

    env, world = time_skipping_env, World()
    tq = f"ns-{uuid.uuid4().hex[:8]}"
    async with Worker(env.client, task_queue=tq, workflows=[NodeSelectorMigrationWorkflow, RevertRecordsWorkflow],
                      activities=world.activities()):
        handle = await env.client.start_workflow(NodeSelectorMigrationWorkflow.run, inp(revert_window_seconds=0),
                                                 id=f"ns-{uuid.uuid4().hex[:6]}", task_queue=tq)
        ended: NodeSelectorMigrationResult = await handle.result()
        assert ended.outcome == "completed" and ended.labels_removed == ["n1", "n2"], ended
        assert sorted(e.name for e in ended.open_records) == [
            "labels/n1", "labels/n2", "selector/DeploymentConfig default/docker-registry"], ended.open_records
        world.objects["Node/n2"]["metadata"]["labels"]["region"] = "edge"  # somebody labelled n2 again since
        rev = await env.client.start_workflow(
            RevertRecordsWorkflow.run,
            RevertRecordsInput(of_workflow=handle.id, records=ended.open_records, approve=False, search_attributes=False),
            id=f"revert-{handle.id}", task_queue=tq, result_type=RevertRecordsResult)
        result = await rev.result()
    assert world.obj(REF)["spec"]["template"]["spec"]["nodeSelector"] == {"region": "infra"}
    assert world.objects["Node/n1"]["metadata"]["labels"]["region"] == "infra"
    assert world.objects["Node/n2"]["metadata"]["labels"]["region"] == "edge"  # refused, not overwritten
    assert result.of_workflow == handle.id and len(result.restored) == 2, result
    assert "labels/n2" in result.message and [i.target for i in result.left_changed] == ["Node n2"], result
