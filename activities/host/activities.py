"""The generic host-command activity: ``run_node_command`` (every procedure's host steps).

Async (the executors are asyncio based and heartbeat while a command runs). A command that ran
and failed is a result (``exit_code``), not an error; a node that cannot be reached is a
retryable ``NodeUnreachable`` ``ApplicationError``. Whether a step may be repeated is the
caller's decision (the workflow's retry policy), not this activity's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.context import fail
from activities.host.debug_pod import sweep_debug_pods
from activities.host.executors import NodeCommandError
from activities.host.factory import ExecutorFactory
from activities.host.models import CommandResult, RunCommandInput, SweepDebugPodsInput, SweepDebugPodsResult
from activities.kube.errors import KubeError

#: Activity names, as workflows call them.
ACTIVITY_NAMES = ["run_node_command", "sweep_debug_pods"]


class HostActivities:
    """Host-command activities. ``executors`` picks the backend for each host (credentials come
    from the worker's environment, never from input)."""

    def __init__(self, executors: ExecutorFactory | None = None) -> None:
        self.executors = executors or ExecutorFactory()

    def activities(self) -> list[Callable[..., Any]]:
        """Every activity of this class, bound, for a Worker's ``activities=``."""
        return [self.run_node_command, self.sweep_debug_pods]

    @activity.defn(name="run_node_command", no_thread_cancel_exception=True)
    async def run_node_command(self, input: RunCommandInput) -> CommandResult:
        """Run one argv on one node (see :mod:`activities.host.executors`). A failing command is
        a result, not an error; an unreachable node is a retryable NodeUnreachable."""
        try:
            return await self.executors.for_access(input.access).run(
                input.argv, timeout=input.timeout_seconds, stdin=input.stdin, env=input.env,
                max_output=input.max_output_bytes,
            )
        except NodeCommandError as exc:
            raise fail("NodeUnreachable", str(exc), retryable=True) from None

    @activity.defn(name="sweep_debug_pods")
    async def sweep_debug_pods(self, input: SweepDebugPodsInput) -> SweepDebugPodsResult:
        """Delete the run's debug pods and read back they are gone
        (:func:`activities.host.debug_pod.sweep_debug_pods`). A pod that stays is in the result's
        ``remaining``, not an error; an API that cannot list pods is a retryable ``KubeError``."""
        try:
            gw = self.executors.debug_pod_gateway()
            return await asyncio.to_thread(sweep_debug_pods, gw, input.run_id, list(input.namespaces))
        except KubeError as exc:
            raise fail("KubeError", f"sweeping the debug pods of run {input.run_id}: {exc}", retryable=True) from None
