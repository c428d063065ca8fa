"""The etcd procedures (R3): a backup of every member as a barrier, and the quorum restore.

:mod:`.backup` (``EtcdBackupWorkflow`` on :mod:`workflows.kit.barrier`, and
:func:`.backup.require_etcd_backup` for other procedures), :mod:`.restore`
(``EtcdQuorumRestoreWorkflow`` with the kit's gates, pause and abort) and :mod:`.models`.
``BACKUP`` and ``RESTORE`` are the procedures as the worker registry and the CLI see them; their
activities need no kubeconfig, so host-only workers run them (task queue kind "host").
"""

from temporalio import workflow

# Models come from the host even when the workflow sandbox runs this package's __init__: a model
# class imported fresh inside the sandbox would differ from the one the passed-through modules use.
with workflow.unsafe.imports_passed_through():
    from workflows.etcd.models import (
        PROCEDURE_ETCD_BACKUP,
        PROCEDURE_ETCD_RESTORE,
        EtcdBackupInput,
        EtcdBackupResult,
        EtcdBackupStatus,
        EtcdRestoreInput,
        EtcdRestoreResult,
        RestoreStatus,
    )
    from workflows.kit.spec import PRIORITY_URGENT, ProcedureSpec
from workflows.etcd.backup import EtcdBackupWorkflow
from workflows.etcd.restore import EtcdQuorumRestoreWorkflow

BACKUP = ProcedureSpec(
    name=PROCEDURE_ETCD_BACKUP,
    priority=PRIORITY_URGENT,
    workflow=EtcdBackupWorkflow,
    input_model=EtcdBackupInput,
    status_model=EtcdBackupStatus,
    result_model=EtcdBackupResult,
    id_prefix="etcd-backup",
    task_queue="host",
    start="lockkeeper.cli.start.etcd:start_etcd_backup",
)

RESTORE = ProcedureSpec(
    name=PROCEDURE_ETCD_RESTORE,
    priority=PRIORITY_URGENT,
    workflow=EtcdQuorumRestoreWorkflow,
    input_model=EtcdRestoreInput,
    status_model=RestoreStatus,
    result_model=EtcdRestoreResult,
    id_prefix="etcd-restore",
    task_queue="host",
    start="lockkeeper.cli.start.etcd:start_etcd_restore",
)

__all__ = ["BACKUP", "RESTORE", "EtcdBackupWorkflow", "EtcdQuorumRestoreWorkflow"]
