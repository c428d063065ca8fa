"""The SDN→OVN migration's guard, ``pools-settled``: the predicate and its words; the gate
mechanics are the kit's (:mod:`workflows.kit.guard`).

"No network-type switch (or any other cluster-wide change that needs every node on its pool's
newest config) while any MachineConfigPool is updating": every pool Updated=True,
Updating=False, Degraded=False, and every node's currentConfig equal to its pool's newest
rendered config (:func:`activities.network_migration.models.pools_settled`).

- :meth:`PoolsGuard.evaluate` judges a state already read (pure);
- :meth:`PoolsGuard.require` runs the ``check_pools_settled`` activity on a fresh read and raises
  :class:`GuardRefused` (type ``PoolsNotSettled``) naming what is behind (also kept in the
  status' ``health`` board as ``pools-settled`` and in ``guard_behind`` of a status that has it);
- :meth:`PoolsGuard.wait` waits on the same check, for a procedure that would rather wait than
  refuse.
A worker running a procedure that uses it must register ``check_pools_settled``
(:mod:`activities.network_migration.activities`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.network_migration.models import MigrationState, PoolsSettledInput, PoolsSettledResult, pools_settled
    from workflows.kit import calls as acts
    from workflows.kit.guard import GuardRefused, GuardSpec, HealthGuard
    from workflows.kit.health import Backoff
    from workflows.kit.models import HealthStatus

CHECK_POOLS_SETTLED = "check_pools_settled"
GUARD_NAME = "pools-settled"

#: The pools guard as a kit guard spec (the refusal type is the word the old ``set_network_type``
#: guard used).
POOLS_SETTLED = GuardSpec(name=GUARD_NAME, activity=CHECK_POOLS_SETTLED, answer_type=PoolsSettledResult,
                          ok_text="every pool Updated, every node on its pool's newest config",
                          refusal_type="PoolsNotSettled", refusal_text="pools are not settled")

__all__ = ["CHECK_POOLS_SETTLED", "GUARD_NAME", "POOLS_SETTLED", "GuardRefused", "PoolsGuard"]


class PoolsGuard(HealthGuard):
    """The ``pools-settled`` guard for one procedure run (see :class:`HealthGuard` for
    ``board``, ``on_change``, ``timeouts``, ``stop``). ``baseline``: pool → the rendered config
    it had before the change (a pool still on it is behind); ``pools``: only these pools (all
    when empty)."""

    def __init__(self, *, board: dict[str, HealthStatus], on_change: Callable[[], None] = lambda: None,
                 timeouts: acts.Timeouts = acts.DEFAULT_TIMEOUTS, stop: Callable[[], bool] = lambda: False) -> None:
        super().__init__(POOLS_SETTLED, board=board, on_change=on_change, timeouts=timeouts, stop=stop)

    @staticmethod
    def evaluate(state: MigrationState, baseline: dict[str, str] | None = None, pools: list[str] | None = None) -> PoolsSettledResult:
        """The guard on a state already read (pure)."""
        return pools_settled(state, baseline, pools)

    async def check(self, baseline: dict[str, str] | None = None, pools: list[str] | None = None) -> PoolsSettledResult:  # type: ignore[override]
        """One fresh check through the activity; the board shows its answer."""
        return await super().check(PoolsSettledInput(baseline=baseline or {}, pools=pools or []))

    async def require(self, baseline: dict[str, str] | None = None, status: object = None,  # type: ignore[override]
                      pools: list[str] | None = None) -> PoolsSettledResult:
        """Check now; raise :class:`GuardRefused` unless every pool is settled."""
        return await super().require(PoolsSettledInput(baseline=baseline or {}, pools=pools or []), status)

    async def wait(self, *, baseline: dict[str, str] | None = None, deadline: datetime | None = None,  # type: ignore[override]
                   backoff: Backoff = Backoff(initial=5.0, maximum=60.0)) -> HealthStatus:
        """Wait until the pools are settled (kit health gate), visible as ``pools-settled``."""
        return await super().wait(PoolsSettledInput(baseline=baseline or {}), deadline=deadline, backoff=backoff)
