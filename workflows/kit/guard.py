"""Guards: a health gate a procedure requires before a dangerous step (DESIGN.md "Health gate").

A guard is a named precondition checked by one activity on a fresh read of the cluster, whose
answer has ``ok: bool`` and ``behind: list[str]`` (what does not hold yet, in words). The kit part
here is the same for every guard; a procedure package supplies the :class:`GuardSpec` (activity
name, input, answer model, words) and, when it wants one, a pure predicate on a state it has
already read. The SDN→OVN migration's "no network-type switch while any MachineConfigPool is
updating" (``pools-settled``, :mod:`workflows.network_migration.guard`) is the first user.

- :meth:`HealthGuard.check` runs the activity once and shows its answer in the status' ``health``
  board under the guard's name (state ``ok`` / ``waiting``, ``last`` = the first five ``behind``);
- :meth:`HealthGuard.require` checks, puts ``behind`` into ``status.guard_behind`` when the
  status has that field, and raises :class:`GuardRefused` unless the guard holds;
- :meth:`HealthGuard.wait` waits until it holds (:func:`workflows.kit.health.wait_until`: backoff,
  deadline, stop), for a procedure that would rather wait than refuse.

Commands per check: one activity (``acts.call`` with the guard's timeouts), nothing else; ``wait``
adds one timer per unsuccessful round (see :mod:`workflows.kit.health`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows.kit import calls as acts
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.kit.models import HealthStatus


class GuardAnswer(Protocol):
    """What a guard's check activity returns: ``ok`` and ``behind`` (human words, most
    important first)."""

    ok: bool
    behind: list[str]


@dataclass(frozen=True)
class GuardSpec:
    """One guard: ``name`` (its key in the ``health`` board), the check ``activity`` name and its
    answer model ``answer_type``; ``ok_text`` shown when it holds; ``refusal_type`` (the
    ApplicationError type of :class:`GuardRefused`) and ``refusal_text`` ("pools are not
    settled") of a refusal."""

    name: str
    activity: str
    answer_type: type
    ok_text: str
    refusal_type: str
    refusal_text: str


class GuardRefused(ApplicationError):
    """The guard does not hold. Non-retryable; type ``spec.refusal_type``; message
    ``"refusing: <refusal_text>: <behind joined by '; '>"``; ``behind`` and ``guard`` (its name)
    kept as attributes."""

    def __init__(self, spec: GuardSpec, behind: list[str]) -> None:
        super().__init__(f"refusing: {spec.refusal_text}: " + "; ".join(behind), type=spec.refusal_type, non_retryable=True)
        self.behind = behind
        self.guard = spec.name


def _last(spec: GuardSpec, answer: GuardAnswer) -> str:
    return "; ".join(answer.behind[:5]) or spec.ok_text


class HealthGuard:
    """One procedure run's use of a guard: ``board`` its status' ``health`` dict, ``on_change``
    its ``touch``, ``timeouts`` of the check activity, ``stop`` its abort predicate (ends a
    :meth:`wait`)."""

    def __init__(self, spec: GuardSpec, *, board: dict[str, HealthStatus], on_change: Callable[[], None] = lambda: None,
                 timeouts: acts.Timeouts = acts.DEFAULT_TIMEOUTS, stop: Callable[[], bool] = lambda: False) -> None:
        self.spec = spec
        self.board = board
        self.on_change = on_change
        self.timeouts = timeouts
        self.stop = stop

    async def _ask(self, arg: Any) -> Any:
        return await acts.call(self.spec.activity, arg, self.spec.answer_type, timeouts=self.timeouts)

    async def check(self, arg: Any) -> Any:
        """One fresh check (the activity with ``arg``); the board shows its answer. Returns the
        answer (``spec.answer_type``); activity errors propagate."""
        return await self._check(arg)

    async def _check(self, arg: Any) -> Any:
        res = await self._ask(arg)
        self.board[self.spec.name] = HealthStatus(name=self.spec.name, since=workflow.now(), state="ok" if res.ok else "waiting",
                                                  last=_last(self.spec, res), polls=1)
        self.on_change()
        return res

    async def require(self, arg: Any, status: Any = None) -> Any:
        """Check now; put ``behind`` into ``status.guard_behind`` when ``status`` has that field;
        raise :class:`GuardRefused` unless the guard holds. Returns the answer when it holds."""
        res = await self._check(arg)
        if status is not None and hasattr(status, "guard_behind"):
            status.guard_behind = list(res.behind)
            self.on_change()
        if not res.ok:
            raise GuardRefused(self.spec, list(res.behind))
        return res

    async def wait(self, arg: Any, *, deadline: datetime | None = None, backoff: Backoff = Backoff(initial=5.0, maximum=60.0)) -> HealthStatus:
        """Wait until the guard holds, ``deadline`` (workflow time) passes or ``stop()`` holds;
        visible in the board under the guard's name. Returns the final :class:`HealthStatus`
        (``ok``, ``timed-out`` or ``stopped``); never raises for a guard that does not hold."""

        async def check() -> Check:
            res = await self._ask(arg)
            return Check(res.ok, "; ".join(res.behind[:5]))

        return await wait_until(check, name=self.spec.name, backoff=backoff, deadline=deadline, stop=self.stop, board=self.board,
                                on_poll=lambda _: self.on_change())
