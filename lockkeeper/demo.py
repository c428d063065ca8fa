"""``lockkeeper demo``: repair R1 (an interrupted SDN→OVN migration) end to end, on one machine.

What runs, all on loopback:
1. a Temporal dev server (``temporal server start-dev``, SQLite file in the state directory; the
   Web UI URL is printed),
2. the cluster simulator with scenario ``r1-ovn-interrupted`` (nodes at the old rendered configs,
   ovnkube-node crash-looping, the machine-config-controller down), its kubeconfig written to
   the state directory,
3. a lockkeeper worker in this process, pointed at both,
4. a MachineConfig rollout with ``repair_network`` and ``approval=canary``: lockkeeper plays the
   machine-config-controller node by node, waits for ovnkube-node on every node, then (gated)
   deletes all pods and waits for the workloads.

Gates are approved by the demo itself (identity ``demo-approver``) unless ``--interactive``, in
which case it prints the exact ``lockkeeper approve`` command and waits for you.

Exit 0 only when the cluster is verified repaired through the API: every MachineConfigPool
Updated (and not Updating/Degraded), ovnkube-node Ready on every node, all pods Ready.
Exit 1 otherwise, with the reason.
"""

from __future__ import annotations

import asyncio
import getpass
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console

DEMO_TASK_QUEUE = "lockkeeper-demo"
DEMO_CLUSTER = "demo"
APPROVER = "demo-approver"


def run_demo(
    *,
    interactive: bool = False,
    state_dir: str | Path | None = None,
    time_scale: float = 0.02,
    scenario: str = "r1-ovn-interrupted",
    timeout: float = 600.0,
) -> int:
    """Run the demo; returns the process exit code (0 repaired, 1 not repaired / failed)."""
    try:
        return asyncio.run(_demo(interactive, state_dir, time_scale, scenario, timeout))
    except KeyboardInterrupt:
        Console(stderr=True).print("[yellow]interrupted[/]")
        return 130


async def _demo(interactive: bool, state_dir: str | Path | None, time_scale: float, scenario: str, timeout: float) -> int:
    from workers.logging import configure_logging

    err = Console(stderr=True)
    from lockkeeper.output import console

    out = console()
    state = Path(state_dir) if state_dir else Path(tempfile.mkdtemp(prefix="lockkeeper-demo-"))
    state.mkdir(parents=True, exist_ok=True)
    # The screen belongs to the live view; logs (JSON lines) go to a file in the state directory.
    log_file = open(state / "lockkeeper.log", "a")  # noqa: SIM115 - open for the whole demo
    configure_logging("info", "json", stream=log_file)
    try:
        return await _demo_in(state, interactive, time_scale, scenario, timeout, err, out)
    finally:
        log_file.flush()


async def _demo_in(
    state: Path, interactive: bool, time_scale: float, scenario: str, timeout: float, err: Console, out: Console
) -> int:
    from clustersim import ClusterSim
    from lockkeeper.devserver import DevServer
    from lockkeeper.starter import rollout_planned, start_procedure, wait_for_status
    from workers.client import connect
    from workers.settings import Settings
    from workers.worker import run_worker
    from workflows import machineconfig
    from workflows.kit.plan import ApprovalPolicy
    from workflows.kit.scopes import pool_scope
    from workflows.machineconfig.models import MachineConfigRolloutInput

    t0 = time.monotonic()

    async with DevServer(state) as server:
        err.print(f"Temporal dev server {server.address}  Web UI [link={server.ui_url}]{server.ui_url}[/link]")
        err.print(f"state directory {state} (logs: {state / 'lockkeeper.log'})")
        async with ClusterSim(scenario, time_scale=time_scale, kubeconfig_path=state / "kubeconfig") as sim:
            err.print(f"cluster simulator {sim.url} (scenario {scenario}, time scale {time_scale}); "
                      f"kubeconfig {sim.kubeconfig_path}")
            settings = Settings(
                temporal_address=server.address,
                task_queue=DEMO_TASK_QUEUE,
                kubeconfig=sim.kubeconfig_path,
                cluster=DEMO_CLUSTER,
                log_level="warning",
                graceful_shutdown_seconds=2,
            )
            stop = asyncio.Event()
            worker = asyncio.create_task(run_worker(settings, stop=stop, install_signal_handlers=False))
            try:
                client = await connect(settings, identity="lockkeeper-demo")
                await _wait_for_poller(client, settings.task_queue, worker)
                inp = MachineConfigRolloutInput(
                    cluster=DEMO_CLUSTER,
                    # R1's operators went master, infra, app; other scenarios: every pool behind.
                    pools=["master", "infra", "app"] if scenario == "r1-ovn-interrupted" else [],
                    approval=ApprovalPolicy.CANARY,
                    repair_network=True,
                    approvals={"requested_by": getpass.getuser()},
                    # The simulator runs its clock time_scale times faster; the daemon's
                    # deadlines shrink with it, and lockkeeper's own polling follows.
                    daemon={
                        "drain_deadline_seconds": 3600 * time_scale,
                        "uncordon_deadline_seconds": max(600 * time_scale, 5.0),
                        "escalate_after_seconds": 2700 * time_scale,  # the deadline guard, 45 of the 60 min
                        "wait_activity_timeout_seconds": 20.0,
                    },
                    drain={"backoff_initial_seconds": 0.5, "backoff_max_seconds": 5.0, "wait_seconds": 10.0},
                    network_poll_initial_seconds=0.5,
                    network_poll_max_seconds=3.0,
                )
                handle = await start_procedure(
                    client, settings, machineconfig.SPEC, inp, cluster=inp.cluster,
                    scopes=[pool_scope(inp.cluster, p) for p in inp.pools], pools=inp.pools,
                    summary=f"MachineConfig rollout on {inp.cluster} by {inp.approvals.requested_by} (demo)",
                )
                err.print(f"started rollout [bold]{handle.id}[/]")
                st = await wait_for_status(handle, machineconfig.SPEC, rollout_planned)
                if st is not None and st.plan is not None:
                    from lockkeeper.output import plan_table

                    out.print(plan_table(st.plan))
                result = await _follow(handle, server.address, interactive, out, err, t0 + timeout)
                if result is None:
                    err.print(f"[red]the rollout did not finish within {timeout:.0f}s[/]")
                    return 1
                repaired, checks = await _verify(sim.kubeconfig_path)
                _summary(out, result, checks, time.monotonic() - t0)
                if result.outcome != "completed":
                    err.print(f"[bold red]rollout {result.outcome}[/]: {result.message}")
                    return 1
                if not repaired:
                    err.print("[bold red]the rollout completed but the cluster is not repaired (see checks above)[/]")
                    return 1
                err.print("[bold green]cluster repaired[/]")
                return 0
            finally:
                stop.set()
                try:
                    await asyncio.wait_for(worker, timeout=15)
                except Exception as exc:  # the worker's own failure is reported, not raised over the result
                    err.print(f"[yellow]worker stopped with {type(exc).__name__}: {exc}[/]")


def approve_hint(address: str, workflow_id: str, gate_id: str) -> str:
    """The interactive demo's hint for a waiting gate: the exact ``lockkeeper approve`` command
    (with the demo server's address and task queue)."""
    return (
        f"gate [bold]{gate_id}[/] is waiting: approve it with\n"
        f"  TEMPORAL_ADDRESS={address} LOCKKEEPER_TASK_QUEUE={DEMO_TASK_QUEUE} lockkeeper approve {workflow_id} {gate_id}"
    )


def print_hint(live: Any, err: Console, text: str) -> None:
    """Print ``text`` through the live view's console when there is one (rich prints it above the
    view, which would otherwise draw over a line written to stderr), else on ``err``."""
    (live.console if live is not None else err).print(text)


async def _wait_for_poller(client: Any, task_queue: str, worker: Any, timeout: float = 60.0) -> None:
    """Wait until the demo's own worker takes new runs on ``task_queue`` (it polls, and its build
    is the current version it made itself on the fresh server; a start is refused before that);
    raises the worker's own error if it ended first, TimeoutError after ``timeout`` seconds."""
    from lockkeeper.starter import new_run_gap

    deadline = time.monotonic() + timeout
    while (await new_run_gap(client, task_queue))[0]:
        if worker.done():
            worker.result()  # raises its error
            raise RuntimeError("the demo's worker stopped before it polled its task queue")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the demo's worker did not poll task queue {task_queue} within {timeout:.0f}s")
        await asyncio.sleep(0.2)


async def _follow(handle: Any, address: str, interactive: bool, out: Console, err: Console, deadline: float) -> Any:
    """Live view until the rollout closes; approve gates (or print how to). None on timeout."""
    from rich.live import Live
    from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateFailedError

    from lockkeeper.output import status_view
    from workflows.kit.models import ApproveInput, GateDecisionResult, GateState
    from lockkeeper.live import client_of, merge_live_progress
    from workflows.machineconfig.models import RolloutStatus

    announced: set[str] = set()
    live = Live(console=out, auto_refresh=False) if out.is_terminal else None
    last_line = None
    if live:
        live.start()
    try:
        while time.monotonic() < deadline:
            if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
                return await handle.result()
            try:
                st = await handle.query("status", result_type=RolloutStatus, rpc_timeout=timedelta(seconds=10))
                await merge_live_progress(client_of(handle), st)
            except Exception:
                await asyncio.sleep(0.5)
                continue
            if live:
                live.update(status_view(st), refresh=True)
            else:
                line = f"{st.phase}: {st.waiting_for or ''} ({st.totals.done} nodes done)"
                if line != last_line:
                    err.print(line)
                    last_line = line
            for gate in st.gates:
                if gate.state != GateState.WAITING or gate.id in announced:
                    continue
                announced.add(gate.id)
                if interactive:
                    # Through the live view's own console: it prints above the view, which
                    # would otherwise draw over a line written to stderr.
                    print_hint(live, err, approve_hint(address, handle.id, gate.id))
                    continue
                try:
                    res = await handle.execute_update(
                        "approve",
                        ApproveInput(gate_id=gate.id, identity=APPROVER, comment="approved by lockkeeper demo"),
                        result_type=GateDecisionResult,
                    )
                    err.print(f"{APPROVER}: {res.message}")
                except WorkflowUpdateFailedError as exc:
                    err.print(f"[yellow]approve {gate.id} refused: {exc.cause or exc}[/]")
                    announced.discard(gate.id)
            await asyncio.sleep(0.5)
        return None
    finally:
        if live:
            live.stop()


async def _verify(kubeconfig: Path) -> tuple[bool, list[tuple[str, bool, str]]]:
    """Check through the API: pools Updated, ovnkube-node Ready everywhere, all pods Ready."""
    from activities.cluster.models import PodsReadyInput
    from activities.cluster.workloads import WorkloadActivities
    from activities.kube.gateway import KubeGateway
    from activities.machineconfig.activities import MachineConfigActivities
    from activities.machineconfig.models import PoolsStatusInput

    def check() -> list[tuple[str, bool, str]]:
        gateway = KubeGateway.from_kubeconfig(str(kubeconfig))
        acts = WorkloadActivities(lambda: gateway)
        pools = MachineConfigActivities(lambda: gateway).get_pools_status(PoolsStatusInput())
        ovn = acts.check_pods_ready(
            PodsReadyInput(namespace="openshift-ovn-kubernetes", label_selector="app=ovnkube-node", expect_per_node=True)
        )
        pods = acts.check_pods_ready(PodsReadyInput())
        gateway.close()
        pool_text = ", ".join(
            f"{p.name} {'Updated' if p.updated and not p.updating and not p.degraded else 'NOT updated'} "
            f"({p.updated_machine_count}/{p.machine_count})"
            for p in pools.pools
        )
        return [
            ("MachineConfigPools Updated", pools.all_settled and not any(p.degraded for p in pools.pools), pool_text),
            ("ovnkube-node Ready on every node", ovn.ready,
             f"{ovn.total} pods" + (f"; not ready {ovn.not_ready[:5]}; missing on {ovn.nodes_missing[:5]}" if not ovn.ready else "")),
            ("all pods Ready", pods.ready, f"{pods.total} pods" + (f"; not ready {pods.not_ready[:5]}" if not pods.ready else "")),
        ]

    # The simulator serves from this event loop: the blocking client must run in a thread.
    checks = await asyncio.to_thread(check)
    return all(ok for _, ok, _ in checks), checks


def _summary(out: Console, result: Any, checks: list[tuple[str, bool, str]], wall_seconds: float) -> None:
    from rich.table import Table

    from lockkeeper.output import fmt_duration, result_view

    out.print(result_view(result))
    t = Table(title="Cluster checks (through the API)", title_justify="left")
    for col in ("check", "ok", "detail"):
        t.add_column(col)
    for name, ok, detail in checks:
        t.add_row(name, "[green]yes[/]" if ok else "[red]NO[/]", detail)
    out.print(t)
    out.print(f"total demo time {fmt_duration(wall_seconds)}")
