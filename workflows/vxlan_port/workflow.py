"""VxlanPortChangeWorkflow: change the OpenShift SDN VXLAN port on a live 3.11 cluster (R5).

Phases A–H of procedures-spec §7.3, each visible in ``status`` (``stage``, ``step``, node and
master rows, barriers, health waits, records, gates):

A preflight and record (the full ``sdn`` DaemonSet) · B image present on every node (barrier) ·
C DaemonSet on the custom image without the triggers annotation, pods replaced node by node ·
D firewall rule on every node (barrier: ``iptables -C``, ``-A``, save) · E gate, then the
fan-out as one activity (failed nodes retried at once; still failing: an urgent gate, approve
retries, reject switches every node back) · F masters (:mod:`.masters`) · G the DaemonSet
restored from the record once the ClusterNetwork and every node are on the new port · H report.

A phase that cannot complete stops the run at a *stop point* (paused, naming the nodes): resume
runs the phase again (every step checks first), abort ends the run, and before the point of no
return (the fan-out) the ``revert`` update restores the DaemonSet and removes the new firewall
rule, then ends the run as reverted. After it, ``revert`` is refused without ``full`` (the whole
change in reverse is a new run: :func:`workflows.vxlan_port.plan.reverse_input`).
"""

from __future__ import annotations

import json

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.vxlan_port.models import (
        CheckResult,
        ClusterNetworkState,
        DaemonSetRecord,
        FanoutResult,
        FileRecord,
        MasterApiInput,
        NodeSwitch,
        PreflightInput,
        PreflightResult,
        SaveRecordInput,
        SwitchTarget,
    )
    from workflows.kit import calls as acts
    from workflows.kit.control import Aborted, check_in_time
    from workflows.kit.host import HostStepFailed, HostSteps
    from workflows.kit.models import ApprovalRules, GateKind, GateState, GateTimeoutOutcome, ProcedurePhase, RecordStatus, failure_message
    from workflows.kit.planning import planning_abort_message, planning_call
    from workflows.kit.procedure import ProcedureWorkflow
    from workflows.kit.scopes import cluster_scope
    from workflows.vxlan_port import plan
    from workflows.vxlan_port.masters import MasterSteps
    from workflows.vxlan_port.models import (
        PROCEDURE_VXLAN_PORT,
        STAGE_NAMES,
        ApiInterval,
        MasterRow,
        NodeRow,
        RevertAnswer,
        RevertInput,
        VxlanPortChangeInput,
        VxlanPortChangeResult,
        VxlanStatus,
    )
    from workflows.vxlan_port.steps import NodeSteps, StepFailed


class RevertNow(Exception):
    """A revert was requested before the point of no return: undo, then end as reverted."""


@workflow.defn
class VxlanPortChangeWorkflow(NodeSteps, MasterSteps, ProcedureWorkflow):
    """Input :class:`VxlanPortChangeInput`, status :class:`VxlanStatus`, result
    :class:`VxlanPortChangeResult` (see the module doc)."""

    @workflow.init
    def __init__(self, input: VxlanPortChangeInput) -> None:
        self.inp = input
        self.st = VxlanStatus(old_port=input.old_port, new_port=input.new_port,
                              masters={m.name: MasterRow(name=m.name) for m in input.masters})
        self.kit_init(procedure=PROCEDURE_VXLAN_PORT, noun="port change", cluster=input.cluster, status=self.st,
                      rules=ApprovalRules(requested_by=input.requested_by, four_eyes=input.four_eyes,
                                          allowed_approvers=input.allowed_approvers),
                      search_attributes=input.search_attributes, pause_on_reject=False, reject_note="the run stops here")
        self.host_steps = HostSteps(self.gates, board=self.st.host_steps, on_change=self.touch,
                                    gate_timeout_seconds=input.gate_timeout_s)
        self.node_names: list[str] = list(input.nodes)
        self.pre: PreflightResult | None = None
        self.ds_record: DaemonSetRecord | None = None
        self.ds_changed = False
        self.firewall_added: set[str] = set()
        self.file_records: dict[str, FileRecord] = {}
        self.cn_record: dict | None = None
        self.cn_deletes = 0
        self.order: list[str] = []
        self.api_intervals: list[ApiInterval] = []
        self.fan_rows: dict[str, NodeSwitch] = {}
        self.fanout_result: FanoutResult | None = None
        self.pnr = False
        self.revert_req: RevertInput | None = None
        self.restarted_pods: list[str] = []
        self.controller_restarts: dict[str, int] = {}

    # --- the revert update ----------------------------------------------------------------------

    @workflow.update
    async def revert(self, input: RevertInput) -> RevertAnswer:
        """Before the fan-out: restore the DaemonSet and remove the new firewall rule, then end
        as reverted (the run does it at its next safe point or stop point)."""
        self.revert_req = input
        self.st.revert_requested = True
        self.touch()
        return RevertAnswer(mode="in-run", message=f"revert requested by {input.identity}: the DaemonSet is restored "
                                                   f"from the record and the udp/{self.inp.new_port} rule removed")

    @revert.validator
    def _validate_revert(self, input: RevertInput) -> None:
        check_in_time(input, "revert")
        if not input.identity.strip():
            raise ValueError("an identity is required to revert")
        if self.control.finished():
            raise ValueError(f"port change already {self.control.base_phase}")
        if self.revert_req is not None:
            raise ValueError("revert already requested")
        if self.pnr:
            if not input.full:
                raise ValueError(f"the fan-out (phase E) has switched nodes to {self.inp.new_port}: reverting now means "
                                 f"the whole change in reverse; use --full")
            raise ValueError("this run is past the fan-out and still running: abort it first, then "
                             "`lockkeeper revert ID --full` starts the change in reverse")

    # --- stages, stop points, gates ------------------------------------------------------------

    def check_revert(self) -> None:
        if self.revert_req is not None and not self.pnr:
            raise RevertNow()

    async def gate(self, gate_id: str, what: str, *, urgent: bool = False) -> bool:
        """Wait for approval of ``gate_id`` (already passed: return at once). True approved;
        False rejected or timed out (the caller decides). Raises Aborted / RevertNow."""
        if gate_id in self.gates.passed:
            return True
        text = ("URGENT: " if urgent else "") + what
        g = self.gates.open(gate_id, GateKind.STEP, timeout_seconds=self.inp.gate_timeout_s, comment=text,
                            opened_by="lockkeeper", record_comment=text)
        self.touch()
        ok = await self.gates.wait(g, timeout_outcome=GateTimeoutOutcome.REJECT, timeout_seconds=self.inp.gate_timeout_s,
                                   interrupt=lambda: self.revert_req is not None and not self.pnr, abort_comment="revert or abort requested")
        self.touch()
        await self.control.safe_point()
        self.check_revert()
        if not ok and g.state in (GateState.REJECTED, GateState.TIMED_OUT) and not urgent:
            raise StepFailed(f"gate {gate_id} {g.state} by {g.decided_by}" + (f": {g.comment}" if g.comment and g.comment != text else ""))
        return ok

    async def stop_point(self, reason: str) -> None:
        """Pause naming ``reason``; resume returns (the stage runs again), abort raises
        Aborted, a revert (allowed only before the fan-out) raises RevertNow."""
        hint = "resume runs this stage again; abort ends the run" + ("" if self.pnr else "; `lockkeeper revert` restores what changed")
        self.control.pause(f"stage {self.st.stage} stopped: {reason}; {hint}")
        await workflow.wait_condition(lambda: not self.control.paused or self.control.abort or (self.revert_req is not None and not self.pnr))
        if self.control.abort:
            raise Aborted(self.control.abort_reason)
        if self.revert_req is not None and not self.pnr:
            self.control.unpause_quietly()
            raise RevertNow()

    async def stage(self, name: str, fn: object) -> None:
        while True:
            await self.control.safe_point()
            self.check_revert()
            self.st.stage, self.st.step = name, STAGE_NAMES[name]
            self.touch()
            try:
                await fn()  # type: ignore[operator]
                return
            except (StepFailed, HostStepFailed) as exc:
                reason = str(exc)
            except ActivityError as err:
                reason = failure_message(err)
            workflow.logger.warning("stage %s stopped: %s", name, reason)
            await self.stop_point(reason)

    async def mirror(self, data: dict[str, str]) -> None:
        """Mirror records to ConfigMap ``<record_namespace>/lockkeeper-record-<id>`` (§1.6), so
        they can be read without Temporal."""
        name = plan.record_configmap_name(self.st.workflow_id)
        await acts.call("save_vxlan_record", SaveRecordInput(
            namespace=self.inp.record_namespace, name=name, data=data,
            labels={"lockkeeper.io/procedure": PROCEDURE_VXLAN_PORT}), str)
        self.st.record_configmap = f"{self.inp.record_namespace}/{name}"
        self.touch()

    # --- A ----------------------------------------------------------------------------------------

    async def phase_a(self) -> None:
        i = self.inp
        try:  # read-only: the planning retry policy fails fast on API errors, an abort stops it (issue 18)
            pre: PreflightResult = await planning_call(self.control, "preflight_vxlan_port", PreflightInput(
                sdn=self.sdn_ref(), nodes=i.nodes, masters=[m.name for m in i.masters]), PreflightResult, seconds=60,
                heartbeat=acts.DEFAULT_TIMEOUTS.heartbeat)  # it beats while it lists
        except Aborted as stop:  # nothing written yet: the run ends aborted (run), its lease released
            raise Aborted(planning_abort_message(self.control, stop)) from None
        except ActivityError as err:
            api = acts.planning_api_failure(err, "preflight")
            if api is None:
                raise
            self.control.base_phase = ProcedurePhase.FAILED
            self.touch()
            await self.leases.release()
            raise api from err
        self.pre = pre
        self.node_names = sorted(pre.nodes)
        for n in self.node_names:
            row = self.st.node_rows.setdefault(n, NodeRow(name=n))
            pod = pre.sdn_pods.get(n)
            row.sdn_pod, row.sdn_image = (pod.name, pod.image) if pod else (None, None)
        ports: dict[str, int | None] = {}
        if all(n in pre.sdn_pods and pre.sdn_pods[n].ready for n in self.node_names):
            read = await self.fanout(await self.resolve(self.node_names), i.old_port, apply=False)
            ports = {r.node: r.before for r in read.nodes}
            for r in read.nodes:
                self.st.node_rows[r.node].port = r.before
        problems = plan.preflight_problems(pre, ports, i)
        for m in i.masters:
            r: CheckResult = await acts.call("check_master_api", MasterApiInput(api_url=m.api_url, ca_file=m.ca_file, insecure=m.insecure),
                                             CheckResult, seconds=10)
            self.st.masters[m.name].api = "ready" if r.ok else "not ready"
            if not r.ok:
                problems.append(f"API of {m.name} not ready: {r.detail}")
        self.st.cluster_network = f"vxlanPort {pre.cluster_network.vxlan_port}" if pre.cluster_network.exists else "absent"
        self.touch()
        if problems:
            raise StepFailed("preflight: " + "; ".join(problems))
        for row in self.st.masters.values():
            row.api = "pending"
        if self.ds_record is None:
            self.ds_record = pre.daemonset
            self.st.records["daemonset"] = RecordStatus(
                name="daemonset", object=f"DaemonSet {pre.daemonset.namespace}/{pre.daemonset.name}",
                paths=[f"/spec/template/spec/containers/{pre.daemonset.container_index}/image",
                       "/metadata/annotations/image.openshift.io~1triggers"],
                detail=f"full object at resourceVersion {pre.daemonset.resource_version}; image {pre.daemonset.image}")
            self.st.records["clusternetwork"] = RecordStatus(name="clusternetwork", object="ClusterNetwork default", state="recorded",
                                                             detail="taken right before the delete")
        if not self.st.record_configmap and not i.dry_run:
            await self.mirror({"daemonset.json": json.dumps(self.ds_record.sanitized_object, indent=1, sort_keys=True),
                               "daemonset.image": self.ds_record.image, "daemonset.triggers": self.ds_record.triggers or ""})
        self.touch()

    # --- E ----------------------------------------------------------------------------------------

    async def phase_e(self) -> None:
        i = self.inp
        if self.fanout_result is not None and not self.fanout_result.failed:
            return
        targets = await self.resolve(self.node_names)
        where = ", ".join(f"{t.node}:{t.pod or t.container_id}" for t in targets)
        await self.gate("fanout", f"switch vxlan0 dst_port {i.old_port} -> {i.new_port} on {len(targets)} nodes at once "
                                  f"(point of no return; cross-node traffic splits until all are done). Targets: {where}")
        self.pnr = self.st.point_of_no_return = True
        self.touch()
        tries = 0
        while True:
            todo = [t for t in targets if t.node not in self.fan_rows or not self.fan_rows[t.node].ok]
            res = await self.switch_all(i.new_port, todo, self.fan_rows)
            self.fanout_result = res
            if not res.failed:
                return
            tries += 1
            failed = ", ".join(f"{n} ({self.fan_rows[n].error or 'not switched'})" for n in res.failed)
            retry = await self.gate(f"fanout-failed-{tries}", f"nodes still on {i.old_port}: {failed}; cross-node traffic between "
                                                            f"them and the rest is down. Approve: retry them; reject: switch every "
                                                            f"node back to {i.old_port}", urgent=True)
            if retry:
                try:
                    fresh = {t.node: t for t in await self.resolve(res.failed)}
                    targets = [fresh.get(t.node, t) for t in targets]
                except ActivityError as err:
                    workflow.logger.warning("re-resolving failed nodes: %s", failure_message(err))
                continue
            back_rows: dict[str, NodeSwitch] = {}
            back = await self.switch_all(i.old_port, targets, back_rows)
            if back.failed:
                raise StepFailed(f"fan-out back to {i.old_port} failed on {', '.join(back.failed)}")
            self.fan_rows.clear()
            self.fanout_result = None
            self.pnr = self.st.point_of_no_return = False
            self.gates.passed.discard("fanout")
            raise StepFailed(f"fan-out failed on {failed}; every node switched back to {i.old_port}")

    # --- G ----------------------------------------------------------------------------------------

    async def phase_g(self) -> None:
        i = self.inp
        if self.ds_changed:
            cn: ClusterNetworkState = await acts.call("get_cluster_network", None, ClusterNetworkState)
            targets: list[SwitchTarget] = await self.resolve(self.node_names)
            read = await self.fanout(targets, i.new_port, apply=False)
            if not (cn.exists and cn.vxlan_port == i.new_port) or read.failed:
                raise StepFailed(f"not restoring the stock image: ClusterNetwork vxlanPort {cn.vxlan_port}, nodes not on "
                                 f"{i.new_port}: {', '.join(read.failed) or 'none'} (a stock SDN would rebuild them)")
            await self.restore_ds()
        after: PreflightResult = await acts.call("preflight_vxlan_port", PreflightInput(sdn=self.sdn_ref(), nodes=self.node_names),
                                                 PreflightResult, seconds=60, heartbeat=True)
        base = self.pre.workload_restarts if self.pre else {}
        self.restarted_pods = sorted(uid for uid, n in after.workload_restarts.items() if uid in base and n > base[uid])
        read = await self.fanout(await self.resolve(self.node_names), i.new_port, apply=False)
        for r in read.nodes:
            self.st.node_rows[r.node].port = r.before
        self.touch()
        if read.failed:
            raise StepFailed(f"after the restore, nodes not on {i.new_port}: {', '.join(read.failed)}")

    # --- run --------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: VxlanPortChangeInput) -> VxlanPortChangeResult:
        self.kit_status_attributes()
        # Every node, every master and the ClusterNetwork: nothing else may run on this cluster.
        await self.leases.acquire([cluster_scope(input.cluster)])
        self.st.leases = list(self.leases.held)
        self.touch()
        try:
            await self.stage("A", self.phase_a)
            if input.dry_run:
                return await self.finish("dry-run", ProcedurePhase.DONE, f"preflight passed; would change {len(self.node_names)} "
                                         f"nodes and {len(input.masters)} masters from {input.old_port} to {input.new_port}")
            for name, fn in (("B", self.phase_b), ("C", self.phase_c), ("D", self.phase_d), ("E", self.phase_e),
                             ("F", self.phase_f), ("G", self.phase_g)):
                await self.stage(name, fn)
        except RevertNow:
            return await self.undo()
        except Aborted as ab:
            return await self.finish("aborted", ProcedurePhase.ABORTED, f"aborted in stage {self.st.stage}: {ab.reason}"
                                     + ("" if not self.ds_changed else "; the DaemonSet still runs the custom image"))
        self.st.stage, self.st.step = "H", STAGE_NAMES["H"]
        return await self.finish("completed", ProcedurePhase.DONE, f"every node and ClusterNetwork default on {input.new_port}; "
                                 f"DaemonSet restored; {plan.inventory_reminder(input.new_port)}")

    async def undo(self) -> VxlanPortChangeResult:
        """The revert before E: DaemonSet back from the record (pods node by node), new rule removed."""
        req = self.revert_req
        assert req is not None
        self.st.stage, self.st.step = "revert", f"revert requested by {req.identity}"
        self.touch()
        try:
            if self.ds_record is not None:
                await self.restore_ds()
            failed = await self.remove_firewall()
        except (ActivityError, StepFailed) as err:
            return await self.finish("failed", ProcedurePhase.FAILED, f"revert failed: {failure_message(err)}")
        if failed:
            return await self.finish("failed", ProcedurePhase.FAILED, f"DaemonSet restored; rule removal failed on {'; '.join(failed)}")
        return await self.finish("reverted", ProcedurePhase.DONE, f"reverted by {req.identity}: DaemonSet restored from the record, "
                                 f"udp/{self.inp.new_port} rule removed where this run added it")

    async def finish(self, outcome: str, phase: str, message: str) -> VxlanPortChangeResult:
        i = self.inp
        self.control.base_phase = phase
        self.touch()
        await self.leases.release()
        await workflow.wait_condition(workflow.all_handlers_finished)
        masters = [m.name for m in i.masters]
        return VxlanPortChangeResult(
            workflow_id=self.st.workflow_id, outcome=outcome, message=message, gate_history=list(self.st.gate_history),
            started_at=self.st.started_at, finished_at=workflow.now(), stage=self.st.stage, old_port=i.old_port, new_port=i.new_port,
            fanout=self.fanout_result, outage_window_s=self.fanout_result.window_s if self.fanout_result else None,
            node_timings=dict(self.st.node_rows), api_unavailable=list(self.api_intervals),
            api_all_down=plan.all_down(self.api_intervals, masters, workflow.now()), daemonset_record=self.ds_record,
            daemonset_restored=self.ds_record is not None and not self.ds_changed, file_records=dict(self.file_records),
            cluster_network_record=self.cn_record, restarted_workload_pods=self.restarted_pods,
            inventory_reminder=plan.inventory_reminder(i.new_port) if outcome == "completed" else "",
            failed_nodes={r.node: r.error for r in self.fan_rows.values() if not r.ok},
        )
