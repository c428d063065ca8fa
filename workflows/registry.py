"""The registry of lockkeeper's procedures (re-exported by :mod:`workflows`).

``PROCEDURES`` is the one list of procedure types (:class:`workflows.kit.spec.ProcedureSpec`), one
spec per procedure package: the worker registry and the CLI read it. ``WORKFLOWS`` (what the
worker registers) is derived from it, plus the lease workflow that procedures start as a helper.
Only the worker and the CLI import this module; workflow code never does.
"""

from workflows import drain, etcd, machineconfig, network_migration, runtime_migration, vxlan_port, node_upgrade, control_plane, node_selectors, cluster_upgrade, gluster, campaign
from workflows.kit import reverse
from workflows.kit.lease import LeaseWorkflow
from workflows.kit.spec import ProcedureSpec

PROCEDURES: list[ProcedureSpec] = [machineconfig.SPEC, drain.SPEC, etcd.BACKUP, etcd.RESTORE, runtime_migration.SPEC, vxlan_port.SPEC, node_upgrade.SPEC, control_plane.SPEC, node_selectors.SPEC, cluster_upgrade.SPEC, network_migration.SPEC, gluster.SPEC, reverse.SPEC, campaign.SPEC]

# dict.fromkeys: a child two procedures start (the GlusterFS recovery) is registered once
WORKFLOWS: list[type] = list(dict.fromkeys(c for spec in PROCEDURES for c in (spec.workflow, *spec.children))) + [LeaseWorkflow]

__all__ = ["PROCEDURES", "WORKFLOWS"]
