"""``lockkeeper revert ID [--full]``: reverse what a procedure changed.

A running run gets the ``revert`` Update (the kit's: :class:`workflows.kit.models.RevertInput`,
``full`` set with ``--full``), sent as every decision is (:func:`lockkeeper.cli.decisions.update`:
a deadline, a bounded wait, "nothing was decided" with exit 3 when no worker answers); its
validator says whether it can and why not. When it refuses only because the run is past its
point of no return (the kit's ``past the point of no return (...)``) and the procedure has a
full revert for an ended run, ``--full`` goes on in the same command: it sends ``abort`` (the
reason naming the full revert), waits for the run to end printing what it waits for (as
``status`` says) on stderr, then starts the full revert below and prints its ID.

A run that has ended is reversed by a NEW run:

- the procedure's own reverse (``ProcedureSpec.reverse``: a function of the ended run's input,
  read from its history, its workflow ID and, when it takes a third argument, its result (None
  for a failed or terminated run); it returns None when that run left nothing to reverse. The
  VXLAN port change swaps the ports and runs the change backwards; the network migration runs
  the documented rollback from the records of a run stopped past the switch);
- otherwise the kit's :class:`workflows.kit.reverse.RevertRecordsWorkflow`, which restores the
  records the ended run left in its result (``open_records``) and reads each object back.

A plain ``revert`` of an ended run changes nothing and says which command would (exit 2).
"""

from __future__ import annotations

import asyncio
from typing import Any

from lockkeeper.cli.common import EXIT_USAGE, CliError, connect, err
from lockkeeper.cli.decisions import update


def reverser(name: str) -> Any:
    """The reverse function of procedure ``name`` (its spec's ``reverse``), or None."""
    from workflows.kit.spec import resolve
    from workflows.registry import PROCEDURES

    spec = next((s for s in PROCEDURES if s.name == name), None)
    return resolve(spec.reverse) if spec is not None and spec.reverse else None


def reverse_of(fn: Any, inp: Any, wid: str, result: Any) -> Any:
    """``fn`` (a procedure's ``reverse``) applied to the ended run: ``fn(inp, wid)``, or
    ``fn(inp, wid, result)`` when it takes a third argument. The reverse run's input, or None."""
    import inspect

    takes_result = len(inspect.signature(fn).parameters) >= 3
    return fn(inp, wid, result) if takes_result else fn(inp, wid)


async def _reverse_input(client: Any, wid: str, spec: Any, result: Any) -> Any:
    """The input of ``spec``'s own reverse run of the ended ``wid``, or None (no reverse, or
    nothing left to reverse)."""
    fn = reverser(spec.name) if spec is not None else None
    if fn is None:
        return None
    return reverse_of(fn, await started_input(client, client.get_workflow_handle(wid), spec.input_model), wid, result)


async def started_input(client: Any, handle: Any, model: type) -> Any:
    """The input the run ``handle`` was started with, decoded as ``model``."""
    history = await handle.fetch_history()
    attrs = history.events[0].workflow_execution_started_event_attributes
    (value,) = await client.data_converter.decode(list(attrs.input.payloads), [model])
    return value


async def _ended(client: Any, wid: str) -> tuple[Any, Any, Any] | None:
    """``(description, spec, result or None)`` when ``wid`` has ended, None while it runs."""
    from temporalio.client import WorkflowExecutionStatus

    from workflows.kit.spec import spec_for_workflow_type
    from workflows.registry import PROCEDURES

    handle = client.get_workflow_handle(wid)
    desc = await handle.describe()
    if desc.status == WorkflowExecutionStatus.RUNNING:
        return None
    spec = spec_for_workflow_type(PROCEDURES, desc.workflow_type)
    result = None
    if spec is not None and desc.status == WorkflowExecutionStatus.COMPLETED:
        result = await client.get_workflow_handle(wid, result_type=spec.result_model).result()
    return desc, spec, result


async def revert_ended(settings: Any, wid: str, who: str) -> bool:
    """Plain ``revert`` of an ended run: say what would revert it (stderr) and return True (the
    caller exits 2); False while the run is running (the Update decides)."""
    client = await connect(settings, identity=who)
    ended = await _ended(client, wid)
    if ended is None:
        return False
    desc, spec, result = ended
    own = await _reverse_input(client, wid, spec, result)
    if spec is not None and spec.no_records_revert and own is None and getattr(result, "open_records", None):
        err(f"{wid} has ended ({desc.status.name.lower()}) and has no full revert: {spec.no_records_revert}")
    elif spec is not None and (own is not None or (not spec.reverse and getattr(result, "open_records", None))):
        err(f"{wid} has ended ({desc.status.name.lower()}): `lockkeeper revert {wid} --full` reverses its change in a new run")
    else:
        err(f"{wid} has ended ({desc.status.name.lower()}) and left no recorded change to revert{left_note(wid, result)}")
    return True


def left_note(wid: str, result: Any) -> str:
    """For a run that left no record open but ended with something changed (a rollback that
    ended ``NOT fully restored``): ``; what it left changed ...`` naming the first items and
    where the rest and the commands are; empty otherwise."""
    left = list(getattr(result, "left_changed", None) or [])
    if not left:
        return ""
    shown = "; ".join(f"{i.target}: {i.what}" for i in left[:3]) + (f"; and {len(left) - 3} more" if len(left) > 3 else "")
    return f"; what it left changed, no record of this run can undo ({shown}): see `lockkeeper status {wid}` for it and the commands"


def revert_id_name(wid: str, id_prefix: str, cluster: str) -> str:
    """The ``id_name`` of the reverse run of ``wid``: ``revert-`` and what of ``wid`` follows its
    own ``<id_prefix>-<cluster>-`` (the new ID has that prefix again), so the ID reads
    ``vxlan-port-C-revert-4789-to-4889-<started>-<started again>-<hex>``; at most 60 characters."""
    head = f"{id_prefix}-{cluster}-"
    rest = wid[len(head):] if wid.startswith(head) else wid
    return f"revert-{rest}"[:60]


async def revert_full(settings: Any, wid: str, who: str, output: str, reason: str) -> int:
    """See the module doc. Exit codes as every command (a refusal is exit 2 or 1)."""
    from lockkeeper.cli.start.shared import Launch, launch
    from workflows.kit.models import ApprovalRules, RevertAnswer, RevertInput
    from workflows.kit.reverse import PROCEDURE_REVERT_RECORDS, RevertRecordsInput
    from workflows.kit.scopes import cluster_scope

    from temporalio.client import WorkflowUpdateFailedError

    from lockkeeper.cli.common import cause_message

    client = await connect(settings, identity=who)
    ended = await _ended(client, wid)
    if ended is None:
        try:
            return await update(settings, wid, "revert", RevertInput(identity=who, full=True, reason=reason), RevertAnswer, output, who)
        except WorkflowUpdateFailedError as exc:
            if not cause_message(exc).startswith(PAST_POINT) or not await has_ended_revert(client, wid):
                raise
            err(f"{wid}: {cause_message(exc)}")
            await abort_and_wait(settings, client, wid, who, reason)
            ended = await _ended(client, wid)
            assert ended is not None
    desc, spec, result = ended
    summary = f"full revert of {wid} by {who}" + (f": {reason}" if reason else "")
    inp = await _reverse_input(client, wid, spec, result)
    if spec is not None and inp is not None:
        cluster = getattr(inp, "cluster", "default")
        return await launch(Launch(name=spec.name, input=inp, cluster=cluster, who=who, output=output,
                                   scopes=[cluster_scope(cluster)], id_name=revert_id_name(wid, spec.id_prefix, cluster),
                                   summary=summary), settings)
    records = list(getattr(result, "open_records", None) or [])
    if records and spec is not None and spec.no_records_revert:
        raise CliError(f"{wid} ({desc.workflow_type}) has ended and has no full revert: {spec.no_records_revert}", EXIT_USAGE)
    if not records:
        raise CliError(f"{wid} ({desc.workflow_type}) has ended and left no recorded change to revert{left_note(wid, result)}",
                       EXIT_USAGE)
    started = await started_input(client, client.get_workflow_handle(wid), spec.input_model) if spec is not None else None
    cluster = str(getattr(started, "cluster", None) or "default")
    inp = RevertRecordsInput(cluster=cluster, of_workflow=wid, records=records, approvals=ApprovalRules(requested_by=who))
    return await launch(Launch(name=PROCEDURE_REVERT_RECORDS, input=inp, cluster=cluster, who=who, output=output,
                               scopes=[], id_name=revert_id_name(wid, spec.id_prefix if spec is not None else "", cluster),
                               summary=summary), settings)


#: How the kit's revert validator begins a refusal that is only about the point of no return
#: (:meth:`workflows.kit.procedure.ProcedureWorkflow.check_revert`).
PAST_POINT = "past the point of no return"

#: Seconds between two looks at a run ``revert --full`` waits for.
WAIT_POLL_SECONDS = 2.0


async def has_ended_revert(client: Any, wid: str) -> bool:
    """Whether the procedure of the running ``wid`` has a full revert once it has ended: its
    own reverse, or its records restored by the kit's record restore."""
    from workflows.kit.spec import spec_for_workflow_type
    from workflows.registry import PROCEDURES

    desc = await client.get_workflow_handle(wid).describe()
    spec = spec_for_workflow_type(PROCEDURES, desc.workflow_type)
    return spec is not None and bool(spec.reverse or not spec.no_records_revert)


async def abort_and_wait(settings: Any, client: Any, wid: str, who: str, reason: str) -> None:
    """Send ``abort`` to ``wid`` (reason: its full revert follows) and wait until it has ended,
    printing on stderr what it waits for each time that changes (its ``status`` query's
    ``phase`` and ``waiting_for``). The abort's answer goes to stderr. Raises what the abort
    Update raises (:func:`lockkeeper.cli.decisions.update`); Ctrl-C leaves the abort sent."""
    from datetime import timedelta

    from temporalio.client import WorkflowExecutionStatus

    from lockkeeper.cli.common import Output
    from workflows.kit.models import ControlInput, ControlResult

    why = f"aborted for `lockkeeper revert {wid} --full` by {who}" + (f": {reason}" if reason else "")
    await update(settings, wid, "abort", ControlInput(identity=who, reason=why), ControlResult, Output.TABLE, who)
    handle = client.get_workflow_handle(wid)
    shown = ""
    while (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
        try:
            st = await handle.query("status", result_type=dict, rpc_timeout=timedelta(seconds=5))
            now = f"{st.get('phase') or 'running'}: {st.get('waiting_for') or st.get('message') or 'working'}"
        except Exception:  # noqa: BLE001 - no worker answered the query: the run still runs
            now = "running (no worker answered the status query)"
        if now != shown:
            err(f"waiting for {wid} to end before its full revert: {now}")
            shown = now
        await asyncio.sleep(WAIT_POLL_SECONDS)
    err(f"{wid} has ended ({(await handle.describe()).status.name.lower()}): starting its full revert")
