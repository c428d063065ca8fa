"""``lockkeeper revert ID --full``: reverse a whole change, for procedures that can.

A run that is still going gets the ``revert`` Update with ``full`` set (its validator says
whether it can, and why not), sent as every decision is (:func:`lockkeeper.cli.decisions.update`:
a deadline, a bounded wait, "nothing was decided" with exit 3 when no worker answers). A run that has ended is reversed by a NEW run of the same
procedure whose input comes from the ended run's own input (read from its history) through the
procedure's reverse function (its spec's ``reverse``; the VXLAN port change swaps the ports:
fan-out back, masters and ClusterNetwork to the old port, the DaemonSet restored at the end).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from lockkeeper.cli.common import EXIT_USAGE, CliError, connect
from lockkeeper.cli.decisions import update
from workflows.kit.models import OperatorInput


class RevertArgs(OperatorInput):
    """What ``lockkeeper revert`` sends as the ``revert`` Update to any procedure that has one
    (each decodes it as its own model: node_selectors ``RevertRequest``, network_migration and
    vxlan_port ``RevertInput``; a field a model does not declare, e.g. ``full``, is ignored).
    The :class:`~workflows.kit.models.OperatorInput` fields are stamped by
    :func:`lockkeeper.cli.decisions.update` (sent_at, deadline, connection identity)."""

    identity: str
    reason: str = ""
    full: bool = False


class RevertReply(BaseModel):
    """Any procedure's answer to ``revert``: its ``message`` and whatever else it says
    (``accepted``, ``mode``), kept for ``-o json``."""

    model_config = ConfigDict(extra="allow")

    message: str = ""

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


async def revert_full(settings: Any, wid: str, who: str, output: str, reason: str) -> int:
    """See the module doc. Exit codes as every command (a refusal is exit 2 or 1)."""
    from temporalio.client import WorkflowExecutionStatus

    from lockkeeper.cli.start.shared import Launch, launch
    from workflows import PROCEDURES
    from workflows.kit.scopes import cluster_scope
    from workflows.kit.spec import spec_for_workflow_type

    client = await connect(settings, identity=who)
    handle = client.get_workflow_handle(wid)
    desc = await handle.describe()
    spec = spec_for_workflow_type(PROCEDURES, desc.workflow_type)
    if desc.status == WorkflowExecutionStatus.RUNNING:
        return await update(settings, wid, "revert", RevertArgs(identity=who, full=True, reason=reason), RevertReply, output, who)
    fn = reverser(spec.name) if spec is not None else None
    if spec is None or fn is None:
        raise CliError(f"{wid} ({desc.workflow_type}) has ended and has no full revert", EXIT_USAGE)
    inp = fn(await started_input(client, handle, spec.input_model), wid)
    cluster = getattr(inp, "cluster", "default")
    req = Launch(name=spec.name, input=inp, cluster=cluster, who=who, output=output, scopes=[cluster_scope(cluster)],
                 id_name=f"revert-{wid}"[-60:], summary=f"full revert of {wid} by {who}" + (f": {reason}" if reason else ""))
    return await launch(req, settings)
