"""Simulated-time clock shared by the cluster simulator's store, server and agents.

Only *durations* are scaled: ``real_seconds = sim_seconds * time_scale``. Timestamps
written into objects (creationTimestamp, condition transition times, events) are the
real UTC wall clock, so clients see a consistent, monotonically advancing cluster.
With ``time_scale=0.01`` a simulated hour (the machine-config-daemon drain deadline)
lasts 36 real seconds.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime


class Clock:
    """Scales simulated durations to real ones.

    ``time_scale`` is real seconds per simulated second (> 0); 1.0 means real time.
    Raises ``ValueError`` for a non-positive scale.
    """

    def __init__(self, time_scale: float = 1.0) -> None:
        if time_scale <= 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale!r}")
        self.time_scale = float(time_scale)

    def real(self, sim_seconds: float) -> float:
        """Real seconds that ``sim_seconds`` of simulated time last (never negative)."""
        return max(0.0, sim_seconds * self.time_scale)

    async def sleep(self, sim_seconds: float) -> None:
        """Sleep for ``sim_seconds`` of simulated time."""
        await asyncio.sleep(self.real(sim_seconds))

    def now(self) -> datetime:
        """Real UTC wall-clock time (timestamps are not scaled)."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """Real monotonic seconds, for measuring real elapsed time."""
        return time.monotonic()
