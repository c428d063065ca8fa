"""The fault matrix of the etcd procedures against real etcd processes (issue 39, "Proof against
the simulator's own view"; the simulator runs no etcd, so the world here is a local 3-member
cluster and its hosts' files, observed by :mod:`etcd_world`).

Each case: a fresh cluster with a marker key, a snapshot of the world, a trap on the step's first
command (``trapshim.py``: ``hold`` for an abort and a kill, ``fail`` for a failure), the procedure
started with every gate approved as a person would, then at the step:

- ``abort``: abort while the command is held, then let it go (it lands);
- ``fail``: the command is refused once (a retry passes); a procedure that then neither ends nor
  moves on within ``STALL`` seconds (waiting for a member that never came up) is aborted;
- ``kill-then-abort``: SIGKILL the worker while the command is held, start a new one, let the
  command go, abort.

Judged as tests/support/faultmatrix.py judges (:func:`judge`): completed; or restored (nothing changed);
or the outcome's ``left_changed`` targets equal the world's diff targets.

The restore (force-new-cluster from m1, after m2 and m3 died; plan: stop-members, force-new-cluster,
restart-survivor, then for m2 and m3 add-member, move-data, start-member, verify); its mutating
steps, each with the trap on its first command:

- ``stop-members``: the SIGTERM to m1 (the only member running);
- ``force-new-cluster``: m1 started with ``--force-new-cluster``;
- ``add-member``: ``etcdctl member add m2``;
- ``move-data``: ``mv -T <m2's data dir> ...``;
- ``start-member``: m2 started with ``--initial-cluster-state=existing``.

(``fix-peer-url`` sends nothing on loopback, where the peer URL never changes; ``restart-survivor``
is a stop and a start like ``stop-members`` and ``force-new-cluster``.) ``stop-members`` has no
``fail`` case: a local member's stop ends in SIGKILL, which nothing can refuse.

The backup (``attempts=1``, so a refused snapshot is not retried): ``snapshot-save``, ``etcdctl
snapshot save`` of m1's snapshot.

Documented changes (not in the diff): none.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from tests.support.etcd_world import EtcdStep, HostTrap, Shims, TrappedEtcd, World, diff
from temporalio.client import WorkflowFailureError, WorkflowHandle

from activities.etcd.models import EtcdctlTimeouts
from lockkeeper.procs import WorkerProcess
from tests.conftest import terminate_running
from tests.support.faultmatrix import (
    Case,
    Mismatch,
    NotJudged,
    abort,
    approve_waiting,
    assert_covers,
    host_writes,
    matrix_params,
    read_status,
)
from tests.support.faultmatrix import _until as until  # the harness's poll loop, shared
from tests.support.harness import forget_dead_worker
from workflows.etcd.models import EtcdBackupInput, EtcdBackupResult, EtcdRestoreInput, EtcdRestoreResult
from workflows.kit.models import FINAL_PHASES, ChangedItem, GateState, ProcedurePhase

MARKER = "/lk/marker"
FAST = EtcdctlTimeouts(dial_seconds=1, command_seconds=2)
#: After a refused command: how long the procedure may go on neither ending nor moving past it.
STALL = 10.0


@dataclass
class EtcdCase:
    """What one case did and ended with (see tests/support/faultmatrix.py's ``CaseResult``)."""

    step: str
    case: Case
    workflow_id: str = ""
    reached: bool = False
    outcome: str = ""
    message: str = ""
    left_changed: list[ChangedItem] = field(default_factory=list)
    changes: dict[str, list[str]] | None = None
    log: list[str] = field(default_factory=list)

    def note(self, what: str) -> None:
        self.log.append(f"{time.strftime('%H:%M:%S')} {what}")


async def run_case(cluster: TrappedEtcd, worker: Any, client: Any, start: Callable[[], Awaitable[WorkflowHandle[Any, Any]]],
                   step: EtcdStep, case: Case, *, reach_timeout: float = 150, end_timeout: float = 90) -> EtcdCase:
    """One case (module docstring); never raises for the procedure's behaviour: :func:`judge` decides."""
    cr = EtcdCase(step.name, case)
    before: World = await cluster.settled(MARKER)
    trap = cluster.arm(step.trap, "fail" if case == Case.FAIL else "hold", f"{step.name}-{case}")
    handle = await start()
    cr.workflow_id = handle.id
    result = asyncio.ensure_future(handle.result())
    comment = f"fault matrix {step.name}/{case}: approved as a person would"
    reason = f"fault matrix: {case} at {step.name}"
    try:
        async def hit() -> bool:
            if trap.hits and (case == Case.FAIL or trap.held):
                return True
            if result.done():
                return True
            st = await read_status(handle)
            if st is not None:
                await approve_waiting(client, handle, st, comment)
            return False

        await until(hit, reach_timeout)
        cr.reached = trap.hits > 0
        if not cr.reached:
            cr.note("the trap was never hit" + (" (the procedure ended first)" if result.done() else ""))
        elif case == Case.ABORT:
            await abort(handle, reason)
            cr.note("abort accepted")
            trap.release()
        elif case == Case.KILL_THEN_ABORT:
            await worker.kill()
            cr.note("worker SIGKILLed")
            await forget_dead_worker(client, worker.task_queue)  # its sticky queues: see the helper
            await worker.start()
            cr.note("new worker started")
            trap.release()
            await abort(handle, reason)
            cr.note("abort accepted")
        else:
            async def ended_or_stuck() -> bool:
                if result.done():
                    return True
                st = await read_status(handle)
                return st is not None and (st.phase in FINAL_PHASES or st.phase == ProcedurePhase.PAUSED
                                           or any(g.state == GateState.WAITING for g in st.gates))

            if not await until(ended_or_stuck, STALL) and not result.done():
                cr.note(f"still running {STALL:.0f}s after the refusal: abort")
                try:
                    await abort(handle, reason)
                except Exception as err:  # noqa: BLE001 - ended meanwhile: its end is what counts
                    cr.note(f"abort refused: {err}")

        async def ended() -> bool:
            if result.done():
                return True
            st = await read_status(handle)
            if st is not None:
                await approve_waiting(client, handle, st, f"fault matrix {step.name}/{case}: approved during the wind-down")
            return False

        if not await until(ended, end_timeout, 0.3):
            cr.outcome = "timeout"
            return cr
        try:
            res = result.result()
            data = res.model_dump(mode="json")
            cr.outcome, cr.message = data["outcome"], data["message"]
            cr.log += [f"  run log: {ln}" for ln in data.get("log") or []]
            cr.left_changed = [ChangedItem.model_validate(i) for i in data.get("left_changed") or []]
        except WorkflowFailureError as err:
            cr.outcome, cr.message = "failed", str(err.cause or err)
            raw = await handle.query("status")
            cr.left_changed = [ChangedItem.model_validate(i) for i in raw.get("left_changed") or []]
        cluster.disarm_all()
        cr.changes = diff(before, await cluster.settled(MARKER))
        cr.note(f"ended {cr.outcome}: {cr.message}")
    finally:
        if not result.done():
            result.cancel()
        cluster.disarm_all()
    return cr


def judge(cr: EtcdCase) -> None:
    """Pass only if the case ended completed, or nothing changed, or ``left_changed`` names
    exactly the targets the world's diff shows; raise :class:`Mismatch` listing both sides
    otherwise, :class:`NotJudged` when the step was never reached or the run did not end."""
    head = f"{cr.step}/{cr.case} ({cr.workflow_id}): "
    if not cr.reached:
        raise NotJudged(head + "the step's trap was never hit\n" + "\n".join(cr.log))
    if cr.changes is None:
        raise NotJudged(head + "did not end\n" + "\n".join(cr.log))
    if cr.outcome == "completed":
        return
    left = {i.target for i in cr.left_changed}
    if set(cr.changes) == left:
        return
    lines = [head + f"ended {cr.outcome!r} ({cr.message})", "  the world's diff, by target:"]
    lines += [f"    {t}: {ln}" for t, lns in cr.changes.items() for ln in lns] or ["    (nothing)"]
    lines += ["  left_changed:"] + ([f"    {i.line()}" for i in cr.left_changed] or ["    (nothing)"])
    lines += [f"  only in the diff: {sorted(set(cr.changes) - left)}", f"  only in left_changed: {sorted(left - set(cr.changes))}"]
    lines += ["  harness log:"] + [f"    {ln}" for ln in cr.log]
    raise Mismatch("\n".join(lines))


# --- the procedures ------------------------------------------------------------------------------------------

RESTORE_STEPS = {
    "stop-members": EtcdStep("stop-members", HostTrap(("etcd", "stop", "m1"), on="stop")),
    "force-new-cluster": EtcdStep("force-new-cluster", HostTrap(("etcd", "start", "m1", "--force-new-cluster"))),
    "add-member": EtcdStep("add-member", HostTrap(("etcdctl", "member", "add", "m2"))),
    "move-data": EtcdStep("move-data", HostTrap(("mv", "-T", "/data/m2 "))),
    "start-member": EtcdStep("start-member", HostTrap(("etcd", "start", "m2", "--initial-cluster-state=existing"))),
}
BACKUP_STEPS = {
    "snapshot-save": EtcdStep("snapshot-save", HostTrap(("etcdctl", "snapshot", "save", "snapshot-m1-"))),
}
#: (step, case) -> why it does not pass as the procedure is today.
XFAIL: dict[tuple[str, Case], str] = {}
#: Cases that cannot be built (not run).
IMPOSSIBLE = {("stop-members", Case.FAIL)}


@pytest.fixture(scope="module")
def shims(tmp_path_factory: pytest.TempPathFactory) -> Shims:
    return Shims(tmp_path_factory.mktemp("etcd-shims"))


@pytest.fixture
def trapped(tmp_path: Path, shims: Shims) -> Any:
    cluster = TrappedEtcd(tmp_path / "etcd", shims)
    try:
        cluster.start()
        cluster.put(MARKER, "before")
        yield cluster
    finally:
        cluster.disarm_all()
        cluster.kill_all()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def matrix_worker(shims: Shims, dev_server: Any, temporal_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One worker for the module's cases (host-only, the trapped ``mv`` on its PATH), on a task
    queue of its own; a kill-then-abort case kills it and starts it again."""
    queue = f"lk-etcd-fm-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(address=dev_server.address, namespace=dev_server.namespace, kubeconfig=None, task_queue=queue,
                           log_path=tmp_path_factory.mktemp("etcd-fm-worker") / "worker.log",
                           env={"LOCKKEEPER_LOG_LEVEL": "info", "LOCKKEEPER_HOST_ONLY": "true", **shims.path_env})
    await worker.start()
    try:
        yield worker
    finally:
        await terminate_running(temporal_client, queue)
        await worker.stop()


def _report(cr: EtcdCase) -> None:
    print("\n".join([f"{cr.step}/{cr.case}: {cr.outcome} {cr.message}", *cr.log,
                     *(f"  diff {t}: {'; '.join(ls)}" for t, ls in (cr.changes or {}).items()),
                     *(f"  left {i.line()}" for i in cr.left_changed)]))


def restore_start(trapped: TrappedEtcd, matrix_worker: Any, temporal_client: Any) -> Callable[[], Awaitable[WorkflowHandle[Any, Any]]]:
    """m2 and m3 killed; the start of the restore from m1."""
    trapped.kill("m2")
    trapped.kill("m3")
    inp = EtcdRestoreInput(members=trapped.members, survivor="m1", timeouts=FAST, calls={"heartbeat_seconds": 3},
                           join_timeout_seconds=6, verify_timeout_seconds=30, stop_timeout_seconds=30, search_attributes=False,
                           approvals={"requested_by": "fault-matrix"}, cluster=f"fm-{uuid.uuid4().hex[:8]}")

    async def begin() -> Any:
        return await temporal_client.start_workflow("EtcdQuorumRestoreWorkflow", inp, id=f"etcd-restore-fm-{uuid.uuid4().hex[:8]}",
                                                    task_queue=matrix_worker.task_queue, result_type=EtcdRestoreResult,
                                                    execution_timeout=timedelta(minutes=4))
    return begin


def backup_start(trapped: TrappedEtcd, matrix_worker: Any, temporal_client: Any) -> Callable[[], Awaitable[WorkflowHandle[Any, Any]]]:
    """The start of a backup (``attempts=1``)."""
    inp = EtcdBackupInput(members=trapped.members, attempts=1, timeouts=FAST, search_attributes=False, calls={"heartbeat_seconds": 3},
                          cluster=f"fm-{uuid.uuid4().hex[:8]}")

    async def begin() -> Any:
        return await temporal_client.start_workflow("EtcdBackupWorkflow", inp, id=f"etcd-backup-fm-{uuid.uuid4().hex[:8]}",
                                                    task_queue=matrix_worker.task_queue, result_type=EtcdBackupResult,
                                                    execution_timeout=timedelta(minutes=3))
    return begin


def move_data_step(trapped: TrappedEtcd) -> EtcdStep:
    """``move-data`` with its trap on m2's data dir exactly (the cluster's own path)."""
    return EtcdStep("move-data", HostTrap(("mv", "-T", trapped.member("m2").data_dir + " ")))


#: Kinds of write that fall inside a step (kind -> (step, why)), per procedure.
RESTORE_WITHIN: dict[str, tuple[str, str]] = {}
BACKUP_WITHIN: dict[str, tuple[str, str]] = {}


async def covered(trapped: TrappedEtcd, begin: Callable[[], Awaitable[WorkflowHandle[Any, Any]]], client: Any, steps: dict[str, EtcdStep],
                  within: dict[str, tuple[str, str]]) -> None:
    """A happy run with every command logged (a ``count`` trap on everything, calls and stops):
    each kind of write it ran must be a step's trap (tests/support/faultmatrix.py, :func:`assert_covers`)."""
    log = trapped.arm(HostTrap((), on="any"), "count", "coverage", times=10**6)
    handle = await begin()
    result = asyncio.ensure_future(handle.result())

    async def ended() -> bool:
        if not result.done():
            st = await read_status(handle)
            if st is not None:
                await approve_waiting(client, handle, st, "fault matrix coverage: approved as a person would")
        return result.done()

    assert await until(ended, 150, 0.3), "the happy run did not end"
    assert result.result().outcome == "completed", result.result()
    commands = list(log.state()["log"])
    print("\n".join(commands))
    assert_covers(steps, host_writes(("local", c.split(" "), "shim") for c in commands), within)


@pytest.mark.timeout(240)
async def test_etcd_restore_matrix_covers_every_write(trapped: TrappedEtcd, matrix_worker: Any, temporal_client: Any) -> None:
    """Every kind of write a happy restore runs is a step of the restore's matrix."""
    steps = {**RESTORE_STEPS, "move-data": move_data_step(trapped)}
    await covered(trapped, restore_start(trapped, matrix_worker, temporal_client), temporal_client, steps, RESTORE_WITHIN)


@pytest.mark.timeout(180)
async def test_etcd_backup_matrix_covers_every_write(trapped: TrappedEtcd, matrix_worker: Any, temporal_client: Any) -> None:
    """Every kind of write a happy backup runs is a step of the backup's matrix."""
    await covered(trapped, backup_start(trapped, matrix_worker, temporal_client), temporal_client, BACKUP_STEPS, BACKUP_WITHIN)


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("step", "case"), [p for p in matrix_params(RESTORE_STEPS, XFAIL) if tuple(p.values) not in IMPOSSIBLE])
async def test_etcd_restore_fault_matrix(step: str, case: Case, trapped: TrappedEtcd, matrix_worker: Any, temporal_client: Any) -> None:
    begin = restore_start(trapped, matrix_worker, temporal_client)
    step_spec = move_data_step(trapped) if step == "move-data" else RESTORE_STEPS[step]

    cr = await run_case(trapped, matrix_worker, temporal_client, begin, step_spec, case)
    _report(cr)
    judge(cr)


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("step", "case"), matrix_params(BACKUP_STEPS, XFAIL))
async def test_etcd_backup_fault_matrix(step: str, case: Case, trapped: TrappedEtcd, matrix_worker: Any, temporal_client: Any) -> None:
    cr = await run_case(trapped, matrix_worker, temporal_client, backup_start(trapped, matrix_worker, temporal_client),
                        BACKUP_STEPS[step], case)
    _report(cr)
    judge(cr)
