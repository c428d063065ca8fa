"""NetworkMigrationWorkflow's decisions on a time-skipping server, against a small in-memory
cluster registered under the activity names (the runs against clustersim are in
tests/network_migration/test_network_migration_e2e.py)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.worker import Worker

from activities.cluster.models import (
    DeleteAllPodsInput,
    DeleteAllPodsResult,
    FieldRecord,
    FieldValue,
    ListPodsToDeleteInput,
    ListPodsToDeleteResult,
    PatchObjectInput,
    PatchObjectResult,
    RestoreFieldsInput,
    RestoreFieldsResult,
    SnapshotFieldsInput,
)
from activities.host.models import CommandResult, RunCommandInput
from activities.network_migration.models import (
    DeleteNamespaceInput,
    DeleteNamespaceResult,
    MigrationState,
    MigrationStateInput,
    NodeState,
    PoolsSettledInput,
    PoolsSettledResult,
    PoolState,
    RolloutState,
    pools_settled,
)
from tests.support.kit_fakes import preflight_activity
from workflows.kit.lease import LeaseWorkflow
from workflows.kit.models import ApproveInput, GateState
from workflows.network_migration import NetworkMigrationWorkflow
from workflows.network_migration.models import (
    NetworkMigrationInput,
    NetworkMigrationResult,
    NetworkMigrationStatus,
)

pytestmark = pytest.mark.timeout(120)

POOLS = {"master": ["m1", "m2", "m3"], "worker": ["w1", "w2"]}


class Cluster:
    """Pools roll one node per read once the migration field is set (unless ``controller_dead``);
    the switch flips status at once; a reboot command changes the node's boot id."""

    def __init__(self, *, controller_dead: bool = False, unsettle_after_pause: bool = False, roll_all: bool = False,
                 unreachable: str | None = None, rerender_on_removal: bool = False, reboots_hang: bool = False) -> None:
        self.roll_all = roll_all
        #: ``rerender_on_removal``: removing spec.migration renders each pool's previous config
        #: again also after the switch (the controller after a rollback), not only before it.
        self.rerender_on_removal = rerender_on_removal
        #: ``reboots_hang``: a reboot command leaves the boot id as it is (the node never comes back).
        self.reboots_hang = reboots_hang
        #: ``unreachable``: every node's reboot access fails its precondition with this detail.
        self.check_preconditions = preflight_activity({"reboot-access": unreachable} if unreachable else None)
        self.config_type = self.status_type = "OpenShiftSDN"
        self.migration: str | None = None
        self.paused = dict.fromkeys(POOLS, False)
        self.target = {p: f"rendered-{p}-old" for p in POOLS}
        self.current = {n: f"rendered-{p}-old" for p, ns in POOLS.items() for n in ns}
        self.boot = dict.fromkeys(self.current, 0)
        self.controller_dead = controller_dead
        self.unsettle_after_pause = unsettle_after_pause
        self.writes: list[str] = []
        self.switch_when_settled: list[bool] = []
        self.reboots: list[str] = []
        self.child_runs: list[dict[str, Any]] = []

    def state(self) -> MigrationState:
        pools = []
        for p, ns in POOLS.items():
            behind = [n for n in ns if self.current[n] != self.target[p]]
            pools.append(PoolState(name=p, paused=self.paused[p], updated=not behind, updating=bool(behind), target=self.target[p],
                                   machine_count=len(ns), updated_machine_count=len(ns) - len(behind), nodes=ns, nodes_behind=behind))
        nodes = [NodeState(name=n, pool=p, master=p == "master", current_config=self.current[n], desired_config=self.current[n],
                           mco_state="Done", ready=True, boot_id=f"boot-{n}-{self.boot[n]}") for p, ns in POOLS.items() for n in ns]
        ds = RolloutState(present=True, desired=5, updated=5, available=5, ready=5, complete=True)
        return MigrationState(config_type=self.config_type, status_type=self.status_type, migration=self.migration, sdn_config=True,
                              sdn_namespace=True, pools=pools, nodes=nodes, multus=ds, ovnkube=ds if self.status_type == "OVNKubernetes" else RolloutState())

    def roll_one(self) -> None:
        if self.controller_dead:
            return
        for p, ns in POOLS.items():
            if self.paused[p]:
                continue
            for n in ns:
                if self.current[n] != self.target[p]:
                    self.current[n] = self.target[p]
                    if not self.roll_all:
                        break

    @activity.defn(name="read_migration_state")
    async def read_migration_state(self, input: MigrationStateInput) -> MigrationState:
        self.roll_one()
        return self.state()

    @activity.defn(name="check_pools_settled")
    async def check_pools_settled(self, input: PoolsSettledInput) -> PoolsSettledResult:
        return pools_settled(self.state(), input.baseline, input.pools)

    def _get(self, kind: str, name: str, path: str) -> tuple[bool, Any]:
        if kind == "MachineConfigPool":
            return True, self.paused[name]
        if path == "/spec/migration":
            return self.migration is not None, {"networkType": self.migration} if self.migration else None
        if path == "/spec/networkType":
            return True, self.config_type
        return True, {"mode": "NetworkPolicy"}

    @activity.defn(name="snapshot_fields")
    async def snapshot_fields(self, input: SnapshotFieldsInput) -> FieldRecord:
        fields = []
        for p in input.paths:
            present, value = self._get(input.ref.kind, input.ref.name, p)
            fields.append(FieldValue(path=p, present=present, value=value))
        return FieldRecord(ref=input.ref, resource_version="1", fields=fields)

    def _set(self, kind: str, name: str, path: str, value: Any, remove: bool = False) -> None:
        self.writes.append(f"{kind}/{name}{path}={'-' if remove else value}")
        if kind == "MachineConfigPool":
            self.paused[name] = bool(value)
            if value and self.unsettle_after_pause and name == "worker":
                self.target["worker"] = "rendered-worker-newer"  # somebody added a MachineConfig
        elif path == "/spec/migration":
            self.migration = None if remove else value["networkType"]
            if self.migration == "OVNKubernetes":
                self.target = {p: f"rendered-{p}-ovn" for p in POOLS}
            elif self.migration is None and (not self.switch_when_settled or self.rerender_on_removal):  # removed before the switch: the previous render again
                self.target = {p: f"rendered-{p}-old" for p in POOLS}
        elif path == "/spec/networkType":
            self.switch_when_settled.append(pools_settled(self.state()).ok)
            self.config_type = self.status_type = value

    @activity.defn(name="patch_object")
    async def patch_object(self, input: PatchObjectInput) -> PatchObjectResult:
        for op in input.ops:
            self._set(input.ref.kind, input.ref.name, op["path"], op.get("value"), op["op"] == "remove")
        return PatchObjectResult(changed=True, resource_version="2")

    @activity.defn(name="restore_fields")
    async def restore_fields(self, input: RestoreFieldsInput) -> RestoreFieldsResult:
        for f in input.record.fields:
            self._set(input.record.ref.kind, input.record.ref.name, f.path, f.value, not f.present)
        return RestoreFieldsResult(restored=[f.path for f in input.record.fields])

    @activity.defn(name="run_node_command")
    async def run_node_command(self, input: RunCommandInput) -> CommandResult:
        node = input.access.node or ""
        self.reboots.append(node)
        if not self.reboots_hang:
            self.boot[node] += 1
        return CommandResult(argv=input.argv, exit_code=0)

    @activity.defn(name="delete_namespace")
    async def delete_namespace(self, input: DeleteNamespaceInput) -> DeleteNamespaceResult:
        self.writes.append(f"delete ns {input.name}")
        return DeleteNamespaceResult(deleted=True)

    @activity.defn(name="list_pods_to_delete")
    async def list_pods_to_delete(self, input: ListPodsToDeleteInput) -> ListPodsToDeleteResult:
        return ListPodsToDeleteResult()

    @activity.defn(name="delete_all_pods")
    async def delete_all_pods(self, input: DeleteAllPodsInput) -> DeleteAllPodsResult:
        return DeleteAllPodsResult(deleted=0)

    @activity.defn(name="fake_takeover")
    async def fake_takeover(self, input: dict[str, Any]) -> None:
        self.child_runs.append(input)
        for p in input["pools"]:
            for n in POOLS[p]:
                self.current[n] = self.target[p]

    def activities(self) -> list[Any]:
        return [self.fake_takeover, self.read_migration_state, self.check_pools_settled, self.snapshot_fields, self.patch_object, self.restore_fields,
                self.run_node_command, self.delete_namespace, self.list_pods_to_delete, self.delete_all_pods,
                self.check_preconditions]


@workflow.defn(name="MachineConfigRolloutWorkflow")
class FakeRollout:
    """Stands in for the MachineConfig rollout: its activity brings the named pools' nodes to
    their targets (the sandboxed workflow cannot touch the test's cluster object itself)."""

    @workflow.run
    async def run(self, input: dict[str, Any]) -> dict[str, Any]:
        from datetime import timedelta

        await workflow.execute_activity("fake_takeover", input, start_to_close_timeout=timedelta(seconds=10))
        return {"outcome": "completed", "ok": True}


def inp(cluster: str, **kw: Any) -> NetworkMigrationInput:
    return NetworkMigrationInput(cluster=cluster, approvals={"requested_by": "t"}, poll_seconds=5, stall_seconds=60, search_attributes=False,
                                 max_unavailable=2, **kw)


async def run(env: Any, c: Cluster, i: NetworkMigrationInput, approve: set[str]) -> tuple[NetworkMigrationResult, NetworkMigrationStatus]:
    tq = f"nm-{uuid.uuid4().hex[:8]}"
    async with Worker(env.client, task_queue=tq, workflows=[NetworkMigrationWorkflow, FakeRollout, LeaseWorkflow], activities=c.activities()):
        h = await env.client.start_workflow(NetworkMigrationWorkflow.run, i, id=f"nm-{uuid.uuid4().hex[:8]}", task_queue=tq)
        while True:
            st = await h.query(NetworkMigrationWorkflow.status, result_type=NetworkMigrationStatus)
            waiting = [g for g in st.gates if g.state == GateState.WAITING]
            for g in waiting:
                if g.id in approve:
                    await h.execute_update("approve", ApproveInput(gate_id=g.id, identity="op", comment="ok"))
            desc = await h.describe()
            if desc.status is not None and desc.status.name != "RUNNING":
                break
            await env.sleep(5)
        result = await h.result()
        final = await h.query(NetworkMigrationWorkflow.status, result_type=NetworkMigrationStatus)
        return result, final


async def test_switch_waits_for_settled_pools_then_completes(time_skipping_env: Any) -> None:
    c = Cluster()
    result, h = await run(time_skipping_env, c, inp("a"), {"cleanup", "delete-broken-pods"})
    assert result.outcome == "completed", result.message
    assert c.switch_when_settled == [True]
    assert sorted(c.reboots) == sorted(c.current) and len(c.reboots) == 5, "each node rebooted once"
    assert c.reboots[-3:] == ["m1", "m2", "m3"], "masters last, one at a time"
    assert c.migration is None and not any(c.paused.values())
    st = h
    assert st.phase == "done", st.phase  # the run's last phase (network-migration-final-phase)
    assert {"migration-field", "network-type", "pool-paused/master", "pool-paused/worker", "cleanup"} <= set(st.records)


async def test_guard_rechecked_after_pause_refuses_the_switch(time_skipping_env: Any) -> None:
    c = Cluster(unsettle_after_pause=True)
    result, h = await run(time_skipping_env, c, inp("b"), set())
    assert result.outcome == "refused" and "pool worker" in result.message
    assert c.switch_when_settled == [], "no networkType patch"
    assert not any(c.paused.values()), "the pools paused for the switch are unpaused again"
    st = h
    assert st.phase == "failed", st.phase
    assert any("rendered-worker-newer" in b for b in st.guard_behind), "status names what is behind"


async def test_stall_opens_takeover_and_child_rollout_finishes_pools(time_skipping_env: Any) -> None:
    c = Cluster(controller_dead=True)
    result, h = await run(time_skipping_env, c, inp("c"), {"takeover", "cleanup", "delete-broken-pods"})
    assert result.outcome == "completed", result.message
    assert c.child_runs and sorted(c.child_runs[0]["pools"]) == ["master", "worker"]
    assert c.switch_when_settled == [True]
    st = h
    assert st.takeovers and any(r.gate_id == "takeover" for r in st.gate_history)


async def test_dry_run_writes_nothing(time_skipping_env: Any) -> None:
    c = Cluster()
    result, _ = await run(time_skipping_env, c, inp("d", dry_run=True), set())
    assert result.outcome == "dry-run" and result.plan[-3:] == [["m1"], ["m2"], ["m3"]]
    assert c.writes == []


async def test_guard_rechecked_on_resume(time_skipping_env: Any) -> None:
    """Paused while waiting for the pools; a pool moves while the run is held; the resume
    re-checks the guard and refuses before any pause or switch."""
    from workflows.kit.models import ControlInput

    env = time_skipping_env
    c = Cluster(roll_all=True)
    tq = f"nm-{uuid.uuid4().hex[:8]}"
    async with Worker(env.client, task_queue=tq, workflows=[NetworkMigrationWorkflow, FakeRollout, LeaseWorkflow], activities=c.activities()):
        h = await env.client.start_workflow(NetworkMigrationWorkflow.run, inp("e"), id=f"nm-{uuid.uuid4().hex[:8]}", task_queue=tq)
        await h.execute_update("pause", ControlInput(identity="op", reason="hold before the switch"))
        for _ in range(60):  # the pools settle; the run holds before pausing them
            await env.sleep(5)
            if c.migration and all(not p.nodes_behind for p in c.state().pools):
                break
        await env.sleep(30)
        st = await h.query(NetworkMigrationWorkflow.status, result_type=NetworkMigrationStatus)
        assert st.step == "wait-pools" and st.phase == "paused" and not any(c.paused.values())
        c.target["master"] = "rendered-master-newer"  # a MachineConfig added while held
        await h.execute_update("resume", ControlInput(identity="op"))
        result = await h.result()
    assert result.outcome == "refused" and "rendered-master-newer" in result.message
    assert c.switch_when_settled == [] and not any(c.paused.values())


async def test_a_node_the_reboots_cannot_reach_refuses_before_any_write(time_skipping_env: Any) -> None:
    """Issue 39 case 5: ``--reboot-via ssh`` without a way in. The reboot access of every node
    is checked in the preflight, so the run is refused, one line per node, before the migration
    field or the network type is touched; a dry run shows the same checks."""
    c = Cluster(unreachable="ssh core@m1:22: Connection lost")
    result, st = await run(time_skipping_env, c, inp("f", reboot_via="ssh"), set())
    assert result.outcome == "refused" and result.message.startswith("refused before any change"), result.message
    assert len(result.problems) == 5 and all("Connection lost" in p for p in result.problems), result.problems
    assert c.writes == [] and c.migration is None and c.switch_when_settled == []
    assert st.preflight == "refused" and len(st.preconditions) == 5
    dry, _ = await run(time_skipping_env, Cluster(unreachable="Connection lost"), inp("g", reboot_via="ssh", dry_run=True), set())
    assert dry.outcome == "dry-run" and "5 precondition(s) failed" in dry.message, dry.message
    assert [r.state for r in dry.preconditions] == ["failed"] * 5 and all("Connection lost" in r.detail for r in dry.preconditions)


async def _abort_when(env: Any, c: Cluster, i: NetworkMigrationInput, ready: Any, approve: set[str],
                      final: list[dict[str, Any]] | None = None) -> NetworkMigrationResult:
    """Start ``i``, approve the gates in ``approve`` until ``ready(status)``, abort, and return the
    result; ``final`` gets the run's last status appended (its JSON)."""
    from workflows.kit.models import ControlInput

    tq = f"nm-{uuid.uuid4().hex[:8]}"
    async with Worker(env.client, task_queue=tq, workflows=[NetworkMigrationWorkflow, FakeRollout, LeaseWorkflow], activities=c.activities()):
        h = await env.client.start_workflow(NetworkMigrationWorkflow.run, i, id=f"nm-{uuid.uuid4().hex[:8]}", task_queue=tq)
        for _ in range(200):
            st = await h.query(NetworkMigrationWorkflow.status, result_type=NetworkMigrationStatus)
            if ready(st):
                break
            for g in st.gates:
                if g.state == GateState.WAITING and g.id in approve:
                    await h.execute_update("approve", ApproveInput(gate_id=g.id, identity="op", comment="ok"))
            await env.sleep(5)
        else:
            raise AssertionError(f"never reached: {st.step}")
        await h.execute_update("abort", ControlInput(identity="op", reason="test over"))
        result = await h.result()
        if final is not None:
            final.append(await h.query("status"))
        return result


async def test_abort_before_the_switch_restores_and_reads_back(time_skipping_env: Any) -> None:
    """Aborted while the pools roll to the migration field: the field is removed again (read
    back) and the run ends ``aborted, restored`` with nothing left changed."""
    c = Cluster(controller_dead=True)
    result = await _abort_when(time_skipping_env, c, inp("h"), lambda st: st.step in ("wait-pools", "takeover") and c.migration, set())
    assert result.outcome == "aborted" and "restored and read back" in result.message, result.message
    assert c.migration is None and c.config_type == "OpenShiftSDN" and not any(c.paused.values())
    assert result.left_changed == [] and result.restored
    assert any(line.startswith("MachineConfigPools ") and "(read back)" in line for line in result.restored), result.restored


async def test_abort_after_the_switch_names_what_stays_changed_and_the_rollback(time_skipping_env: Any) -> None:
    """Aborted at the cleanup gate, past the switch: nothing is written back (a network type is
    not put back by a field), and the outcome lists the network type with the nodes rebooted
    onto it, the records still changed, and the documented rollback's commands."""
    c = Cluster()
    result = await _abort_when(time_skipping_env, c, inp("i"), lambda st: any(g.id == "cleanup" and g.state == GateState.WAITING
                                                                             for g in st.gates), {"delete-broken-pods"})
    assert result.outcome == "aborted" and "past the point of no return" in result.message, result.message
    assert c.config_type == "OVNKubernetes", "nothing written back"
    targets = {item.target for item in result.left_changed}
    assert "network type" in targets and any("5 of 5 nodes rebooted" in item.what for item in result.left_changed)
    # the records of the Network objects' type fields are part of the network type (as the
    # simulator's diff names them), not targets of their own
    network_type = next(item for item in result.left_changed if item.target == "network type")
    assert "record migration-field" in network_type.what and "record network-type" in network_type.what, network_type
    assert not targets & {"Network cluster", "Network.operator.openshift.io cluster"}, targets
    cmds = result.next_commands
    assert cmds[0] == f"lockkeeper revert {result.workflow_id} --full", cmds
    assert any('"networkType":"OpenShiftSDN"' in cmd for cmd in cmds) and sum("shutdown -r" in cmd for cmd in cmds) == 5, cmds
    # `revert --full` is the documented rollback in a new run, never the kit's record restore
    # (writing spec.networkType back without reboots would leave every node on the wrong network).
    from workflows.network_migration.plan import reverse_input

    assert result.open_records, "the records stay open (they are what the outcome lists)"
    rollback = reverse_input(inp("i"), result.workflow_id, result)
    assert rollback is not None and rollback.rollback_of == result.workflow_id
    assert [e.name for e in rollback.rollback_records] == ["network-type"], "the pools were unpaused by the run itself"
    assert rollback.rollback_baseline == {"master": "rendered-master-old", "worker": "rendered-worker-old"}


async def test_full_revert_of_a_run_aborted_past_the_switch_rolls_back_and_reads_back(time_skipping_env: Any) -> None:
    """Issue 39: ``revert ID --full`` of a migration aborted past the switch is a new run of
    the documented rollback (gate ``rollback`` first): pools paused, spec.migration to
    OpenShiftSDN, the type back, every node rebooted, pools unpaused, spec.migration removed,
    then read back: the type, each pool on its rendered config from before the migration."""
    from workflows.network_migration.plan import reverse_input

    c = Cluster(rerender_on_removal=True)
    aborted = await _abort_when(time_skipping_env, c, inp("k"), lambda st: any(g.id == "cleanup" and g.state == GateState.WAITING
                                                                              for g in st.gates), {"delete-broken-pods"})
    assert aborted.outcome == "aborted" and c.config_type == "OVNKubernetes" and len(c.reboots) == 5
    rollback = reverse_input(inp("k"), aborted.workflow_id, aborted)
    assert rollback is not None
    c.writes.clear()
    result, st = await run(time_skipping_env, c, rollback, {"rollback"})
    assert result.outcome == "reverted" and result.message.startswith("reverted, restored and read back"), result.message
    assert c.config_type == c.status_type == "OpenShiftSDN" and c.migration is None and not any(c.paused.values())
    assert c.target == {"master": "rendered-master-old", "worker": "rendered-worker-old"}
    assert sorted(c.reboots[5:]) == sorted(c.current) and c.reboots[-3:] == ["m1", "m2", "m3"], c.reboots
    assert c.writes[:3] == ["MachineConfigPool/master/spec/paused=True", "MachineConfigPool/worker/spec/paused=True",
                            "Network.operator.openshift.io/cluster/spec/migration={'networkType': 'OpenShiftSDN'}"], c.writes
    assert c.writes[3] == "Network/cluster/spec/networkType=OpenShiftSDN", c.writes
    assert {r.gate_id for r in st.gate_history} == {"rollback"}
    # the rollback run has nothing left for another full revert: every record it took or took
    # over is closed (the spec.migration ones read back absent, as before the migration)
    assert reverse_input(rollback, result.workflow_id, result) is None
    assert result.open_records == [], [(e.name, e.written) for e in result.open_records]
    assert all(r.state == "reverted" for r in st.records.values()), {n: r.state for n, r in st.records.items()}


async def test_an_abort_ends_the_wait_for_a_reboot_that_did_not_move_the_node(time_skipping_env: Any) -> None:
    """An abort stops no reboot already sent (the node finishes, the outcome reads it back), but
    a command that left its node Ready on the same boot id for ``unknown_grace_seconds`` (it
    failed, say) rebooted nothing: the abort ends that wait then, as ``stopped``, instead of
    letting it run to ``ready_timeout_seconds`` and time out. The command is not sent again."""
    c = Cluster(reboots_hang=True)
    final: list[dict[str, Any]] = []
    result = await _abort_when(time_skipping_env, c, inp("n", ready_timeout_seconds=1800, unknown_grace_seconds=60),
                               lambda st: st.step == "reboots" and c.reboots, set(), final)
    assert result.outcome == "aborted", result.message
    sent = sorted(set(c.reboots))
    assert sent and sorted(c.reboots) == sent, ("each command sent once", c.reboots)
    rows = {r["node"]: r for r in final[0]["reboots"]}
    for node in sent:
        assert rows[node]["state"] != "done" and rows[node]["commands_sent"] == 1, rows[node]
        assert final[0]["health"][f"reboot/{node}"]["state"] == "stopped", final[0]["health"][f"reboot/{node}"]
    assert "not reached within" not in result.message, result.message


async def test_full_revert_unpauses_the_pools_the_aborted_run_left_paused_and_names_what_differs(time_skipping_env: Any) -> None:
    """Aborted during its reboots, the run leaves both pools paused (their records open): the
    full revert does not pause them again but unpauses them through those records. The
    controller here keeps the migration's render after spec.migration is removed: the read-back
    waits ``pools_timeout_seconds``, then ends ``stopped``, NOT fully restored, naming each pool."""
    from workflows.network_migration.plan import reverse_input

    c = Cluster(reboots_hang=True)
    aborted = await _abort_when(time_skipping_env, c, inp("l"), lambda st: st.step == "reboots" and c.reboots, set())
    c.reboots_hang = False
    assert aborted.outcome == "aborted" and all(c.paused.values()), (aborted.message, c.paused)
    rollback = reverse_input(inp("l", pools_timeout_seconds=120), aborted.workflow_id, aborted)
    assert rollback is not None
    assert sorted(e.name for e in rollback.rollback_records) == ["network-type", "pool-paused/master", "pool-paused/worker"]
    c.writes.clear()
    result, _ = await run(time_skipping_env, c, rollback, {"rollback"})
    assert result.outcome == "stopped" and "NOT fully restored" in result.message, result.message
    assert not any(w.endswith("paused=True") for w in c.writes), c.writes
    assert not any(c.paused.values()) and c.config_type == "OpenShiftSDN" and c.migration is None
    assert {i.target for i in result.left_changed} == {"MachineConfigPool master", "MachineConfigPool worker"}, result.left_changed
    assert all("not rendered-" in i.what for i in result.left_changed), result.left_changed
    # Issue 39: the rollback run closed its records; `revert --full` of it says there is no
    # record left and names what it left changed and where the commands are (exit 2).
    from lockkeeper.cli.common import CliError
    from lockkeeper.cli.revert_full import revert_full
    from workers.settings import load_settings

    assert result.open_records == [], [e.name for e in result.open_records]
    settings = load_settings(TEMPORAL_ADDRESS=time_skipping_env.client.service_client.config.target_host)
    with pytest.raises(CliError) as refused:
        await revert_full(settings, result.workflow_id, "op", "table", "again")
    text = str(refused.value)
    assert refused.value.code == 2 and "left no recorded change to revert" in text, text
    assert "MachineConfigPool master" in text and f"lockkeeper status {result.workflow_id}" in text, text


async def test_a_revert_ends_a_pause_and_rolls_back_at_once(time_skipping_env: Any) -> None:
    """Issue 39: a pending revert pre-empts every wait. Paused before the switch with the
    migration field set, the run gets a revert: it does not wait for a resume, it rolls back
    (the migration field removed, pools unpaused) and ends ``reverted``."""
    from workflows.kit.models import ControlInput
    from temporalio.client import WorkflowUpdateFailedError

    from workflows.kit.models import RevertAnswer
    from workflows.kit.models import RevertInput as MigrationRevertInput

    env = time_skipping_env
    c = Cluster(roll_all=True)
    tq = f"nm-{uuid.uuid4().hex[:8]}"
    async with Worker(env.client, task_queue=tq, workflows=[NetworkMigrationWorkflow, FakeRollout, LeaseWorkflow], activities=c.activities()):
        h = await env.client.start_workflow(NetworkMigrationWorkflow.run, inp("j"), id=f"nm-{uuid.uuid4().hex[:8]}", task_queue=tq)
        await h.execute_update("pause", ControlInput(identity="op", reason="hold before the switch"))
        for _ in range(60):
            await env.sleep(5)
            if c.migration and all(not p.nodes_behind for p in c.state().pools):
                break
        await env.sleep(30)
        st = await h.query(NetworkMigrationWorkflow.status, result_type=NetworkMigrationStatus)
        assert st.phase == "paused" and c.migration == "OVNKubernetes", (st.phase, st.step)
        # The kit's revert update (issue 36): its validator (an identity is required), its answer.
        with pytest.raises(WorkflowUpdateFailedError) as no_identity:
            await h.execute_update("revert", MigrationRevertInput(identity=" ", reason="not today"))
        assert "an identity is required to revert" in str(no_identity.value.cause)
        answer = await h.execute_update("revert", MigrationRevertInput(identity="op", reason="not today"), result_type=RevertAnswer)
        assert answer.mode == "in-run" and "revert requested by op" in answer.message
        with pytest.raises(WorkflowUpdateFailedError) as twice:
            await h.execute_update("revert", MigrationRevertInput(identity="op2"))
        assert "a revert was already requested by op" in str(twice.value.cause)
        result = await h.result()
    assert result.outcome == "reverted", result.message
    assert c.migration is None and c.config_type == "OpenShiftSDN" and c.switch_when_settled == [] and not any(c.paused.values())


async def test_revert_full_of_a_running_run_is_its_revert_where_that_is_accepted(time_skipping_env: Any) -> None:
    """``lockkeeper revert ID --full`` on a running migration past the switch (at its cleanup
    gate): the plain revert is accepted there, so ``--full`` sends it (no abort, no new run) and
    the run rolls back in place and ends ``reverted``."""
    from lockkeeper.cli.revert_full import revert_full
    from workers.settings import load_settings

    env = time_skipping_env
    c = Cluster()
    settings = load_settings(TEMPORAL_ADDRESS=env.client.service_client.config.target_host)
    tq = f"nm-{uuid.uuid4().hex[:8]}"
    async with Worker(env.client, task_queue=tq, workflows=[NetworkMigrationWorkflow, FakeRollout, LeaseWorkflow], activities=c.activities()):
        h = await env.client.start_workflow(NetworkMigrationWorkflow.run, inp("m"), id=f"nm-{uuid.uuid4().hex[:8]}", task_queue=tq)
        for _ in range(200):
            st = await h.query(NetworkMigrationWorkflow.status, result_type=NetworkMigrationStatus)
            if any(g.id == "cleanup" and g.state == GateState.WAITING for g in st.gates):
                break
            for g in st.gates:
                if g.state == GateState.WAITING and g.id == "delete-broken-pods":
                    await h.execute_update("approve", ApproveInput(gate_id=g.id, identity="op", comment="ok"))
            await env.sleep(5)
        assert c.config_type == "OVNKubernetes"
        assert await revert_full(settings, h.id, "op", "table", "test over") == 0
        result = await h.result()
    assert result.outcome == "reverted" and result.workflow_id == h.id, result.message
    assert c.config_type == c.status_type == "OpenShiftSDN" and c.migration is None and not any(c.paused.values())


async def test_a_revert_during_the_reboots_unpauses_the_pools_through_the_runs_own_records(time_skipping_env: Any) -> None:
    """Issue 39: ``revert ID`` while the nodes reboot (the pools paused by this run, their
    records open). The rollback does not take a second pause record (its original would be
    ``paused``): it unpauses each pool through the run's own ``pool-paused/<pool>`` record, read
    back, so the pools end as they were before the run (unpaused) and the run ends ``reverted``
    without waiting out ``pools_timeout_seconds``. Every record the run took is closed: the
    migration field's are read back absent, as before the run, and nothing is left for
    ``revert --full``."""
    from workflows.kit.models import RevertInput as MigrationRevertInput
    from workflows.network_migration.plan import reverse_input

    env = time_skipping_env
    c = Cluster(reboots_hang=True, rerender_on_removal=True)
    tq = f"nm-{uuid.uuid4().hex[:8]}"
    i = inp("n", pools_timeout_seconds=3600)
    async with Worker(env.client, task_queue=tq, workflows=[NetworkMigrationWorkflow, FakeRollout, LeaseWorkflow], activities=c.activities()):
        h = await env.client.start_workflow(NetworkMigrationWorkflow.run, i, id=f"nm-{uuid.uuid4().hex[:8]}", task_queue=tq)
        for _ in range(200):
            st = await h.query(NetworkMigrationWorkflow.status, result_type=NetworkMigrationStatus)
            if st.step == "reboots" and c.reboots:
                break
            await env.sleep(5)
        else:
            raise AssertionError(f"never reached the reboots: {st.step}")
        assert all(c.paused.values()), c.paused
        c.writes.clear()
        c.reboots_hang = False
        await h.execute_update("revert", MigrationRevertInput(identity="op", reason="during the reboots"))
        result = await h.result()
    assert result.outcome == "reverted", result.message
    assert not any(c.paused.values()), c.paused
    assert c.config_type == c.status_type == "OpenShiftSDN" and c.migration is None
    assert not any(w.endswith("paused=True") for w in c.writes), c.writes
    assert result.open_records == [], [e.name for e in result.open_records]
    assert reverse_input(i, result.workflow_id, result) is None
