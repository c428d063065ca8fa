"""Phases B, C, D, E and G of the VXLAN port change, as a mixin of the workflow class.

Every step checks before it acts, so a replayed or resumed run re-does nothing that holds:
the barriers re-check every node (procedures-spec §1.4), the DaemonSet patch sees the target
values already there, a pod replacement sees the Ready pod on the image, the fan-out reads each
port before it sets it (§1.5).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.host.models import CommandResult, RunCommandInput
    from activities.vxlan_port.models import (
        DsPatchInput,
        DsPatchResult,
        FanoutInput,
        FanoutResult,
        NodeSwitch,
        ReplacePodInput,
        ReplacePodResult,
        ResolveTargetsInput,
        SdnRef,
        SwitchTarget,
        summarise,
    )
    from workflows.kit import calls as acts
    from workflows.kit.barrier import Barrier, BarrierResult
    from workflows.kit.models import failure_message
    from workflows.vxlan_port import plan

if TYPE_CHECKING:
    from workflows.vxlan_port.workflow import VxlanPortChangeWorkflow as _Base
else:
    _Base = object


class StepFailed(Exception):
    """A phase could not complete; ``message`` names the nodes and why (shown at the stop point)."""


class NodeSteps(_Base):
    """Mixin: phases B, C, D, E, G (see the module doc). Uses the workflow's ``inp``, ``st``,
    ``pre``, ``gates``, ``control`` and ``touch``."""

    # --- helpers ---------------------------------------------------------------------------------

    def sdn_ref(self) -> SdnRef:
        i = self.inp
        return SdnRef(namespace=i.namespace, daemonset=i.daemonset, label_selector=i.label_selector, container=i.container)

    async def host_cmd(self, node: str, argv: list[str], *, timeout: float = 60.0, once: bool = False) -> CommandResult:
        """``run_node_command`` on ``node``'s host access; ``once``: never retried (not safe to repeat)."""
        cmd = RunCommandInput(access=self.inp.host_access[node], argv=argv, timeout_seconds=timeout)
        return await workflow.execute_activity(
            acts.RUN_NODE_COMMAND, cmd,
            result_type=CommandResult, start_to_close_timeout=timedelta(seconds=cmd.bound_seconds() + 30),
            heartbeat_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=1) if once else acts.DEFAULT_RETRY,
        )

    async def run_barrier(self, name: str, step: Any, *, concurrency: int | None = None) -> BarrierResult[str]:
        """One round of a barrier over every node (the caller stops on failure)."""
        barrier = Barrier(name, self.node_names, step, ok=lambda r: r, concurrency=concurrency, board=self.st.barriers,
                          on_change=self.touch)
        return await barrier.run()

    # --- B: image present -----------------------------------------------------------------------

    async def image_step(self, node: str) -> bool | str:
        row, img = self.st.node_rows[node], self.inp.custom_image
        check = [*self.inp.image_present_cmd, img]
        if (await self.host_cmd(node, check)).ok:
            row.image_present = "present"
            self.touch()
            return True
        row.image_present = "pulling"
        self.touch()
        pulled = await self.host_cmd(node, [*self.inp.pull_cmd, img], timeout=self.inp.pull_timeout_s)
        verify = await self.host_cmd(node, check)
        row.image_present = "pulled" if verify.ok else "missing"
        self.touch()
        if verify.ok:
            return True
        return f"{img} not present after pull: {pulled.summary()}"

    async def phase_b(self) -> None:
        res = await self.run_barrier("image-present", self.image_step, concurrency=self.inp.pull_parallelism)
        if not res.ok:
            raise StepFailed(res.message + "; " + "; ".join(f"{n}: {w}" for n, w in res.failed.items()))

    # --- C and G: the DaemonSet, then its pods node by node --------------------------------------

    async def patch_ds(self, to_image: str, to_triggers: str | None, from_image: str, from_triggers: str | None) -> DsPatchResult:
        rec = self.ds_record
        assert rec is not None
        return await acts.call("patch_sdn_daemonset", DsPatchInput(
            sdn=self.sdn_ref(), container_index=rec.container_index, from_image=from_image, to_image=to_image,
            from_triggers=from_triggers, to_triggers=to_triggers), DsPatchResult)

    async def roll_pods(self, image: str) -> None:
        """OnDelete: each node's SDN pod replaced and Ready on ``image`` before the next."""
        for node in self.node_names:
            await self.control.safe_point()
            row = self.st.node_rows[node]
            self.st.step = f"sdn pod on {node} -> {image}"
            row.detail = f"replacing sdn pod ({image})"
            self.touch()
            res: ReplacePodResult = await acts.call(
                "replace_sdn_pod", ReplacePodInput(sdn=self.sdn_ref(), node=node, image=image, timeout_s=self.inp.pod_ready_timeout_s),
                ReplacePodResult, seconds=self.inp.pod_ready_timeout_s, heartbeat=True)
            row.sdn_pod, row.sdn_image = res.pod, image
            row.detail = f"sdn pod {res.pod} Ready on {image}" + (f" (replaced {res.deleted})" if res.deleted else "")
            self.touch()

    async def phase_c(self) -> None:
        rec = self.ds_record
        assert rec is not None
        self.st.step = "patch daemonset: custom image, triggers annotation removed"
        self.touch()
        res = await self.patch_ds(self.inp.custom_image, None, rec.image, rec.triggers)
        self.ds_changed = True
        self.st.records["daemonset"].state = "changed"
        self.st.records["daemonset"].detail = res.detail
        self.touch()
        await self.roll_pods(self.inp.custom_image)

    async def restore_ds(self) -> None:
        """Put the recorded image and triggers annotation back, then roll the pods (phase G and
        the revert before E)."""
        rec = self.ds_record
        assert rec is not None
        self.st.step = "restore daemonset from the record"
        self.touch()
        await self.patch_ds(rec.image, rec.triggers, self.inp.custom_image, None)
        self.st.records["daemonset"].state = "reverted"
        self.st.records["daemonset"].detail = f"image {rec.image} and triggers annotation restored"
        self.touch()
        await self.roll_pods(rec.image)
        self.ds_changed = False

    # --- D: firewall ----------------------------------------------------------------------------

    async def firewall_step(self, node: str) -> bool | str:
        i, row = self.inp, self.st.node_rows[node]
        check = plan.iptables("-C", i.firewall_chain, i.new_port)
        res = await self.host_cmd(node, check)
        if not res.ok:
            row.firewall = "adding"
            self.touch()
            try:  # `-A` twice would add the rule twice: once, then the check decides
                await self.host_cmd(node, plan.iptables("-A", i.firewall_chain, i.new_port), once=True)
            except ActivityError as err:
                row.detail = f"iptables -A: {failure_message(err)}"
            res = await self.host_cmd(node, check)
            if not res.ok:
                row.firewall = "failed"
                self.touch()
                return f"rule for udp/{i.new_port} missing in {i.firewall_chain}: {res.summary()}"
            self.firewall_added.add(node)
        if i.persist_firewall:
            saved = await self.host_cmd(node, i.save_cmd)
            grep = await self.host_cmd(node, plan.saved_rule_check(i.new_port, i.saved_rules_path))
            if not (saved.ok and grep.ok):
                row.firewall = "not-saved"
                self.touch()
                return f"rule not saved to {i.saved_rules_path}: {(saved if not saved.ok else grep).summary()}"
        row.firewall = "ok"
        self.touch()
        return True

    async def phase_d(self) -> None:
        res = await self.run_barrier("firewall", self.firewall_step)
        if not res.ok:
            raise StepFailed(res.message + "; " + "; ".join(f"{n}: {w}" for n, w in res.failed.items()))

    async def remove_firewall(self) -> list[str]:
        """Revert before E: ``iptables -D`` the new rule where this run added it, then save.
        Returns the nodes where it failed."""
        i, failed = self.inp, []
        for node in sorted(self.firewall_added):
            res = await self.host_cmd(node, plan.iptables("-D", i.firewall_chain, i.new_port), once=True)
            check = await self.host_cmd(node, plan.iptables("-C", i.firewall_chain, i.new_port))
            if check.ok:
                failed.append(f"{node}: {res.summary()}")
                continue
            if i.persist_firewall:
                await self.host_cmd(node, i.save_cmd)
            self.st.node_rows[node].firewall = "removed"
        self.firewall_added -= {n for n in self.firewall_added if self.st.node_rows[n].firewall == "removed"}
        self.touch()
        return failed

    # --- E: the fan-out -------------------------------------------------------------------------

    async def resolve(self, nodes: list[str]) -> list[SwitchTarget]:
        i = self.inp
        access = {n: i.host_access[n] for n in nodes if n in i.host_access}
        return await acts.call("resolve_sdn_targets", ResolveTargetsInput(sdn=self.sdn_ref(), nodes=nodes, via=i.switch_via, access=access),
                               list[SwitchTarget], seconds=60, heartbeat=True)  # the host commands beat

    async def fanout(self, targets: list[SwitchTarget], port: int, *, apply: bool = True) -> FanoutResult:
        """One ``switch_vxlan_port`` activity; a crashed worker's retry resumes from heartbeats."""
        i = self.inp
        return await workflow.execute_activity(
            "switch_vxlan_port", FanoutInput(targets=targets, port=port, apply=apply, deadline_s=i.fanout_deadline_s),
            result_type=FanoutResult, start_to_close_timeout=timedelta(seconds=i.fanout_deadline_s + 30),
            heartbeat_timeout=timedelta(seconds=i.fanout_heartbeat_s),
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=i.fanout_attempts),
        )

    def show_fanout(self, rows: dict[str, NodeSwitch], port: int) -> None:
        for name, r in rows.items():
            row = self.st.node_rows[name]
            row.port = r.after if r.after is not None else r.before
            row.switch = "switched" if r.ok and r.applied else ("already" if r.ok else "failed")
            row.t_apply_start, row.t_apply_end = r.t_apply_start, r.t_apply_end
            row.detail = r.error
        ok = sum(1 for r in rows.values() if r.ok)
        self.st.switched = f"{ok}/{len(self.node_names)} on {port}"
        self.st.partial_switch = 0 < ok < len(self.node_names)
        self.touch()

    async def switch_all(self, port: int, targets: list[SwitchTarget], rows: dict[str, NodeSwitch]) -> FanoutResult:
        """The fan-out of ``targets`` plus the immediate retries of failed nodes (up to
        ``fanout_attempts`` rounds, their targets re-resolved), merged into ``rows`` (node →
        latest outcome). Returns the merged result over every node in ``rows``."""
        todo = targets
        for round_ in range(self.inp.fanout_attempts):
            res = await self.fanout(todo, port)
            for r in res.nodes:
                earlier = rows.get(r.node)
                if r.ok and not r.applied and earlier is not None and earlier.applied and earlier.ok:
                    continue  # switched by an earlier round: keep its timings
                rows[r.node] = r
            self.show_fanout(rows, port)
            failed = [n for n in self.node_names if n in rows and not rows[n].ok]
            if not failed or round_ + 1 == self.inp.fanout_attempts:
                break
            try:
                todo = await self.resolve(failed)
            except ActivityError as err:
                workflow.logger.warning("re-resolving %s failed: %s", failed, failure_message(err))
                todo = [t for t in targets if t.node in failed]
        merged = summarise(port, [rows[n] for n in self.node_names if n in rows], attempts=1)
        self.st.fanout_window_s = merged.window_s
        self.touch()
        return merged
