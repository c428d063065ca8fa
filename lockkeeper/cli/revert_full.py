"""``lockkeeper revert ID [--full]``: reverse what a procedure changed.

A running run gets the ``revert`` Update (the kit's: :class:`workflows.kit.models.RevertInput`,
``full`` set with ``--full``), sent as every decision is (:func:`lockkeeper.cli.decisions.update`:
a deadline, a bounded wait, "nothing was decided" with exit 3 when no worker answers); its
validator says whether it can and why not. A run that has ended is reversed by a NEW run:

- the procedure's own reverse (``ProcedureSpec.reverse``: a function of the ended run's input,
  read from its history; the VXLAN port change swaps the ports and runs the change backwards);
- otherwise the kit's :class:`workflows.kit.reverse.RevertRecordsWorkflow`, which restores the
  records the ended run left in its result (``open_records``) and reads each object back.

A plain ``revert`` of an ended run changes nothing and says which command would (exit 2).
"""

from __future__ import annotations

from typing import Any

from lockkeeper.cli.common import EXIT_USAGE, CliError, connect, err
from lockkeeper.cli.decisions import update


def reverser(name: str) -> Any:
    """The reverse function of procedure ``name`` (its spec's ``reverse``), or None."""
    from workflows.kit.spec import resolve
    from workflows.registry import PROCEDURES

    spec = next((s for s in PROCEDURES if s.name == name), None)
    return resolve(spec.reverse) if spec is not None and spec.reverse else None


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
    if spec is not None and spec.no_records_revert and not spec.reverse and getattr(result, "open_records", None):
        err(f"{wid} has ended ({desc.status.name.lower()}) and has no full revert: {spec.no_records_revert}")
    elif spec is not None and (spec.reverse or getattr(result, "open_records", None)):
        err(f"{wid} has ended ({desc.status.name.lower()}): `lockkeeper revert {wid} --full` reverses its change in a new run")
    else:
        err(f"{wid} has ended ({desc.status.name.lower()}) and left no recorded change to revert")
    return True


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

    client = await connect(settings, identity=who)
    ended = await _ended(client, wid)
    if ended is None:
        return await update(settings, wid, "revert", RevertInput(identity=who, full=True, reason=reason), RevertAnswer, output, who)
    desc, spec, result = ended
    summary = f"full revert of {wid} by {who}" + (f": {reason}" if reason else "")
    fn = reverser(spec.name) if spec is not None else None
    if spec is not None and fn is not None:
        inp = fn(await started_input(client, client.get_workflow_handle(wid), spec.input_model), wid)
        cluster = getattr(inp, "cluster", "default")
        return await launch(Launch(name=spec.name, input=inp, cluster=cluster, who=who, output=output,
                                   scopes=[cluster_scope(cluster)], id_name=revert_id_name(wid, spec.id_prefix, cluster),
                                   summary=summary), settings)
    records = list(getattr(result, "open_records", None) or [])
    if records and spec is not None and spec.no_records_revert:
        raise CliError(f"{wid} ({desc.workflow_type}) has ended and has no full revert: {spec.no_records_revert}", EXIT_USAGE)
    if not records:
        raise CliError(f"{wid} ({desc.workflow_type}) has ended and left no recorded change to revert", EXIT_USAGE)
    started = await started_input(client, client.get_workflow_handle(wid), spec.input_model) if spec is not None else None
    cluster = str(getattr(started, "cluster", None) or "default")
    inp = RevertRecordsInput(cluster=cluster, of_workflow=wid, records=records, approvals=ApprovalRules(requested_by=who))
    return await launch(Launch(name=PROCEDURE_REVERT_RECORDS, input=inp, cluster=cluster, who=who, output=output,
                               scopes=[], id_name=revert_id_name(wid, spec.id_prefix if spec is not None else "", cluster),
                               summary=summary), settings)
