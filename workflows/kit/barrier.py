"""Barrier: a step on every target; it passes only when all pass, and names the ones that failed.

DESIGN.md "Barrier" (R3: "every etcd host must have finished its backup before anything else
proceeds"; R5: pre-pull, firewall and ``ovs-vsctl`` on every node). The step (usually one
activity call per target, started together) runs on every target; a target fails when its step
raises (ActivityError, ApplicationError: the innermost message is kept) or returns a result the
``ok`` predicate refuses. :class:`BarrierStatus` (pending / done / failed, rounds) is kept in the
procedure's status board.

:meth:`Barrier.hold` is the blocking form: when a round fails, the procedure pauses naming the
failed targets; on resume the step runs again on EVERY target (what passed before may not hold
any more after the pause), until a round passes or the procedure is aborted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from workflows.kit.control import Control
    from workflows.kit.models import BarrierStatus, failure_message

T = TypeVar("T")


@dataclass
class BarrierResult(Generic[T]):
    """``ok`` only when every target passed; ``done`` target name → step result; ``failed``
    target name → why (in target order); ``message`` names the failed ones."""

    ok: bool
    done: dict[str, Any] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    message: str = ""


class Barrier(Generic[T]):
    """``name``: shown in status; ``targets``; ``key(target)`` → its name; ``step(target)`` →
    awaitable result; ``ok(result)`` → passed? (default: any result passes); ``concurrency``:
    at most this many steps at once (None: all together, in target order)."""

    def __init__(
        self,
        name: str,
        targets: Sequence[T],
        step: Callable[[T], Awaitable[Any]],
        *,
        key: Callable[[T], str] = str,
        ok: Callable[[Any], bool | str] = lambda result: True,
        concurrency: int | None = None,
        board: dict[str, BarrierStatus] | None = None,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.name = name
        self.targets = list(targets)
        self.step = step
        self.key = key
        self.ok = ok
        self.concurrency = concurrency
        self.on_change = on_change
        self.status = BarrierStatus(name=name, pending=[key(t) for t in self.targets])
        if board is not None:
            board[name] = self.status

    async def _one(self, target: T) -> tuple[bool, Any]:
        try:
            result = await self.step(target)
        except (ActivityError, ApplicationError, ChildWorkflowError) as err:
            return False, failure_message(err)
        verdict = self.ok(result)
        if verdict is True:
            return True, result
        return False, verdict if isinstance(verdict, str) and verdict else "check refused the result"

    async def run(self) -> BarrierResult[T]:
        """One round on every target; updates the status board."""
        st = self.status
        st.rounds += 1
        st.state, st.pending, st.done, st.failed = "running", [self.key(t) for t in self.targets], [], {}
        self.on_change()
        if self.concurrency is None:
            outcomes = await asyncio.gather(*(self._one(t) for t in self.targets))
        else:
            sem = asyncio.Semaphore(max(1, self.concurrency))

            async def bounded(t: T) -> tuple[bool, Any]:
                async with sem:
                    return await self._one(t)

            outcomes = await asyncio.gather(*(bounded(t) for t in self.targets))
        result: BarrierResult[T] = BarrierResult(ok=True)
        for target, (passed, value) in zip(self.targets, outcomes, strict=True):
            name = self.key(target)
            if passed:
                result.done[name] = value
            else:
                result.failed[name] = str(value)
        result.ok = not result.failed
        total = len(self.targets)
        result.message = (
            f"{self.name}: all {total} passed" if result.ok
            else f"{self.name} failed on {len(result.failed)} of {total}: {', '.join(result.failed)}"
        )
        st.pending, st.done, st.failed = [], list(result.done), dict(result.failed)
        st.state = "passed" if result.ok else "failed"
        self.on_change()
        return result

    async def hold(self, control: Control) -> BarrierResult[T]:
        """Run rounds until one passes: after a failed round pause ``control`` naming the failed
        targets, wait for resume, then run again on every target. Raises
        :class:`workflows.kit.control.Aborted` on abort (from :meth:`Control.safe_point`)."""
        while True:
            await control.safe_point()
            result = await self.run()
            if result.ok:
                return result
            control.pause(result.message + "; resume re-checks every target")
            await control.safe_point()  # waits for resume; raises Aborted on abort
            workflow.logger.info("barrier %s re-checked after resume", self.name)
