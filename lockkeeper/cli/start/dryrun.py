"""Dry runs of ``lockkeeper start``: the input and its leases only (:func:`dry_run_report`), or
the procedure's own read-only run (:func:`dry_run_result`) and, for a procedure that checks
preconditions, every check with its result (:func:`workflow_dry_run`). Nothing here writes to a
cluster: a dry run's workflow reads and checks, and ends ``dry-run``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lockkeeper.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, connect, err
from lockkeeper.cli.start.shared import QUEUED, Launch, emit, show_window_plan, spec_named, start_run


async def dry_run_report(req: Launch, settings: Any) -> int:
    """Validate-only dry run: the input and the leases that would refuse it; nothing starts."""
    from lockkeeper import output as out
    from lockkeeper.starter import lease_holders

    client = await connect(settings, identity=req.who)
    held = await lease_holders(client, req.scopes)
    conflicts = [{"scope": s, "holder": h, "procedure": p} for s, h, p in held]
    if req.output == "table":
        err(f"dry run: {req.name} on cluster {req.cluster} would take {', '.join(req.scopes) or 'no lease'}")
        show_window_plan(req)
        for c in conflicts:
            err(f"  refused today: {c['procedure']} {c['holder']} holds {c['scope']}")
        print(out.dump({"input": req.input}, "yaml"))
    else:
        emit({"dry_run": True, "procedure": req.name, "scopes": list(req.scopes), "conflicts": conflicts,
               "input": req.input}, req.output)
    return EXIT_FAILED if conflicts else EXIT_OK


async def dry_run_result(req: Launch, settings: Any, *, show_id: bool = True, note: str = "(dry run)",
                         precheck: bool = False, stop_if_queued: bool = False) -> tuple[Any, Any]:
    """A procedure's own dry run (or check): start ``req`` (:func:`start_run`, no lease
    pre-check by default), print its workflow ID (stdout, a table only; ``show_id``), say
    ``started ID`` and ``note`` (stderr) and wait for its result. Returns ``(handle, result)``; with
    ``stop_if_queued`` the result is None when the start is queued (``--queue``, no worker: it
    runs when one comes), else the wait lasts until a worker has run it."""
    handle = await start_run(req, settings, precheck=precheck)
    if show_id and req.output == "table":
        print(handle.id, flush=True)
    if stop_if_queued and handle.id in QUEUED:
        return handle, None
    err(f"started {handle.id} {note}")
    return handle, await handle.result()


async def workflow_dry_run(req: Launch, settings: Any, *, plan: Callable[[Any], Sequence[str]] | None = None) -> int:
    """The procedure's own dry run (its input has ``dry_run``): start the run, which reads the
    cluster, checks every precondition (:mod:`workflows.kit.preflight`) and ends ``dry-run``
    without writing; print each check with its result (``ok`` / ``failed`` / ``not-run``, with
    the reason) and, with ``plan``, the lines it makes of the result. Exit 0 when nothing failed,
    2 when a real start would be refused (a failed check: the lines say what), 1 when the run
    could not plan at all; a run queued for a worker (``--queue``) exits 0 after its ID."""
    from lockkeeper import output as out

    spec = spec_named(req.name)
    # a run that cannot plan fails: the CLI's error mapping says why
    handle, res = await dry_run_result(req, settings, note="(dry run: it reads and checks, it writes nothing)",
                                       stop_if_queued=True)
    if res is None:  # queued (--queue): it checks when a worker comes
        return EXIT_OK
    if isinstance(res, dict):
        res = spec.result_model.model_validate(res)
    checked = list(getattr(res, "preconditions", None) or [])
    failed = [r for r in checked if str(getattr(r, "state", "")) == "failed"]
    problems = list(getattr(res, "problems", None) or [])
    if req.output != "table":
        emit({"workflow_id": handle.id, "dry_run": True, "input": out.to_data(req.input), "result": out.to_data(res)}, req.output)
    else:
        for line in (plan(res) if plan is not None else []):
            print(line)
        print(f"preconditions ({len(checked)} checked, {len(failed)} failed):" if checked else
              "preconditions: none declared by this procedure")
        for r in checked:
            print(f"  {r.line()}")
        if getattr(res, "outcome", "") != "dry-run":
            err(f"{res.outcome}: {getattr(res, 'message', '')}")
    if failed or problems or getattr(res, "outcome", "") == "refused":
        err("a real start would be refused before any change: " + "; ".join(problems or [r.problem() for r in failed]))
        return EXIT_USAGE
    return EXIT_OK if getattr(res, "outcome", "") == "dry-run" else EXIT_FAILED


async def leased_workflow_dry_run(req: Launch, settings: Any, *, plan: Callable[[Any], Sequence[str]] | None = None) -> int:
    """The procedure's own dry run (:func:`workflow_dry_run`) unless a lease it would take is
    held today: then the lease report of :func:`dry_run_report` (exit 1, each holder named), as
    a real start would be refused by the lease before its preflight ran."""
    from lockkeeper.starter import lease_holders

    client = await connect(settings, identity=req.who)
    if req.scopes and await lease_holders(client, req.scopes):
        return await dry_run_report(req, settings)
    return await workflow_dry_run(req, settings, plan=plan)
