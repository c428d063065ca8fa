"""The GlusterFS activities as the workflows call them: names and call options.

Names match :mod:`activities.gluster.activities`. ``read_gluster`` may run ``heal info`` on
many volumes (minutes on big ones, procedures-spec §3.3), so it gets a long start-to-close and
heartbeats while each CLI call runs (:data:`CLI_HEARTBEAT`); its retries are bounded so a check
never hangs on a broken cluster. The pod delete is safe to retry (it is guarded by the recorded
uid).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import PodRef
    from activities.gluster.models import (
        DeletePodResult,
        GlusterReadInput,
        GlusterReport,
        ReplacementInput,
        ReplacementState,
        VolumeStartInput,
        VolumeStartResult,
    )
    from workflows.kit import calls as kit_calls
    from workflows.kit.control import Control
    from workflows.kit.planning import planning_call

READ_GLUSTER = "read_gluster"
DELETE_GLUSTER_POD = "delete_gluster_pod"
FIND_GLUSTER_REPLACEMENT = "find_gluster_replacement"
GLUSTER_VOLUME_START_FORCE = "gluster_volume_start_force"

#: Errors retrying cannot fix: no usable pod, a CLI refusal, unreadable output.
NON_RETRYABLE = ["NoGlusterPod", "GlusterCommandFailed", "GlusterParseError", "KubeconfigError", "InvalidInput"]

READ_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), backoff_coefficient=2.0, maximum_interval=timedelta(seconds=20),
                         maximum_attempts=4, non_retryable_error_types=NON_RETRYABLE)
WRITE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_interval=timedelta(seconds=20),
                          maximum_attempts=10, non_retryable_error_types=NON_RETRYABLE)
#: A procedure's first read (planning): the kit's planning policy (issue 18: API errors fail fast,
#: ``Api*`` types, 5xx a bounded number of times) that also gives up at once on :data:`NON_RETRYABLE`.
PLANNING_READ_RETRY = dataclasses.replace(
    kit_calls.PLANNING_RETRY, non_retryable_error_types=[*(kit_calls.PLANNING_RETRY.non_retryable_error_types or []), *NON_RETRYABLE])
#: heal info on big volumes can take many minutes (procedures-spec §3.3: >= 30 min).
READ_START_TO_CLOSE = timedelta(minutes=30)
#: Heartbeat timeout of the activities that run the gluster CLI: a running command beats every
#: 2 s (``activities.context.beating``), so a dead worker is seen within this, however long the
#: command's own timeout; 30 s leaves a busy worker room.
CLI_HEARTBEAT = timedelta(seconds=30)


def _read_heartbeat(input: GlusterReadInput, short_call_s: float) -> timedelta:
    """A read's heartbeat timeout: :data:`CLI_HEARTBEAT`, or the command's own timeout plus the
    short-call slack when that is shorter."""
    return min(CLI_HEARTBEAT, timedelta(seconds=input.command_timeout_seconds + short_call_s))


async def read(input: GlusterReadInput, short_call_s: float, *, planning: bool = False) -> GlusterReport:
    """``read_gluster``: heartbeat within a command's timeout plus slack; ``planning`` (a
    procedure's first read, before it changes anything) with :data:`PLANNING_READ_RETRY`."""
    return await workflow.execute_activity(
        READ_GLUSTER, input, result_type=GlusterReport, start_to_close_timeout=READ_START_TO_CLOSE,
        heartbeat_timeout=_read_heartbeat(input, short_call_s),
        retry_policy=PLANNING_READ_RETRY if planning else READ_RETRY,
    )


async def read_planning(control: Control, input: GlusterReadInput, short_call_s: float) -> GlusterReport:
    """A procedure's first ``read_gluster`` (the options of ``read(planning=True)``) raced
    against ``control.abort`` (:func:`workflows.kit.planning.planning_call`): raises
    :class:`workflows.kit.control.Aborted` when an abort came while it ran or waited for its next
    attempt, ActivityError when it failed."""
    return await planning_call(
        control, READ_GLUSTER, input, GlusterReport, seconds=0, retry=PLANNING_READ_RETRY, start_to_close=READ_START_TO_CLOSE,
        heartbeat=_read_heartbeat(input, short_call_s),
    )


async def delete_pod(ref: PodRef, short_call_s: float) -> DeletePodResult:
    """``delete_gluster_pod`` (uid-guarded, so retries are safe)."""
    return await workflow.execute_activity(
        DELETE_GLUSTER_POD, ref, result_type=DeletePodResult, start_to_close_timeout=timedelta(seconds=short_call_s),
        retry_policy=WRITE_RETRY,
    )


async def find_replacement(input: ReplacementInput, short_call_s: float) -> ReplacementState:
    """``find_gluster_replacement`` (one list call)."""
    return await workflow.execute_activity(
        FIND_GLUSTER_REPLACEMENT, input, result_type=ReplacementState, start_to_close_timeout=timedelta(seconds=short_call_s),
        retry_policy=READ_RETRY,
    )


async def start_force(input: VolumeStartInput, short_call_s: float) -> VolumeStartResult:
    """``gluster_volume_start_force`` (restarting only offline bricks, so a repeat is harmless)."""
    return await workflow.execute_activity(
        GLUSTER_VOLUME_START_FORCE, input, result_type=VolumeStartResult,
        start_to_close_timeout=timedelta(seconds=short_call_s + 120), heartbeat_timeout=CLI_HEARTBEAT, retry_policy=READ_RETRY,
    )
