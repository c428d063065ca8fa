"""A time-skipping ``sleep`` that survives its RPC failing while the test server sleeps on.

``WorkflowEnvironment.sleep(d)`` on the Java time-skipping test server is one blocking RPC
(``UnlockTimeSkippingWithSleep``, sdk-java ``TestService.unlockTimeSkippingWhileSleep``): the
server schedules "take the lock again at now + d", drops the SDK's time-skipping lock, and answers
once that timer has fired. The SDK sends it without retries and with a 30 s deadline, so a
sleep that takes longer in wall time fails the test: when the server holds its clock at wall
speed (it does while any workflow task is outstanding, and a loaded worker can keep one
outstanding for long). The failure reads ``Timeout expired``, or, when the server's own
deadline resets the stream first, ``h2 protocol error: http2 error`` (1 call in 10 to 20 here;
CI failed once so, in issue 16's 3,000-node test). The server goes on all the same: its timer
still fires at now + d and takes the lock back, the same end state as a sleep that answered.

``recovering_sleep`` waits for exactly that: on an RPCError it watches the test clock until it has
passed now + d, then returns as the sleep would have. If the clock does not get there within
``wall_bound`` seconds of wall time (the request never reached the server, and time stays
locked), or the server stops answering, it re-raises the original error.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

log = logging.getLogger(__name__)

WALL_BOUND_SECONDS = 120.0
"""How long a failed sleep waits, in wall-clock seconds, for the test clock to pass its end."""

recoveries: list[str] = []
"""One line per recovered sleep in this process (what failed, and when), for the tests."""


async def recovering_sleep(env: WorkflowEnvironment, duration: timedelta | float, *,
                           rpc_sleep: Callable[[timedelta | float], Awaitable[None]],
                           wall_bound: float = WALL_BOUND_SECONDS) -> None:
    """Sleep ``duration`` (a timedelta or seconds) of ``env``'s test time through ``rpc_sleep``
    (the SDK's sleep), and recover from its RPC failing as the module docstring says.

    Raises the RPCError of ``rpc_sleep`` when the test clock does not pass the sleep's end
    within ``wall_bound`` seconds, or the server stops answering."""
    seconds = duration.total_seconds() if isinstance(duration, timedelta) else float(duration)
    start = await env.get_current_time()
    try:
        await rpc_sleep(duration)
        return
    except RPCError as err:
        failure = err
    end = start + timedelta(seconds=seconds)
    give_up = time.monotonic() + wall_bound
    while True:
        try:
            now = await env.get_current_time()
        except RPCError:
            raise failure from None
        if now >= end:
            break
        if time.monotonic() > give_up:
            raise failure
        await asyncio.sleep(0.05)
    recoveries.append(f"sleep({seconds:g} s) from {start.isoformat()}: {failure}")
    log.warning("time-skipping sleep(%g s) failed (%s) while the server slept on; its clock passed "
                "the end and took the lock back", seconds, failure)


def make_sleep_recover(env: WorkflowEnvironment) -> WorkflowEnvironment:
    """Replace ``env.sleep`` (a time-skipping environment's) with ``recovering_sleep`` over the
    SDK's own; return ``env``. Other environments are returned unchanged."""
    if env.supports_time_skipping:
        env.sleep = functools.partial(recovering_sleep, env, rpc_sleep=env.sleep)  # type: ignore[method-assign]
    return env
