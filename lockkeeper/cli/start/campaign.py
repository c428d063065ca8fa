"""``lockkeeper start campaign``: one procedure across a fleet of clusters, in waves (issue 38).

``--procedure NAME`` is the procedure each cluster runs; ``-f input.yaml`` (and ``--set``) its
input, shared by every cluster; ``--clusters FILE`` the fleet (YAML or JSON)::

    clusters:
      - name: prod-eu            # the cluster's name: its worker runs `lockkeeper worker --cluster prod-eu`
      - name: prod-us
        overrides: {node: worker-7}   # fields of the procedure's input for this cluster only

(a plain list of names or of such mappings works too). Every cluster's input (shared + its
overrides + ``cluster: NAME``) is validated against the procedure's own input model before
anything starts (exit 2 naming the cluster). A campaign needs per-cluster queues
(``LOCKKEEPER_CLUSTER_QUEUES=true``, else exit 2: one queue would run every cluster's procedure
with one worker's credentials): each child runs on ``<task queue>-<cluster>``; a cluster whose
queue no worker polls refuses the start (exit 3, naming the clusters) unless ``--queue``. The campaign itself runs on the central
task queue (a host-only worker may serve it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from lockkeeper.cli.common import EXIT_USAGE, CliError, err, validation_lines
from lockkeeper.cli.start.options import Approvals, Start, approval_options, completes, start_options, window_options
from lockkeeper.cli.start.shared import Launch, input_data, launch, spec_named
from lockkeeper.cli.start.dryrun import workflow_dry_run


def read_clusters(path: Path) -> list[dict[str, Any]]:
    """The fleet file: a list of names or ``{name, overrides}`` mappings, or a mapping with
    ``clusters:`` holding that list. Raises :class:`CliError` (exit 2) naming the file."""
    import yaml

    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise CliError(f"cannot read {path}: {exc}", EXIT_USAGE) from None
    if isinstance(doc, dict):
        doc = doc.get("clusters")
    if not isinstance(doc, list) or not doc:
        raise CliError(f"{path}: give a list of clusters (names, or mappings with name and overrides)", EXIT_USAGE)
    out: list[dict[str, Any]] = []
    for n, item in enumerate(doc, 1):
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise CliError(f"{path}: cluster {n} has no name", EXIT_USAGE)
        extra = set(item) - {"name", "overrides"}
        if extra:
            raise CliError(f"{path}: cluster {item['name']}: unknown key(s) {', '.join(sorted(extra))} (name, overrides)", EXIT_USAGE)
        if not isinstance(item.get("overrides", {}), dict):
            raise CliError(f"{path}: cluster {item['name']}: overrides must be a mapping of input fields", EXIT_USAGE)
        out.append({"name": item["name"], "overrides": dict(item.get("overrides") or {})})
    return out


def _soak_checks(checks: list[str], alert_url: str | None, poll: float, red_timeout: float | None) -> dict[str, Any] | None:
    """The campaign's ``soak_checks`` from ``--soak-check`` (nodes, pools, pods=NS, none; default
    nodes and pools) and ``--soak-alert-gate``; None when nothing is checked (the soak is a timer).
    Raises typer.BadParameter for an unknown check."""
    chosen = checks or ["nodes", "pools"]
    out: dict[str, Any] = {"nodes_ready": False, "pools_not_degraded": False, "pod_namespaces": [], "poll_seconds": poll,
                           "red_timeout_seconds": red_timeout}
    for c in chosen:
        name, _, value = c.partition("=")
        if name == "nodes" and not value:
            out["nodes_ready"] = True
        elif name == "pools" and not value:
            out["pools_not_degraded"] = True
        elif name == "pods" and value:
            out["pod_namespaces"].append(value)
        elif name != "none" or value:
            raise typer.BadParameter(f"{c!r}: one of nodes, pools, pods=NAMESPACE, none", param_hint="'--soak-check'")
    if alert_url:
        out["alerts"] = {"url": alert_url}
    if not (out["nodes_ready"] or out["pools_not_degraded"] or out["pod_namespaces"] or alert_url):
        return None
    return out


def start_campaign(
    procedure: str = typer.Option(..., "--procedure", help="The procedure every cluster runs (e.g. drain)."),
    clusters_file: Path = typer.Option(..., "--clusters", metavar="FILE", dir_okay=False,
                                       help="The fleet: YAML/JSON list of clusters (name, optional overrides)."),
    waves: str = typer.Option("1,rest", "--waves", metavar="SPEC", help="Wave sizes: counts, percentages, rest (e.g. 1,10%,rest)."),
    max_in_flight: int | None = typer.Option(None, "--max-clusters-in-flight", min=1, help="At most N clusters run at once."),
    failure_budget: int = typer.Option(0, "--failure-budget", min=0,
                                       help="Clusters that may fail before no new one starts and a decision gate opens."),
    soak: str = typer.Option("0", "--soak", metavar="DURATION", help="Wait after each wave before the next (e.g. 10m, 30s, 0)."),
    soak_check: list[str] = typer.Option(
        [], "--soak-check", metavar="CHECK",
        help="What must stay green on every completed cluster during the soak (repeatable): nodes (every Node Ready), "
             "pools (no MachineConfigPool degraded), pods=NAMESPACE (every pod there Ready), none. Default: nodes and pools."),
    soak_alert_gate: str | None = typer.Option(None, "--soak-alert-gate", metavar="URL",
                                               help="Also no blocking alert in this Prometheus during the soak (a cluster "
                                                    "whose input has its own alert gate is asked there)."),
    soak_poll: str = typer.Option("30s", "--soak-poll", metavar="DURATION", help="Between two rounds of soak checks."),
    soak_red_timeout: str = typer.Option("1h", "--soak-red-timeout", metavar="DURATION",
                                         help="Red this long: gate soak/<wave>/<n> asks a person (0: wait)."),
    approve_each: str = typer.Option("wave", "--approve-each", help="wave: a gate before each wave after the first; none."),
    gate_timeout: float | None = typer.Option(None, "--gate-timeout",
                                              help="Seconds a gate waits (default forever): gates.timeout_seconds."),
    approvals: Approvals = approval_options("the campaign's gates", verb="decide"),
    window: list[str] = window_options(),
    start: Start = start_options(wait=completes("campaign"), cluster=False),
) -> None:
    """Run one procedure across a fleet of clusters, wave by wave (a child per cluster on its own queue)."""
    from pydantic import ValidationError

    from lockkeeper.cli.common import parse_duration
    from workflows.campaign.models import CampaignInput, parse_waves

    try:
        parse_waves(waves)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--waves'") from None
    if approve_each not in ("wave", "none"):
        raise typer.BadParameter("must be wave or none", param_hint="'--approve-each'")
    soak_seconds = 0.0 if soak.strip() in ("0", "0s") else parse_duration(soak)
    soak_checks = _soak_checks(soak_check, soak_alert_gate, parse_duration(soak_poll),
                               None if soak_red_timeout.strip() in ("0", "0s") else parse_duration(soak_red_timeout))
    try:
        target = spec_named(procedure)
    except KeyError as exc:
        raise typer.BadParameter(str(exc.args[0]), param_hint="'--procedure'") from None
    fields = target.input_model.model_fields
    if target.central or "cluster" not in fields:
        raise typer.BadParameter(f"{procedure} cannot run per cluster in a campaign (its input names no cluster)",
                                 param_hint="'--procedure'")
    settings = start.settings
    if not settings.cluster_queues:
        # One queue for every cluster would run every cluster's procedure with the one worker's
        # credentials: against the same cluster, whatever the names say.
        err("error: a campaign runs each cluster's procedure on that cluster's own task queue: set "
            "LOCKKEEPER_CLUSTER_QUEUES=true (for `lockkeeper start` and the workers) and run `lockkeeper worker "
            "--cluster NAME` with each cluster's kubeconfig")
        raise typer.Exit(EXIT_USAGE)
    who = start.who
    try:
        fleet = read_clusters(clusters_file)
        shared = input_data()  # the procedure's shared input: -f FILE, then each --set
    except CliError as exc:
        err(f"error: {exc}")
        raise typer.Exit(exc.code) from None
    from lockkeeper.starter import procedure_queue

    try:
        inp = CampaignInput(
            procedure=target.name, workflow_type=target.workflow_type, reports="report_to" in fields,
            nested_approvals="approvals" in fields, input=shared,
            clusters=[{**c, "task_queue": procedure_queue(settings, target, c["name"])} for c in fleet],
            waves=waves, max_clusters_in_flight=max_in_flight, failure_budget=failure_budget, soak_seconds=soak_seconds,
            soak_checks=soak_checks,
            approve_each=approve_each, windows=window, **approvals.nested(who), gates={"timeout_seconds": gate_timeout},
            dry_run=start.dry_run, procedure_has_dry_run="dry_run" in fields,
        )
    except ValidationError as exc:
        err(f"error: invalid campaign: {validation_lines(exc)}")
        raise typer.Exit(EXIT_USAGE) from None
    problems = []
    for c in inp.clusters:  # every cluster's own input, validated as its child will be
        try:
            target.input_model.model_validate(inp.child_input(c, "campaign"))
        except ValidationError as exc:
            problems.append(f"cluster {c.name}: {validation_lines(exc)}")
    if problems:
        err(f"error: invalid input of {procedure}:\n  " + "\n  ".join(problems))
        raise typer.Exit(EXIT_USAGE)
    plan = inp.wave_plan()
    start.go(start.request(
        "campaign", inp, cluster="fleet", id_name=inp.procedure, extra={"waves": plan},
        summary=f"campaign of {inp.procedure} over {len(inp.clusters)} clusters in {len(plan)} waves by {who}",
    ), dry_run=_dry_run, launcher=_launch)


start_campaign.takes_input_overrides = True  # type: ignore[attr-defined]  # -f / --set: the procedure's shared input


async def _dry_run(req: Launch, settings: Any) -> int:
    """The campaign's own dry run (:func:`.dryrun.workflow_dry_run`): it checks a worker on every
    cluster's queue and, for a procedure with a dry run, runs that dry run on every cluster; every
    check is printed with its result, then the waves. No cluster's procedure runs; exit 2 when a
    real start would be refused."""
    err("waves: " + " | ".join(", ".join(w) for w in req.extra["waves"]))
    return await workflow_dry_run(req, settings, plan=lambda res: [res.message])


async def _launch(req: Launch, settings: Any) -> int:
    """Start the campaign once a worker polls every cluster's queue (else ``NoWorker``, exit 3,
    naming the clusters; ``--queue`` starts it anyway)."""
    from lockkeeper.cli.common import connect
    from lockkeeper.starter import QUEUE_WITHOUT_WORKER, NoWorker, new_run_gap

    if QUEUE_WITHOUT_WORKER.get():  # --queue: the children wait for their workers; the campaign does not check them
        req.input = req.input.model_copy(update={"check_workers": False})
    else:
        client = await connect(settings, identity=req.who)
        missing = []
        for c in req.input.clusters:
            waits, _ = await new_run_gap(client, c.task_queue)
            if waits:
                missing.append(c)
        if missing:
            names = ", ".join(c.name for c in missing)
            raise NoWorker(missing[0].task_queue, client.namespace,
                           f"no worker polls the task queue of cluster(s) {names} "
                           f"({', '.join(c.task_queue for c in missing)}): run `lockkeeper worker --cluster NAME` for each")
    return await launch(req, settings)
