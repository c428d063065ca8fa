"""NetworkMigrationWorkflow: the OpenShift 4.14 offline SDN→OVN-Kubernetes migration, guarded (R1).

Steps (each visible in ``status``; every change recorded first, so ``revert`` restores exactly it):

1. **preflight**: read network configs, pools, nodes; refuse (nothing written) when the type is
   already the target, a pool is Degraded or paused. ``dry_run`` stops with the reboot plan.
   **Leases**: ``sdn/<cluster>`` before the first write (a second
   network migration, or anything holding the cluster, is refused, or refuses us, naming the
   holder); ``cluster/<cluster>`` (covering every pool and node) once the pools are settled, before
   the pause: from there on the run reboots every node. The takeover child (the MachineConfig
   rollout, pool and node leases) runs before the cluster lease exists. Refused → outcome
   ``refused`` with the holder's workflow ID in the message and ``lease_holder``.
2. **migration field**: record, then set ``network.operator/cluster`` ``spec.migration.networkType``.
3. **wait for the pools** until the guard holds. No progress for ``stall_seconds`` opens gate
   ``takeover``: approve runs the MachineConfig rollout (``MachineConfigRolloutWorkflow``) as a
   child on the pools behind (lockkeeper playing the controller, as in R1's repair).
4. **guard** (``pools-settled``, :mod:`workflows.network_migration.guard` on the kit guard
   :mod:`workflows.kit.guard`): re-checked right before the pause, right
   before the switch, and after a resume; otherwise the status names what is behind.
5. **pause the pools** (recorded), **switch** ``network.config/cluster`` ``spec.networkType``
   (recorded), **wait for multus**.
6. **reboots**: batches (masters one at a time, last), each node through the kit's reboot
   (:func:`workflows.kit.host.reboot`): the reboot command once per node (its boot id is recorded
   before; a lost command is re-sent only when the node stayed Ready on the same boot id for
   ``unknown_grace_seconds``), a new boot id and Ready before the next batch.
   With ``alerts``, the kit's alert gate (:mod:`workflows.kit.alerts`) stands before each batch
   (``alerts/reboots/batch-<n>``; never before the rollback's reboots), and the takeover rollout
   gates each node with it.
7. **unpause** (the records reverted), **verify** (status type, ovnkube-node, pools Updated),
   gate ``delete-broken-pods`` for pods still on the old network.
8. gate ``cleanup``: remove the migration field and ``openshiftSDNConfig``, delete ``openshift-sdn``.
   Before it, the kit's ``revert`` update (rules: :meth:`NetworkMigrationWorkflow.check_revert`)
   runs the documented rollback: pause, migration field and type back, multus, reboots, unpause,
   migration field removed; a pending revert ends every wait (health, reboots, a pause, a gate).

**Full revert of an ended run** (``lockkeeper revert ID --full``; input ``rollback_of``, built by
:func:`workflows.network_migration.plan.reverse_input` from a run that stopped past the switch):
a new run reads the cluster, checks it can reach every node to reboot it, takes the same
leases, asks at gate ``rollback``, takes over the ended run's records of the switch and of the
pools it left paused, and runs the same rollback (:meth:`NetworkMigrationWorkflow._rollback`).
It ends with a read-back (:meth:`NetworkMigrationWorkflow._read_back`): ``reverted, restored and
read back``, or ``stopped`` with ``NOT fully restored`` naming each difference.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import ObjectRef
    from activities.preflight.models import RebootAccess
    from activities.host.models import CommandResult, ExecBackend, HostAccess
    from activities.network_migration.models import (
        DeleteNamespaceInput,
        DeleteNamespaceResult,
        MigrationState,
    )
    from workflows.kit import calls as acts
    from workflows.kit.control import Aborted
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.kit.host import HostSteps, RebootFailed, reboot
    from workflows.kit.models import (
        ChangedItem,
        ProcedureStatus,
        RevertInput,
    )
    from workflows.kit.planning import planning_abort_message
    from workflows.kit.procedure import ProcedureStopped, ProcedureWorkflow
    from workflows.kit.records import REMOVE, RecordRefused
    from workflows.kit.scopes import cluster_scope, node_scope, pool_scope, scope_workflow_id, subsystem_scope
    from workflows.network_migration.guard import GuardRefused, PoolsGuard
    from workflows.network_migration.models import (
        PROCEDURE_NETWORK_MIGRATION,
        NetworkMigrationInput,
        NetworkMigrationResult,
        NetworkMigrationStatus,
        NodeReboot,
    )
    from workflows.network_migration.plan import (
        kubelet_ca_problems,
        pause_bound_seconds,
        preflight_problems,
        progress,
        reboot_batches,
        signature,
    )
    from workflows.network_migration.state import read_state

DELETE_NAMESPACE = "delete_namespace"
NET_OP = ObjectRef(kind="Network.operator.openshift.io", name="cluster")
NET_CFG = ObjectRef(kind="Network", name="cluster")

#: How long the cluster lease is retried while a finished takeover rollout's leases still close.
TAKEOVER_LEASES_CLOSE_WITHIN = timedelta(seconds=120)


class _RevertNow(Exception):
    """A revert was requested while the run waited (health, reboots, a pause): the rollback
    starts now instead of after the wait (:meth:`NetworkMigrationWorkflow._run`)."""


#: The targets of the two Network objects and the paths of their network type (what
#: clustersim's diff and an operator call "the network type", not the objects).
TYPE_OBJECTS = ("Network cluster", "Network.operator.openshift.io cluster")
TYPE_FIELDS = ("/spec/networkType", "/spec/migration")


class Refused(ProcedureStopped):
    """The run stops before (or instead of) a change: ``reason``; ``holder`` the workflow ID
    holding a lease we were refused (the result's ``lease_holder``). The kit's run template ends
    it ``refused`` with what stays changed (:meth:`ProcedureWorkflow.kit_rule_stopped`)."""

    def __init__(self, reason: str, holder: str = "") -> None:
        super().__init__(reason, outcome="refused", lease_holder=holder)
        self.holder = holder


@workflow.defn
class NetworkMigrationWorkflow(ProcedureWorkflow):
    """Input :class:`NetworkMigrationInput`, status :class:`NetworkMigrationStatus`, result
    :class:`NetworkMigrationResult` (see the module doc)."""

    @workflow.init
    def __init__(self, input: NetworkMigrationInput) -> None:
        self._in = input
        self._st = NetworkMigrationStatus(to=input.to)
        self.kit_init(procedure=PROCEDURE_NETWORK_MIGRATION, noun="network migration", input=input, status=self._st,
                      pause_on_reject=False, reject_note="the step is not taken")
        self._t = self.timeouts  # the input's calls (workflows.kit.inputs.CallTimeouts)
        #: The reboots' host steps (the kit's reboot; boot ids from the migration state).
        self.host = HostSteps(self.gates, board=self._st.host_steps, on_change=self.touch, timeouts=self._t,
                              heartbeat_seconds=self._t.heartbeat.total_seconds())
        self.guard = PoolsGuard(board=self._st.health, on_change=self.touch, timeouts=self._t, stop=lambda: self.control.abort)
        self._cleanup_started = False
        self._lease_holder = ""
        self._from_type = ""
        #: The network plugins' objects at the preflight, and the cluster as read at the end of a
        #: run stopped past the switch (:meth:`kit_left_changed` names what changed between).
        self._plugin_before: dict[str, int] = {}
        self._final: MigrationState | None = None
        self._rolling_back = False
        if self.alerts is not None:
            self.alerts.stop = self._revert_pending  # a revert ends an alert wait, as an abort does

    # --- operator surface: the kit's ``revert`` update, with the migration's rules -------------

    def check_revert(self, input: RevertInput) -> None:
        """The kit's ``revert`` (:meth:`ProcedureWorkflow.revert`) runs the documented rollback
        (:meth:`_revert`), before or after the switch, until the cleanup: refused once the run
        ended, once the cleanup started, twice, or before anything was changed."""
        c = self.control
        if c.finished():
            raise ValueError(f"{self.kit_noun} already {c.base_phase}")
        if self._in.rollback_of:
            raise ValueError(f"this run is the full revert of {self._in.rollback_of}: it cannot be reverted; abort it, "
                             "and its outcome lists what stays changed and the rollback's remaining commands")
        if self._cleanup_started:
            raise ValueError("the cleanup has started: the migration can no longer be reverted")
        if c.revert:
            raise ValueError(f"a revert was already requested by {c.revert_by}")
        if "network-type" not in self.records.records and "migration-field" not in self.records.records:
            raise ValueError("nothing has been changed yet: abort the run instead")

    def kit_revert_means(self) -> str:
        return ("every wait ends and the documented rollback starts at the next step (pause the pools, the migration "
                "field and network type back, reboot every node, unpause)")

    def procedure_status(self) -> ProcedureStatus:
        self._st.reverting = self.control.revert
        st = super().procedure_status()
        if not st.waiting_for:
            st.waiting_for = f"step {self._st.step}"
        return st

    # --- helpers ---------------------------------------------------------------------------------

    def _step(self, step: str) -> None:
        self._st.step = step
        self.touch()
        if self.control.abort:
            raise Aborted(self.control.abort_reason)

    async def _read(self, count_pods: bool = False, *, planning: bool = False) -> MigrationState:
        """Read the migration state (:func:`workflows.network_migration.state.read_state`;
        ``planning``: the preflight, fails fast on API errors and raises Aborted on an abort)."""
        state = await read_state(self.control, self._t, count_pods=count_pods, planning=planning)
        self._st.pools = progress(state.pools)
        return state

    async def _gate(self, gate_id: str, comment: str) -> bool:
        """The kit's gate step (asked each time it is reached) with the input's ``gates`` policy;
        a revert request cancels it ("revert requested"), an abort raises :class:`Aborted`."""
        answer = await self.gates.step(gate_id, comment, self.gate_policy, again=True,
                                       interrupt=lambda: "revert requested" if self.control.revert else None)
        if self.control.abort:
            raise Aborted(self.control.abort_reason)
        return answer.passed

    async def _hold(self) -> None:
        """Wait while the run is paused (an operator's pause holds before the switch); abort ends it."""
        await workflow.wait_condition(lambda: not self.control.paused or self.control.abort or self._revert_pending())
        if self.control.abort:
            raise Aborted(self.control.abort_reason)
        if self._revert_pending():
            raise _RevertNow()

    def _revert_pending(self) -> bool:
        """A revert was requested and the rollback has not started: every wait ends for it."""
        return self.control.revert and not self._rolling_back

    async def _sleep(self, seconds: float) -> None:
        try:
            await workflow.wait_condition(lambda: self.control.abort, timeout=timedelta(seconds=seconds))
        except TimeoutError:
            pass
        if self.control.abort:
            raise Aborted(self.control.abort_reason)
        await workflow.wait_condition(lambda: not self.control.paused or self.control.abort)

    # --- run -------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: NetworkMigrationInput) -> NetworkMigrationResult:
        return await self.kit_run(lambda: self._body(input), NetworkMigrationResult)

    async def _body(self, input: NetworkMigrationInput) -> NetworkMigrationResult:
        """The migration; its own refusals (a lease held, a record somebody else changed, the
        pools guard after the pause) raise :class:`Refused`, which the run template
        (:meth:`kit_run`) ends ``refused`` with what stays changed, as it ends aborts, the kit's
        refusals and failures."""
        try:
            return await self._run(input)
        except Refused as err:
            self._lease_holder = err.holder
            raise
        except RecordRefused as err:
            raise Refused(f"{err} (somebody else changed it; nothing of theirs was overwritten)") from err
        except GuardRefused as err:
            # Refused after pausing: the pools go back to what was recorded before refusing.
            for name in [n for n in self.records.records if n.startswith("pool-paused/")]:
                await self.records.revert(name)
            raise Refused(f"{err.message}; the network type was not switched") from err

    async def kit_release(self) -> None:
        """Every lease in one workflow task; ``status`` then shows none."""
        if self.leases.held:
            await self.leases.release(concurrent=True)
            self._st.leases = []
            self.touch()

    # --- the kit's ending hooks ------------------------------------------------------------------

    def kit_result_fields(self) -> dict[str, object]:
        return {"plan": self._st.plan, "reboots": self._st.reboots, "cleaned_up": self._cleanup_started,
                "lease_holder": self._lease_holder, "baseline": dict(self._st.baseline)}

    def kit_full_revert_command(self) -> str | None:
        """None: a network type is not put back by writing fields; the rollback reboots every node
        (:meth:`kit_next_commands` lists it)."""
        return None

    async def kit_undo(self, why: str) -> tuple[list[str], list[str]]:
        """An abort before the switch: the records restored and read back (the migration field
        removed, the pools unpaused), then the pools back where they were: the
        machine-config-controller renders each pool's previous config again and rolls back the
        nodes it already moved to the migration's (a reboot each), so the run waits, up to
        ``pools_timeout_seconds``, until every pool targets its recorded rendered config with
        every node on it and Updated. Not back by then: a problem line naming each pool behind."""
        restored, problems = await super().kit_undo(why)
        baseline = dict(self._st.baseline)
        if self._st.switched or not baseline or "migration-field" not in self.records.records:
            return restored, problems
        self._st.step = "restore-pools"
        self.touch()

        def behind(state: MigrationState) -> list[str]:
            out = []
            for p in state.pools:
                if p.name not in baseline:
                    continue
                why = [f"targets {p.target}, not {baseline[p.name]}"] if p.target != baseline[p.name] else []
                why += [f"{len(p.nodes_behind)} node(s) not on it"] if p.nodes_behind else []
                why += ["not Updated"] if not p.updated or p.updating else []
                if why:
                    out.append(f"{p.name}: {', '.join(why)}")
            return out

        async def check() -> Check:
            left = behind(await self._read())
            return Check(not left, "pools back on their rendered configs" if not left else "behind: " + "; ".join(left))

        hs = await wait_until(check, name="pools-restored", backoff=Backoff(initial=self._in.poll_seconds, maximum=self._in.poll_seconds * 3),
                              deadline=workflow.now() + timedelta(seconds=self._in.pools_timeout_seconds), board=self._st.health,
                              on_poll=lambda _: self.touch())
        if hs.state == "ok":
            restored.append("MachineConfigPools " + ", ".join(f"{p} on {c}" for p, c in sorted(baseline.items()))
                            + ", every node on it (read back)")
        else:
            problems.append(f"MachineConfigPools not back within {self._in.pools_timeout_seconds:.0f}s: {hs.last}")
        return restored, problems

    async def kit_settle(self) -> None:
        """Past the switch, read the cluster once more (pods counted) for
        :meth:`kit_left_changed`: the run ends with the cluster on the new type, and its outcome
        names what the switch changed as the cluster shows it now."""
        if self._st.switched:
            self._final = await self._read(count_pods=True)

    def kit_left_changed(self) -> list[ChangedItem]:
        """The records not reverted, then, once switched, the cluster's state against what the
        preflight read:

        - ``network type`` (the records of the two Network objects' type fields folded in):
          the new type since the switch, the nodes rebooted onto it and not yet;
        - each pool the machine-config-controller points at the migration's rendered config, and
          each node it moved there;
        - each network plugin object the network operator added, removed or restarted;
        - the owners of the pod-network pods not Ready (their node not rebooted onto the new
          type yet).

        Each node needs a reboot to match whichever type the cluster ends on (the commands of
        :meth:`kit_next_commands`)."""
        items = super().kit_left_changed()
        if not self._st.switched:
            return items
        type_records = [i for i in items if i.target in TYPE_OBJECTS and i.what.split(" changed", 1)[0] in TYPE_FIELDS]
        items = [i for i in items if i not in type_records]
        done = [r.node for r in self._st.reboots if r.state == "done"]
        nodes = [n for batch in self._st.plan for n in batch]
        records = "; ".join(f"{i.target} {i.what}" for i in type_records)
        items.append(ChangedItem(target="network type", what=f"{self._in.to} since the switch; {len(done)} of {len(nodes)} nodes "
                                 f"rebooted onto it" + (f" ({', '.join(done)})" if done else "") + (f" [{records}]" if records else "")))
        final = self._final
        if final is None:
            return items
        baseline = self._st.baseline
        for pool in final.pools:
            was = baseline.get(pool.name)
            if was and pool.target and pool.target != was:
                items.append(ChangedItem(target=f"MachineConfigPool {pool.name}", what=f"targets rendered config {pool.target} (was "
                                         f"{was}): the machine-config-controller's render with the migration's MachineConfig"))
        for n in final.nodes:
            was = baseline.get(n.pool)
            if was and n.current_config and n.current_config != was:
                items.append(ChangedItem(target=f"Node {n.name}", what=f"on rendered config {n.current_config} (was {was}): the "
                                         "machine-config-controller rolled it when the migration field was set"))
        for target in sorted(set(self._plugin_before) | set(final.plugin_objects)):
            before, after = self._plugin_before.get(target), final.plugin_objects.get(target)
            if before is None and after is not None:
                items.append(ChangedItem(target=target, what=f"added by the cluster network operator for {self._in.to}"))
            elif before is not None and after is None:
                items.append(ChangedItem(target=target, what=f"removed by the cluster network operator (the {self._from_type} plugin)"))
            elif before != after:
                items.append(ChangedItem(target=target, what=f"changed by the cluster network operator for {self._in.to}"))
        for owner in final.broken_owners:
            items.append(ChangedItem(target=owner, what=f"pods not Ready: their node is not rebooted onto {self._in.to} yet"))
        return items

    def kit_next_commands(self, left: list[ChangedItem]) -> list[str]:
        """Past the switch: ``lockkeeper revert ID --full`` (that rollback in a new run; not for a
        rollback run itself), then the documented rollback to the old type by hand, step by step
        (OpenShift 4.14 "Rolling back to the OpenShift SDN network plugin": pause the pools, set
        the migration field and the type back, reboot every node, unpause, remove the migration
        field)."""
        if not self._st.switched:
            return super().kit_next_commands(left)
        old = self._from_type or "OpenShiftSDN"
        pools = list(self._st.baseline) or ["master", "worker"]
        nodes = [n for batch in self._st.plan for n in batch]
        full = [] if self._in.rollback_of else [f"lockkeeper revert {workflow.info().workflow_id} --full"]
        return [
            *full,
            *[f"oc patch mcp {p} --type=merge -p '{{\"spec\":{{\"paused\":true}}}}'" for p in pools],
            f"oc patch Network.operator.openshift.io cluster --type=merge -p '{{\"spec\":{{\"migration\":{{\"networkType\":\"{old}\"}}}}}}'",
            f"oc patch Network.config.openshift.io cluster --type=merge -p '{{\"spec\":{{\"networkType\":\"{old}\"}}}}'",
            *[f"oc debug node/{n} -- chroot /host shutdown -r +1" for n in nodes],
            *[f"oc patch mcp {p} --type=merge -p '{{\"spec\":{{\"paused\":false}}}}'" for p in pools],
            "oc patch Network.operator.openshift.io cluster --type=merge -p '{\"spec\":{\"migration\":null}}'",
        ]

    # --- leases ------------------------------------------------------------------------------------

    async def _take(self, scopes: list[str], covers: list[str], after: str, retry_for: tuple[str, ...] = ()) -> None:
        """Take ``scopes`` (with ``covers``) through the kit leases; a refusal becomes
        :class:`Refused` naming the holder (``after``: what is already changed, in words). A
        refusal by one of ``retry_for`` (our finished takeover children, or their leases' IDs:
        their leases still closing) is retried every second for
        :data:`TAKEOVER_LEASES_CLOSE_WITHIN`."""
        deadline = workflow.now() + TAKEOVER_LEASES_CLOSE_WITHIN
        while True:
            try:
                await self.leases.acquire(scopes, covers=covers, concurrent=True)
                break
            except ApplicationError as err:
                if err.type != "LeaseHeld":
                    raise
                holder = str((list(err.details or ()) or [""])[0])
                if holder in retry_for and workflow.now() < deadline:
                    await workflow.sleep(timedelta(seconds=1))
                    continue
                raise Refused(f"{err.message}; {after}", holder) from err
        self._st.leases = list(self.leases.held)
        self.touch()

    async def _take_cluster(self, i: NetworkMigrationInput, pools: list[str]) -> None:
        """``cluster/<cluster>`` covering every pool and every node of the plan."""
        nodes = [n for batch in self._st.plan for n in batch]
        covers = [pool_scope(i.cluster, p) for p in pools] + [node_scope(i.cluster, n) for n in nodes]
        ours = (*self._st.takeovers, *(scope_workflow_id(c) for c in covers)) if self._st.takeovers else ()
        self._step("cluster-lease")
        await self._take([cluster_scope(i.cluster)], covers,
                         "the network type was not switched; spec.migration stays set (a new run continues from it, "
                         "or remove it to roll the pools back)", ours)

    def _result(self, outcome: str, message: str, status_type: str = "") -> NetworkMigrationResult:
        """The result (:meth:`kit_end`, with :meth:`kit_result_fields`); the step ``done`` once
        completed or reverted."""
        self._st.step = "done" if outcome in ("completed", "reverted") else self._st.step
        self.touch()
        return self.kit_end(NetworkMigrationResult, outcome, message, status_type=status_type,
                            cleaned_up=self._cleanup_started and outcome == "completed")

    async def _run(self, i: NetworkMigrationInput) -> NetworkMigrationResult:
        self._step("preflight")
        try:
            state = await self._read(planning=True)
        except Aborted as stop:  # an abort during the preflight read: nothing was written, no lease taken
            return self._result("aborted", planning_abort_message(self.control, stop))
        if i.rollback_of:
            return await self._rollback_run(i, state)
        batches = reboot_batches(state.nodes, i.max_unavailable)
        problems = preflight_problems(state, i.to) + kubelet_ca_problems(
            state.pools, workflow.now(), pause_bound_seconds(len(batches), i.pools_timeout_seconds, i.ready_timeout_seconds))
        if problems:
            raise Refused("; ".join(problems))
        self._st.plan = batches
        self._st.baseline = {p.name: p.target for p in state.pools}
        self._from_type = state.config_type
        self._plugin_before = dict(state.plugin_objects)
        # Every node is rebooted after the switch: reach each one now, before anything is written
        # (issue 39 case 5: a switch whose reboots then cannot reach a node leaves the cluster
        # half-migrated).
        checked = await self.kit_preflight([
            RebootAccess(node=n.name, access=self._access(n.name, n.address),
                         why=f"the migration reboots it onto {i.to} after the switch (--reboot-via {i.reboot_via})")
            for n in state.nodes], refuse=not i.dry_run)
        if i.dry_run:
            return self._result("dry-run", f"plan: set the migration field, wait for {len(state.pools)} pools, switch to {i.to}, "
                                           f"reboot {len(state.nodes)} nodes in {len(self._st.plan)} batches"
                                           + (f"; {len(checked.failed)} precondition(s) failed" if checked.failed else ""))
        pools = [p.name for p in state.pools]
        await self._take([subsystem_scope("sdn", i.cluster)], [], "nothing was changed")
        try:
            return await self._forward(i, pools)
        except _RevertNow:  # requested while a wait ran: roll back from here
            return await self._revert(i, pools)

    async def _forward(self, i: NetworkMigrationInput, pools: list[str]) -> NetworkMigrationResult:
        """From the migration field to the cleanup (module doc, steps 2-8); a revert requested
        meanwhile ends it at the next step or wait (:class:`_RevertNow`)."""
        self._step("migration-field")
        await self.records.change("migration-field", NET_OP, {"/spec/migration": {"networkType": i.to}})
        await self._wait_pools(i)
        if self.control.revert:
            return await self._revert(i, pools)
        await self._hold()
        await self._take_cluster(i, pools)
        self._step("pause-pools")
        await self.guard.require(self._st.baseline, self._st)  # right before the first write of the switch phase
        for p in pools:
            await self.records.change(f"pool-paused/{p}", ObjectRef(kind="MachineConfigPool", name=p), {"/spec/paused": True})
        await self._hold()
        self._step("guard")
        await self.guard.require(self._st.baseline, self._st)  # re-checked right before the patch (and after a resume)
        self._step("switch")
        await self.records.change("network-type", NET_CFG, {"/spec/networkType": i.to})
        self._st.switched = True
        self.control.passed_point_of_no_return(f"network.config/cluster spec.networkType switched to {i.to}")
        await self._after_switch(i, pools, i.to)
        if self.control.revert:
            return await self._revert(i, pools)
        self._step("verify")
        state = await self._verify(i)
        if self.control.revert:
            return await self._revert(i, pools)
        if await self._gate("cleanup", "remove spec.migration and openshiftSDNConfig from network.operator/cluster and delete "
                                       "namespace openshift-sdn (after this the migration cannot be reverted)"):
            if self.control.revert:
                return await self._revert(i, pools)
            self._cleanup_started = True
            self._step("cleanup")
            await self.records.change("cleanup", NET_OP, {"/spec/migration": REMOVE, "/spec/defaultNetwork/openshiftSDNConfig": REMOVE})
            await acts.call(DELETE_NAMESPACE, DeleteNamespaceInput(name="openshift-sdn"), DeleteNamespaceResult, timeouts=self._t)
        elif self.control.revert:
            return await self._revert(i, pools)
        return self._result("completed", f"migrated to {i.to}" + ("" if self._cleanup_started else "; cleanup not approved"),
                            state.status_type)

    async def _after_switch(self, i: NetworkMigrationInput, pools: list[str], to: str, pause_prefix: str = "pool-paused",
                            unpause: list[str] | None = None) -> None:
        """Multus, the reboots, then the pools unpaused: the records ``unpause`` names (default:
        ``<pause_prefix>/<pool>`` for each of ``pools``) reverted."""
        self._step("wait-multus")
        await self._wait("multus", lambda s: s.multus.complete and s.status_type == to,
                         lambda s: f"multus {s.multus.updated}/{s.multus.desired} updated, {s.multus.available} available; "
                                   f"status.networkType {s.status_type}", i.pools_timeout_seconds)
        self._step("reboots")
        await self._reboots(i)
        self._step("unpause")
        for name in unpause if unpause is not None else [f"{pause_prefix}/{p}" for p in pools]:
            await self.records.revert(name)

    async def _wait(self, name: str, ok: object, detail: object, timeout: float) -> MigrationState:
        seen: list[MigrationState] = []

        async def check() -> Check:
            s = await self._read()
            seen.append(s)
            return Check(ok(s), detail(s))  # type: ignore[operator]

        hs = await wait_until(check, name=name, backoff=Backoff(initial=self._in.poll_seconds, maximum=self._in.poll_seconds * 3),
                              deadline=workflow.now() + timedelta(seconds=timeout), stop=lambda: self.control.abort or self._revert_pending(),
                              board=self._st.health, on_poll=lambda _: self.touch())
        if hs.state == "stopped":
            if self.control.abort:
                raise Aborted(self.control.abort_reason)
            raise _RevertNow()
        if hs.state != "ok":
            raise ApplicationError(f"{name}: not reached within {timeout:.0f}s ({hs.last})", type="WaitTimedOut", non_retryable=True)
        return seen[-1]

    # --- pools, stall and takeover ---------------------------------------------------------------

    async def _wait_pools(self, i: NetworkMigrationInput) -> None:
        self._step("wait-pools")
        last_sig: tuple[object, ...] | None = None
        since = workflow.now()
        while not self.control.revert:
            state = await self._read()
            verdict = self.guard.evaluate(state, self._st.baseline)
            self._st.guard_behind = verdict.behind
            self.touch()
            if verdict.ok:
                return
            sig = signature(state)
            if sig != last_sig:
                last_sig, since = sig, workflow.now()
            elif (workflow.now() - since).total_seconds() >= i.stall_seconds:
                behind = [p.name for p in state.pools if p.nodes_behind or not p.updated]
                if await self._gate("takeover", f"the machine-config-controller made no progress for {i.stall_seconds:.0f}s; "
                                                f"run lockkeeper's MachineConfig rollout on pools {', '.join(behind)}"):
                    await self._takeover(i, behind)
                self._step("wait-pools")
                last_sig, since = None, workflow.now()
                continue
            await self._sleep(i.poll_seconds)

    async def _takeover(self, i: NetworkMigrationInput, pools: list[str]) -> None:
        self._step("takeover")
        child_id = f"{workflow.info().workflow_id}/takeover-{len(self._st.takeovers) + 1}"
        self._st.takeovers.append(child_id)
        self.touch()
        # Started by type name with a plain input: the procedure packages stay independent.
        result = await workflow.execute_child_workflow(
            "MachineConfigRolloutWorkflow",
            {"cluster": i.cluster, "pools": pools, "max_unavailable": i.max_unavailable,
             "approvals": {"requested_by": f"{i.approvals.requested_by} (takeover)"}, "search_attributes": i.search_attributes,
             "drain": {"backoff_initial_seconds": 1.0, "wait_seconds": 10.0},
             **({"alerts": i.alerts.model_dump(mode="json")} if i.alerts is not None else {})},
            id=child_id, result_type=dict,
            static_summary=f"takeover: MachineConfig rollout of pools {', '.join(pools)}",
        )
        outcome = (result or {}).get("outcome")
        if outcome not in ("completed", "succeeded", None) and not (result or {}).get("ok", True):
            raise Refused(f"the takeover rollout ended {outcome}: {(result or {}).get('message', '')}")

    # --- reboots -----------------------------------------------------------------------------------

    def _access(self, node: str, address: str) -> HostAccess:
        if self._in.reboot_via == "ssh":
            host, _, port = (self._in.ssh_hosts.get(node) or "").rpartition(":")
            if host:
                return HostAccess(backend=ExecBackend.SSH, host=host, port=int(port), node=node, user=self._in.ssh_user)
            return HostAccess(backend=ExecBackend.SSH, host=address or node, port=self._in.ssh_port, node=node, user=self._in.ssh_user)
        return HostAccess(backend=ExecBackend.DEBUG_POD, node=node, namespace="default")

    async def _reboots(self, i: NetworkMigrationInput) -> None:
        """Every node rebooted once, batch after batch of the plan (workers ``max_unavailable``
        at a time, masters alone and last: :func:`workflows.network_migration.plan.reboot_batches`),
        the nodes of a batch at once, each through the kit's reboot
        (:func:`workflows.kit.host.reboot`): its boot id read from the migration state before
        any command, the command sent once (any exit status judged by the boot id), a lost call
        sent again only when the node stayed Ready on the same boot id for
        ``unknown_grace_seconds``, then a new boot id and Ready within ``ready_timeout_seconds``
        (else ``WaitTimedOut``). An abort raises Aborted, a revert ends the waits (the rollback's
        own reboots go on)."""
        state = await self._read()
        by_name = {n.name: n for n in state.nodes}
        if not self._st.reboots:
            self._st.reboots = [NodeReboot(node=n, master=by_name[n].master) for batch in self._st.plan for n in batch if n in by_name]
        runs = {r.node: r for r in self._st.reboots}
        for batch in self._st.plan:
            todo = [runs[n] for n in batch if n in runs and runs[n].state != "done"]
            if not todo:
                continue
            await workflow.wait_condition(lambda: not self.control.paused or self.control.abort)
            if self.control.abort:
                raise Aborted(self.control.abort_reason)
            if self.alerts is not None and not self._rolling_back and any(r.state == "pending" for r in todo):
                # Prometheus before a batch's first reboot (no gate: no command); the rollback's
                # reboots are never held, and a batch already rebooting is not held again.
                await self.alerts.wait_clear(f"reboots/batch-{self._st.plan.index(batch) + 1}")
                await self._hold()
            for r in todo:  # the boot id BEFORE any command: proof of a reboot later
                if r.state == "pending":
                    r.boot_before = by_name[r.node].boot_id
                    r.state = "rebooting"
                self.host.boots[r.node] = r.boot_before
            self.touch()
            # Every node of the batch ends (done, stopped or failed) before the first failure, in
            # batch order, is raised: no reboot of this batch is left running behind it.
            ends = await asyncio.gather(*(self._reboot(i, r, by_name[r.node].address) for r in todo), return_exceptions=True)
            failed = next((e for e in ends if isinstance(e, BaseException)), None)
            if failed is not None:
                raise failed

    async def _reboot(self, i: NetworkMigrationInput, r: NodeReboot, address: str) -> None:
        """One node of a batch through the kit's reboot; its row counts the commands sent."""
        moved, sent_at = [False], [workflow.now()]  # the node went down or booted anew since; when the command was sent

        async def read() -> tuple[str | None, bool | None]:
            n = next((n for n in (await self._read()).nodes if n.name == r.node), None)
            bid, up = ((n.boot_id or None), n.ready) if n is not None else (None, None)
            moved[0] = moved[0] or bid is None or bid != r.boot_before or up is False
            return bid, up

        def unmoved_after_grace() -> bool:
            """The command was sent ``unknown_grace_seconds`` ago and the node is still Ready on its
            boot id: the reboot did not happen (e.g. the command failed), nothing is left to finish."""
            return not moved[0] and workflow.now() - sent_at[0] >= timedelta(seconds=i.unknown_grace_seconds)

        def sent(res: CommandResult | None) -> None:
            r.commands_sent += 1
            sent_at[0] = workflow.now()
            if res is None:
                r.detail = "reboot command outcome unknown; judged by the boot id"
            elif res.exit_code is None:
                r.detail = "reboot command sent; its session ended with no exit status (the node went down); judged by the boot id"
            else:
                # A reboot usually cuts its own session (debug pod gone: 137, SSH dropped): the
                # boot id, not the exit code, says whether the node rebooted.
                r.detail = f"reboot command exit {res.exit_code}" + (
                    f" ({(res.stderr or res.stdout).strip()[:200]}); judged by the boot id" if res.exit_code else "")
            self.touch()

        try:
            await reboot(self.host, r.node, self._access(r.node, address), list(i.reboot_command), timeout_seconds=i.ready_timeout_seconds,
                         read=read, until_ready=True, killed_by_reboot=lambda res: True, on_timeout="fail", on_send=sent,
                         resend_after_grace_seconds=i.unknown_grace_seconds, poll_seconds=i.poll_seconds, board=self._st.health,
                         # An abort stops no reboot already sent: the node finishes (boot id and
                         # Ready), so the outcome reads it back as it ends (issue 39); a revert does.
                         # A reboot that has not moved the node within the grace never happened:
                         # an abort ends its wait then instead of at ready_timeout_seconds.
                         stop=lambda: self._revert_pending() or (self.control.abort and (r.commands_sent == 0 or unmoved_after_grace())),
                         safe_point=self._interrupted)
        except RebootFailed as err:
            if err.kind == "command":
                raise ApplicationError(f"reboot/{r.node}: {err.reason}", type="RebootFailed", non_retryable=True) from err
            raise ApplicationError(f"reboot/{r.node}: not reached within {i.ready_timeout_seconds:.0f}s ({err.reason})",
                                   type="WaitTimedOut", non_retryable=True) from err
        r.state = "done"
        self.touch()

    async def _interrupted(self) -> None:
        """The reboots' safe point: an abort raises Aborted, a pending revert :class:`_RevertNow`."""
        if self.control.abort:
            raise Aborted(self.control.abort_reason)
        if self._revert_pending():
            raise _RevertNow()

    # --- verify, revert -----------------------------------------------------------------------------

    async def _verify(self, i: NetworkMigrationInput) -> MigrationState:
        state = await self._wait("pools-updated", lambda s: self.guard.evaluate(s, {}).ok,
                                 lambda s: "; ".join(self.guard.evaluate(s, {}).behind[:3]), i.pools_timeout_seconds)
        state = await self._wait("ovnkube-node", lambda s: s.status_type == i.to and s.ovnkube.present and s.ovnkube.ready == s.ovnkube.desired > 0,
                                 lambda s: f"status.networkType {s.status_type}; ovnkube-node {s.ovnkube.ready}/{s.ovnkube.desired} Ready",
                                 i.pools_timeout_seconds)
        state = await self._read(count_pods=True)
        if state.broken_pod_count:
            if await self._gate("delete-broken-pods", f"{state.broken_pod_count} pods are not Ready after the switch (old pod IPs), "
                                                      f"e.g. {', '.join(state.broken_pods[:5])}: delete all pods (oc delete pod -A --all)"):
                await acts.delete_pods_once(["openshift-ovn-kubernetes", "openshift-multus", "openshift-machine-config-operator"],
                                            self._t)
        return state

    async def _revert(self, i: NetworkMigrationInput, pools: list[str]) -> NetworkMigrationResult:
        """The running run's revert: :meth:`_rollback`, then the run ends ``reverted``."""
        state = await self._rollback(i, pools)
        return self._result("reverted", f"reverted to {state.status_type} (requested by {self.control.revert_by})", state.status_type)

    async def _rollback(self, i: NetworkMigrationInput, pools: list[str], paused_by: dict[str, str] | None = None) -> MigrationState:
        """The documented rollback order: pause the pools, migration field to the old type, the
        type back, multus, reboot every node, unpause, migration field removed (its record); then
        wait until ``status.networkType`` is the old type and the pools are Updated. Returns the
        state last read. ``paused_by``: pool -> the record that already holds it paused (a full
        revert's pools an ended run left paused): not paused again, unpaused through it. A pool
        this run paused itself and has not unpaused yet (a revert during the reboots) is likewise
        unpaused through its own ``pool-paused/<pool>`` record: a new record taken then would
        record ``paused`` as the original and leave the pool paused (issue 39)."""
        paused_by = dict(paused_by or {})
        open_records = self.records.changed()
        for p in pools:
            if p not in paused_by and f"pool-paused/{p}" in open_records:
                paused_by[p] = f"pool-paused/{p}"
        self._rolling_back = True
        self.control.paused, self.control.paused_reason = False, None  # a pause held the run; the rollback goes on
        self._step("revert")
        old = "OpenShiftSDN"
        if "network-type" in self.records.records:
            # New record names: a record guards on its first originals, and these objects have
            # moved on since (pools unpaused again, the migration field set by us).
            unpause = []
            for p in pools:
                if p in paused_by:
                    unpause.append(paused_by[p])
                    continue
                await self.records.change(f"revert/pool-paused/{p}", ObjectRef(kind="MachineConfigPool", name=p), {"/spec/paused": True})
                unpause.append(f"revert/pool-paused/{p}")
            await self.records.change("revert/migration-field", NET_OP, {"/spec/migration": {"networkType": old}})
            await self.records.revert("network-type")
            self._st.reboots = []
            await self._after_switch(i, pools, old, unpause=unpause)
            await self.records.change("revert/migration-removed", NET_OP, {"/spec/migration": REMOVE})
            if workflow.patched("network-revert-deletes-ovn-namespace"):
                # The documented rollback's last step: the network operator leaves the namespace
                # of the plugin it no longer runs (OpenShift docs, "Rolling back to the OpenShift
                # SDN network plugin").
                await acts.call(DELETE_NAMESPACE, DeleteNamespaceInput(name="openshift-ovn-kubernetes"), DeleteNamespaceResult,
                                timeouts=self._t)
        else:
            await self.records.revert("migration-field")
        state = await self._wait("reverted", lambda s: s.status_type == old and self.guard.evaluate(s, {}).ok,
                                 lambda s: f"status.networkType {s.status_type}; " + "; ".join(self.guard.evaluate(s, {}).behind[:3]),
                                 i.pools_timeout_seconds)
        self._close_migration_records(state)
        return state

    def _close_migration_records(self, state: MigrationState) -> None:
        """The rollback's records of ``spec.migration`` (the run's own ``migration-field``, or
        the one a full revert took over, and the rollback's ``revert/migration-field`` and
        ``revert/migration-removed``) are closed once ``state`` (read after the last of them)
        shows the field absent, as before the migration: the field is back at the first
        record's original, so none of them holds a change a later ``revert --full`` could undo
        (issue 39). Still set (somebody set it again): they stay open, and the outcome says so."""
        if state.migration is not None:
            return
        for name in ("migration-field", "revert/migration-field", "revert/migration-removed"):
            st = self.records.board.get(name)
            if st is not None and name in self.records.changed():
                st.state, st.detail = "reverted", ("spec.migration read back absent, as before the migration "
                                                   "(removed by the rollback's last step)")
        self.touch()

    # --- the full revert of an ended run (``rollback_of``) -------------------------------------------

    async def _rollback_run(self, i: NetworkMigrationInput, state: MigrationState) -> NetworkMigrationResult:
        """``revert --full`` of the ended run ``i.rollback_of`` (module doc): nothing is written
        before the reboot preconditions pass, the leases are held and gate ``rollback`` is
        approved; from the first write on, an abort restores nothing (the rollback is past its
        own point of no return) and the outcome lists what stays changed and the commands."""
        self._st.plan = reboot_batches(state.nodes, i.max_unavailable)
        self._st.baseline = dict(i.rollback_baseline)
        self._from_type = "OpenShiftSDN"
        self._plugin_before = dict(state.plugin_objects)
        checked = await self.kit_preflight([
            RebootAccess(node=n.name, access=self._access(n.name, n.address),
                         why=f"the rollback of {i.rollback_of} reboots it back onto OpenShiftSDN (--reboot-via {i.reboot_via})")
            for n in state.nodes], refuse=not i.dry_run)
        paused = {e.name.split("/", 1)[1]: e.name for e in i.rollback_records if e.name.startswith("pool-paused/")}
        pools = [p.name for p in state.pools]
        plan = (f"roll {i.rollback_of} back to OpenShiftSDN: pause pools {', '.join(p for p in pools if p not in paused) or '-'}"
                f"{' (still paused by it: ' + ', '.join(sorted(paused)) + ')' if paused else ''}, spec.migration to OpenShiftSDN, "
                f"spec.networkType back (now {state.config_type}), reboot {len(state.nodes)} nodes in {len(self._st.plan)} batches, "
                "unpause the pools, remove spec.migration; then read back the network type, the pools' rendered configs "
                "and spec.migration")
        if i.dry_run:
            return self._result("dry-run", plan + (f"; {len(checked.failed)} precondition(s) failed" if checked.failed else ""))
        await self._take([subsystem_scope("sdn", i.cluster)], [], "nothing was changed")
        await self._take_cluster(i, pools)
        self._step("rollback-gate")
        await self.gates.step("rollback", plan, self.gate_policy, required=True)
        if self.control.abort:
            raise Aborted(self.control.abort_reason)
        self.records.restore_entries(i.rollback_records)
        self._st.switched = True
        self.control.passed_point_of_no_return(f"the rollback of {i.rollback_of} started")
        await self._rollback(i, pools, paused_by=paused)
        return await self._read_back(i)

    def _differences(self, s: MigrationState, old: str) -> list[tuple[str, str]]:
        """What the read-back finds not as before the migration: (target, what) pairs."""
        out: list[tuple[str, str]] = []
        if s.config_type != old:
            out.append(("Network cluster", f"spec.networkType is {s.config_type}, not {old}"))
        if s.status_type != old:
            out.append(("Network cluster", f"status.networkType is {s.status_type}, not {old}"))
        if s.migration is not None:
            out.append(("Network.operator.openshift.io cluster", f"spec.migration still set (networkType {s.migration})"))
        for p in s.pools:
            was = self._st.baseline.get(p.name)
            if was and p.target != was:
                out.append((f"MachineConfigPool {p.name}", f"targets rendered config {p.target}, not {was} (before the migration)"))
            if p.nodes_behind:
                out.append((f"MachineConfigPool {p.name}", f"node(s) {', '.join(p.nodes_behind)} not on {p.target}"))
            if p.paused:
                out.append((f"MachineConfigPool {p.name}", "still paused"))
        return out

    async def _read_back(self, i: NetworkMigrationInput) -> NetworkMigrationResult:
        """Wait up to ``pools_timeout_seconds`` until the read-back finds no difference (the
        machine-config-controller renders each pool's previous config again once spec.migration
        is gone and moves its nodes back): ``reverted, restored and read back``; otherwise
        ``stopped``, ``NOT fully restored`` naming each difference (also in ``left_changed``)."""
        old = "OpenShiftSDN"
        self._step("read-back")
        last: list[MigrationState] = []

        async def check() -> Check:
            s = await self._read()
            last.append(s)
            diffs = self._differences(s, old)
            return Check(not diffs, "; ".join(f"{t}: {w}" for t, w in diffs) or "as before the migration")

        await wait_until(check, name="read-back", backoff=Backoff(initial=i.poll_seconds, maximum=i.poll_seconds * 3),
                         deadline=workflow.now() + timedelta(seconds=i.pools_timeout_seconds), board=self._st.health,
                         stop=lambda: self.control.abort, on_poll=lambda _: self.touch())
        if self.control.abort:
            raise Aborted(self.control.abort_reason)
        state = last[-1]
        diffs = self._differences(state, old)
        pools = ", ".join(f"{p.name} on {p.target}" for p in state.pools)
        if not diffs:
            return self._result("reverted", f"reverted, restored and read back: {i.rollback_of} rolled back to {old} "
                                            f"(network type {old}, pools {pools} with every node on it, spec.migration removed)",
                                state.status_type)
        self._st.step = "done"
        return self.kit_end(NetworkMigrationResult, "stopped", f"rollback of {i.rollback_of}: NOT fully restored: "
                            + "; ".join(f"{t}: {w}" for t, w in diffs), status_type=state.status_type,
                            left_changed=[ChangedItem(target=t, what=w) for t, w in diffs])
