"""The pools guard as a kit-style health gate any procedure can require.

"No network-type switch (or any other cluster-wide change that needs every node on its pool's
newest config) while any MachineConfigPool is updating": every pool Updated=True,
Updating=False, Degraded=False, and every node's currentConfig equal to its pool's newest
rendered config (:func:`activities.network_migration.models.pools_settled`).

- :meth:`PoolsGuard.evaluate` judges a state already read (pure);
- :meth:`PoolsGuard.require` runs the ``check_pools_settled`` activity on a fresh read and raises
  :class:`GuardRefused` naming what is behind (also kept in the status' ``health`` board as
  ``pools-settled`` and in ``guard_behind`` of a status that has it);
- :meth:`PoolsGuard.wait` is :func:`workflows.kit.health.wait_until` on the same check, for a
  procedure that would rather wait than refuse.
A worker running a procedure that uses it must register ``check_pools_settled``
(:mod:`activities.network_migration.activities`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.network_migration.models import MigrationState, PoolsSettledInput, PoolsSettledResult, pools_settled
    from workflows.kit import calls as acts
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.kit.models import HealthStatus

CHECK_POOLS_SETTLED = "check_pools_settled"
GUARD_NAME = "pools-settled"


class GuardRefused(ApplicationError):
    """The guard does not hold: ``behind`` lists what is behind. Non-retryable, type
    ``PoolsNotSettled`` (the word the old ``set_network_type`` guard used)."""

    def __init__(self, behind: list[str]) -> None:
        super().__init__("refusing: pools are not settled: " + "; ".join(behind), type="PoolsNotSettled", non_retryable=True)
        self.behind = behind


class PoolsGuard:
    """The guard for one procedure run: ``board`` its status' ``health`` dict, ``on_change`` its
    ``touch``, ``stop`` its abort predicate."""

    def __init__(self, *, board: dict[str, HealthStatus], on_change: Callable[[], None] = lambda: None,
                 timeouts: acts.Timeouts = acts.DEFAULT_TIMEOUTS, stop: Callable[[], bool] = lambda: False) -> None:
        self.board = board
        self.on_change = on_change
        self.timeouts = timeouts
        self.stop = stop

    @staticmethod
    def evaluate(state: MigrationState, baseline: dict[str, str] | None = None, pools: list[str] | None = None) -> PoolsSettledResult:
        """The guard on a state already read (pure)."""
        return pools_settled(state, baseline, pools)

    async def check(self, baseline: dict[str, str] | None = None, pools: list[str] | None = None) -> PoolsSettledResult:
        """One fresh check through the activity; the board shows its answer."""
        res: PoolsSettledResult = await acts.call(CHECK_POOLS_SETTLED, PoolsSettledInput(baseline=baseline or {}, pools=pools or []),
                                                  PoolsSettledResult, timeouts=self.timeouts)
        hs = HealthStatus(name=GUARD_NAME, since=workflow.now(), state="ok" if res.ok else "waiting",
                          last="; ".join(res.behind[:5]) or "every pool Updated, every node on its pool's newest config", polls=1)
        self.board[GUARD_NAME] = hs
        self.on_change()
        return res

    async def require(self, baseline: dict[str, str] | None = None, status: Any = None, pools: list[str] | None = None) -> None:
        """Check now; raise :class:`GuardRefused` (after putting ``behind`` into
        ``status.guard_behind`` when the status has it) unless the guard holds."""
        res = await self.check(baseline, pools)
        if status is not None and hasattr(status, "guard_behind"):
            status.guard_behind = res.behind
            self.on_change()
        if not res.ok:
            raise GuardRefused(res.behind)

    async def wait(self, *, baseline: dict[str, str] | None = None, deadline: datetime | None = None,
                   backoff: Backoff = Backoff(initial=5.0, maximum=60.0)) -> HealthStatus:
        """Wait until the guard holds (kit health gate), visible in the board as ``pools-settled``."""

        async def check() -> Check:
            res: PoolsSettledResult = await acts.call(CHECK_POOLS_SETTLED, PoolsSettledInput(baseline=baseline or {}),
                                                      PoolsSettledResult, timeouts=self.timeouts)
            return Check(res.ok, "; ".join(res.behind[:5]))

        return await wait_until(check, name=GUARD_NAME, backoff=backoff, deadline=deadline, stop=self.stop, board=self.board,
                                on_poll=lambda _: self.on_change())
