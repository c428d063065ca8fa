"""VxlanPortChangeWorkflow: change the OpenShift SDN VXLAN port on a live 3.11 cluster (R5).

Stages A–H of procedures-spec §7.3 (``status.step``, :data:`~workflows.vxlan_port.models.STAGES`),
on the kit's run template (:meth:`~workflows.kit.procedure.ProcedureWorkflow.kit_run`):

A every precondition checked before the first write (the kit's preflight: names, ports, host
programs, the cluster as read, each master's API); a miss ends ``refused``, nothing written ·
B image present on every node (barrier) · C the DaemonSet's image and triggers annotation changed
through the kit's records, its pods replaced node by node · D firewall rule on every node
(barrier) · E gate, then the fan-out: the point of no return (failed nodes retried at once; still
failing: an urgent gate, ``retry`` or ``switch-back``) · F masters (:mod:`.masters`): config on
every master, ClusterNetwork deleted, the masters restarted one at a time on the kit's node
window · G the DaemonSet restored from its record and read back, its pods replaced · H report.

A stage that cannot complete pauses naming why: resume runs the stage again (every step checks
first). Before the fan-out an abort (or ``revert``) restores the DaemonSet through the records
(read back), replaces its pods and removes the firewall rule this run added, and ends ``aborted,
restored``; after it, an abort ends naming what stays changed and ``lockkeeper revert ID --full``
(:func:`workflows.vxlan_port.plan.reverse_input`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import FieldRecord, ObjectRef, SnapshotFieldsInput
    from activities.vxlan_port.models import (
        TRIGGERS_POINTER,
        CheckResult,
        MasterApiInput,
        NodeSwitch,
        PreflightInput,
        PreflightResult,
        SwitchTarget,
    )
    from workflows.kit import calls as acts
    from workflows.kit.batches import Group, LocalStop, NodeBatches, local_run
    from workflows.kit.board import NodeBoard
    from workflows.kit.control import Aborted
    from workflows.kit.host import HOST_HEARTBEAT_SECONDS, HostStepFailed, HostSteps
    from workflows.kit.models import ChangedItem, NodePhase, RecordEntry, failure_message
    from workflows.kit.noderun import NodeRunResult
    from workflows.kit.planning import abortable, planning_call
    from workflows.kit.preflight import PRECONDITION_FAILED
    from workflows.kit.procedure import NodeProcedureWorkflow
    from workflows.kit.records import REMOVE, SNAPSHOT_FIELDS, RecordRefused, record_configmap_name, save_record_configmap
    from workflows.kit.scopes import cluster_scope
    from workflows.vxlan_port import plan
    from workflows.vxlan_port.masters import Masters
    from workflows.vxlan_port.models import PROCEDURE_VXLAN_PORT, STAGES, VxlanPortChangeInput, VxlanPortChangeResult, VxlanStatus
    from workflows.vxlan_port.sdn import SdnNodes, StepFailed

#: The record of the DaemonSet's image and triggers annotation (this run's change).
DS_RECORD = "daemonset"
#: A reverse run's take-over of the record the run it reverses left (phase G restores it too).
FORWARD_RECORD = "daemonset-as-found"
#: The record ConfigMap's key that holds the DaemonSet's record (a RecordEntry as JSON).
DS_RECORD_KEY = "daemonset.record.json"


@workflow.defn
class VxlanPortChangeWorkflow(NodeProcedureWorkflow):
    """Input :class:`VxlanPortChangeInput`, status :class:`VxlanStatus`, result
    :class:`VxlanPortChangeResult` (see the module doc)."""

    kit_keeps_records = True

    @workflow.init
    def __init__(self, input: VxlanPortChangeInput) -> None:
        self.inp = input
        self.st = VxlanStatus(old_port=input.old_port, new_port=input.new_port)
        self.kit_init(procedure=PROCEDURE_VXLAN_PORT, noun="port change", status=self.st, input=input, pause_on_reject=False,
                      reject_note="the run stops (before the fan-out, what it changed is restored)", preflight=True)
        self.host_steps = HostSteps(self.gates, board=self.st.host_steps, on_change=self.touch, timeouts=self.timeouts,
                                    heartbeat_seconds=input.calls.host_heartbeat_seconds or HOST_HEARTBEAT_SECONDS,
                                    gate_timeout_seconds=input.gates.timeout_seconds)
        self.sdn = SdnNodes(input, self.st, self.control, self.touch, self.timeouts, self.host_steps)
        self.masters = Masters(input, self.st, self.control, self.touch, self.host_steps, self.mirror, self.timeouts)
        self.board = NodeBoard(procedure=PROCEDURE_VXLAN_PORT, cluster=input.cluster, nodes=self.st.nodes,
                               gate_history=self.st.gate_history, warnings=self.st.warnings, on_change=self.touch, noun="port change")
        # A master skipped before or after its restart needs no undo; none counts as unavailable
        # (the window's defaults for in-process steps).
        self.batches = NodeBatches(board=self.board, control=self.control, gates=self.gates, start_child=self._start_master,
                                   gate_timeout_seconds=input.gates.timeout_seconds, gate_timeout_outcome=input.gates.timeout_outcome,
                                   alerts=self.alerts)
        # The masters restart in their order (the controllers' leader last): a held master keeps
        # the ones after it waiting (workflows.kit.holds).
        self.batches.holds_keep_order = True
        self.kit_windows(input.windows)  # no master restart starts outside a maintenance window
        self.pre: PreflightResult | None = None
        #: A reverse run's take-over of the DaemonSet record of the run it reverses.
        self.forward: RecordEntry | None = None
        self.restored: list[str] = []
        self.restarted_pods: list[str] = []

    @workflow.run
    async def run(self, input: VxlanPortChangeInput) -> VxlanPortChangeResult:
        return await self.kit_run(lambda: self._run(input), VxlanPortChangeResult)

    async def _run(self, i: VxlanPortChangeInput) -> VxlanPortChangeResult:
        # Every node, every master and the ClusterNetwork: nothing else may run on this cluster.
        await self.leases.acquire([cluster_scope(i.cluster)])
        self.st.leases = list(self.leases.held)
        self.kit_step("A", STAGES["A"])
        try:
            checked = await self.preflight()
        except Aborted as stop:  # read-only so far: say who stopped it where
            raise Aborted(f"by {self.control.abort_by} while planning: {stop.reason}") from None
        if i.dry_run:
            return self.kit_end(VxlanPortChangeResult, "dry-run", f"every precondition holds ({len(checked)} checked); would "
                                f"change {len(self.sdn.names)} nodes and {len(i.masters)} masters from {i.old_port} to {i.new_port}")
        stages: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("B", self.sdn.image_present), ("C", self.phase_c), ("D", self.sdn.firewall), ("E", self.phase_e),
            ("F", self.phase_f), ("G", self.phase_g)]
        for letter, fn in stages:
            await self.stage(letter, fn)
        self.kit_step("H", STAGES["H"])
        reminder = plan.inventory_reminder(i.new_port)
        return self.kit_end(VxlanPortChangeResult, "completed", f"every node and ClusterNetwork default on {i.new_port}; "
                            f"DaemonSet restored and read back; {reminder}", inventory_reminder=reminder)

    async def stage(self, letter: str, fn: Callable[[], Awaitable[None]]) -> None:
        """Run stage ``letter``; when it cannot complete, pause naming why (resume runs it again)."""
        while True:
            await self.control.safe_point()
            self.kit_step(letter, STAGES[letter])
            try:
                await fn()
                return
            except (StepFailed, HostStepFailed, RecordRefused) as exc:
                reason = str(exc)
            except ActivityError as err:
                reason = failure_message(err)
            workflow.logger.warning("stage %s stopped: %s", letter, reason)
            undo = "abort ends it, naming what stays changed" if self.control.point_of_no_return else \
                "abort (or `lockkeeper revert ID`) restores what changed"
            self.control.pause(f"stage {letter} stopped: {reason}; resume runs it again; {undo}")
            await self.control.safe_point()

    async def mirror(self, data: dict[str, str]) -> None:
        """Mirror records to ConfigMap ``<record_namespace>/lockkeeper-record-<workflow id>``
        (procedures-spec §1.6), readable without Temporal (and by a reverse run)."""
        self.st.record_configmap = await save_record_configmap(
            "save_vxlan_record", str, namespace=self.inp.record_namespace, workflow_id=workflow.info().workflow_id,
            procedure=PROCEDURE_VXLAN_PORT, data=data, timeouts=self.timeouts)
        self.touch()

    # --- A: every precondition before the first write ------------------------------------------

    async def preflight(self) -> list[str]:
        """Read the cluster, each node's port (through the fan-out's executor) and each master's
        API, then the kit's preflight of :func:`plan.preconditions`. Raises PreconditionFailed
        (the run ends refused, nothing written). Returns every check's line."""
        i = self.inp
        try:
            pre: PreflightResult = await planning_call(self.control, "preflight_vxlan_port", PreflightInput(sdn=i.sdn),
                                                       PreflightResult, seconds=60, timeouts=self.timeouts,
                                                       heartbeat=self.timeouts.heartbeat)  # it beats while it lists
        except ActivityError as err:
            api = acts.planning_api_failure(err, "preflight")
            if api is not None:
                raise api from err
            if isinstance(err.cause, ApplicationError) and err.cause.type == "InvalidInput":
                raise ApplicationError(err.cause.message, type=PRECONDITION_FAILED, non_retryable=True) from err
            raise
        self.pre = pre
        self.sdn.names = [n for n in sorted(i.nodes or pre.nodes) if n in pre.nodes]
        for n in self.sdn.names:
            pod = pre.sdn_pods.get(n)
            row = self.sdn.row(n)
            row.sdn_pod, row.sdn_image = (pod.name, pod.image) if pod else (None, None)
        self.st.cluster_network = f"vxlanPort {pre.cluster_network.vxlan_port}" if pre.cluster_network.exists else "absent"
        ports = await self.read_ports(pre)
        answers = await asyncio.gather(*(acts.call("check_master_api", MasterApiInput(api_url=m.api_url, ca_file=m.ca_file, insecure=m.insecure),
                                                   CheckResult, timeouts=self.timeouts) for m in i.masters))
        forward = None
        if i.reverse_of is not None:
            self.forward = await self.forward_record(i.reverse_of)
            forward = self.forward is not None
        outcome = await self.kit_preflight(plan.preconditions(i, pre, ports, {m.name: a for m, a in zip(i.masters, answers, strict=True)},
                                                              forward_record=forward))
        return outcome.lines()

    async def read_ports(self, pre: PreflightResult) -> dict[str, NodeSwitch]:
        """Each node's dst_port as the fan-out will reach it (read only); a node whose sdn pod is
        not Ready (or, for the ssh switch, without host access) is not read."""
        i = self.inp
        readable = [n for n in self.sdn.names if n in pre.sdn_pods and pre.sdn_pods[n].ready
                    and (i.fanout.switch_via == "pod-exec" or n in i.host_access)]
        if not readable:
            return {}
        try:
            targets: list[SwitchTarget] = await planning_call(self.control, "resolve_sdn_targets", self.sdn.resolve_input(readable),
                                                              list[SwitchTarget], seconds=60, timeouts=self.timeouts,
                                                              heartbeat=self.timeouts.heartbeat)
            read = await abortable(self.control, self.sdn.fanout(targets, i.new_port, apply=False))
        except ActivityError as err:
            return {n: NodeSwitch(node=n, error=failure_message(err)) for n in readable}
        for r in read.nodes:
            self.sdn.row(r.node).port = r.before
        return {r.node: r for r in read.nodes}

    async def forward_record(self, workflow_id: str) -> RecordEntry | None:
        """The DaemonSet record the run ``workflow_id`` mirrored to its record ConfigMap (None
        when the ConfigMap or the key is gone)."""
        ref = ObjectRef(kind="ConfigMap", name=record_configmap_name(workflow_id), namespace=self.inp.record_namespace)
        path = "/data/" + DS_RECORD_KEY
        try:
            got: FieldRecord = await acts.call(SNAPSHOT_FIELDS, SnapshotFieldsInput(ref=ref, paths=[path]), FieldRecord,
                                               timeouts=self.timeouts)
        except ActivityError as err:
            workflow.logger.warning("record of %s not read: %s", workflow_id, failure_message(err))
            return None
        value = got.value(path)
        return RecordEntry.model_validate_json(value.value).model_copy(update={"name": FORWARD_RECORD}) \
            if value is not None and value.present else None

    # --- C: the DaemonSet through the kit's records -----------------------------------------------

    def ds_ref(self) -> ObjectRef:
        return ObjectRef(kind="DaemonSet", name=self.inp.sdn.daemonset, namespace=self.inp.sdn.namespace)

    def image_path(self) -> str:
        assert self.pre is not None
        return f"/spec/template/spec/containers/{self.pre.daemonset.container_index}/image"

    async def phase_c(self) -> None:
        i, ds = self.inp, self.pre.daemonset  # type: ignore[union-attr]
        if not self.st.record_configmap:  # the seed's sdn_saved.yml, before the first write
            await self.mirror({"daemonset.json": json.dumps(ds.sanitized_object, indent=1, sort_keys=True),
                               "daemonset.image": ds.image, "daemonset.triggers": ds.triggers or ""})
        self.kit_step("C", f"DaemonSet {ds.namespace}/{ds.name}: image {i.custom_image}, triggers annotation removed")
        await self.records.change(DS_RECORD, self.ds_ref(), {self.image_path(): i.custom_image, TRIGGERS_POINTER: REMOVE})
        entry = next(e for e in self.records.entries() if e.name == DS_RECORD)
        await self.mirror({DS_RECORD_KEY: entry.model_dump_json()})
        self.kit_step("C", f"sdn pods replaced node by node on {i.custom_image}")
        await self.sdn.roll_pods(i.custom_image)

    # --- E: the fan-out, the point of no return ------------------------------------------------------

    async def phase_e(self) -> None:
        i, sdn = self.inp, self.sdn
        if sdn.result is not None and not sdn.result.failed:
            return
        targets = await sdn.resolve(sdn.names)
        where = ", ".join(f"{t.node}:{t.pod or t.container_id}" for t in targets)
        await self.gates.step("fanout", f"switch vxlan0 dst_port {i.old_port} -> {i.new_port} on {len(targets)} nodes at once "
                                        f"(point of no return; cross-node traffic splits until all are done). Targets: {where}",
                              self.gate_policy, required=True, again=True)
        self.control.passed_point_of_no_return(f"the fan-out switches vxlan0 on {len(targets)} nodes to {i.new_port}")
        tries = 0
        while True:
            todo = [t for t in targets if t.node not in sdn.rows or not sdn.rows[t.node].ok]
            sdn.result = await sdn.switch_all(i.new_port, todo, sdn.rows)
            if not sdn.result.failed:
                return
            tries += 1
            failed = ", ".join(f"{n} ({sdn.rows[n].error or 'not switched'})" for n in sdn.result.failed)
            answer = await self.gates.step(
                f"fanout-failed-{tries}", f"URGENT: nodes still on {i.old_port}: {failed}; cross-node traffic between them and the "
                f"rest is down. retry: switch them again; switch-back: every node back to {i.old_port}",
                self.gate_policy, choices=["retry", "switch-back"], required=True)
            if answer.choice == "retry":
                try:
                    fresh = {t.node: t for t in await sdn.resolve(sdn.result.failed)}
                    targets = [fresh.get(t.node, t) for t in targets]
                except ActivityError as err:
                    workflow.logger.warning("re-resolving failed nodes: %s", failure_message(err))
                continue
            back = await sdn.switch_all(i.old_port, targets, {})
            if back.failed:
                raise StepFailed(f"fan-out back to {i.old_port} failed on {', '.join(back.failed)}")
            sdn.rows.clear()
            sdn.result = None
            self.control.back_before_point_of_no_return(f"every node switched back to {i.old_port}")
            raise StepFailed(f"fan-out failed on {failed}; every node switched back to {i.old_port}")

    # --- F: the masters, one at a time on the kit's node window ---------------------------------------

    async def phase_f(self) -> None:
        i, m = self.inp, self.masters
        self.kit_step("F", "master-config.yaml edited on every master before any restart")
        await m.edit_configs()
        cn = await m.cluster_network()
        if not m.cn_deletes and cn.exists and cn.vxlan_port == i.new_port:
            return  # nothing for the controllers to re-create (a reverse of a run that stopped before F)
        if not m.cn_deletes:
            await self.gates.step("clusternetwork-delete", f"delete ClusterNetwork default (vxlanPort {cn.vxlan_port}) so the "
                                                           f"controllers re-create it with {i.new_port}; SDN pods must not restart "
                                                           f"until it is back", self.gate_policy, required=True)
            self.kit_step("F", "delete ClusterNetwork default")
            await m.delete_cluster_network()
        if not self.st.restart_order:
            self.st.restart_order = plan.restart_order([x.name for x in i.masters], await m.leader(), i.master.restart_order)
        pending = [n for n in self.st.restart_order if n not in self.board.nodes
                   or self.board.nodes[n].phase not in (NodePhase.DONE, NodePhase.SKIPPED)]
        if pending:
            group = f"masters-{len(self.batches.groups) + 1}"
            self.batches.add_group(group, max_unavailable=1, nodes=pending)
            self.kit_step("F", f"masters restarted one at a time (the controllers leader last): {', '.join(pending)}")
            await self.batches.run_group(group)
            await self.control.safe_point()
            left = {n: self.board.nodes[n] for n in pending if self.board.nodes[n].phase not in (NodePhase.DONE, NodePhase.SKIPPED)}
            if left:
                raise StepFailed("masters not restarted: " + "; ".join(f"{n} {s.phase}: {s.reason}" for n, s in left.items()))
        while True:
            self.kit_step("F", "ClusterNetwork default back with the new port")
            cn = await m.cluster_network_back()
            if cn.exists and cn.vxlan_port == i.new_port:
                return
            what = f"ClusterNetwork default is back with vxlanPort {cn.vxlan_port}" if cn.exists else "ClusterNetwork default did not come back"
            leader = await m.leader()
            await self.gates.step(f"clusternetwork-retry-{m.cn_deletes}", f"{what}: delete it again and restart the controllers "
                                                                          f"of the leader {leader}", self.gate_policy, required=True)
            if cn.exists:
                await m.delete_cluster_network()
            if leader is not None:
                await m.restart_controllers(leader)

    async def _start_master(self, node: str, group: Group, attempt: int) -> workflow.ChildWorkflowHandle:
        async def step(stop: LocalStop) -> NodeRunResult:
            try:
                await self.masters.restart(node, self.board.nodes[node], stop)
            except (StepFailed, HostStepFailed) as exc:
                return NodeRunResult(node=node, outcome="failed", attempt=attempt, reason=str(exc), finished_at=workflow.now())
            return NodeRunResult(node=node, outcome="done", attempt=attempt, finished_at=workflow.now())

        return await local_run(node, attempt, step)

    # --- G: the DaemonSet restored from its record, read back ------------------------------------------

    async def phase_g(self) -> None:
        i = self.inp
        cn = await self.masters.cluster_network()
        read = await self.sdn.ports()
        if not (cn.exists and cn.vxlan_port == i.new_port) or read.failed:
            raise StepFailed(f"not restoring the stock image: ClusterNetwork {self.st.cluster_network}, nodes not on "
                             f"{i.new_port}: {', '.join(read.failed) or 'none'} (a stock SDN would rebuild them)")
        self.kit_step("G", f"DaemonSet {i.sdn.namespace}/{i.sdn.daemonset} restored from the record, read back")
        image = await self.restore_daemonset()
        self.kit_step("G", f"sdn pods replaced node by node on {image}")
        await self.sdn.roll_pods(image)
        self.restored.append(f"sdn pods on {len(self.sdn.names)} nodes: Ready on {image}")
        after: PreflightResult = await acts.call("preflight_vxlan_port", PreflightInput(sdn=i.sdn), PreflightResult,
                                                 seconds=60, heartbeat=True, timeouts=self.timeouts)
        base = self.pre.workload_restarts if self.pre else {}
        self.restarted_pods = sorted(uid for uid, n in after.workload_restarts.items() if uid in base and n > base[uid])
        read = await self.sdn.ports()
        if read.failed:
            raise StepFailed(f"after the restore, nodes not on {i.new_port}: {', '.join(read.failed)}")

    async def restore_daemonset(self) -> str:
        """Revert this run's DaemonSet record, then (a reverse run) the one the reversed run left,
        each read back. Returns the image the DaemonSet reads back with; raises StepFailed naming
        every difference."""
        names = [DS_RECORD] if DS_RECORD in self.records.changed() else []
        if self.forward is not None:
            self.records.restore_entries([self.forward])
            names.insert(0, FORWARD_RECORD)  # revert_all goes last first: this run's own record first
        restored, problems = await self.records.revert_all(names)
        self.restored += [r for r in restored if r not in self.restored]
        if problems:
            raise StepFailed("DaemonSet not restored: " + "; ".join(problems))
        return self.original_image()

    def original_image(self) -> str:
        """The image the DaemonSet had before any of it changed (the reversed run's record first)."""
        for name in (FORWARD_RECORD, DS_RECORD):
            rec = self.records.records.get(name)
            field = rec.value(self.image_path()) if rec is not None else None
            if field is not None and field.present:
                return str(field.value)
        assert self.pre is not None
        return self.pre.daemonset.image

    # --- the kit's hooks: what an ending carries, undoes and leaves ----------------------------------------

    def kit_result_fields(self) -> dict[str, object]:
        i, res = self.inp, self.sdn.result
        return dict(
            step=self.st.step, old_port=i.old_port, new_port=i.new_port, preconditions=[p.line() for p in self.st.preconditions],
            fanout=res, outage_window_seconds=res.window_seconds if res else None, sdn_nodes=dict(self.st.sdn_nodes),
            api_unavailable=list(self.masters.api_intervals),
            api_all_down=plan.all_down(self.masters.api_intervals, [m.name for m in i.masters], workflow.now()),
            daemonset=self.pre.daemonset if self.pre else None, file_records=dict(self.masters.file_records),
            cluster_network_record=self.masters.cn_record, restarted_workload_pods=self.restarted_pods,
            failed_nodes={r.node: r.error for r in self.sdn.rows.values() if not r.ok}, restored=list(self.restored),
        )

    async def kit_undo(self, why: str) -> tuple[list[str], list[str]]:
        """Before the fan-out: the DaemonSet back from its record (read back), its pods replaced
        on the original image, the firewall rule removed where this run added it (read back)."""
        restored, problems = await super().kit_undo(why)
        record = self.st.records.get(DS_RECORD)
        if record is not None and record.state == "reverted":
            image = self.original_image()
            try:
                await self.sdn.roll_pods(image, stoppable=False)
                restored.append(f"sdn pods on {len(self.sdn.names)} nodes: Ready on {image}")
            except ActivityError as err:
                problems.append(f"sdn pods not all replaced on {image}: {failure_message(err)}")
        removed, failed = await self.sdn.remove_firewall()
        return restored + removed, problems + failed

    def kit_left_changed(self) -> list[ChangedItem]:
        """The records (the DaemonSet) and what records cannot hold: the firewall rule, the
        master-config files, ClusterNetwork ``default``, the nodes the fan-out switched."""
        i, fw, undo = self.inp, self.inp.firewall, self.kit_full_revert_command()
        items = super().kit_left_changed()
        past = self.control.point_of_no_return is not None
        for n in sorted(self.sdn.firewall_added):
            delete = " ".join(plan.iptables("-D", fw.chain, i.new_port)) + (f" && {' '.join(fw.save_cmd)}" if fw.persist else "")
            items.append(ChangedItem(target=f"host {n}", what=f"iptables rule udp/{i.new_port} in {fw.chain}"
                                     + (f", saved to {fw.saved_rules_path}" if fw.persist else "")
                                     + ("; needed while any node is on it" if past else ""),
                                     undo=None if past else f"ssh {n} '{delete}'"))
        for n in self.masters.edited():
            items.append(ChangedItem(target=f"host {n}", what=f"{i.master.config_path}: networkConfig.vxlanPort {i.new_port} "
                                     "(the original is in the record ConfigMap)", undo=undo))
        if self.masters.cn_deletes:
            items.append(ChangedItem(target="ClusterNetwork default", what=f"deleted (was vxlanPort {i.old_port}); now "
                                     f"{self.st.cluster_network}", undo=undo))
        items += [ChangedItem(target=f"host {n}", what=f"vxlan0 options:dst_port {i.new_port} (was {r.before})", undo=undo)
                  for n, r in sorted(self.sdn.rows.items()) if r.ok and r.applied]
        return items

    def kit_full_revert_command(self) -> str | None:
        changed = (self.records.changed() or self.sdn.firewall_added or self.masters.edited() or self.masters.cn_deletes
                   or any(r.applied for r in self.sdn.rows.values()))
        return f"lockkeeper revert {workflow.info().workflow_id} --full" if changed else None
