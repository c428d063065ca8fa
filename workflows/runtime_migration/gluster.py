"""The GlusterFS reads of the migration, through the GlusterFS package's read activity.

A thin adapter: the activity ``read_gluster`` (:class:`activities.gluster.models.GlusterReadInput`
→ :class:`activities.gluster.models.GlusterReport`, the CLI run in a GlusterFS pod) and the pure
:func:`workflows.shared.glusterfs.assess.assess` give an :class:`workflows.gluster.models.Assessment`; the
migration's own rules (which bricks are the node's, heal counts, split-brain) are in
:mod:`workflows.runtime_migration.plan`. Keeping the call here means a change of the GlusterFS
package's activity shape touches one function.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.gluster.models import GlusterReadInput, GlusterReport, GlusterTarget
    from workflows.shared.glusterfs.calls import CLI_HEARTBEAT, READ_GLUSTER
    from workflows.shared.glusterfs.models import Assessment
    from workflows.shared.glusterfs.assess import assess
    from workflows.runtime_migration.models import GlusterTargetSpec

_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), backoff_coefficient=2.0, maximum_interval=timedelta(seconds=30),
                     maximum_attempts=5)


async def read_assessment(spec: GlusterTargetSpec, *, exclude_node: str | None, heal: bool, timeout_seconds: float = 120.0) -> Assessment:
    """Read every volume (status, info, peers; heal info when ``heal``) from a GlusterFS pod not on
    ``exclude_node`` and assess it per replica set. Raises ActivityError after the retries (no pod
    answered, the CLI kept failing)."""
    inp = GlusterReadInput(
        target=GlusterTarget(namespace=spec.namespace, clusters=list(spec.clusters), exclude_node=exclude_node),
        heal=heal, command_timeout_seconds=timeout_seconds,
    )
    report: GlusterReport = await workflow.execute_activity(
        READ_GLUSTER, inp, result_type=GlusterReport,
        start_to_close_timeout=timedelta(seconds=timeout_seconds * 4 + 30), heartbeat_timeout=CLI_HEARTBEAT, retry_policy=_RETRY,
    )
    return assess(report, "per-replica-set")
