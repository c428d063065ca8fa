"""``lockkeeper status`` and ``lockkeeper list``: generic over every procedure type.

``status ID`` describes the workflow, finds its :class:`~workflows.kit.spec.ProcedureSpec` by
workflow type in ``workflows.PROCEDURES``, queries ``status`` and validates it with the spec's
status model (a closed run: its result with the result model, or its failure), then renders the
procedure's own panel (:mod:`lockkeeper.panels`) and the steps that wait or retry (each pending
activity's attempt, last failure and next retry time). ``-o json|yaml`` prints one document of
the same shape in every state (:mod:`lockkeeper.cli.status_doc`). ``list`` is a visibility
query on the ``Lockkeeper*`` search attributes, which the starter sets for every procedure.
"""

from __future__ import annotations

import asyncio
from typing import Any

import typer

from lockkeeper.cli.common import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    CliError,
    OutputOpt,
    check_output,
    cli_settings,
    connect,
    run,
    show,
)


def spec_of(workflow_type: str) -> Any:
    """The spec of a workflow type; :class:`CliError` (exit 3) for a type that is no procedure
    (a node run or a lease: their parent is the procedure)."""
    from workflows import PROCEDURES
    from workflows.kit.spec import spec_for_workflow_type

    spec = spec_for_workflow_type(PROCEDURES, workflow_type)
    if spec is None:
        known = ", ".join(s.workflow_type for s in PROCEDURES)
        raise CliError(f"{workflow_type} is not a lockkeeper procedure (procedures: {known})", EXIT_NOT_FOUND)
    return spec


def status(
    ctx: typer.Context,
    workflow_id: str = typer.Argument(..., metavar="ID"),
    output: str = OutputOpt,
    watch: bool = typer.Option(False, "--watch", "-w", help="Live view until the procedure ends."),
) -> None:
    """Where a procedure is: its phase, what it waits for since when, gates, and its own panel
    (per node phase/step for the rollout, members for an etcd restore)."""
    output = check_output(output)
    settings = cli_settings(ctx)
    run(show_status(settings, workflow_id, output, watch))


async def show_status(settings: Any, wid: str, output: str, watch: bool) -> int:
    """Body of ``status``: one document for every state (:mod:`.status_doc`). Exit 0 while
    running or after success; 1 after a failed, aborted, terminated or canceled run; 3 when it
    runs but no worker answers the status query (what is known is still printed)."""
    from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
    from temporalio.service import RPCError

    from lockkeeper import output as out
    from lockkeeper import panels
    from lockkeeper.cli.common import cause_message, err
    from lockkeeper.cli.status_doc import document, pending_activities, pending_table, versioning_of
    from lockkeeper.starter import query_status

    client = await connect(settings)
    handle = client.get_workflow_handle(wid)
    desc = await handle.describe()
    spec = spec_of(desc.workflow_type)
    handle = client.get_workflow_handle(wid, result_type=spec.result_model)
    console = out.console()
    if desc.status == WorkflowExecutionStatus.RUNNING:
        if watch and output == "table":
            res = await watch_until_closed(handle, spec, console, live=True)
            console.print(panels.result_panel(spec.name, res))
            return EXIT_OK if panels.result_ok(res) else EXIT_FAILED
        pending = await pending_activities(client, wid, desc)
        try:
            st = await query_status(handle, spec, timeout=15)
        except RPCError as exc:
            version, build = versioning_of(desc), ""
            if version is not None and version["behavior"] == "pinned":  # only that build's workers answer it
                build = f" of build {version['build_id']} (the run is pinned to it)"
            warning = (f"no worker answered the status query ({exc.message}); is a `lockkeeper worker`{build} running "
                       f"on task queue {desc.task_queue!r}?")
            doc = document(desc, spec, warning=warning, pending=pending)
            if output == "table":
                console.print(f"{wid} ({spec.name}): running; status unknown")
                if pending:
                    console.print(pending_table(pending))
            else:
                print(out.dump(doc, output))
            err(f"error: {warning}")
            return EXIT_NOT_FOUND
        if output == "table":
            console.print(panels.status_panel(spec.name, st))
            if pending:
                console.print(pending_table(pending))
        else:
            print(out.dump(document(desc, spec, status=st, pending=pending), output))
        return EXIT_OK
    # Closed: the result holds the final state (no worker needed to answer); a run that failed,
    # was terminated, canceled or timed out has a failure instead.
    try:
        res = await handle.result(follow_runs=False)
    except WorkflowFailureError as exc:
        failure = cause_message(exc)
        if output == "table":
            from rich.markup import escape

            console.print(f"{wid} ({spec.name}): [bold red]{escape(desc.status.name.lower())}[/]: {escape(failure)}")
        else:
            print(out.dump(document(desc, spec, failure=failure), output))
        return EXIT_FAILED
    if output == "table":
        console.print(panels.result_panel(spec.name, res))
    else:
        print(out.dump(document(desc, spec, result=res), output))
    return EXIT_OK if panels.result_ok(res) else EXIT_FAILED


async def watch_until_closed(handle: Any, spec: Any, console: Any, *, live: bool, interval: float = 1.0) -> Any:
    """Show the status (a live rich view, or one line per change when not on a terminal) until
    the workflow closes; returns its result (validated with the spec's result model)."""
    from rich.live import Live
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError

    from lockkeeper import panels
    from lockkeeper.starter import query_status

    async def closed() -> bool:
        return (await handle.describe()).status != WorkflowExecutionStatus.RUNNING

    if live:
        with Live(console=console, auto_refresh=False, transient=False) as lv:
            while not await closed():
                try:
                    lv.update(panels.status_panel(spec.name, await query_status(handle, spec)), refresh=True)
                except RPCError:
                    pass  # a query can time out while no worker runs; keep watching
                await asyncio.sleep(interval)
    else:
        last = None
        while not await closed():
            try:
                st = await query_status(handle, spec)
                line = f"{getattr(st, 'phase', '')} {getattr(st, 'waiting_for', None) or ''}".strip()
                if line != last:
                    console.print(line)
                    last = line
            except RPCError:
                pass
            await asyncio.sleep(interval)
    return await handle.result()


def list_(
    ctx: typer.Context,
    cluster: str | None = typer.Option(None, "--cluster", help="Only this cluster."),
    procedure: str | None = typer.Option(None, "--procedure", help="e.g. machineconfig-rollout, drain, etcd-restore"),
    state: str | None = typer.Option(None, "--status", help="LockkeeperStatus, e.g. running, paused, done"),
    running: bool = typer.Option(False, "--running", help="Only executions still running."),
    campaign: str | None = typer.Option(None, "--campaign", metavar="ID", help="Only the clusters' runs of this campaign."),
    limit: int = typer.Option(50, "--limit"),
    output: str = OutputOpt,
) -> None:
    """List procedures of every type (visibility query on LockkeeperProcedure/Cluster/Status)."""
    output = check_output(output)
    settings = cli_settings(ctx)
    run(show_list(settings, cluster, procedure, state, running, limit, output, campaign))


def build_list_query(cluster: str | None, procedure: str | None, state: str | None, running: bool,
                     campaign: str | None = None) -> str:
    """The visibility query of ``lockkeeper list``; ``campaign``: only that campaign's children
    (Temporal's system attribute ``ParentWorkflowId``)."""
    from lockkeeper.starter import quote
    from workflows.kit.models import SA_CLUSTER, SA_PROCEDURE, SA_STATUS

    terms = [f"{SA_PROCEDURE} = {quote(procedure)}" if procedure else f"{SA_PROCEDURE} IS NOT NULL"]
    if cluster:
        terms.append(f"{SA_CLUSTER} = {quote(cluster)}")
    if state:
        terms.append(f"{SA_STATUS} = {quote(state)}")
    if running:
        terms.append("ExecutionStatus = 'Running'")
    if campaign:
        terms.append(f"ParentWorkflowId = {quote(campaign)}")
    return " AND ".join(terms)


async def list_rows(client: Any, query: str, limit: int) -> list[dict[str, Any]]:
    """The rows of ``lockkeeper list``: id, procedure, cluster, pools, status, execution, started."""
    from workflows.kit.models import SA_CLUSTER, SA_POOLS, SA_PROCEDURE, SA_STATUS

    rows = []
    async for wf in client.list_workflows(query, limit=limit):
        sa = wf.search_attributes
        first = lambda k: (sa.get(k) or [None])[0]  # noqa: E731 - untyped SAs come as lists
        rows.append(
            {
                "id": wf.id,
                "procedure": first(SA_PROCEDURE),
                "cluster": first(SA_CLUSTER),
                "pools": list(sa.get(SA_POOLS) or []),
                "status": first(SA_STATUS),
                "execution": wf.status.name.lower() if wf.status else None,
                "started": wf.start_time.isoformat(timespec="seconds") if wf.start_time else None,
            }
        )
    return rows


async def show_list(
    settings: Any, cluster: str | None, procedure: str | None, state: str | None, running: bool, limit: int, output: str,
    campaign: str | None = None,
) -> int:
    """Body of ``list``."""
    from lockkeeper import output as out

    client = await connect(settings)
    rows = await list_rows(client, build_list_query(cluster, procedure, state, running, campaign), limit)
    show(lambda: out.list_table(rows), lambda: rows, output)
    return EXIT_OK


def register(app: typer.Typer) -> None:
    """Add ``status`` and ``list``."""
    app.command("status")(status)
    app.command("list")(list_)
