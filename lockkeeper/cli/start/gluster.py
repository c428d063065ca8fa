"""``lockkeeper start gluster-recovery``: GlusterFS brick check and recovery (R3a).

Without ``--check-only`` it starts ``GlusterRecoveryWorkflow`` in recover mode (lease
``gluster/<cluster>``): one host at a time, an approval gate before each pod delete, then the
heal gate; follow it with ``lockkeeper status ID`` and answer its gates with ``approve`` /
``reject``. With ``--check-only`` it runs the same workflow in check mode (nothing is written,
no lease is taken), waits for it, prints the report and exits 0 when GlusterFS is healthy, 1 when
not. ``--dry-run`` reads, checks every precondition (printed with its result) and prints the plan;
nothing is written (exit 2 when a real start would be refused).
"""

from __future__ import annotations

from typing import Any

import typer

from lockkeeper.cli.common import EXIT_FAILED, EXIT_OK, err, run
from lockkeeper.cli.start.options import Approvals, Start, approval_options, start_options
from lockkeeper.cli.start.shared import Launch
from lockkeeper.cli.start.dryrun import dry_run_result, leased_workflow_dry_run

PROCEDURE = "gluster-recovery"


def start_gluster_recovery(
    check_only: bool = typer.Option(False, "--check-only", help="Read and assess only; exit 0 healthy, 1 not. Changes nothing."),
    namespace: str = typer.Option("glusterfs", "--namespace", help="Namespace of the GlusterFS pods."),
    gluster_cluster: list[str] = typer.Option(["storage"], "--gluster-cluster", help="GlusterFS cluster(s): pods glusterfs=<name>-pod."),
    exclude_node: str | None = typer.Option(None, "--exclude-node", help="Never run the CLI in, or count on, this node's pod."),
    quorum_rule: str = typer.Option("per-volume", "--quorum-rule", help="per-volume | per-replica-set: when a volume is down."),
    approve_pod_delete: bool = typer.Option(True, "--approve-pod-delete/--no-approve-pod-delete", help="Gate each host's pod delete."),
    max_restarts: int = typer.Option(2, "--max-restarts", help="Pod restarts per host before asking a person."),
    allow_start_force: bool = typer.Option(False, "--allow-start-force", help="Offer 'gluster volume start VOL force' (gated)."),
    heal_timeout: float = typer.Option(1200.0, "--heal-timeout", help="Seconds the heal gate waits before asking."),
    stall_after: float = typer.Option(300.0, "--stall-after", help="Seconds without heal progress before asking."),
    gate_timeout: float | None = typer.Option(None, "--gate-timeout", help="Seconds a gate waits (default forever; then rejects)."),
    approvals: Approvals = approval_options("the gates", verb="decide"),
    start: Start = start_options(wait="Wait until the run ends; exit 0 only if GlusterFS is healthy."),
) -> None:
    """Check GlusterFS bricks and heal info; recover offline bricks one host at a time."""
    from workflows.kit.scopes import subsystem_scope

    inp = start.validated(
        PROCEDURE, "invalid gluster-recovery:\n  ",
        cluster=start.cluster, namespace=namespace, clusters=gluster_cluster,
        mode="check" if check_only else "recover", exclude_node=exclude_node, quorum_rule=quorum_rule,
        approve_pod_delete=approve_pod_delete, max_restarts_per_host=max_restarts, allow_volume_start_force=allow_start_force,
        heal={"timeout_s": heal_timeout, "stall_after_s": stall_after, "gate_timeout_s": gate_timeout},
        gate_timeout_s=gate_timeout, **approvals.fields(start.who), dry_run=start.dry_run,
    )
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
