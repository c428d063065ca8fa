"""The machine-config-daemon, one task per node (MCO pkg/daemon, the node handshake of DESIGN.md):
desiredConfig -> Working + desiredDrain=drain-X -> wait lastAppliedDrain (1 h deadline) -> write
files, reboot -> desiredDrain=uncordon-X -> wait (10 min) -> currentConfig=X, Done.

Missed deadlines, as MCO ``pkg/daemon`` handles them (``daemon.go``, ``drain.go``, ``writer.go``):

- Drain (``performDrain``, 1 h): the update fails, the node goes Degraded ("failed to drain node:
  N after 1 hour"); ``syncNode`` then stays put while desiredDrain != lastAppliedDrain and resumes
  the update once the controller hands the drain off (``performDrain`` finds lastAppliedDrain ==
  drain-X: "drain is already completed on this node").
- Uncordon (``completeUpdate``, 10 min, after the reboot): ``checkStateOnFirstRun`` fails, so
  ``booting`` stays true and the work queue retries the whole first-run check with its rate
  limiter (``updateDelay`` 5 s bucket, per-item backoff 1 s doubling to ``maxUpdateBackoff`` 60 s,
  :func:`mcd_requeue_delay`). Each retry finds the node booted into X
  (the on-disk config), sets desiredDrain=uncordon-X again and polls another 10 minutes; the node
  stays Degraded ("failed to uncordon node: N after 10 minutes") until lastAppliedDrain ==
  uncordon-X, then ``SetDone`` writes currentConfig=X, state Done, reason "". The daemon never
  asks for drain-X again on this path.
- A ``degrade`` fault while the node is booted into X but not yet Done stands for the first-run
  check failing (e.g. on-disk validation): Degraded with the fault's reason, retried the same way
  until the fault is cleared.

With the scenario's ``mco:`` section (OpenShift 4.16+, MCO ``release-4.21`` ``pkg/daemon/update.go``
``update`` and ``performPostConfigChangeNodeDisruptionAction``, ``pkg/daemon/drain.go``
``performDrain``; clustersim.agents.mco):

- the update follows the node disruption policies of ``MachineConfiguration/cluster``: the drain
  is asked for only when an action needs one (Reboot, Drain, a Special registries.conf change
  that is not safe), the node reboots only for Reboot; otherwise the daemon runs the actions
  (``systemctl reload|restart UNIT`` / ``daemon-reload`` on the node's simulated host, when the
  scenario has hosts) and then asks for the uncordon as after a reboot (``finishRebootlessUpdate``
  -> ``updateConfigAndState`` -> ``completeUpdate``): the handshake keeps its uncordon step;
- every phase is written to the node's MachineConfigNode in the daemon's order: Updated=False,
  UpdatePrepared, [Drained not required], AppliedFilesAndOS Unknown then True, RebootedNode
  Unknown / "has rebooted" or UpdatePostActionComplete, Resumed, NodeDegraded, Updated=True; the
  controller's conditions (Cordoned, Drained, Uncordoned, UpdateComplete) are left to the
  controller or whoever stands in for it;
- Node events as the daemon emits them (Cordon, Drain, Reboot, SkipReboot, ServiceReload,
  ServiceRestart, Uncordon, NodeDone, and the deadlines' FailedToDrain / FailedToUncordon).

Simplification: a rebootless update that misses the uncordon deadline is retried like one after
a reboot (the real daemon rolls the files back and redoes the update from the start).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from clustersim.agents import logic
from clustersim.agents.base import MC, AgentBase
from clustersim.agents.logic import (
    ANN_CURRENT_CONFIG,
    ANN_DESIRED_CONFIG,
    ANN_DESIRED_DRAIN,
    ANN_LAST_APPLIED_DRAIN,
    ANN_REASON,
    ANN_STATE,
    STATE_DEGRADED,
    STATE_DONE,
    STATE_REBOOTING,
    STATE_UNRECONCILABLE,
    STATE_WORKING,
    annotations,
)
from clustersim.agents.mco import MachineConfigOperatorMixin, PlanError, UpdateRecord
from clustersim.agents.objects import new_uid
from clustersim.agents.podstatus import kubelet_status
from clustersim.mco import mcn
from clustersim.mco.disruption import config_diff
from clustersim.mco.mcn import Condition

log = logging.getLogger("clustersim.agents")

#: MCO ``pkg/daemon/constants`` ``MachineConfigDaemonPostConfigAction``: "Rebooting" while the
#: daemon's reboot is under way (4.16+; ``syncNode`` reports RebootedNode=True when it sees it).
ANN_POST_CONFIG_ACTION = "machineconfiguration.openshift.io/post-config-action"


#: MCO ``pkg/daemon/daemon.go``: ``updateDelay`` (the work queue's token bucket, one sync per 5 s)
#: and ``maxUpdateBackoff`` (cap of the per-item exponential backoff that starts at 1 s).
MCD_UPDATE_DELAY_SECONDS = 5.0
MCD_MAX_UPDATE_BACKOFF_SECONDS = 60.0


def mcd_requeue_delay(failures: int) -> float:
    """Simulated seconds before the daemon's work queue retries a sync that failed ``failures``
    times before (0 for the first failure): the max of the 5 s token bucket and the per-item
    exponential backoff 1 s * 2**failures, capped at 60 s (``workqueue.NewTypedMaxOfRateLimiter``
    of a ``TypedBucketRateLimiter`` and a ``TypedItemExponentialFailureRateLimiter(1s, 60s)``).
    Raises ValueError for a negative ``failures``."""
    if failures < 0:
        raise ValueError(f"failures must be >= 0, got {failures}")
    backoff = MCD_MAX_UPDATE_BACKOFF_SECONDS if failures >= 6 else float(2**failures)
    return max(MCD_UPDATE_DELAY_SECONDS, min(backoff, MCD_MAX_UPDATE_BACKOFF_SECONDS))


class MachineConfigDaemonMixin(MachineConfigOperatorMixin, AgentBase):
    """Mixed into ``clustersim.agents.Agents``; see the module docstring."""

    @property
    def _on_disk(self) -> dict[str, str]:
        """Node -> the rendered config written to disk before its last reboot, while the daemon has
        not finished it (``/etc/machine-config-daemon/currentconfig`` in MCO: after the reboot the
        daemon completes that config, whatever currentConfig says)."""
        return self.__dict__.setdefault("_mcd_on_disk", {})

    def _set_annotations(self, node: str, values: dict[str, str]) -> dict[str, Any] | None:
        def fn(o: dict[str, Any]) -> None:
            o["metadata"].setdefault("annotations", {}).update(values)

        return self.store.mutate("nodes", node, None, fn)

    async def _wait_node(self, node: str, pred: Callable[[dict[str, Any]], Any], timeout_real: float | None) -> Any:
        """Wait until ``pred(node)`` is truthy (returns its value) or the timeout (returns None)."""
        ev = self._wake[node]
        loop = asyncio.get_running_loop()
        deadline = None if timeout_real is None else loop.time() + timeout_real
        while True:
            ev.clear()
            obj = self._node(node)
            if obj is None:
                raise asyncio.CancelledError
            got = pred(obj)
            if got:
                return got
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ev.wait(), remaining)

    async def _daemon(self, node: str) -> None:
        while True:
            obj = self._node(node)
            if obj is None:
                return
            a = annotations(obj)
            cur, des, state = a.get(ANN_CURRENT_CONFIG, ""), a.get(ANN_DESIRED_CONFIG, ""), a.get(ANN_STATE, "")
            seen = (des, a.get(ANN_LAST_APPLIED_DRAIN, ""))
            fault = self._faults.get(node)
            act = bool(des) and des != cur
            if state in (STATE_DEGRADED, STATE_UNRECONCILABLE) and self._degraded_seen.get(node) == seen:
                act = False  # failed on exactly this; retry only on a change or clear_node_fault
            if fault is not None and fault.kind == "stuck_reboot" and state == STATE_REBOOTING:
                act = False
            if act:
                try:
                    if self._on_disk.get(node) == des:
                        # Booted into the desired config: finish it (checkStateOnFirstRun -> completeUpdate).
                        await self._complete(node, des)
                    else:
                        await self._apply(node, cur, des)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("machine-config-daemon %s failed", node)
                    await asyncio.sleep(0.05)
                continue
            self._wake[node].clear()
            await self._wake[node].wait()

    def _fail(self, node: str, state: str, reason: str) -> None:
        obj = self._set_annotations(node, {ANN_STATE: state, ANN_REASON: reason})
        if obj is not None:
            a = annotations(obj)
            self._degraded_seen[node] = (a.get(ANN_DESIRED_CONFIG, ""), a.get(ANN_LAST_APPLIED_DRAIN, ""))

    @property
    def _rebootless(self) -> set[str]:
        """Nodes whose update to their on-disk config finishes without a reboot (node disruption
        policies): ``updateConfigAndState`` inside ``update``, not ``checkStateOnFirstRun``."""
        return self.__dict__.setdefault("_mcd_rebootless", set())

    @property
    def _ocp4(self) -> bool:
        """The scenario serves the 4.16+ machine-config kinds: the daemon's MachineConfigNode
        writes, events and post-config-action annotation are part of what it shows."""
        return self.mcn_enabled or self.policies_enabled

    async def _apply(self, node: str, cur: str, rendered: str) -> None:
        """One update attempt of ``node`` from ``cur`` to ``rendered`` (MCO daemon ``syncNode`` ->
        ``update``): Updated=False, the reconcilable check (fault ``unreconcilable``), the disruption
        plan (clustersim.agents.mco), UpdatePrepared, the drain request when the plan drains, files
        written, then the reboot or the rebootless actions, then :meth:`_complete`."""
        fault = self._faults.get(node)
        self._mcn(node, Condition(mcn.UPDATED, mcn.UPDATED, f"Node {node} needs an update"), None, "False")
        if fault and fault.kind == "unreconcilable":
            reason = fault.reason or f"can't reconcile config {cur} with {rendered}: ignition file changes unsupported"
            self._mcn(node, Condition(mcn.UPDATE_PREPARED, mcn.UPDATE_PREPARED,
                                      f"Update Failed compatibility validation. MachineConfigs {cur} and {rendered} "
                                      f"are not compatible. Err: {reason}"), None, "Unknown")
            self._mcd_event(node, "FailedToReconcile", reason, "Warning")
            self._degraded_report(node, reason)
            self._fail(node, STATE_UNRECONCILABLE, reason)
            return
        if self.store.try_get(MC, rendered) is None:
            reason = f'machineconfig.machineconfiguration.openshift.io "{rendered}" not found'
            self._degraded_report(node, reason)
            self._fail(node, STATE_DEGRADED, reason)
            return
        if fault and fault.kind == "degrade":
            reason = fault.reason or f"failed to apply {rendered}: injected fault"
            self._degraded_report(node, reason)
            self._fail(node, STATE_DEGRADED, reason)
            return
        try:
            plan = await self._disruption_plan(cur, rendered)
        except PlanError as exc:
            self._mcn(node, Condition(mcn.UPDATE_PREPARED, mcn.UPDATE_PREPARED,
                                      f"Update Failed compatibility validation. MachineConfigs {cur} and {rendered} are "
                                      f"not available for update. Error calculating post config change actions: {exc}"),
                      None, "Unknown")
            self._degraded_report(node, str(exc))
            self._fail(node, STATE_DEGRADED, str(exc))
            return
        record = UpdateRecord(node, cur, rendered, plan.actions, plan.drain, plan.reboot)
        self.mcd_updates.append(record)
        drain = f"drain-{rendered}"
        self._degraded_seen.pop(node, None)
        obj = self._node(node)
        if obj is None:
            return
        ask_drain = plan.drain and annotations(obj).get(ANN_LAST_APPLIED_DRAIN) != drain
        if self._ocp4:
            self._set_annotations(node, {ANN_STATE: STATE_WORKING, ANN_REASON: ""})
            self._mcn(node, Condition(mcn.UPDATE_PREPARED, mcn.UPDATE_PREPARED,
                                      f"Update Compatible. Post Cfg Actions: [] Drain Required: {str(plan.drain).lower()}"))
            self._mcn_spec(node)
            if ask_drain:
                self._mcd_event(node, "Cordon", "Cordoned node to apply update")
                self._mcd_event(node, "Drain", "Draining node to update config.")
                self._set_annotations(node, {ANN_DESIRED_DRAIN: drain})
        else:
            values = {ANN_STATE: STATE_WORKING, ANN_REASON: ""}
            if ask_drain:
                values[ANN_DESIRED_DRAIN] = drain
            self._set_annotations(node, values)

        if plan.drain:
            def drained_or_changed(o: dict[str, Any]) -> str | None:
                a = annotations(o)
                if a.get(ANN_DESIRED_CONFIG) != rendered:
                    return "changed"
                if a.get(ANN_LAST_APPLIED_DRAIN) == drain:
                    return "drained"
                if self._faults.get(node) is not None and self._faults[node].kind in ("degrade", "unreconcilable"):
                    return "fault"
                return None

            got = await self._wait_node(node, drained_or_changed, self.clock.real(self.options.drain_deadline_seconds))
            if got is None:
                reason = (f"failed to drain node: {node} after 1 hour. "
                          "Please see machine-config-controller logs for more information")
                self._mcd_event(node, "FailedToDrain", reason, "Warning")
                self._degraded_report(node, reason)
                self._fail(node, STATE_DEGRADED, reason)
                return
            if got == "fault":
                return  # the loop re-enters _apply and applies the fault
            if got == "changed":
                a = annotations(self._node(node) or {})
                if a.get(ANN_DESIRED_CONFIG) == a.get(ANN_CURRENT_CONFIG):
                    # Rolled back / skipped while waiting for the drain: back to idle at the current config.
                    self._set_annotations(node, {ANN_STATE: STATE_DONE, ANN_REASON: "",
                                                 ANN_DESIRED_DRAIN: f"uncordon-{a.get(ANN_CURRENT_CONFIG, '')}"})
                return
        else:
            self._mcn(node, Condition(mcn.UPDATE_EXECUTED, mcn.DRAINED, "Node Drain Not required for this update."),
                      Condition(mcn.DRAINED, "UpdateExecutedDrained", "Node Drain Not required for this update."),
                      "Unknown", "False")
        # Write files (the new config goes to disk), then reboot or run the rebootless actions.
        diff = config_diff(self.store.try_get(MC, cur), self.store.try_get(MC, rendered) or {})
        os_word = "" if diff.os_update or diff.extensions or diff.kernel_type else "not"
        ssh_word = "" if diff.passwd else "not"
        self._mcn(node, Condition(mcn.UPDATE_EXECUTED, mcn.APPLIED_FILES_AND_OS,
                                  "Updating the Files and OS on disk as a part of the in progress phase"),
                  Condition(mcn.APPLIED_FILES_AND_OS, "UpdateExecutedAppliedFilesAndOS",
                            f"Applying files and new OS config to node. OS will {os_word} need an update. "
                            f"SSH Keys will {ssh_word} need an update"), "Unknown", "Unknown")
        await self.clock.sleep(self.options.write_files_seconds)
        self._on_disk[node] = rendered
        self._mcn(node, Condition(mcn.UPDATE_EXECUTED, mcn.APPLIED_FILES_AND_OS,
                                  "Updated the Files and OS on disk as a part of the in progress phase"),
                  Condition(mcn.APPLIED_FILES_AND_OS, "UpdateExecutedAppliedFilesAndOS",
                            f"Applied files and new OS config to node. OS did {os_word} need an update. "
                            f"SSH Keys did {ssh_word} need an update"), "True", "True")
        if not plan.reboot:
            err = await self._post_config_actions(node, rendered, plan.actions, record)
            if err is not None:
                self._on_disk.pop(node, None)  # update() rolls the files back on an error
                self._degraded_report(node, err)
                self._fail(node, STATE_DEGRADED, err)
                return
            self._rebootless.add(node)
            await self._complete(node, rendered)
            return
        self._mcn(node, Condition(mcn.REBOOTED_NODE, mcn.REBOOTED_NODE, "Upgrade requires a reboot."), None, "Unknown")
        rebooting = {ANN_STATE: STATE_REBOOTING}
        if self._ocp4:
            self._mcd_event(node, "Reboot", f"Node will reboot into config {rendered}")
            rebooting[ANN_POST_CONFIG_ACTION] = STATE_REBOOTING
            self._degraded_report(node, None)  # update() returned: the reboot is under way
        self._set_annotations(node, rebooting)
        self._set_node_ready(node, False)
        if self._faults.get(node) is not None and self._faults[node].kind == "stuck_reboot":
            await self._wait_node(node, lambda o: self._faults.get(node) is None, None)
        else:
            await self.clock.sleep(self.options.reboot_seconds)
        self._set_node_ready(node, True, rebooted=True)
        self._restart_pods(node)
        if self._ocp4:
            self._mcn(node, Condition(mcn.REBOOTED_NODE, mcn.REBOOTED_NODE, "Node has rebooted"))
            self._set_annotations(node, {ANN_STATE: STATE_WORKING, ANN_POST_CONFIG_ACTION: ""})
        else:
            self._set_annotations(node, {ANN_STATE: STATE_WORKING})
        await self._complete(node, rendered)

    async def _complete(self, node: str, rendered: str) -> None:
        """After the reboot into ``rendered`` (or its rebootless actions): ask for the uncordon and
        wait for the controller (``updateConfigAndState`` -> ``completeUpdate``), retrying after a
        missed deadline as the daemon's work queue does (module docstring). Returns at Done, or
        when desiredConfig moved away from ``rendered`` (the caller's loop then starts the update
        to the new desired config). MachineConfigNode: Resumed ("Applying proper annotations")
        first; at Done, NodeDegraded=False (rebootless) or Resumed (after a boot), then Updated."""
        uncordon = f"uncordon-{rendered}"
        failures = 0
        rebootless = node in self._rebootless

        def changed(o: dict[str, Any]) -> bool:
            return annotations(o).get(ANN_DESIRED_CONFIG) != rendered

        self._mcn(node, Condition(mcn.RESUMED, mcn.RESUMED,
                                  f"In desired config {rendered}. Resumed normal operations. Applying proper annotations."))
        while True:
            obj = self._node(node)
            if obj is None or changed(obj):
                self._on_disk.pop(node, None)
                self._rebootless.discard(node)
                return
            fault = self._faults.get(node)
            if fault is not None and fault.kind == "degrade":
                reason = fault.reason or f"unexpected on-disk state validating against {rendered}: injected fault"
                if rebootless:
                    self._degraded_report(node, reason)
                self._fail(node, STATE_DEGRADED, reason)
            else:
                self._set_annotations(node, {ANN_DESIRED_DRAIN: uncordon})
                got = await self._wait_node(
                    node, lambda o: "changed" if changed(o) else annotations(o).get(ANN_LAST_APPLIED_DRAIN) == uncordon,
                    self.clock.real(self.options.uncordon_deadline_seconds))
                if got == "changed":
                    continue
                if got:
                    self._on_disk.pop(node, None)
                    self._rebootless.discard(node)
                    self._degraded_seen.pop(node, None)
                    self._mcd_event(node, "Uncordon", f"Update completed for config {rendered} and node has been uncordoned")
                    self._mcd_event(node, "NodeDone", f"Setting node {node}, currentConfig {rendered} to Done")
                    self._set_annotations(node, {ANN_CURRENT_CONFIG: rendered, ANN_STATE: STATE_DONE, ANN_REASON: ""})
                    if rebootless:
                        self._degraded_report(node, None)
                    else:
                        self._mcn(node, Condition(mcn.RESUMED, mcn.RESUMED,
                                                  f"In desired config {rendered}. Resumed normal operations."))
                    self._mcn(node, Condition(mcn.UPDATED, mcn.UPDATED, f"Node {node} Updated"))
                    return
                reason = (f"failed to uncordon node: {node} after 10 minutes. "
                          "Please see machine-config-controller logs for more information")
                self._mcd_event(node, "FailedToUncordon", reason, "Warning")
                if rebootless:
                    self._degraded_report(node, reason)
                self._fail(node, STATE_DEGRADED, reason)
            # The work queue's rate-limited requeue; a desiredConfig change or a cleared fault wakes
            # the daemon sooner (the informer's node event; clear_node_fault stands for the fix).
            await self._wait_node(
                node, lambda o: changed(o) or self._faults.get(node) is not fault and fault is not None,
                self.clock.real(mcd_requeue_delay(failures)))
            failures += 1

    def _set_node_ready(self, node: str, ready: bool, rebooted: bool = False) -> None:
        now = self._now()
        boot_id = new_uid()
        if rebooted and self._ocp4 and self.host_rebooted is not None:
            # The node's host booted too (its /proc boot_id and the bootID the kubelet reports agree).
            self.host_rebooted(node, boot_id)

        def fn(o: dict[str, Any]) -> None:
            st = o.setdefault("status", {})
            for c in st.get("conditions") or []:
                if c.get("type") == "Ready":
                    new = "True" if ready else "False"
                    if c.get("status") != new:
                        c["lastTransitionTime"] = now
                    c["status"] = new
                    c["reason"] = "KubeletReady" if ready else "KubeletNotReady"
                    c["message"] = "kubelet is posting ready status" if ready else "node is rebooting"
                    c["lastHeartbeatTime"] = now
            if rebooted:
                st.setdefault("nodeInfo", {})["bootID"] = boot_id
            taints = [t for t in (o["spec"].get("taints") or []) if t.get("key") != logic.TAINT_NOT_READY]
            if not ready:
                taints.append({"key": logic.TAINT_NOT_READY, "effect": "NoSchedule", "timeAdded": now})
            if taints:
                o["spec"]["taints"] = taints
            else:
                o["spec"].pop("taints", None)

        self.store.mutate("nodes", node, None, fn)

    def _restart_pods(self, node: str) -> None:
        """After a reboot every container on the node restarted once."""
        now = self._now()
        target = self._node(node)
        for pod in self.store.list_refs("pods", field_selector=f"spec.nodeName={node}"):
            if logic.is_terminating(pod):
                continue
            count = max([c.get("restartCount", 0) for c in (pod.get("status") or {}).get("containerStatuses") or []] + [0])
            st = kubelet_status(pod, target, self.net, now, restarts=count + 1)
            self.store.mutate("pods", pod["metadata"]["name"], pod["metadata"]["namespace"],
                              lambda o, st=st: o.__setitem__("status", st), subresource="status")
