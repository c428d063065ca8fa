"""The OpenShift 4.16+ parts of the simulated machine-config world, used when the scenario serves
them (``mco:`` section, clustersim.mco.model):

- the operator's sync of ``MachineConfiguration/cluster`` (MCO ``pkg/operator/sync.go``
  ``syncMachineConfiguration``): on a spec change, ``status.nodeDisruptionPolicyStatus.clusterPolicies``
  becomes the defaults merged with ``spec.nodeDisruptionPolicy`` and ``status.observedGeneration``
  the object's generation;
- the daemon's side of it (MCO ``pkg/daemon/update.go``): the disruption plan of an update (actions,
  drain, reboot) from the cluster policies, the rebootless actions run on the node's host,
  MachineConfigNode condition writes (clustersim.mco.mcn) and the daemon's Node events
  (``nodeWriter.Eventf``: source component ``machineconfigdaemon``).

``MachineConfigOperatorMixin`` is mixed into ``clustersim.agents.Agents``; clustersim.agents.mcd
calls it. Every method is a no-op (or the legacy answer: drain and reboot) when the store serves
neither kind.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from clustersim.agents.base import MC, AgentBase
from clustersim.agents.objects import new_uid
from clustersim.mco import disruption as nd
from clustersim.mco.mcn import MCN, Condition, report, set_spec_desired
from clustersim.mco.model import MACHINECONFIGURATION, MACHINECONFIGURATION_NAME

log = logging.getLogger("clustersim.agents")

#: ``HostCommand(node, argv) -> (stdout, stderr, exit code)``: runs a command on the node's
#: simulated host (clustersim.hosts ``HostsComponent.run``); KeyError for a node without a host.
HostCommand = Callable[[str, list[str]], Awaitable[tuple[str, str, int]]]
#: ``HostRebooted(node, boot_id)``: the daemon rebooted ``node``; its simulated host (if any) takes
#: the new boot id.
HostRebooted = Callable[[str, str], None]

#: MCO ``calculatePostConfigChangeNodeDisruptionAction``: the daemon polls every 5 s, for at most
#: 2 minutes, for an up-to-date ``MachineConfiguration/cluster`` status.
POLICY_POLL_SECONDS = 5.0
POLICY_WAIT_SECONDS = 120.0


class PlanError(Exception):
    """The daemon cannot compute the disruption actions (the message is the daemon's error)."""


@dataclass
class DisruptionPlan:
    """What an update of a node does: ``actions`` (API shape, clustersim.mco.disruption),
    ``drain`` (the daemon asks for a drain), ``reboot`` (the node reboots)."""

    actions: list[dict[str, Any]] = field(default_factory=lambda: [{"type": nd.REBOOT}])
    drain: bool = True
    reboot: bool = True


@dataclass
class UpdateRecord:
    """One update the simulated daemon started (``Agents.mcd_updates``): the node, its current and
    desired rendered configs, the plan, and the services it reloaded/restarted (``ran``: argv lists
    run on the host, empty without hosts)."""

    node: str
    current: str
    desired: str
    actions: list[dict[str, Any]]
    drain: bool
    reboot: bool
    ran: list[list[str]] = field(default_factory=list)


class MachineConfigOperatorMixin(AgentBase):
    """See the module docstring."""

    host_command: HostCommand | None
    host_rebooted: HostRebooted | None
    mcd_updates: list[UpdateRecord]

    # --- what is served ----------------------------------------------------------------------------

    @property
    def mcn_enabled(self) -> bool:
        """The store serves MachineConfigNodes: the daemon reports its phases there."""
        return self.store.serves(MCN)

    @property
    def policies_enabled(self) -> bool:
        """The store serves MachineConfigurations: the daemon follows node disruption policies."""
        return self.store.serves(MACHINECONFIGURATION)

    # --- the operator ------------------------------------------------------------------------------

    def _sync_machine_configuration(self, obj: dict[str, Any]) -> None:
        """``syncMachineConfiguration``: status from spec when the generation moved on."""
        meta = obj.get("metadata") or {}
        status = obj.get("status") or {}
        if meta.get("name") != MACHINECONFIGURATION_NAME or meta.get("deletionTimestamp"):
            return
        if status.get("observedGeneration") == meta.get("generation") and "nodeDisruptionPolicyStatus" in status:
            return
        merged = nd.merge_cluster_policies((obj.get("spec") or {}).get("nodeDisruptionPolicy"))

        def fn(o: dict[str, Any]) -> None:
            st = o.setdefault("status", {})
            st["nodeDisruptionPolicyStatus"] = {"clusterPolicies": merged}
            st["observedGeneration"] = o["metadata"].get("generation", 1)

        self.store.mutate(MACHINECONFIGURATION, MACHINECONFIGURATION_NAME, None, fn, subresource="status")

    # --- MachineConfigNode writes and events -------------------------------------------------------

    def _mcn(self, node: str, parent: Condition, child: Condition | None = None, parent_status: str = "True",
             child_status: str = "False") -> None:
        """One upgrade-monitor write for ``node`` (nothing unless MachineConfigNodes are served)."""
        try:
            report(self.store, node, parent, child, parent_status, child_status)
        except Exception:  # the real daemon logs MCN errors and goes on
            log.exception("machine-config-daemon %s: MachineConfigNode write failed", node)

    def _mcn_spec(self, node: str) -> None:
        """``GenerateAndApplyMachineConfigNodeSpec`` after UpdatePrepared."""
        set_spec_desired(self.store, node)

    def _mcd_event(self, node: str, reason: str, message: str, etype: str = "Normal") -> None:
        """A Node event from the daemon (only in the 4.16+ world, where the daemon's events are
        part of what the scenario promises)."""
        if not (self.mcn_enabled or self.policies_enabled):
            return
        obj = self._node(node)
        if obj is None:
            return
        now = self._now()
        self.store.create("events", {
            "metadata": {"name": f"{node}.{new_uid()[:8]}{new_uid()[:8]}", "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": node, "uid": obj["metadata"].get("uid", ""),
                               "apiVersion": "v1"},
            "reason": reason, "message": message, "type": etype,
            "source": {"component": "machineconfigdaemon", "host": node},
            "reportingComponent": "machineconfigdaemon", "reportingInstance": node,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        })

    def _degraded_report(self, node: str, error: str | None) -> None:
        """``reportMachineNodeDegradeStatus``: NodeDegraded True with the error, else False."""
        if error is None:
            self._mcn(node, Condition("NodeDegraded", "NodeDegraded", f"Node {node} upgrade succeeded"), None, "False")
        else:
            self._mcn(node, Condition("NodeDegraded", "NodeDegraded", f"Node {node} upgrade failure. {error}"), None,
                      "True")

    # --- the plan ----------------------------------------------------------------------------------

    async def _cluster_policies(self) -> dict[str, Any]:
        """``status.nodeDisruptionPolicyStatus.clusterPolicies`` once up to date, polling as the
        daemon does; PlanError after 2 minutes."""
        waited = 0.0
        while True:
            mcop = self.store.try_get(MACHINECONFIGURATION, MACHINECONFIGURATION_NAME)
            if mcop is None:
                err = "MachineConfiguration/cluster has not been created yet"
            elif (mcop.get("status") or {}).get("observedGeneration") != mcop["metadata"].get("generation"):
                err = "NodeDisruptionPolicyStatus is not up to date"
            else:
                st = mcop.get("status") or {}
                return dict((st.get("nodeDisruptionPolicyStatus") or {}).get("clusterPolicies") or {})
            if waited >= POLICY_WAIT_SECONDS:
                raise PlanError(f"NodeDisruptionPolicyStatus was not ready: {err}")
            await self.clock.sleep(POLICY_POLL_SECONDS)
            waited += POLICY_POLL_SECONDS

    async def _disruption_plan(self, cur: str, rendered: str) -> DisruptionPlan:
        """The plan for moving a node from ``cur`` to ``rendered``: drain and reboot unless the
        store serves MachineConfigurations, else the policies' actions
        (clustersim.mco.disruption.disruption_actions / drain_required). PlanError when the
        policies are not ready or a registries.conf is not TOML."""
        if not self.policies_enabled:
            return DisruptionPlan()
        policies = await self._cluster_policies()
        old_mc, new_mc = self.store.try_get(MC, cur), self.store.try_get(MC, rendered)
        if new_mc is None:
            raise PlanError(f'machineconfig.machineconfiguration.openshift.io "{rendered}" not found')
        actions = nd.disruption_actions(old_mc, new_mc, policies)
        try:
            drain = nd.drain_required(actions, old_mc, new_mc)
        except ValueError as exc:
            raise PlanError(f"failed decoding TOML content from file {nd.REGISTRIES_CONF}: {exc}") from None
        return DisruptionPlan(actions, drain, nd.has_action(actions, nd.REBOOT))

    # --- rebootless actions ------------------------------------------------------------------------

    async def _host_run(self, node: str, argv: list[str], record: UpdateRecord | None) -> tuple[str, int]:
        """Run ``argv`` on ``node``'s host (none: success, nothing run). Returns (stderr, code)."""
        if self.host_command is None:
            return "", 0
        try:
            _out, err, code = await self.host_command(node, argv)
        except KeyError:
            return "", 0
        if record is not None:
            record.ran.append(list(argv))
        return err, code

    async def _post_config_actions(self, node: str, rendered: str, actions: list[dict[str, Any]],
                                   record: UpdateRecord | None) -> str | None:
        """``performPostConfigChangeNodeDisruptionAction`` without a reboot: each action in order
        (Drain is done already; None reports "Changes do not require a reboot"; Reload, Special
        (reload crio) and DaemonReload run ``systemctl`` on the host and report
        UpdatePostActionComplete; Restart restarts the unit, events only, as MCO has no MCN
        condition for it). Returns the daemon's error text when a command fails, else None."""
        for action in actions:
            t = action.get("type")
            if t == nd.DRAIN:
                continue
            if t == nd.NONE:
                self._mcd_event(node, "SkipReboot", "Config changes do not require reboot.")
                self._mcn(node, Condition("UpdatePostActionComplete", "None", "Changes do not require a reboot"))
                continue
            if t == nd.RESTART:
                svc = str((action.get("restart") or {}).get("serviceName", ""))
                err, code = await self._host_run(node, ["systemctl", "restart", svc], record)
                if code != 0:
                    self._mcd_event(node, "FailedServiceRestart",
                                    f"Restarting {svc} service failed. Error: {err.strip()}", "Warning")
                    return f"could not apply update: restarting {svc} service failed. Error: {err.strip()}"
                self._mcd_event(node, "ServiceRestart",
                                f"Config changes do not require reboot. Service {svc} was restarted.")
                continue
            if t == nd.DAEMON_RELOAD:
                svc, argv = "daemon-reload", ["systemctl", "daemon-reload"]
            else:  # Reload, Special
                svc = nd.CRIO_SPECIAL_SERVICE if t == nd.SPECIAL else str((action.get("reload") or {}).get("serviceName", ""))
                argv = ["systemctl", "reload", svc]
            err, code = await self._host_run(node, argv, record)
            if code != 0:
                self._mcd_event(node, "FailedServiceReload",
                                f"Reloading service {svc} failed. Error: {err.strip()}", "Warning")
                return f"could not apply update: reloading {svc} configuration failed. Error: {err.strip()}"
            self._mcn(node, Condition("UpdatePostActionComplete", "UpdatePostActionComplete",
                                      f"Node has reloaded service {svc}"))
            self._mcd_event(node, "ServiceReload", f"Config changes do not require reboot. Service {svc} was reloaded.")
        return None
