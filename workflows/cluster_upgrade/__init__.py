"""The whole cluster upgrade of R3 (GlusterFS, etcd backup, control plane, infra nodes, compute
nodes, nodeSelector migration) as child procedures: :mod:`.workflow`, :mod:`.models`. ``SPEC``
for the registry; its children include the GlusterFS recovery, which it starts as phase 1."""

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.cluster_upgrade.models import (
        PROCEDURE_CLUSTER_UPGRADE,
        ClusterUpgradeInput,
        ClusterUpgradeResult,
        ClusterUpgradeStatus,
    )
    from workflows.kit.spec import PRIORITY_CONTROL, ProcedureSpec
from workflows.cluster_upgrade.workflow import ClusterUpgradeWorkflow
from workflows.gluster.workflow import GlusterRecoveryWorkflow

SPEC = ProcedureSpec(
    name=PROCEDURE_CLUSTER_UPGRADE,
    priority=PRIORITY_CONTROL,
    workflow=ClusterUpgradeWorkflow,
    input_model=ClusterUpgradeInput,
    status_model=ClusterUpgradeStatus,
    result_model=ClusterUpgradeResult,
    id_prefix="cluster-upgrade",
    children=(GlusterRecoveryWorkflow,),
    start="lockkeeper.cli.start.cluster_upgrade:start_cluster_upgrade",
)

__all__ = ["SPEC", "ClusterUpgradeWorkflow"]
