"""The kit's side of webhook notifications: what a procedure tells the outside, and when.

:class:`ProcedureNotifier` watches the procedure's status on every ``touch`` (no extra call in
procedure code) and sends, through the ``notify`` activity (:mod:`activities.notify.webhook`):

- ``gate-opened`` / ``gate-decided`` / ``gate-timed-out`` from new gate-history records, with the
  gate and the exact command that answers it;
- ``node-degraded`` and ``drain-blocked`` (with the report) when a node enters that phase;
- ``paused`` when the procedure's phase becomes paused;
- ``completed`` / ``failed`` when the run ends (:class:`NotifyInterceptor`, which the worker
  installs, awaits that last one so it is sent before the run closes).

It never blocks the procedure: an activity is started and a background task awaits it; a
failure after the retries is logged and appended to the status ``warnings`` (shown by
``lockkeeper status``). Sending is on only where the worker wired it (:func:`wire`, the worker
registers the ``notify`` activity at the same time) and only in runs that have the
``kit-notify`` patch, so stored histories without these activities replay.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.worker import ExecuteWorkflowInput, Interceptor, WorkflowInboundInterceptor, WorkflowInterceptorClassInput

with workflow.unsafe.imports_passed_through():
    from activities.notify.models import NotifyEvent
    from workflows.kit.details import gate_command, node_statuses
    from workflows.kit.models import NodePhase, ProcedureStatus

NOTIFY = "notify"  # activities.notify.webhook.NOTIFY (workflows call activities by name)
PATCH_NOTIFY = "kit-notify"
#: A notification gives up after this many attempts (1 s, 2 s, 4 s apart).
MAX_ATTEMPTS = 4
#: The run's last notification: fewer, quicker attempts, and the run waits for it at most this
#: long (seconds), so a receiver that is down delays the close by seconds, never the work.
FINAL_ATTEMPTS = 3
FINAL_WAIT_SECONDS = 5.0

_wired = {"on": False}


def wire(on: bool) -> None:
    """Called by the worker that registers the ``notify`` activity (True) and at its shutdown.
    Every worker of a deployment runs the same code, so all of them send or none does."""
    _wired["on"] = on


def wired() -> bool:
    """Whether this worker process sends notifications."""
    return _wired["on"]


_ACTION_EVENT = {"opened": "gate-opened", "approved": "gate-decided", "rejected": "gate-decided",
                 "decided": "gate-decided", "timeout": "gate-timed-out"}


class ProcedureNotifier:
    """One per procedure run (created in ``kit_init``). ``status``: the procedure's status model
    (the kit's own instance); ``noun``: "rollout", ..."""

    def __init__(self, status: ProcedureStatus, noun: str) -> None:
        self.status = status
        self.noun = noun
        self._records = len(status.gate_history)
        self._nodes: dict[str, str] = {}
        self._phase: str | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._on: bool | None = None

    def enabled(self) -> bool:
        """Wired by the worker and patched in this run (asked once, then remembered)."""
        if self._on is None:
            if not wired():
                return False  # asked again later: never marks the patch in an unwired run
            self._on = workflow.patched(PATCH_NOTIFY)
        return self._on

    def observe(self, phase: str, gates: dict[str, Any]) -> None:
        """After a change (``touch``): send what is new since the last call."""
        st = self.status
        history = st.gate_history
        new, self._records = history[self._records:], len(history)
        nodes = node_statuses(st)
        changed_nodes = [n for n in nodes.values() if self._nodes.get(n.name) != str(n.phase)]
        for n in changed_nodes:
            self._nodes[n.name] = str(n.phase)
        paused = phase == "paused" and self._phase != "paused"
        self._phase = phase
        if not (new or changed_nodes or paused) or not self.enabled():
            return
        wid = st.workflow_id
        for r in new:
            event = _ACTION_EVENT.get(r.action)
            if event is None:
                continue
            gate = gates.get(r.gate_id)
            cmd = gate_command(wid, gate) if gate is not None and r.action == "opened" else None
            what = {"opened": "waits for", "timeout": "timed out"}.get(r.action, f"{r.action} by {r.by}")
            text = f"{st.procedure} `{wid}` on {st.cluster}: gate `{r.gate_id}` {what}"
            text += f" — `{cmd}`" if cmd else (f" ({r.outcome})" if r.outcome else "")
            self.send(event, text, gate=r.gate_id, command=cmd, by=r.by if r.action != "opened" else None,
                      outcome=str(r.decision or r.outcome or r.action))
        for n in changed_nodes:
            if n.phase == NodePhase.DEGRADED:
                self.send("node-degraded", f"{st.procedure} `{wid}` on {st.cluster}: node {n.name} degraded: {n.reason or '-'}",
                          node=n.name, command=f"lockkeeper retry-node {wid} {n.name}")
            elif n.phase == NodePhase.BLOCKED and n.drain_report is not None:
                pods = ", ".join(f"{p.namespace}/{p.name}" for p in n.drain_report.blocked_pods) or "-"
                self.send("drain-blocked", f"{st.procedure} `{wid}` on {st.cluster}: drain of {n.name} blocked by {pods}",
                          node=n.name, report=n.drain_report.model_dump(mode="json"),
                          command=f"lockkeeper decide {wid} {n.name} wait|skip|delete-pod|abort")
        if paused:
            self.send("paused", f"{st.procedure} `{wid}` on {st.cluster} paused: {st.paused_reason or '-'}",
                      command=f"lockkeeper resume {wid}")

    def send(self, event: str, text: str, *, attempts: int = MAX_ATTEMPTS, **fields: Any) -> asyncio.Task[None]:
        """Start the ``notify`` activity for ``event`` and return at once (see the module doc);
        returns the background task that awaits it."""
        st = self.status
        ev = NotifyEvent(event=event, text=text, procedure=st.procedure, workflow_id=st.workflow_id,  # type: ignore[arg-type]
                         cluster=st.cluster, at=workflow.now(), **fields)
        handle = workflow.start_activity(
            NOTIFY, ev, start_to_close_timeout=timedelta(seconds=30), heartbeat_timeout=None,
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1 if attempts == MAX_ATTEMPTS else 0.5),
                                     maximum_attempts=attempts),
            summary=f"notify {event}",
        )
        task = asyncio.ensure_future(self._watch(handle, event))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _watch(self, handle: Any, event: str) -> None:
        try:
            await handle
        except Exception as exc:  # ActivityError after the retries: tell, never fail the run
            cause = exc.__cause__ or exc
            msg = f"notification {event} not delivered: {cause}"
            workflow.logger.warning(msg)
            self.status.warnings.append(msg)

    async def finish(self, event: str, text: str, outcome: str | None) -> None:
        """Send the run's last notification and wait for it, at most :data:`FINAL_WAIT_SECONDS`
        (a durable timer): activities of a closed run never start. Earlier ones still retrying
        are given up with the run."""
        if self.enabled():
            task = self.send(event, text, attempts=FINAL_ATTEMPTS, outcome=outcome)
            await asyncio.wait([task], timeout=FINAL_WAIT_SECONDS)


class NotifyInterceptor(Interceptor):
    """Worker interceptor: sends ``completed`` / ``failed`` when a procedure's run ends (see
    :class:`ProcedureNotifier.finish`). Runs that are no procedure (node runs, leases) pass."""

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        return _Inbound


class _Inbound(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        try:
            result = await super().execute_workflow(input)
        except (asyncio.CancelledError, workflow.ContinueAsNewError):
            raise
        except Exception as exc:
            n = _notifier()
            if n is not None:
                st = n.status
                await n.finish("failed", f"{st.procedure} `{st.workflow_id}` on {st.cluster} failed: {exc}", "failed")
            raise
        n = _notifier()
        if n is not None:
            st = n.status
            outcome = str(getattr(result, "outcome", "") or "completed")
            event = "completed" if outcome in ("completed", "done", "dry-run", "checked") else "failed"
            await n.finish(event, f"{st.procedure} `{st.workflow_id}` on {st.cluster} {outcome}", outcome)
        return result


def _notifier() -> ProcedureNotifier | None:
    return getattr(workflow.instance(), "kit_notifier", None)
