"""LeaseWorkflow: one running procedure per pool of a cluster, made exclusive by a workflow ID.

A rollout starts one lease child per pool with the ID ``lease/{cluster}/{pool}``
(:func:`workflows.models.lease_workflow_id`). Temporal allows one running workflow per ID, so a
second rollout's start fails with WorkflowAlreadyStartedError; it then signals ``contend`` with
its own workflow ID and the lease answers with a ``lease_denied`` signal carrying the holder
(:class:`LeaseInfo`), so the refusal names the first rollout. The lease ends on ``release`` or
when its parent closes (parent close policy TERMINATE), so a crashed or terminated rollout never
leaves a stale lock behind.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.models import LeaseInfo, LeaseInput


@workflow.defn
class LeaseWorkflow:
    """Hold ``input.scope`` of ``input.cluster`` for ``input.holder`` until released."""

    @workflow.init
    def __init__(self, input: LeaseInput) -> None:
        self._info = LeaseInfo(
            cluster=input.cluster, scope=input.scope, holder=input.holder, procedure=input.procedure
        )
        self._released = False
        self._contenders: list[str] = []

    @workflow.signal
    def release(self, holder: str = "") -> None:
        """Give the lease up (the holder calls this with its workflow ID when it finishes)."""
        if holder and holder != self._info.holder:
            workflow.logger.warning("lease %s: release by %s ignored (held by %s)", self._info.scope, holder, self._info.holder)
            return
        self._released = True

    @workflow.signal
    def contend(self, requester_workflow_id: str) -> None:
        """Somebody wants this lease: answer them with ``lease_denied`` naming the holder."""
        self._contenders.append(requester_workflow_id)

    @workflow.query
    def holder(self) -> LeaseInfo:
        """Who holds the lease, for which procedure, since when."""
        return self._info

    @workflow.run
    async def run(self, input: LeaseInput) -> LeaseInfo:
        self._info.acquired_at = workflow.now()
        while True:
            await workflow.wait_condition(lambda: self._released or bool(self._contenders))
            while self._contenders:
                requester = self._contenders.pop(0)
                try:
                    await workflow.get_external_workflow_handle(requester).signal("lease_denied", self._info)
                except Exception as err:  # noqa: BLE001 - a requester that is gone needs no answer
                    workflow.logger.info("lease contender %s not reachable: %s", requester, err)
            if self._released:
                await workflow.wait_condition(workflow.all_handlers_finished)
                return self._info
