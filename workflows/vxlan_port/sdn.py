"""The VXLAN port change on every node: image present (B), sdn pods replaced (C, G), firewall
rule (D) and the fan-out (E), as one component with its own state (:class:`SdnNodes`).

Every step checks before it acts, so a resumed run re-does nothing that holds: the barriers
re-check every node (procedures-spec §1.4), a pod replacement leaves a Ready pod on the image
alone, the fan-out reads each port before it sets it (§1.5). What this run added (the firewall
rule where it was missing) is remembered, so an abort before the fan-out removes exactly that.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.host.models import CommandResult
    from activities.vxlan_port.models import (
        FanoutInput,
        FanoutResult,
        NodeSwitch,
        ReplacePodInput,
        ReplacePodResult,
        ResolveTargetsInput,
        SwitchTarget,
        summarise,
    )
    from workflows.kit import calls as acts
    from workflows.kit.barrier import Barrier
    from workflows.kit.control import Control
    from workflows.kit.host import HostSteps
    from workflows.kit.models import failure_message
    from workflows.vxlan_port import plan
    from workflows.vxlan_port.models import SdnNode, VxlanPortChangeInput, VxlanStatus


class StepFailed(Exception):
    """A stage could not complete; the message names the nodes and why (the stage's stop point)."""


class SdnNodes:
    """The per-node steps of one run over ``names`` (status rows in ``st.sdn_nodes``); host
    commands through the kit's ``steps`` (:class:`workflows.kit.host.HostSteps`)."""

    def __init__(self, inp: VxlanPortChangeInput, st: VxlanStatus, control: Control, touch: Callable[[], None],
                 timeouts: acts.Timeouts, steps: HostSteps) -> None:
        self.inp, self.st, self.control, self.touch, self.timeouts = inp, st, control, touch, timeouts
        self.steps = steps
        self.names: list[str] = []
        #: Nodes where this run added the new port's rule (an abort before the fan-out removes it there).
        self.firewall_added: set[str] = set()
        #: node -> latest fan-out outcome of the switch to the new port.
        self.rows: dict[str, NodeSwitch] = {}
        self.result: FanoutResult | None = None

    def row(self, node: str) -> SdnNode:
        return self.st.sdn_nodes.setdefault(node, SdnNode(name=node))

    async def host(self, node: str, argv: list[str], *, timeout: float = 60.0, once: bool = False) -> CommandResult:
        """``argv`` on ``node``'s host (the kit's :meth:`HostSteps.command`); ``once``: never
        retried (not safe to repeat: the check that follows decides)."""
        return await self.steps.command(argv, self.inp.host_access[node], timeout_seconds=timeout, once=once)

    async def barrier(self, name: str, step: Callable[[str], Awaitable[bool | str]], concurrency: int | None = None) -> None:
        """One round of ``step`` on every node; raises StepFailed naming the nodes that failed."""
        res = await Barrier(name, self.names, step, ok=lambda r: r, concurrency=concurrency, board=self.st.barriers,
                            on_change=self.touch).run()
        if not res.ok:
            raise StepFailed(res.message + "; " + "; ".join(f"{n}: {w}" for n, w in res.failed.items()))

    # --- B: the custom image on every node ------------------------------------------------------

    async def image_present(self) -> None:
        i = self.inp

        async def step(node: str) -> bool | str:
            row, check = self.row(node), [*i.images.present_cmd, i.custom_image]
            if (await self.host(node, check)).ok:
                row.image_present = "present"
                return True
            row.image_present = "pulling"
            self.touch()
            pulled = await self.host(node, [*i.images.pull_cmd, i.custom_image], timeout=i.images.timeout_seconds)
            ok = (await self.host(node, check)).ok
            row.image_present = "pulled" if ok else "missing"
            self.touch()
            return True if ok else f"{i.custom_image} not present after pull: {pulled.summary()}"

        await self.barrier("image-present", step, i.images.parallelism)

    # --- D: the firewall rule on every node -------------------------------------------------------

    async def firewall(self) -> None:
        i, fw = self.inp, self.inp.firewall

        async def step(node: str) -> bool | str:
            row, check = self.row(node), plan.iptables("-C", fw.chain, i.new_port)
            if not (await self.host(node, check)).ok:
                row.firewall = "adding"
                self.touch()
                lost = ""
                try:  # `-A` twice would add the rule twice: once, then the check decides
                    await self.host(node, plan.iptables("-A", fw.chain, i.new_port), once=True)
                except ActivityError as err:
                    row.detail = f"iptables -A: {failure_message(err)}"
                    lost = f" (the iptables -A call was lost: {failure_message(err)}; not repeated blindly)"
                res = await self.host(node, check)
                if not res.ok:
                    row.firewall = "failed"
                    return f"rule for udp/{i.new_port} missing in {fw.chain}{lost}: {res.summary()}"
                self.firewall_added.add(node)
            if fw.persist:
                saved = await self.host(node, fw.save_cmd)
                grep = await self.host(node, plan.saved_rule_check(i.new_port, fw.saved_rules_path))
                if not (saved.ok and grep.ok):
                    row.firewall = "not-saved"
                    return f"rule not saved to {fw.saved_rules_path}: {(saved if not saved.ok else grep).summary()}"
            row.firewall = "ok"
            self.touch()
            return True

        await self.barrier("firewall", step)

    async def remove_firewall(self) -> tuple[list[str], list[str]]:
        """Undo before the fan-out: ``iptables -D`` the new rule where this run added it, read
        back with ``-C`` (exit 1: gone), then save. Returns ``(removed, problems)`` lines."""
        i, fw = self.inp, self.inp.firewall
        removed, problems = [], []
        for node in sorted(self.firewall_added):
            try:
                res = await self.host(node, plan.iptables("-D", fw.chain, i.new_port), once=True)
                if (await self.host(node, plan.iptables("-C", fw.chain, i.new_port))).ok:
                    problems.append(f"host {node}: udp/{i.new_port} rule still in {fw.chain} ({res.summary()})")
                    continue
                if fw.persist:
                    await self.host(node, fw.save_cmd)
            except ActivityError as err:
                problems.append(f"host {node}: removing the udp/{i.new_port} rule: {failure_message(err)}")
                continue
            self.firewall_added.discard(node)
            self.row(node).firewall = "removed"
            removed.append(node)
        self.touch()
        return ([f"hosts {', '.join(removed)}: udp/{i.new_port} rule removed from {fw.chain}, read back absent"]
                if removed else []), problems

    # --- C and G: sdn pods replaced node by node -------------------------------------------------

    async def roll_pods(self, image: str, *, stoppable: bool = True) -> None:
        """OnDelete: each node's sdn pod replaced and Ready on ``image`` before the next (a
        ``stoppable`` roll stops at an abort between nodes; an undo's roll does not)."""
        for node in self.names:
            if stoppable:
                await self.control.safe_point()
            row = self.row(node)
            row.detail = f"replacing sdn pod ({image})"
            self.touch()
            res: ReplacePodResult = await acts.call(
                "replace_sdn_pod", ReplacePodInput(sdn=self.inp.sdn, node=node, image=image, timeout_seconds=self.inp.pod_ready_timeout_seconds),
                ReplacePodResult, seconds=self.inp.pod_ready_timeout_seconds, heartbeat=True, timeouts=self.timeouts)
            row.sdn_pod, row.sdn_image = res.pod, image
            row.detail = f"sdn pod {res.pod} Ready on {image}" + (f" (replaced {res.deleted})" if res.deleted else "")
            self.touch()

    # --- E: the fan-out ------------------------------------------------------------------------

    def resolve_input(self, nodes: list[str]) -> ResolveTargetsInput:
        i = self.inp
        return ResolveTargetsInput(sdn=i.sdn, nodes=nodes, via=i.fanout.switch_via, access={n: i.host_access[n] for n in nodes if n in i.host_access})

    async def resolve(self, nodes: list[str]) -> list[SwitchTarget]:
        return await acts.call("resolve_sdn_targets", self.resolve_input(nodes), list[SwitchTarget], seconds=60, heartbeat=True,
                               timeouts=self.timeouts)  # the host commands beat

    async def fanout(self, targets: list[SwitchTarget], port: int, *, apply: bool = True) -> FanoutResult:
        """One ``switch_vxlan_port`` activity; a crashed worker's retry resumes from heartbeats."""
        f = self.inp.fanout
        return await workflow.execute_activity(
            "switch_vxlan_port", FanoutInput(targets=targets, port=port, apply=apply, deadline_seconds=f.deadline_seconds),
            result_type=FanoutResult, start_to_close_timeout=timedelta(seconds=f.deadline_seconds + 30),
            heartbeat_timeout=timedelta(seconds=f.heartbeat_seconds),
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=f.attempts),
        )

    def show(self, rows: dict[str, NodeSwitch], port: int) -> None:
        for name, r in rows.items():
            row = self.row(name)
            row.port = r.after if r.after is not None else r.before
            row.switch = "switched" if r.ok and r.applied else ("already" if r.ok else "failed")
            row.t_apply_start, row.t_apply_end = r.t_apply_start, r.t_apply_end
            row.detail = r.error
        ok = sum(1 for r in rows.values() if r.ok)
        self.st.switched = f"{ok}/{len(self.names)} on {port}"
        self.st.partial_switch = 0 < ok < len(self.names)
        self.touch()

    async def switch_all(self, port: int, targets: list[SwitchTarget], rows: dict[str, NodeSwitch]) -> FanoutResult:
        """The fan-out of ``targets`` plus immediate rounds for failed nodes (up to
        ``fanout.attempts``, their targets re-resolved), merged into ``rows`` (node → latest
        outcome). Returns the merged result over every node in ``rows``."""
        todo = targets
        for round_ in range(self.inp.fanout.attempts):
            res = await self.fanout(todo, port)
            for r in res.nodes:
                earlier = rows.get(r.node)
                if r.ok and not r.applied and earlier is not None and earlier.applied and earlier.ok:
                    continue  # switched by an earlier round: keep its timings
                rows[r.node] = r
            self.show(rows, port)
            failed = [n for n in self.names if n in rows and not rows[n].ok]
            if not failed or round_ + 1 == self.inp.fanout.attempts:
                break
            try:
                todo = await self.resolve(failed)
            except ActivityError as err:
                workflow.logger.warning("re-resolving %s failed: %s", failed, failure_message(err))
                todo = [t for t in targets if t.node in failed]
        merged = summarise(port, [rows[n] for n in self.names if n in rows], attempts=1)
        self.st.fanout_window_seconds = merged.window_seconds
        self.touch()
        return merged

    async def ports(self) -> FanoutResult:
        """Every node's dst_port now (a read-only fan-out), shown in its row."""
        read = await self.fanout(await self.resolve(self.names), self.inp.new_port, apply=False)
        for r in read.nodes:
            self.row(r.node).port = r.before
        self.touch()
        return read
