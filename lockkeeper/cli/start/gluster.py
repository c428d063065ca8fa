"""``lockkeeper start gluster-recovery``: GlusterFS brick check and recovery (R3a).

Without ``--check-only`` it starts ``GlusterRecoveryWorkflow`` in recover mode (lease
``gluster/<cluster>``): one host at a time, an approval gate before each pod delete, then the
heal gate; follow it with ``lockkeeper status ID`` and answer its gates with ``approve`` /
``reject``. With ``--check-only`` it runs the same workflow in check mode (nothing is written,
no lease is taken), waits for it, prints the report and exits 0 when GlusterFS is healthy, 1 when
not. ``--dry-run`` reads, checks every precondition (printed with its result) and prints the plan;
nothing is written (exit 2 when a real start would be refused).

The flags are aliases of the input's fields (:class:`workflows.gluster.models.GlusterRecoveryInput`:
``--check-only`` ``mode: check``, ``--gluster-cluster`` ``clusters``, ``--max-restarts``
``max_restarts_per_host``, ``--heal-timeout`` / ``--stall-after`` ``heal.timeout_seconds`` /
``heal.stall_after_seconds``, ``--gate-timeout`` ``gates.timeout_seconds`` (every gate, the heal
gate's too), ``--four-eyes`` ``approvals.four_eyes``, ...); ``-f input.yaml`` gives the input,
the flags given override it, ``--set read_attempts=3`` any field
(:func:`lockkeeper.cli.start.shared.build_input`).
"""

from __future__ import annotations

from typing import Any

import typer

from lockkeeper.cli.common import EXIT_FAILED, EXIT_OK, err, run
from lockkeeper.cli.start.options import Approvals, Start, approval_options, start_options
from lockkeeper.cli.start.shared import Launch, build_input, spec_named
from lockkeeper.cli.start.dryrun import dry_run_result, leased_workflow_dry_run

PROCEDURE = "gluster-recovery"


def start_gluster_recovery(
    check_only: bool = typer.Option(False, "--check-only", help="Read and assess only; exit 0 healthy, 1 not. Changes nothing."),
    namespace: str | None = typer.Option(None, "--namespace", help="Namespace of the GlusterFS pods (default glusterfs)."),
    gluster_cluster: list[str] = typer.Option([], "--gluster-cluster", help="GlusterFS cluster(s): pods glusterfs=<name>-pod "
                                                                          "(default storage)."),
    exclude_node: str | None = typer.Option(None, "--exclude-node", help="Never run the CLI in, or count on, this node's pod."),
    quorum_rule: str | None = typer.Option(None, "--quorum-rule", help="per-volume (default) | per-replica-set: when a volume "
                                                                       "is down."),
    approve_pod_delete: bool | None = typer.Option(None, "--approve-pod-delete/--no-approve-pod-delete",
                                                   help="Gate each host's pod delete (default: gate)."),
    max_restarts: int | None = typer.Option(None, "--max-restarts", help="Pod restarts per host before asking a person (default 2)."),
    allow_start_force: bool = typer.Option(False, "--allow-start-force", help="Offer 'gluster volume start VOL force' (gated)."),
    heal_timeout: float | None = typer.Option(None, "--heal-timeout", help="Seconds the heal gate waits before asking "
                                                                           "(default 1200)."),
    stall_after: float | None = typer.Option(None, "--stall-after", help="Seconds without heal progress before asking "
                                                                         "(default 300)."),
    gate_timeout: float | None = typer.Option(None, "--gate-timeout", help="Seconds a gate waits (default forever; then rejects)."),
    approvals: Approvals = approval_options("the gates", verb="decide"),
    start: Start = start_options(wait="Wait until the run ends; exit 0 only if GlusterFS is healthy."),
) -> None:
    """Check GlusterFS bricks and heal info; recover offline bricks one host at a time."""
    from workflows.kit.scopes import subsystem_scope

    inp = build_input(spec_named(PROCEDURE).input_model, {
        **start.input_fields(), **approvals.flags(), "namespace": namespace, "clusters": list(gluster_cluster) or None,
        "mode": "check" if check_only else None, "exclude_node": exclude_node, "quorum_rule": quorum_rule,
        "approve_pod_delete": approve_pod_delete, "max_restarts_per_host": max_restarts,
        "allow_volume_start_force": allow_start_force or None, "heal.timeout_seconds": heal_timeout,
        "heal.stall_after_seconds": stall_after, "gates.timeout_seconds": gate_timeout,
    })
    check = inp.mode == "check"
    req = start.request(
        PROCEDURE, inp, cluster=inp.cluster, scopes=[] if check else [subsystem_scope("gluster", inp.cluster)],
        id_name="check" if check else None,
        summary=f"gluster {'check' if check else 'recovery'} of {inp.namespace}/{','.join(inp.clusters)} on {inp.cluster} by {start.who}",
    )
    if check and not req.dry_run:
        run(_check_only(req, start.settings))
    else:
        # --dry-run: the workflow reads, checks every precondition and ends dry-run with the
        # plan; each check is printed with its result (exit 2 when a start would be refused).
        start.go(req, dry_run=lambda r, settings: leased_workflow_dry_run(r, settings, plan=lambda res: [res.message]))


start_gluster_recovery.takes_input_overrides = True  # type: ignore[attr-defined]  # build_input applies -f/--set


async def _check_only(req: Launch, settings: Any) -> int:
    """Run the check-mode workflow to its end and print its report (exit 0 healthy, 1 not)."""
    from lockkeeper import output as out
    from lockkeeper.cli.gluster import assessment_view

    handle, res = await dry_run_result(req, settings, show_id=False, note="(check only); waiting for its report",
                                       precheck=True)
    if req.output == "table":
        if res.assessment_end is not None:
            out.console().print(assessment_view(res.assessment_end, title=f"GlusterFS check {handle.id}"))
        err(res.message)
    else:
        print(out.dump({"workflow_id": handle.id, "result": out.to_data(res)}, req.output))
    return EXIT_OK if res.ok else EXIT_FAILED
