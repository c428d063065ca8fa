"""One node's upgrade: the child workflow ``NodeUpgradeNodeWorkflow`` (procedures-spec §4.2).

Steps, after openshift-ansible 3.10 ``upgrade_nodes.yml``: read → (already at the target kubelet
and Ready: done, nothing touched) → cordon → drain (the kit's drain with R2's decision gate; with
``drain.on_timeout="proceed"`` no gate: after ``drain.timeout_seconds`` the drain is given up and
the node goes on with its pods, as openshift-ansible does with a drain timeout) →
node-config.yaml sha256 (host access only) → the node action → wait Ready at the target kubelet
version → uncordon (only our cordon) → done.

"Done" is observed, never assumed: the kubelet version the Node reports. The action runs at most
once per attempt (``maximum_attempts=1``): when its outcome is unknown (the worker died, the
activity timed out) the node is read again; at the target it goes on, otherwise the node ends
``failed`` with the reason and stays cordoned, and the person decides with ``retry-node`` or
``skip-node`` (a retry reads the kubelet version first, so a finished action never runs again).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.host.models import CommandResult, ExecBackend, HostAccess
    from activities.node_upgrade.models import READ_NODE_FACTS, NodeFacts, NodeFactsInput
    from workflows.kit import calls as acts
    from workflows.kit.drain import DrainGateState
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.kit.host import HostSteps
    from workflows.kit.models import NodePhase, failure_message
    from workflows.kit.noderun import DrainTimedOut, NodeRun, NodeRunWorkflow, Stopped
    from workflows.node_upgrade.models import NodeUpgradeNodeInput, NodeUpgradeNodeResult
    from workflows.node_upgrade.plan import is_done

STEP_READ = "read"
STEP_ACTION = "node-action"
STEP_WAIT_READY = "wait-ready"
STEP_UNCORDON = "uncordon"
STEP_FINISHED = "finished"
NODE_CONFIG = "/etc/origin/node/node-config.yaml"
#: Seconds a blocked drain counts for the deadline warning when the policy never asks (twice this).
DEFAULT_DECIDE_AFTER = 600.0


@workflow.defn
class NodeUpgradeNodeWorkflow(NodeRunWorkflow):
    """Input :class:`NodeUpgradeNodeInput`, result :class:`NodeUpgradeNodeResult` (never raises
    for a node that did not come back: outcome ``failed`` with the reason)."""

    @workflow.init
    def __init__(self, input: NodeUpgradeNodeInput) -> None:
        r = input.run
        self._in = input
        d = r.drain
        self._timeouts = acts.Timeouts(r.calls.short_call_seconds, r.calls.heartbeat_seconds)
        self.node_run = NodeRun(
            node=input.node, attempt=input.attempt, parent_id=input.parent_id, owner=input.owner, warn_fraction=0.8,
            timeouts=self._timeouts,
            drain=DrainGateState(input.node, None if d.on_timeout == "proceed" else (d.timeout_seconds or d.decide_after_seconds),
                                 d.decision_timeout_seconds, d.decision_timeout_outcome),
            deadline_consequence="node {node} stays cordoned at the drain",
        )
        # Host commands through the kit (no gates: a lost action is judged here by the kubelet version).
        self._host = HostSteps(None, timeouts=self._timeouts, heartbeat_seconds=r.calls.heartbeat_seconds)

    async def _facts(self) -> NodeFacts:
        return await acts.call(READ_NODE_FACTS, NodeFactsInput(node=self._in.node), NodeFacts, timeouts=self._timeouts)

    async def _command(self, argv: list[str], access: HostAccess, timeout: float, *, once: bool,
                       env: dict[str, str] | None = None) -> CommandResult:
        return await self._host.command(argv, access, timeout_seconds=timeout, once=once, env=env)

    async def _sha256(self) -> str | None:
        """node-config.yaml's sha256 over the node's host access (None without access or file):
        3.10 regenerates the file from the node group ConfigMap, so a change is reported."""
        access = self._in.run.host_access.get(self._in.node)
        if access is None:
            return None
        res = await self._command(["sha256sum", NODE_CONFIG], access, 30.0, once=False)
        return res.stdout.split()[0] if res.ok and res.stdout.strip() else None

    def _action_access(self) -> HostAccess:
        if self._in.run.action.kind == "external":
            return HostAccess(backend=ExecBackend.LOCAL)
        access = self._in.run.host_access.get(self._in.node)
        if access is None:  # the parent validates this before starting; a child never guesses
            raise ValueError(f"no host access for node {self._in.node}")
        return access

    @workflow.run
    async def run(self, input: NodeUpgradeNodeInput) -> NodeUpgradeNodeResult:
        result = await self._upgrade(input)
        await self.node_run.settle()
        return result

    async def _failed(self, step: str, reason: str, **kw: object) -> NodeUpgradeNodeResult:
        run = self.node_run
        workflow.logger.warning("node %s failed at %s: %s", self._in.node, step, reason)
        await run.report(NodePhase.FAILED, step, "retry-node or skip-node", reason=reason)
        return run.result(NodeUpgradeNodeResult, "failed", reason=reason, safe_point=step, **kw)  # type: ignore[arg-type]

    async def _upgrade(self, input: NodeUpgradeNodeInput) -> NodeUpgradeNodeResult:
        run, target = self.node_run, input.run.target_version
        await run.report(NodePhase.RUNNING, STEP_READ)
        facts = await self._facts()
        if facts.unschedulable and not run.cordoned_by_us:
            # An earlier attempt's cordon is ours when the owner matches (same for every attempt);
            # the uncordon activity checks cordoned-by, so a foreign cordon is never lifted.
            run.cordoned_by_us = input.attempt > 1
        if is_done(facts, target):
            if run.cordoned_by_us:
                await run.uncordon()
                run.cordoned_by_us = False
            reason = f"already at {target}"
            await run.report(NodePhase.DONE, STEP_FINISHED, reason=reason)
            return run.result(NodeUpgradeNodeResult, "done", reason=reason, kubelet_version=facts.kubelet_version,
                              drain="skipped-already-done")
        d = input.run.drain
        proceed = d.on_timeout == "proceed"
        drain_outcome = "drained"
        drain_note: str | None = None
        try:
            await run.cordon_and_drain(
                wait_seconds=d.wait_seconds, backoff_initial=d.backoff_initial_seconds, backoff_max=d.backoff_max_seconds,
                deadline_seconds=(d.decide_after_seconds or DEFAULT_DECIDE_AFTER) * 2,
                give_up_after=d.timeout_seconds if proceed else None,
            )
        except DrainTimedOut:
            left = run.drain.last_report
            pods = ", ".join(f"{p.namespace}/{p.name}" for p in (left.blocked_pods if left else [])) or "pods not yet gone"
            drain_outcome = "timed-out-proceeded"
            drain_note = (f"drain not finished after {d.timeout_seconds:.0f}s; proceeded with {pods} still on the node "
                          "(drain.on_timeout=proceed)")
            workflow.logger.warning("node %s: %s", input.node, drain_note)
            await run.report(NodePhase.RUNNING, STEP_ACTION, reason=drain_note)
        except Stopped:
            async def nothing() -> None:
                return None

            return await run.roll_back(NodeUpgradeNodeResult, "before the node action", nothing, before="the node action")

        before = await self._sha256()
        action_ran = False
        facts = await self._facts()
        if facts.kubelet_version != target:
            action = input.run.action
            argv = action.argv_for(input.node)
            await run.report(NodePhase.RUNNING, STEP_ACTION, " ".join(argv))
            try:
                res = await self._command(argv, self._action_access(), action.timeout_seconds, once=True, env=action.env)
                action_ran = True
            except ActivityError as err:
                # Unknown outcome: it may have run. Look at the node rather than running it again.
                facts = await self._facts()
                if facts.kubelet_version != target:
                    return await self._failed(
                        STEP_ACTION, f"node action outcome unknown ({failure_message(err)}) and the kubelet is at "
                        f"{facts.kubelet_version}; not run again: check the node, then retry-node or skip-node",
                        node_config_sha256_before=before,
                    )
            else:
                if not res.ok:
                    tail = (res.stderr or res.stdout).strip()[-800:]
                    return await self._failed(STEP_ACTION, f"node action exited {res.exit_code}: {tail}", action_ran=True,
                                              node_config_sha256_before=before)

        deadline = workflow.now() + timedelta(seconds=input.run.ready_timeout_seconds)
        await run.report(NodePhase.RUNNING, STEP_WAIT_READY, f"Ready with kubelet {target}", deadline=deadline)
        seen: list[NodeFacts] = []

        async def ready() -> Check:
            f = await self._facts()
            seen.append(f)
            return Check(is_done(f, target), f"kubelet {f.kubelet_version}, {'Ready' if f.ready else 'NotReady'}")

        hs = await wait_until(ready, name=f"ready/{input.node}", deadline=deadline,
                              backoff=Backoff(initial=input.run.ready_poll_seconds, maximum=input.run.ready_poll_seconds * 4))
        last = seen[-1] if seen else facts
        if hs.state != "ok":
            return await self._failed(STEP_WAIT_READY, f"not Ready at {target} after {input.run.ready_timeout_seconds:.0f}s: {hs.last}",
                                      action_ran=action_ran, kubelet_version=last.kubelet_version, node_config_sha256_before=before)
        await run.report(NodePhase.RUNNING, STEP_UNCORDON)
        await run.uncordon()
        run.cordoned_by_us = False
        after = await self._sha256()
        notes = [drain_note] if drain_note else []
        if before and after and before != after:
            notes.append(f"{NODE_CONFIG} changed (sha256 {before[:12]} -> {after[:12]}): regenerated from the node group ConfigMap")
        reason = "; ".join(notes) or None
        await run.report(NodePhase.DONE, STEP_FINISHED, reason=reason)
        return run.result(NodeUpgradeNodeResult, "done", reason=reason, kubelet_version=last.kubelet_version, action_ran=action_ran,
                          drain=drain_outcome, node_config_sha256_before=before, node_config_sha256_after=after)
