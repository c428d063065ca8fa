"""One WATCH of every Node, shared by the node waits their activities handed off (issue 40).

A node run waits minutes for a reboot. Watched inside its activity, each node in flight holds
one of the worker's activity slots for the whole wait, so ``maxUnavailable`` nodes rebooting
hold ``maxUnavailable`` slots, and an urgent procedure on the same worker queues behind them.
Handed off here, the activity returns at once (``activity.raise_complete_async()``) and frees
its slot; this hub follows every handed-off node on one watch stream of ``/api/v1/nodes`` and
completes each wait through the worker's :class:`~activities.cluster.completion.Completer`.

Each wait is a :class:`NodeWait`: its ``step`` is the same code the activity runs on each
object it sees (it may write, e.g. answer the daemon's uncordon), called here on the hub's step
threads with every newer object of its node; the first non-None result completes the activity.
A step that must go on waiting in code of its own (a drain pass waiting for its evicted pods)
answers :class:`Then`: the hub runs that on its wait threads, heartbeating the wait meanwhile,
and completes the activity with its result.
An exception fails it with that error (the server retries it per the activity's policy; a new
attempt hands off again). At the deadline ``timed_out()`` completes it. Every
:data:`BEAT_SECONDS` the hub heartbeats it with ``details()``; a heartbeat answered "cancelled"
reports the cancellation. A hub with nothing to follow for :data:`IDLE_SECONDS` ends its thread
and its watch.

The race between the activity's own first look (a LIST at resourceVersion R) and the hand-off
is closed by a cache of the objects this hub's stream delivered (only nodes that changed while
it ran): a wait picked up late is evaluated at once with its node's cached object when newer
than R; the stream starts at the first wait's R when the hub was idle. Watch semantics as
:func:`activities.cluster.watch.watch_window` with ``resume``: 410 Gone re-lists, a broken stream
(a read timeout of a slow API server) watches on from the last resourceVersion seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import weakref
from datetime import UTC, datetime
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.cluster.completion import wired

from activities.cluster.nodeinfo import node_info
from activities.cluster.watch import watch_window
from activities.context import HEARTBEAT_INTERVAL_SECONDS, beating, log
from activities.kube import objects

if TYPE_CHECKING:
    from activities.cluster.completion import Completer
    from activities.cluster.models import NodeInfo

#: Seconds between two heartbeats of one handed-off wait (the rollout's heartbeat timeout is 10 s).
BEAT_SECONDS = 4.0
#: Length of one WATCH window (seconds): the longest a deadline, a cancel or a hand-off waits.
WINDOW_SECONDS = 1
#: Watch windows failed in a row (an API answering 5xx, say) after which the waits fail with the
#: API's error, as each would have in its own activity: the failure shows on the activity.
FAIL_WAITS_AFTER = 3
#: A hub with no wait ends its thread after this many seconds.
IDLE_SECONDS = 30.0
#: Threads that run the waits' steps (their writes: a burst of uncordon answers at 500 nodes in
#: flight is not answered one after the other); one step at a time per wait.
STEP_THREADS = 32
#: Threads that run the :class:`Then` continuations of steps (a drain pass waiting up to its
#: ``wait_seconds`` for evicted pods): one per such wait running at once, at most this many; made
#: on demand. A drain at a time per node in flight, so this bounds maxUnavailable's drains at once.
WAIT_THREADS = 512
#: Seconds between two log lines of the hub's figures (:class:`HubStats`), while it follows waits.
STATS_SECONDS = 10.0


@dataclass(frozen=True)
class Then:
    """A step's answer that the wait goes on in blocking code: ``run(cancelled)`` runs on the
    hub's wait threads (``cancelled()`` tells whether a heartbeat answer said the activity was
    cancelled: poll it between blocking calls and raise ``CancelledError``); its result completes
    the activity and its exception fails it (a ``CancelledError`` after a cancel reports the
    cancellation). The hub heartbeats the wait with its ``details()`` while ``run`` runs."""

    run: Callable[[Callable[[], bool]], Any]


class HubStats:
    """What a hub's step pool did since the last :meth:`take` (thread-safe): for each step run,
    the seconds it waited in the pool's queue and the seconds it ran, and how it ended
    (``none``: the wait goes on, ``then``, ``result``, ``error``). The hub logs them every
    :data:`STATS_SECONDS` (benchmarks read the worker's log)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.queued: list[float] = []
        self.ran: dict[str, list[float]] = {}
        self.events = 0  # watch events seen (ADDED/MODIFIED/DELETED of any node)
        self.gone = 0  # waits dropped because the server no longer knew their attempt (all time)
        self.early_beats = 0  # waits heartbeaten at once on hand-off, their attempt already old (all time)
        self.rounds: list[float] = []  # seconds one round of the heartbeat thread took (sending, not answers)
        self.late: list[float] = []  # seconds each heartbeat was sent after it was due
        self.rtt: list[float] = []  # seconds from a heartbeat's send to its answer (the worker's loop and the RPC)
        self.gaps: list[float] = []  # seconds between two accepted heartbeats of one wait (the server's view)
        self.refused = 0  # heartbeats answered with an error
        self.ages: list[float] = []  # seconds from an attempt's start to its hand-off

    def beat_round(self, seconds: float) -> None:
        """One round of the heartbeat thread took ``seconds``."""
        with self._lock:
            self.rounds.append(seconds)

    def beat_sent(self, late: float) -> None:
        """A heartbeat was sent ``late`` seconds after it was due."""
        with self._lock:
            self.late.append(late)

    def beat_answered(self, rtt: float, gap: float | None, ok: bool) -> None:
        """A heartbeat was answered ``rtt`` seconds after its send; ``gap``: seconds since the
        wait's previous accepted one (None: its first); ``ok``: accepted."""
        with self._lock:
            self.rtt.append(rtt)
            if gap is not None:
                self.gaps.append(gap)
            self.refused += 0 if ok else 1

    def handed_off(self, age: float) -> None:
        """An attempt handed its wait off ``age`` seconds after it started."""
        with self._lock:
            self.ages.append(age)

    def step(self, queued: float, ran: float, how: str) -> None:
        """One step run: ``queued``/``ran`` seconds, ``how`` it ended."""
        with self._lock:
            self.queued.append(queued)
            self.ran.setdefault(how, []).append(ran)

    def take(self) -> tuple[list[float], dict[str, list[float]], int]:
        """The figures since the last call (queue waits, run times by outcome, events), reset."""
        with self._lock:
            out = (self.queued, self.ran, self.events)
            self.queued, self.ran, self.events = [], {}, 0
        return out

    def take_beats(self) -> str:
        """The heartbeat figures since the last call, as a log fragment (seconds), reset."""
        with self._lock:
            rounds, late, rtt, gaps, refused, ages = self.rounds, self.late, self.rtt, self.gaps, self.refused, self.ages
            self.rounds, self.late, self.rtt, self.gaps, self.refused, self.ages = [], [], [], [], 0, []

        def fig(v: list[float]) -> str:
            return f"p50 {_pct(v, 0.5):.2f} p99 {_pct(v, 0.99):.2f} max {max(v, default=0.0):.2f} s"

        return (f"beats: {len(late)} sent in {len(rounds)} rounds (round {fig(rounds)}; late {fig(late)});"
                f" {len(rtt)} answered ({fig(rtt)}), {refused} refused; gap between accepted {fig(gaps)},"
                f" {sum(1 for g in gaps if g > 8.0)} over 8 s; hand-off {len(ages)} at attempt age {fig(ages)},"
                f" {sum(1 for a in ages if a > 8.0)} over 8 s")


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _rv(obj: dict[str, Any]) -> int | None:
    """The resourceVersion as an integer when it is one (etcd revisions; clustersim's too), for
    ordering objects of one node; None when opaque."""
    try:
        return int(objects.meta(obj).get("resourceVersion") or "")
    except ValueError:
        return None


@dataclass(eq=False)
class NodeWait:
    """One wait handed off by its activity.

    ``node``: the Node's name; ``task_token``: the activity's (``activity.info().task_token``);
    ``deadline``: ``time.monotonic()`` at which ``timed_out()`` completes it; ``rv``: the
    resourceVersion of the object the activity last evaluated (older objects are skipped);
    ``step(obj, info)``: the result that ends the wait, a :class:`Then`, or None (runs on the hub's
    step threads; may write and may raise); ``details()``: the heartbeat details; ``what``: for
    the log; ``first``: an object the activity already saw that the step must still act on (run
    at once when the hub takes the wait, whatever its resourceVersion)."""

    node: str
    task_token: bytes
    completer: Completer
    deadline: float
    rv: int | None
    start_rv: str | None
    step: Callable[[dict[str, Any], NodeInfo], Any | None]
    timed_out: Callable[[], Any]
    details: Callable[[], Any]
    what: str
    first: dict[str, Any] | None = None
    next_beat: float = field(default_factory=lambda: time.monotonic() + BEAT_SECONDS)
    #: ``time.monotonic()`` of its last heartbeat the server accepted (None: none yet; figures only).
    beat_ok: float | None = None
    cancelled: bool = False
    #: A step runs (on the hub's pool); ``pending`` the newest object seen meanwhile; ``ended``
    #: completed, failed or cancelled (never twice). Guarded by ``lock``.
    busy: bool = False
    pending: dict[str, Any] | None = None
    ended: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class NodeWatchHub:
    """The shared watcher of one cluster gateway (see the module). Thread-safe: :meth:`hand_off`
    from any activity thread; the hub's own thread does everything else."""

    def __init__(self, gateway: Any) -> None:
        self.gateway = gateway
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._new: list[NodeWait] = []
        self._waits: dict[str, list[NodeWait]] = {}
        self._cache: dict[str, dict[str, Any]] = {}
        self._thread: threading.Thread | None = None
        self._beater: threading.Thread | None = None
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=STEP_THREADS, thread_name_prefix="lockkeeper-nodewatch-step")
        self._then_pool = ThreadPoolExecutor(max_workers=WAIT_THREADS, thread_name_prefix="lockkeeper-nodewatch-wait")
        self.handed_off = 0  # waits taken since the hub was made (benchmarks print it)
        self.stats = HubStats()
        self._stats_at = time.monotonic()

    # --- any thread ---------------------------------------------------------------------------

    def hand_off(self, wait: NodeWait) -> None:
        """Follow ``wait`` from now on. Raises RuntimeError when the worker is stopping (the
        activity then runs its wait itself)."""
        if wait.completer.closed:
            raise RuntimeError("the worker is stopping")
        wait.completer.on_close(self._close)
        if wait.next_beat <= time.monotonic():  # its attempt is old already: beat now, not a beat later
            self.stats.early_beats += 1
            wait.next_beat = time.monotonic() + BEAT_SECONDS
            self._beat_one(wait)
        with self._lock:
            self._new.append(wait)
            self.handed_off += 1
            # A live wait: the hub goes on. The stop flag (set by :meth:`_close` when a stopping
            # worker left nothing to follow) may be set while the thread still runs; the thread and
            # the beater read it under this lock, so cleared here they go on with this wait, and
            # once gone they are None and started again. Cleared only for a new thread, the wait
            # was left in ``_new`` by a thread that ended at its next look (issue 40).
            self._stop.clear()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lockkeeper-nodewatch", daemon=True)
                self._thread.start()
            if self._beater is None:
                self._beater = threading.Thread(target=self._beat, name="lockkeeper-nodewatch-beat", daemon=True)
                self._beater.start()
        self._wake.set()

    def waiting(self) -> int:
        """How many waits the hub follows now."""
        with self._lock:
            return len(self._new) + sum(len(w) for w in self._waits.values())

    def _of(self, completer: Completer) -> list[NodeWait]:
        with self._lock:
            return [w for w in self._new if w.completer is completer] + [
                w for ws in self._waits.values() for w in ws if w.completer is completer
            ]

    async def _close(self, completer: Completer, grace_seconds: float) -> None:
        """:meth:`Completer.close`: the waits of ``completer`` may end within ``grace_seconds``;
        the rest fail as retryable ``WorkerStopping``, and the thread stops when nothing is left."""
        until = time.monotonic() + grace_seconds
        while self._of(completer) and time.monotonic() < until:
            await asyncio.sleep(0.2)
        with self._lock:
            mine = [w for w in self._new if w.completer is completer]
            self._new = [w for w in self._new if w.completer is not completer]
            for node, waits in list(self._waits.items()):
                mine += [w for w in waits if w.completer is completer]
                rest = [w for w in waits if w.completer is not completer]
                if rest:
                    self._waits[node] = rest
                else:
                    del self._waits[node]
            if not self._new and not self._waits:
                self._stop.set()
        self._wake.set()
        error = ApplicationError("the worker stopped while it watched this node; another attempt watches on", type="WorkerStopping")
        mine = [w for w in mine if self._mark_ended(w)]
        await asyncio.gather(*(completer.handle(w.task_token).fail(error) for w in mine), return_exceptions=True)

    @staticmethod
    def _mark_ended(w: NodeWait) -> bool:
        with w.lock:
            if w.ended:
                return False
            w.ended = True
            return True

    # --- the hub's thread ---------------------------------------------------------------------

    def _run(self) -> None:
        rv: str | None = None
        idle_since: float | None = None
        failures = 0  # watch windows failed in a row
        while True:
            try:
                self._take_new()
                self._housekeeping()
            except Exception as exc:  # noqa: BLE001 - a bug here must not orphan the other waits
                log().error(f"nodes (shared watch): {type(exc).__name__}: {exc}")
            with self._lock:
                idle = not self._waits and not self._new
                if self._stop.is_set() or (idle and idle_since is not None and time.monotonic() - idle_since > IDLE_SECONDS):
                    self._thread = None
                    self._cache.clear()
                    return
            if idle:
                idle_since = idle_since or time.monotonic()
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            idle_since = None
            if rv is None:
                rv = self._start_rv()
            try:
                rv = watch_window(
                    lambda r, s: self.gateway.watch("Node", resource_version=r, timeout_seconds=s),
                    rv, WINDOW_SECONDS, self._seen, self._relist, "nodes (shared watch)", resume=True,
                )
                failures = 0
            except Exception as exc:  # noqa: BLE001 - the hub must outlive one bad window
                log().warning(f"nodes (shared watch): {type(exc).__name__}: {exc}; re-listing")
                rv, failures = None, failures + 1
                if failures >= FAIL_WAITS_AFTER:
                    self._fail_waiting(exc)
                time.sleep(1.0)

    def _fail_waiting(self, exc: Exception) -> None:
        """The API failed :data:`FAIL_WAITS_AFTER` watch windows in a row: fail every wait not in
        a step of its own with ``exc``, as its activity would have failed watching by itself, so
        the failure shows on the activity (attempt, last failure) and the server retries it; a
        new attempt reads again and hands off again. A wait in its step fails there, if at all."""
        with self._lock:
            waits = [w for ws in self._waits.values() for w in ws]
        for w in waits:
            with w.lock:
                busy = w.busy
            if not busy:
                self._failed(w, exc)

    def _start_rv(self) -> str | None:
        with self._lock:
            starts = [w.start_rv for waits in self._waits.values() for w in waits if w.start_rv]
        ints = [int(s) for s in starts if s.isdigit()]
        if ints:
            return str(min(ints))
        return starts[0] if starts else self._relist()

    def _take_new(self) -> None:
        with self._lock:
            # A wait may have ended before it is taken: its attempt's first heartbeat, sent at the
            # hand-off, answered NOT_FOUND (:meth:`_gone`). Taken all the same, it was followed for
            # ever with nothing to end it, and kept the hub from going idle (issue 40: 420 of them
            # after the 5,000-node run stopped).
            new, self._new = [w for w in self._new if not w.ended], []
            for w in new:
                self._waits.setdefault(w.node, []).append(w)
        for w in new:  # events this stream delivered before the wait arrived
            if w.first is not None:  # what the activity saw and left to the step
                first, w.first, rv, w.rv = w.first, None, w.rv, None
                self._evaluate(w, first)
                w.rv = rv if w.rv is None else w.rv
            cached = self._cache.get(w.node)
            if cached is not None:
                self._evaluate(w, cached)

    def _seen(self, type_: str, obj: dict[str, Any]) -> bool:
        name = objects.meta(obj).get("name") or ""
        if type_ == "DELETED":
            self._cache.pop(name, None)
            self._end_all(name, lambda w: w.completer.fail(
                w.task_token, ApplicationError(f"node {name} was deleted", type="NodeNotFound", non_retryable=True), w.what))
            return False
        self._cache[name] = obj
        self.stats.events += 1
        with self._lock:
            waits = list(self._waits.get(name, ()))
        for w in waits:
            self._evaluate(w, obj)
        if self._new:
            self._take_new()
        return self._stop.is_set()

    def _relist(self) -> str | None:
        items, rv = self.gateway.list_nodes_with_rv()
        with self._lock:
            followed = set(self._waits)
        # Every node listed, not only those followed now: a wait handed off while the LIST ran
        # (still in ``_new``) is evaluated with its node as listed when taken. The watch goes on
        # from the list's resourceVersion, so a change the list already shows (the daemon's
        # drain request) comes as no event again: kept only for the followed nodes, it was lost
        # until the next re-list (issue 40: drain requests answered 60-70 s late at 2,000 nodes).
        self._cache = {objects.meta(o).get("name") or "": o for o in items}
        for name in followed:
            obj = self._cache.get(name)
            if obj is None:
                self._end_all(name, lambda w: w.completer.fail(
                    w.task_token, ApplicationError(f"node {w.node} not found", type="NodeNotFound", non_retryable=True), w.what))
                continue
            with self._lock:
                waits = list(self._waits.get(name, ()))
            for w in waits:
                self._evaluate(w, obj)
        return rv

    def _evaluate(self, w: NodeWait, obj: dict[str, Any]) -> None:
        """Run ``w.step`` on ``obj`` (skipped when not newer than what it saw) on the pool; while
        a step of ``w`` runs, only the newest object waits for the next."""
        orv = _rv(obj)
        if w.rv is not None and orv is not None and orv <= w.rv:
            return
        w.rv = orv if orv is not None else w.rv
        with w.lock:
            if w.ended:
                return
            if w.busy:
                w.pending = obj
                return
            w.busy = True
        try:
            self._pool.submit(self._steps, w, obj, time.monotonic())
        except RuntimeError:  # the pool is shut down (interpreter exit)
            with w.lock:
                w.busy = False

    def _steps(self, w: NodeWait, obj: dict[str, Any], submitted: float) -> None:
        while True:
            obj = self._freshest(w, obj)
            began = time.monotonic()
            try:
                result = w.step(obj, node_info(obj))
            except Exception as exc:  # noqa: BLE001 - the activity fails with it, as it would have
                self.stats.step(began - submitted, time.monotonic() - began, "error")
                self._failed(w, exc)
                return
            self.stats.step(began - submitted, time.monotonic() - began,
                            "then" if isinstance(result, Then) else "none" if result is None else "result")
            if isinstance(result, Then):  # busy until it ends: the deadline waits for it, heartbeats go on
                try:
                    self._then_pool.submit(self._then, w, result)
                except RuntimeError as exc:  # the pool is shut down (interpreter exit)
                    self._failed(w, exc)
                return
            if result is not None:
                if self._end(w):
                    w.completer.complete(w.task_token, result, w.what)
                return
            with w.lock:
                nxt, w.pending = w.pending, None
                if nxt is None or w.ended:
                    w.busy = False
                    return
            obj, submitted = nxt, time.monotonic()

    def _freshest(self, w: NodeWait, obj: dict[str, Any]) -> dict[str, Any]:
        """The newest object of ``w``'s node the stream delivered, when newer than ``obj`` (which
        waited in the step queue meanwhile, or behind a step of ``w``): a step's writes are
        conditional on the object it runs on, and one older than the node answers 409 and reads
        the node again (issue 40). An object pending for ``w`` that is no newer is dropped."""
        cached = self._cache.get(w.node)
        crv, orv = (_rv(cached) if cached is not None else None), _rv(obj)
        if cached is None or crv is None or orv is None or crv <= orv:
            return obj
        with w.lock:
            prv = _rv(w.pending) if w.pending is not None else None
            if prv is not None and prv <= crv:
                w.pending = None
            w.rv = crv if w.rv is None else max(w.rv, crv)  # its own event, if still coming, is skipped
        return cached

    def _then(self, w: NodeWait, then: Then) -> None:
        try:
            result = then.run(lambda: w.cancelled)
        except Exception as exc:  # noqa: BLE001 - as a step's
            self._failed(w, exc)
            return
        if self._end(w):
            w.completer.complete(w.task_token, result, w.what)

    def _failed(self, w: NodeWait, exc: Exception) -> None:
        """A step of ``w`` raised ``exc``: fail the activity with it, or report the cancellation
        when a heartbeat answer said it was cancelled."""
        if self._end(w):
            if w.cancelled:
                w.completer.report_cancellation(w.task_token, w.what)
            else:
                w.completer.fail(w.task_token, exc, w.what)

    def _end(self, w: NodeWait) -> bool:
        """Mark ``w`` ended and stop following it; False when it already was."""
        with w.lock:
            if w.ended:
                return False
            w.ended, w.busy = True, False
        self._remove(w)
        return True

    def _housekeeping(self) -> None:
        now = time.monotonic()
        with self._lock:
            waits = [w for ws in self._waits.values() for w in ws]
        for w in waits:
            if w.busy:  # its step runs: the deadline and the cancel wait for it
                continue
            if w.cancelled:
                if self._end(w):
                    w.completer.report_cancellation(w.task_token, w.what)
            elif now >= w.deadline:
                if self._end(w):
                    try:
                        result = w.timed_out()
                    except Exception as exc:  # noqa: BLE001
                        w.completer.fail(w.task_token, exc, w.what)
                    else:
                        w.completer.complete(w.task_token, result, w.what)

    def _beat(self) -> None:
        """The heartbeat thread: every second, heartbeat each wait (its step running or not, taken
        by the watch thread or not yet) whose :data:`BEAT_SECONDS` passed. Apart from the watch thread, whose windows a burst of node
        events at thousands of nodes stretches past the activities' heartbeat timeout. Ends with
        the watch thread."""
        while True:
            with self._lock:
                # The waits not yet taken too: the watch thread takes them between its windows or
                # on an event, and a window blocked on a stalled API server (a read waiting for its
                # timeout, a LIST of every node) left them unbeaten past their heartbeat timeout.
                waits = list(self._new) + [w for ws in self._waits.values() for w in ws]
                if self._thread is None or self._stop.is_set():
                    self._beater = None
                    return
            now = time.monotonic()
            if now - self._stats_at >= STATS_SECONDS:
                seconds, self._stats_at = now - self._stats_at, now
                try:
                    self._log_stats(len(waits), seconds)
                except Exception as exc:  # noqa: BLE001 - figures only: the beats must go on
                    log().warning(f"nodes (shared watch) stats: {type(exc).__name__}: {exc}")
            for w in waits:
                if now >= w.next_beat and not w.ended:
                    self.stats.beat_sent(time.monotonic() - w.next_beat)
                    w.next_beat = now + BEAT_SECONDS
                    try:
                        self._beat_one(w)
                    except Exception as exc:  # noqa: BLE001 - one wait's details must not end every wait's beats
                        log().warning(f"{w.what}: heartbeat not sent: {type(exc).__name__}: {exc}")
            self.stats.beat_round(time.monotonic() - now)
            self._stop.wait(1.0)

    def _log_stats(self, waits: int, seconds: float) -> None:
        """One log line of :attr:`stats` over the last ``seconds`` (then reset)."""
        queued, ran, events = self.stats.take()
        runs = ", ".join(f"{how} {len(v)} (p50 {_pct(v, 0.5) * 1000:.0f} ms, p99 {_pct(v, 0.99) * 1000:.0f} ms)"
                         for how, v in sorted(ran.items()))
        log().info(
            f"nodes (shared watch) stats: {waits} waits, {events / seconds:.1f} events/s, {len(queued)} steps"
            f" (queued p50 {_pct(queued, 0.5) * 1000:.0f} ms, p99 {_pct(queued, 0.99) * 1000:.0f} ms,"
            f" max {max(queued, default=0.0) * 1000:.0f} ms; ran: {runs}), {self._pool._work_queue.qsize()} in the queue;"
            f" so far {self.stats.gone} waits dropped as gone, {self.stats.early_beats} beaten at hand-off;"
            f" {self.stats.take_beats()}"
        )

    def _beat_one(self, w: NodeWait) -> None:
        sent = time.monotonic()

        def answered(exc: BaseException | None) -> None:
            at = time.monotonic()
            self.stats.beat_answered(at - sent, None if w.beat_ok is None else at - w.beat_ok, exc is None)
            if exc is None:
                w.beat_ok = at

        w.completer.heartbeat(w.task_token, w.details(), w.what, cancelled=lambda: self._cancel(w), gone=lambda: self._gone(w),
                              answered=answered)

    def _gone(self, w: NodeWait) -> None:
        """The server no longer knows ``w``'s attempt (a heartbeat answered NOT_FOUND: it timed
        out, or its workflow ended): stop following it, with no completion (none would be
        accepted; a retried attempt hands off a wait of its own). Its step, if running, ends
        on its own; its answer is then dropped."""
        if self._end(w):
            self.stats.gone += 1
            log().warning(f"{w.what}: the server no longer knows this attempt (timed out?); no longer followed")

    def _cancel(self, w: NodeWait) -> None:
        w.cancelled = True
        self._wake.set()

    def _remove(self, w: NodeWait) -> None:
        with self._lock:
            if w in self._new:  # ended before the hub's thread took it
                self._new.remove(w)
            waits = self._waits.get(w.node)
            if waits and w in waits:
                waits.remove(w)
                if not waits:
                    del self._waits[w.node]

    def _end_all(self, node: str, end: Callable[[NodeWait], Any]) -> None:
        with self._lock:
            waits = list(self._waits.get(node, []))
        for w in waits:
            if self._end(w):
                end(w)


_HUBS: weakref.WeakKeyDictionary[Any, NodeWatchHub] = weakref.WeakKeyDictionary()
_HUBS_LOCK = threading.Lock()


def hub_for(gateway: Any) -> NodeWatchHub:
    """The shared node watcher of ``gateway`` (one per cluster gateway, made on first use)."""
    with _HUBS_LOCK:
        hub = _HUBS.get(gateway)
        if hub is None:
            hub = _HUBS[gateway] = NodeWatchHub(gateway)
        return hub


def hand_off(
    gateway: Any, *, node: str, rv: str | None, timeout_seconds: float,
    step: Callable[[dict[str, Any], NodeInfo], Any | None], timed_out: Callable[[], Any], details: Callable[[], Any],
    what: str, first: dict[str, Any] | None = None,
) -> None:
    """Hand the running activity's wait on ``node`` to the shared watcher of ``gateway`` and end
    the activity without a result (``activity.raise_complete_async``: raises, the SDK's signal);
    the watcher completes it (see :class:`NodeWait` for ``step``, ``timed_out`` and ``details``;
    ``rv``: the resourceVersion of the caller's own first look, which ``step`` already saw, unless
    it passes that look as ``first`` for the step to act on).
    Returns normally, handing off nothing, when no worker wired a completer (a unit test) or the
    worker is stopping: the caller then waits itself."""
    completer = wired()
    if completer is None:
        return
    info = activity.info()
    beat = first_beat(info.started_time)
    hub = hub_for(gateway)
    hub.stats.handed_off(BEAT_SECONDS - (beat - time.monotonic()))
    try:
        hub.hand_off(NodeWait(
            node=node, task_token=info.task_token, completer=completer,
            deadline=time.monotonic() + max(0.0, timeout_seconds), rv=int(rv) if rv and rv.isdigit() else None,
            start_rv=rv, step=step, timed_out=timed_out, details=details, what=what, first=first,
            next_beat=beat,
        ))
    except RuntimeError:  # the worker is stopping
        return
    activity.raise_complete_async()


def first_beat(started: datetime | None) -> float:
    """When (``time.monotonic()``) a handed-off wait heartbeats first: :data:`BEAT_SECONDS` after
    its attempt started (``started``: ``activity.info().started_time``, the server's clock), not
    after the hand-off. An attempt that took seconds to reach its hand-off (its task waited for the
    worker, a slow API answered its first look) would otherwise beat first past its heartbeat
    timeout and be retried though it watches on (issue 40: at 2,000 nodes, 202 of them). A past
    time: at once. No ``started``: :data:`BEAT_SECONDS` from now."""
    if started is None:
        return time.monotonic() + BEAT_SECONDS
    age = (datetime.now(UTC) - (started if started.tzinfo else started.replace(tzinfo=UTC))).total_seconds()
    return time.monotonic() + BEAT_SECONDS - max(0.0, age)


@contextlib.contextmanager
def beating_to_hand_off() -> Iterator[None]:
    """Heartbeat the running activity every :data:`~activities.context.HEARTBEAT_INTERVAL_SECONDS`
    from a helper thread while the block runs, when a worker wired a completer (the block ends in
    :func:`hand_off`, whose hub beats from then on); nothing otherwise (the activity's own watch
    beats). For the API calls an activity makes before its hand-off (its first look, the
    desiredConfig PATCH, a cordon and the evictions when the drain request is already there): on
    an API server stalled for seconds they outlasted the heartbeat timeout with no beat, and the
    server retried attempts that were handing off (issue 40: at 2,000 nodes, attempts 12.6 s old
    at their hand-off, dropped as gone at their first beat)."""
    if wired() is None:
        yield
        return
    with beating(None, every=HEARTBEAT_INTERVAL_SECONDS):
        yield


def can_hand_off() -> bool:
    """Whether a worker wired a completer for this activity (:func:`hand_off` would hand off)."""
    return wired() is not None
