"""The kit's side of webhook notifications: what a procedure tells the outside, and when.

:class:`ProcedureNotifier` watches the procedure's status on every ``touch`` (no extra call in
procedure code) and sends, through the ``notify`` activity (:mod:`activities.notify.webhook`):

- ``gate-opened`` / ``gate-decided`` / ``gate-timed-out`` from new gate-history records, with the
  gate and the exact command that answers it;
- ``node-degraded`` and ``drain-blocked`` (with the report) when a node enters that phase;
- ``paused`` when the procedure's phase becomes paused;
- ``node-held`` / ``node-released`` / ``hold-expired`` from new hold records
  (:mod:`workflows.kit.holds`), with the command that releases a hold;
- ``window-wait`` once per closed maintenance window that keeps a node from starting, with the
  next opening (:mod:`workflows.kit.windows`; sent by :meth:`NodeProcedureWorkflow.kit_windows`'s
  hook, not from the status);
- ``completed`` / ``failed`` when the run ends (:func:`wrap_run` awaits that last one so it
  is sent before the run closes).

It never blocks the procedure: an activity is started and a background task awaits it; a
failure after the retries is logged and appended to the status ``warnings`` (shown by
``lockkeeper status``).

Whether a run sends is decided once, in its first workflow task, and recorded in its history:
a run whose first task ran on a worker wired with at least one URL (:func:`wire`: the worker
registers the ``notify`` activity) takes the marker ``kit-notify-on`` (``workflow.patched`` used
as a recorded decision, not as a code version). A replay reads the decision back from the
marker, so a worker wired differently (or not at all, or a ``Replayer``) makes the same commands.
The run's last notification is sent by the run method itself (:func:`wrap_run`, installed on
every procedure class), not by a worker interceptor.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.worker import (
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

with workflow.unsafe.imports_passed_through():
    from activities.notify.models import NotifyEvent
    from workflows.kit.details import gate_command, node_statuses
    from workflows.kit.models import NodePhase, NodeStatus, ProcedureStatus

NOTIFY = "notify"  # activities.notify.webhook.NOTIFY (workflows call activities by name)
#: Marker of a run that sends (a decision recorded in history, see the module doc).
PATCH_NOTIFY_ON = "kit-notify-on"
#: A notification gives up after this many attempts (1 s, 2 s, 4 s apart).
MAX_ATTEMPTS = 4
#: The run's last notification: fewer, quicker attempts, and the run waits for it at most this
#: long (seconds), so a receiver that is down delays the close by seconds, never the work.
FINAL_ATTEMPTS = 3
FINAL_WAIT_SECONDS = 5.0

_wired = {"on": False, "targets": True}


def wire(on: bool, *, targets: bool = True) -> None:
    """Called by the worker that registers the ``notify`` activity (True) and at its shutdown.
    ``targets``: whether any URL is configured (without one, new runs decide not to send and
    their histories carry no notify activity). Only the start of a run reads this (see the
    module doc): a replay never does."""
    _wired["on"] = on
    _wired["targets"] = targets


def wired() -> bool:
    """Whether this worker process registers the notify activity."""
    return _wired["on"]


def _sends() -> bool:
    return _wired["on"] and _wired["targets"]


#: Result outcomes sent as ``completed``; any other outcome (aborted, rejected, failed...) is
#: sent as ``failed``.
COMPLETED_OUTCOMES = ("completed", "done", "dry-run", "checked")

_ACTION_EVENT = {"opened": "gate-opened", "approved": "gate-decided", "rejected": "gate-decided",
                 "decided": "gate-decided", "timeout": "gate-timed-out"}


class ProcedureNotifier:
    """One per procedure run (created in ``kit_init``). ``status``: the procedure's status model
    (the kit's own instance); ``noun``: "rollout", ..."""

    def __init__(self, status: ProcedureStatus, noun: str) -> None:
        self.status = status
        self.noun = noun
        self._records = len(status.gate_history)
        self._hold_records = len(status.hold_history)
        self._nodes: dict[str, str] = {}
        self._phase: str | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Called from kit_init, in the run's first workflow task (see the module doc). The one
        # workflow.patched of the kit that is no code version: a decision recorded in history.
        self._on: bool = workflow.patched(PATCH_NOTIFY_ON) if workflow.unsafe.is_replaying() or _sends() else False

    def enabled(self) -> bool:
        """Whether this run sends (decided at its start and recorded in its history)."""
        return self._on

    def _view(self) -> ProcedureStatus:
        """The status to read. A one-node procedure (a ``node`` field: the standalone drain)
        keeps its node row and drain-gate records out of the status model and assembles them
        in its ``procedure_status`` hook, so that view is read (one node: cheap); otherwise the
        status model itself."""
        st = self.status
        if "node" in type(st).model_fields:
            hook = getattr(workflow.instance(), "procedure_status", None)
            if hook is not None:
                view = hook()
                if isinstance(view, ProcedureStatus):
                    return view
        return st

    def _watched(self, st: ProcedureStatus) -> dict[str, NodeStatus]:
        """The node rows to watch: the procedure's ``nodes``, and the single ``node`` of a
        one-node procedure (the standalone drain)."""
        nodes = node_statuses(st)
        one = getattr(st, "node", None)
        if isinstance(one, NodeStatus) and one.name not in nodes:
            nodes = {**nodes, one.name: one}
        return nodes

    def observe(self, phase: str, gates: dict[str, Any]) -> None:
        """After a change (``touch``): send what is new since the last call."""
        if self._on is False:
            return  # decided: this run sends nothing
        st = self._view()
        history = st.gate_history
        new, self._records = history[self._records:], len(history)
        nodes = self._watched(st)
        changed_nodes = [n for n in nodes.values() if self._nodes.get(n.name) != str(n.phase)]
        for n in changed_nodes:
            self._nodes[n.name] = str(n.phase)
        paused = phase == "paused" and self._phase != "paused"
        self._phase = phase
        holds = st.hold_history
        new_holds, self._hold_records = holds[self._hold_records:], len(holds)
        if not (new or changed_nodes or paused or new_holds) or not self.enabled():
            return
        wid = st.workflow_id
        for h in new_holds:
            event = {"held": "node-held", "released": "node-released", "expired": "hold-expired"}.get(h.action)
            if event is None:
                continue  # "ended": the node finished or was skipped; its own notification says so
            cmd = f"lockkeeper release {wid} {h.node} -m REASON" if h.action == "held" else None
            self.send(event, f"{st.procedure} `{wid}` on {st.cluster}: {h.line()}", node=h.node, by=h.by, command=cmd)
        for r in new:
            event = _ACTION_EVENT.get(r.action)
            if event is None:
                continue
            # A node's drain-decision gate lives in its node run: the record came with the node's status.
            gate = gates.get(r.gate_id) or next(
                (n.decision_gate for n in nodes.values() if n.decision_gate is not None and n.decision_gate.id == r.gate_id), None)
            cmd = gate_command(wid, gate) if gate is not None and r.action == "opened" else None
            if r.action == "timeout" and phase == "paused" and r.gate_id in gates:
                cmd = f"lockkeeper resume {wid}"  # the declared outcome paused it; resume opens the gate again
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
                          gate=n.decision_gate.id if n.decision_gate is not None else None,
                          command=f"lockkeeper decide {wid} {n.name} wait|skip|delete-pod|abort")
        if paused:
            self.send("paused", f"{st.procedure} `{wid}` on {st.cluster} paused: {st.paused_reason or '-'}",
                      command=f"lockkeeper resume {wid}")

    def seen_holds(self) -> None:
        """Hold records up to now are known (taken over at a continue-as-new): not sent again."""
        self._hold_records = len(self.status.hold_history)

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
        except Exception as exc:  # noqa: BLE001 - ActivityError after the retries: tell, never fail the run
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
    """Kept for workers that install it (workers/worker.py): it no longer acts. The run's last
    notification (``completed`` / ``failed``) is sent by :func:`wrap_run`, so a worker or a
    ``Replayer`` without this interceptor makes the same commands."""

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor] | None:
        return None


def wrap_run(cls: type) -> None:
    """Make the ``@workflow.run`` method that ``cls`` defines itself (if any) send the run's
    last notification when it returns or raises (not on continue-as-new or cancellation), then
    return or raise as before. Called for every procedure class (``ProcedureWorkflow.
    __init_subclass__``), before ``@workflow.defn`` reads the class; the wrapper keeps the
    method's name, signature and type hints. A run method that calls an overridden one
    (``super().run``) sends once."""
    for name, fn in list(vars(cls).items()):
        if inspect.iscoroutinefunction(fn) and hasattr(fn, "__temporal_workflow_run") and not hasattr(fn, "_kit_notify_wrapped"):
            setattr(cls, name, _wrapped(fn))


def _wrapped(fn: Any) -> Any:
    @functools.wraps(fn)
    async def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "_kit_notify_running", False):
            return await fn(self, *args, **kwargs)  # an inner run method: the outer one sends
        self._kit_notify_running = True
        try:
            result = await fn(self, *args, **kwargs)
        except (asyncio.CancelledError, workflow.ContinueAsNewError):
            raise
        except Exception as exc:
            await _final(self, None, exc)
            raise
        await _final(self, result, None)
        return result

    run._kit_notify_wrapped = True  # type: ignore[attr-defined]
    return run


async def _final(instance: Any, result: Any, exc: BaseException | None) -> None:
    n: ProcedureNotifier | None = getattr(instance, "kit_notifier", None)
    if n is None:
        return
    st = n.status
    if exc is not None:
        await n.finish("failed", f"{st.procedure} `{st.workflow_id}` on {st.cluster} failed: {exc}", "failed")
        return
    outcome = str(getattr(result, "outcome", "") or "completed")
    event = "completed" if outcome in COMPLETED_OUTCOMES else "failed"
    await n.finish(event, f"{st.procedure} `{st.workflow_id}` on {st.cluster} {outcome}", outcome)
