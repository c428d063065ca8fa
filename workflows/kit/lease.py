"""Leases by scope: one procedure at a time on a node, a pool, a cluster or a named subsystem.

Scopes (DESIGN.md "Lease"; :mod:`workflows.kit.scopes`): ``node/<cluster>/<node>``,
``pool/<cluster>/<pool>``, ``cluster/<cluster>``, ``gluster/<cluster>``, ``sdn/<cluster>``,
``etcd/<cluster>``. Two scopes overlap when they are the same string, or when one is
``cluster/<c>`` and the other any scope of <c>.

Mechanism. Each held scope is one :class:`LeaseWorkflow`, started as a child of the holder with
the scope's workflow ID (:func:`scope_workflow_id`). Temporal allows one running workflow per ID,
so a second start fails with WorkflowAlreadyStartedError: the same scope is exclusive atomically.
The refused procedure then signals ``contend`` to that lease, the lease answers with a
``lease_denied`` signal carrying :class:`LeaseInfo`, and the refusal (ApplicationError type
``LeaseHeld``, details ``[holder workflow ID]``) names the holder. The lease ends on ``release``
or when the holder closes (parent close policy TERMINATE), so a crashed or terminated procedure
never leaves a stale lock behind.

A run can also be its own lease: started with the scope's workflow ID, it holds the scope for
exactly as long as it runs, and answers ``contend`` (:func:`answer_contender`) and ``holder`` as a
:class:`LeaseWorkflow` does. A large MachineConfig rollout starts its node runs so
(:class:`workflows.kit.noderun.NodeRunWorkflow`, ``lease_info``): a lease workflow per node cost
the server a start, a workflow task and a termination, about a third of its CPU (issue 16).

``cluster/<c>`` against the rest of <c>: a procedure taking ``cluster/<c>`` also takes the
subsystem scopes of <c> and the node and pool scopes it names (``covers``); a procedure taking
scopes of <c> without the cluster scope then probes the cluster lease (a ``contend`` signal: a
running cluster lease answers with its holder, a missing one makes the signal fail). Whichever
starts its lease second is refused. Limit: a node or pool the cluster-wide procedure does not
name is only protected by the probe, which can miss a lease taken in the same instant before the
cluster lease existed.

The holder workflow must have a ``lease_denied`` signal handler that calls :meth:`Leases.denied`
(:class:`workflows.kit.procedure.ProcedureWorkflow` has it).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from activities.leases.models import FindHeldLeasesInput, FindHeldLeasesResult
    from workflows.kit import calls as acts
    from workflows.kit.models import LeaseInfo, LeaseInput
    from workflows.kit.scopes import SUBSYSTEM_SCOPES, LeaseScope, cluster_scope, scope_workflow_id

if TYPE_CHECKING:
    pass


#: How long :meth:`Leases.release` waits for released leases to close (when the caller did not
#: ask for ``wait_closed``).
LEASE_CLOSE_TIMEOUT = timedelta(seconds=60)

#: How often :meth:`Leases.hold_while_running` asks again for a lease its own holder still holds
#: (a second apart), before it counts that lease as covering it.
OWN_LEASE_RETRIES = 5

#: The bound of :meth:`Leases.probe_by_activity`'s activity (it heartbeats).
PROBE_ACTIVITY_SECONDS = 300

#: How long a refused lease waits for the holder's answer before failing with the lease ID only.
LEASE_ANSWER_TIMEOUT = timedelta(seconds=30)


@workflow.defn(sandboxed=False)
class LeaseWorkflow:
    """Hold ``input.scope`` of ``input.cluster`` for ``input.holder`` until released.

    Not sandboxed: a rollout starts one per node it moves, and a sandboxed instance costs about
    0.2 s of worker CPU to build (the sandbox re-imports the workflow module), against almost
    nothing for this class. It only waits for signals and answers them: no I/O, no clock but
    ``workflow.now()``, no randomness; its imports are plain models. Sandboxing is the worker's
    business only: the commands, hence the histories, are the same either way.
    """

    @workflow.init
    def __init__(self, input: LeaseInput) -> None:
        self._info = LeaseInfo(
            cluster=input.cluster, scope=input.scope, holder=input.holder, procedure=input.procedure
        )
        self._released = False
        self._contenders: list[str] = []

    @workflow.signal
    def release(self, holder: str = "") -> None:
        """Give the lease up (the holder calls this with its workflow ID when it finishes)."""
        if holder and holder != self._info.holder:
            workflow.logger.warning("lease %s: release by %s ignored (held by %s)", self._info.scope, holder, self._info.holder)
            return
        self._released = True

    @workflow.signal
    def contend(self, requester_workflow_id: str) -> None:
        """Somebody wants this lease: answer them with ``lease_denied`` naming the holder."""
        self._contenders.append(requester_workflow_id)

    @workflow.query
    def holder(self) -> LeaseInfo:
        """Who holds the lease, for which procedure, since when."""
        return self._info

    @workflow.run
    async def run(self, input: LeaseInput) -> LeaseInfo:
        self._info.acquired_at = workflow.now()
        while True:
            await workflow.wait_condition(lambda: self._released or bool(self._contenders))
            while self._contenders:
                await answer_contender(self._contenders.pop(0), self._info)
            if self._released:
                await workflow.wait_condition(workflow.all_handlers_finished)
                return self._info


async def answer_contender(requester: str, info: LeaseInfo) -> None:
    """Tell ``requester`` (a workflow ID) who holds the lease: its ``lease_denied`` signal with
    ``info``. A requester that is gone needs no answer (logged, nothing raised). Workflow code."""
    try:
        await workflow.get_external_workflow_handle(requester).signal("lease_denied", info)
    except Exception as err:  # noqa: BLE001 - a requester that is gone needs no answer
        workflow.logger.info("lease contender %s not reachable: %s", requester, err)


def holder_noun(procedure: str) -> str:
    """The word for a holder in a refusal: the last part of its procedure name
    ("machineconfig-rollout" → "rollout", "drain" → "drain", "etcd-restore" → "restore")."""
    return procedure.rsplit("-", 1)[-1] or "procedure"


#: How long :meth:`Leases.retake` retries a lease the previous run still holds while it closes.
RETAKE_FOR = timedelta(seconds=120)
RETAKE_EVERY = timedelta(seconds=1)


class Leases:
    """The leases one procedure run holds (see the module doc).

    ``holder``: this run's workflow ID; ``procedure``: its spec name (shown to the refused).
    ``requester``: the workflow a lease answers ``contend`` to (default ``holder``): a node run
    taking a lease for its procedure holds it in the procedure's name but hears the answers itself
    (:meth:`hold_while_running`).
    """

    def __init__(self, holder: str, procedure: str, requester: str | None = None) -> None:
        self.holder = holder
        self.procedure = procedure
        self.requester = requester or holder
        self.held: dict[str, workflow.ChildWorkflowHandle] = {}
        #: Leases released one by one (release_scope) that may still be closing.
        self.closing: dict[str, workflow.ChildWorkflowHandle] = {}
        self._denied: LeaseInfo | None = None

    def denied(self, info: LeaseInfo) -> None:
        """The ``lease_denied`` signal's handler body: a lease's answer naming its holder."""
        self._denied = info

    @staticmethod
    def expand(scopes: list[str], covers: list[str] = ()) -> list[str]:  # type: ignore[assignment]
        """The scopes to take, in order and without duplicates: ``scopes`` (validated with
        :meth:`LeaseScope.parse`), and for each ``cluster/<c>`` also the subsystem scopes of <c>
        and the ``covers`` scopes of <c>. Raises ValueError for a malformed scope."""
        out: list[str] = []
        for s in scopes:
            parsed = LeaseScope.parse(s)
            extra = []
            if parsed.kind == "cluster":
                extra = [f"{k}/{parsed.cluster}" for k in SUBSYSTEM_SCOPES]
                extra += [c for c in covers if LeaseScope.parse(c).cluster == parsed.cluster]
            for x in (str(parsed), *extra):
                if x not in out:
                    out.append(x)
        return out

    async def acquire(
        self,
        scopes: list[str],
        *,
        covers: list[str] = (),  # type: ignore[assignment]
        probe_cluster: bool = True,
        input_scope: dict[str, str] | None = None,
        concurrent: bool = False,
    ) -> None:
        """Take every scope (see :meth:`expand`), in order; then, with ``probe_cluster``, probe
        the ``cluster/<c>`` lease of every cluster whose cluster scope we do not take.

        Raises a non-retryable ApplicationError type ``LeaseHeld`` (details: the holder's
        workflow ID, or the lease's ID when the holder does not answer) naming the holder:
        "<scope in words> is held by <noun> <workflow ID>". Leases already taken stay until the
        run closes (parent close policy) or :meth:`release`.

        ``input_scope``: scope → the ``LeaseInput.scope`` text to send instead (the rollout's
        pool leases keep ``pool/<pool>``). ``concurrent``: start all lease children in one
        workflow task instead of one round trip each (a rollout leasing thousands of nodes); the
        first refused scope in order is reported.
        """
        wanted = self.expand(list(scopes), list(covers))
        if concurrent:
            await self._acquire_concurrently([s for s in wanted if s not in self.held], input_scope or {})
        for scope in wanted:
            if scope in self.held:
                continue
            parsed = LeaseScope.parse(scope)
            lease_id = scope_workflow_id(scope)
            try:
                self.held[scope] = await workflow.start_child_workflow(
                    LeaseWorkflow.run,
                    LeaseInput(cluster=parsed.cluster, scope=(input_scope or {}).get(scope, scope), holder=self.holder,
                               procedure=self.procedure),
                    id=lease_id,
                    parent_close_policy=workflow.ParentClosePolicy.TERMINATE,
                )
            except WorkflowAlreadyStartedError as err:
                raise await self._refusal(parsed, lease_id) from err
        if not probe_cluster:
            return
        for cluster in dict.fromkeys(LeaseScope.parse(s).cluster for s in wanted):
            if cluster_scope(cluster) in self.held:
                continue
            lease_id = scope_workflow_id(cluster_scope(cluster))
            exists, holder = await self._ask(lease_id)
            if exists and (holder is None or holder.holder != self.holder):
                raise self._error(LeaseScope.parse(cluster_scope(cluster)), holder, lease_id)

    async def retake(self, scopes: list[str], *, input_scope: dict[str, str] | None = None) -> None:
        """Take ``scopes`` again after a continue-as-new (all at once, no cluster probe). A refusal
        naming this run's ``holder`` (or a scope's own lease ID) is the previous run's lease not
        closed yet: wait :data:`RETAKE_EVERY` and try again, up to :data:`RETAKE_FOR`. A refusal
        naming anyone else raises (LeaseHeld, as :meth:`acquire`): another procedure took the
        scope in the instant between the two runs, and we must not share it."""
        deadline = workflow.now() + RETAKE_FOR
        while True:
            try:
                await self.acquire(scopes, input_scope=input_scope, probe_cluster=False, concurrent=True)
                return
            except ApplicationError as err:
                details = list(err.details or ())
                ours = err.type == "LeaseHeld" and bool(details) and details[0] in (self.holder, *map(scope_workflow_id, scopes))
                if not ours or workflow.now() >= deadline:
                    raise
                workflow.logger.info("lease of the previous run not closed yet (%s); retrying", err.message)
                await workflow.sleep(RETAKE_EVERY)

    async def _acquire_concurrently(self, todo: list[str], input_scope: dict[str, str]) -> None:
        """Start the lease children of ``todo`` together; raise the refusal of the first scope
        (in order) that another procedure holds. Other start failures propagate."""

        async def start(scope: str) -> workflow.ChildWorkflowHandle:
            parsed = LeaseScope.parse(scope)
            return await workflow.start_child_workflow(
                LeaseWorkflow.run,
                LeaseInput(cluster=parsed.cluster, scope=input_scope.get(scope, scope), holder=self.holder,
                           procedure=self.procedure),
                id=scope_workflow_id(scope),
                parent_close_policy=workflow.ParentClosePolicy.TERMINATE,
            )

        results = await asyncio.gather(*(start(s) for s in todo), return_exceptions=True)
        refused: tuple[str, BaseException] | None = None
        for scope, res in zip(todo, results, strict=True):
            if isinstance(res, WorkflowAlreadyStartedError):
                refused = refused or (scope, res)
            elif isinstance(res, BaseException):
                raise res
            else:
                self.held[scope] = res
        if refused is not None:
            scope, err = refused
            raise await self._refusal(LeaseScope.parse(scope), scope_workflow_id(scope)) from err

    async def acquire_some(self, scopes: list[str], input_scope: dict[str, str] | None = None) -> list[str]:
        """Start the lease children of those ``scopes`` not held yet, together in one workflow
        task; returns the scopes another procedure holds (not asked who: see :meth:`refusal`).
        The caller decides what a refusal means (a rollout's look-ahead leases of the nodes it
        starts next). Other start failures propagate. Raises ValueError for a malformed scope."""
        todo = [s for s in dict.fromkeys(scopes) if s not in self.held]
        if not todo:
            return []

        async def start(scope: str) -> workflow.ChildWorkflowHandle:
            parsed = LeaseScope.parse(scope)
            return await workflow.start_child_workflow(
                LeaseWorkflow.run,
                LeaseInput(cluster=parsed.cluster, scope=(input_scope or {}).get(scope, scope), holder=self.holder,
                           procedure=self.procedure),
                id=scope_workflow_id(scope),
                parent_close_policy=workflow.ParentClosePolicy.TERMINATE,
            )

        results = await asyncio.gather(*(start(s) for s in todo), return_exceptions=True)
        refused: list[str] = []
        for scope, res in zip(todo, results, strict=True):
            if isinstance(res, WorkflowAlreadyStartedError):
                refused.append(scope)
            elif isinstance(res, BaseException):
                raise res
            else:
                self.held[scope] = res
        return refused

    async def hold_while_running(self, scope: str) -> None:
        """Take ``scope`` for as long as the calling run lives: its lease workflow is the run's own
        child (parent close policy TERMINATE), so it ends when the run closes, with no release
        signal and no completion in anybody's history (issue 16: a node run holding its node's
        lease costs the procedure's history nothing). The lease names ``holder``.

        A lease held by ``holder`` already is ours: either still closing after an earlier run of
        the same holder (asked again up to :data:`OWN_LEASE_RETRIES` times, a second apart) or
        kept by the holder itself; it is then not taken again. Raises the LeaseHeld refusal
        naming any other holder."""
        parsed = LeaseScope.parse(scope)
        lease_id = scope_workflow_id(scope)
        for attempt in range(OWN_LEASE_RETRIES + 1):
            try:
                self.held[scope] = await workflow.start_child_workflow(
                    LeaseWorkflow.run,
                    LeaseInput(cluster=parsed.cluster, scope=scope, holder=self.holder, procedure=self.procedure),
                    id=lease_id,
                    parent_close_policy=workflow.ParentClosePolicy.TERMINATE,
                )
                return
            except WorkflowAlreadyStartedError:
                exists, info = await self._ask(lease_id)
            if exists and (info is None or info.holder != self.holder):
                raise self._error(parsed, info, lease_id)
            if exists and attempt == OWN_LEASE_RETRIES:
                workflow.logger.info("lease %s is held by %s itself: not taken again", scope, self.holder)
                return
            if exists:
                await workflow.sleep(timedelta(seconds=1))
        # Started and ended by somebody else every time we looked: held all the same.
        raise self._error(parsed, None, lease_id)

    async def refusal(self, scope: str) -> ApplicationError:
        """The LeaseHeld error for ``scope``, naming its holder (asked with ``contend``)."""
        return await self._refusal(LeaseScope.parse(scope), scope_workflow_id(scope))

    async def probe(self, scopes: list[str], *, chunk: int = 0) -> None:
        """Check, without taking them, that no other procedure holds ``scopes``: one ``contend``
        signal per scope, all in one workflow task (a signal to a lease that does not run fails,
        which costs no workflow). Raises the LeaseHeld refusal (see :meth:`acquire`) of the
        first held scope in order. Scopes we hold ourselves are not probed.

        ``chunk`` > 0: at most that many signals per workflow task, one task after the other (a
        task's time grows with its commands: 2,000 signals took about 1 s)."""
        todo = [s for s in dict.fromkeys(scopes) if s not in self.held]
        if chunk > 0 and len(todo) > chunk:
            for i in range(0, len(todo), chunk):
                await self.probe(todo[i : i + chunk])
            return
        self._denied = None

        async def contend(scope: str) -> bool:
            try:
                await workflow.get_external_workflow_handle(scope_workflow_id(scope)).signal("contend", self.requester)
            except Exception:  # noqa: BLE001 - the lease does not run: the scope is free
                return False
            return True

        delivered = await asyncio.gather(*(contend(s) for s in todo))
        held = [s for s, d in zip(todo, delivered, strict=True) if d]
        if held:
            raise await self.refusal(held[0])

    async def probe_by_activity(self, scopes: list[str], *, timeouts: acts.Timeouts = acts.DEFAULT_TIMEOUTS) -> None:
        """As :meth:`probe`, but one ``find_held_leases`` activity asks the server which of the
        scopes' lease workflow IDs run (:mod:`activities.leases`): one activity in the caller's
        history instead of two events per scope. Raises the LeaseHeld refusal (naming the holder,
        asked with ``contend``) of the first held scope in order. Scopes we hold are not probed.
        ``timeouts``: the caller's :class:`workflows.kit.calls.Timeouts`."""
        todo = [s for s in dict.fromkeys(scopes) if s not in self.held]
        if not todo:
            return
        ids = [scope_workflow_id(s) for s in todo]
        found: FindHeldLeasesResult = await acts.call(
            acts.FIND_HELD_LEASES, FindHeldLeasesInput(lease_ids=ids), FindHeldLeasesResult,
            seconds=PROBE_ACTIVITY_SECONDS, heartbeat=True, timeouts=timeouts,
        )
        if found.held:
            raise await self.refusal(todo[ids.index(found.held[0])])

    async def release_scope(self, scope: str) -> None:
        """Release one held lease (no-op when not held; a lease already gone is ignored)."""
        handle = self.held.pop(scope, None)
        if handle is None:
            return
        try:
            await handle.signal("release", self.holder)
        except Exception as err:  # noqa: BLE001 - a lease that already ended needs no release
            workflow.logger.info("release of lease %s not delivered: %s", scope, err)
        self.closing[scope] = handle  # release(wait_closed=True) waits for it to close

    async def release(self, *, concurrent: bool = False, wait_closed: bool = False) -> None:
        """Signal ``release`` to every held lease (a lease already gone is ignored); with
        ``concurrent`` all signals go out in one workflow task (see :meth:`acquire`).

        ``wait_closed``: then wait until every released lease workflow (these, and those
        :meth:`release_scope` released before) has closed (see
        :meth:`wait_closed`), so that none outlives this run; without ``wait_closed`` it waits
        at most :data:`LEASE_CLOSE_TIMEOUT`. A procedure that closed right after its release (an
        abort while planning) could otherwise close before its lease had processed the release:
        the parent close policy would then terminate the lease instead."""

        async def release_one(scope: str, handle: workflow.ChildWorkflowHandle) -> None:
            try:
                await handle.signal("release", self.holder)
            except Exception as err:  # noqa: BLE001 - a lease that already ended needs no release
                workflow.logger.info("release of lease %s not delivered: %s", scope, err)

        held = list(self.held.items())
        self.held.clear()  # released once: a second release (the kit's ending after a procedure's own) sends nothing
        self.closing.update(held)
        if concurrent:
            await asyncio.gather(*(release_one(s, h) for s, h in held))
        else:
            for scope, handle in held:
                await release_one(scope, handle)
        limit = None
        if not wait_closed and (held or self.closing):
            wait_closed, limit = True, LEASE_CLOSE_TIMEOUT
        if wait_closed:
            await self.wait_closed({**self.closing, **dict(held)}, timeout=limit)
            self.closing.clear()

    @staticmethod
    async def wait_closed(handles: dict[str, workflow.ChildWorkflowHandle], *, timeout: timedelta | None = None) -> None:
        """Wait until the lease workflows of ``handles`` (scope → child handle) have closed, all
        in one workflow task. Their completion then reaches this run before it closes or
        continues as new: a child that closes after its parent run leaves the time-skipping test
        server's clock locked for good (its "notify parent" lock is never released), and on a
        real server a lease still running refuses the next run's retake of the same scope. A
        lease that failed or was terminated counts as closed (logged); nothing is raised.
        ``timeout`` (a durable timer): stop waiting then and log the leases still open (their
        parent close policy ends them with this run), so that a lease no worker runs cannot
        hold the procedure's end for ever."""

        async def closed(scope: str, handle: workflow.ChildWorkflowHandle) -> None:
            try:
                await handle
            except Exception as err:  # noqa: BLE001 - a lease that ended otherwise is closed too
                workflow.logger.info("lease %s closed with %s", scope, err)

        waits = {s: asyncio.ensure_future(closed(s, h)) for s, h in handles.items()}
        if not waits:
            return
        await asyncio.wait(list(waits.values()), timeout=timeout.total_seconds() if timeout else None)
        still = sorted(s for s, w in waits.items() if not w.done())
        if still:
            workflow.logger.warning("leases %s did not close within %s of their release", still, timeout)

    async def _ask(self, lease_id: str) -> tuple[bool, LeaseInfo | None]:
        """Signal ``contend`` to ``lease_id`` and wait for its ``lease_denied`` answer.

        Returns (exists, holder): a signal that cannot be delivered means no such lease runs
        (False, None); a delivered one means it runs, even when its answer does not come within
        LEASE_ANSWER_TIMEOUT (True, None): a silent lease still counts as held."""
        self._denied = None
        try:
            await workflow.get_external_workflow_handle(lease_id).signal("contend", self.requester)
        except Exception as err:  # noqa: BLE001 - the lease does not run
            workflow.logger.info("lease %s not running: %s", lease_id, err)
            return False, None
        try:
            # Probes may have several answers in flight: wait for this lease's (same lease ID).
            await workflow.wait_condition(
                lambda: self._denied is not None and self._answers(lease_id), timeout=LEASE_ANSWER_TIMEOUT
            )
        except TimeoutError:
            workflow.logger.info("lease %s did not answer within %s", lease_id, LEASE_ANSWER_TIMEOUT)
            return True, None
        return True, self._denied

    def _answers(self, lease_id: str) -> bool:
        """The last ``lease_denied`` came from ``lease_id`` (a pool lease's text scope
        ``pool/<name>`` maps back to its ID too; an unparsable scope is accepted)."""
        info = self._denied
        if info is None:
            return False
        scope = info.scope
        kind, _, rest = scope.partition("/")
        if kind == "pool" and "/" not in rest:  # the rollout's pool leases say "pool/<pool>"
            scope = f"pool/{info.cluster}/{rest}"
        try:
            return scope_workflow_id(scope) == lease_id
        except ValueError:
            return True

    async def _refusal(self, scope: LeaseScope, lease_id: str) -> ApplicationError:
        _, holder = await self._ask(lease_id)
        return self._error(scope, holder, lease_id)

    def _error(self, scope: LeaseScope, holder: LeaseInfo | None, lease_id: str) -> ApplicationError:
        if holder is not None:
            who = f"{holder_noun(holder.procedure)} {holder.holder}"
        else:
            who = f"another procedure (lease workflow {lease_id})"
        return ApplicationError(
            f"{scope.describe()} is held by {who}",
            holder.holder if holder else lease_id,
            type="LeaseHeld",
            non_retryable=True,
        )
