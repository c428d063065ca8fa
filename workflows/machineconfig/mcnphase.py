"""A node's place in the update, named as its MachineConfigNode names it (OpenShift 4.16+).

openshift/api ``release-4.21`` ``machineconfiguration/v1/types_machineconfignode.go``
(``StateProgress``): the phases ``UpdatePrepared``, ``UpdateExecuted``,
``UpdatePostActionComplete``, ``UpdateComplete``, ``Resumed``, ``Updated`` and the sub-steps
``Cordoned``, ``Drained``, ``AppliedFilesAndOS``, ``RebootedNode``, ``Uncordoned``, plus
``NodeDegraded``. The machine-config-daemon moves through them in that order
(``pkg/daemon/update.go`` ``update``): prepared (the update is compatible, actions computed),
executed (cordon and drain by the controller when needed, files and OS written), the post
action (a reboot: ``RebootedNode``; otherwise the reloads: ``UpdatePostActionComplete``),
complete (the controller uncordons), resumed (the daemon's annotations), updated.

:func:`mcn_phase` maps lockkeeper's handshake steps
(:class:`workflows.machineconfig.models.NodeStep`) to those names; pure.
"""

from __future__ import annotations

from workflows.kit.models import NodePhase

# The values of workflows.machineconfig.models.NodeStep (spelled out: models uses this module).
_BY_STEP = {
    "read-node": "UpdatePrepared",
    "set-desired-config": "UpdatePrepared",
    "wait-drain-request": "UpdatePrepared",
    "cordon": "UpdateExecuted/Cordoned",
    "drain": "UpdateExecuted/Drained",
    "hand-off-drain": "UpdateExecuted/Drained",
    "uncordon": "UpdateComplete/Uncordoned",
    "hand-off-uncordon": "UpdateComplete/Uncordoned",
    "wait-done": "Resumed",
}
WAIT_REBOOT = "wait-reboot"


def mcn_phase(phase: NodePhase | str, step: str | None, reboot: bool = True) -> str | None:
    """The MachineConfigNode name of a node in ``phase`` at handshake ``step`` (a
    :class:`NodeStep` value, or a kit step such as ``drain``); ``reboot``: the daemon reboots
    this node (its disruption plan), so the wait after the drain is ``RebootedNode``, else
    ``UpdatePostActionComplete``. None for a node not (yet) in an update (pending, skipped)."""
    phase = str(phase)
    if phase == NodePhase.DONE:
        return "Updated"
    if phase == NodePhase.DEGRADED:
        return "NodeDegraded"
    if phase not in (NodePhase.RUNNING, NodePhase.BLOCKED):
        return None
    if step == WAIT_REBOOT:
        return "UpdateExecuted/RebootedNode" if reboot else "UpdatePostActionComplete"
    if step is None:
        return "UpdatePrepared"
    return _BY_STEP.get(str(step), "UpdateExecuted/Drained" if "drain" in step else "UpdatePrepared")
