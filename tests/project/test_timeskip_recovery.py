"""The time-skipping fixture's ``sleep`` survives its RPC failing (tests/support/timeskip.py).

The failure is a real one: the sleep RPC sent with a short client deadline while an extra
time-skipping lock (a stand-in for the rest of a loaded test server) keeps the clock at wall
speed, so the call times out on the client while the server sleeps on. A workflow's one-hour
timer shows whether time is held afterwards: with the SDK's lock back, it does not fire."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from temporalio import workflow
from temporalio.api.testservice.v1 import LockTimeSkippingRequest, SleepRequest, UnlockTimeSkippingRequest
from temporalio.service import RPCError
from temporalio.worker import Worker

from tests.support import timeskip


@workflow.defn(sandboxed=False)
class HourTimer:
    @workflow.run
    async def run(self) -> str:
        await asyncio.sleep(3600)
        return "rang"


def _short_deadline_sleep(env):
    """The SDK's sleep RPC, with a 0.3 s client deadline."""
    async def rpc_sleep(duration: float) -> None:
        req = SleepRequest()
        req.duration.FromTimedelta(timedelta(seconds=duration))
        await env.client.service_client.test_service.unlock_time_skipping_with_sleep(req, timeout=timedelta(seconds=0.3))
    return rpc_sleep


async def _assert_time_held(env) -> None:
    """With the hour-long timer pending, a held lock lets the clock move at wall speed only."""
    before = await env.get_current_time()
    await asyncio.sleep(0.5)
    moved = (await env.get_current_time()) - before
    assert moved < timedelta(minutes=1), f"time ran free: {moved} in 0.5 s of wall time"


async def _extra_lock(env, release_after: float | None) -> None:
    test_service = env.client.service_client.test_service
    await test_service.lock_time_skipping(LockTimeSkippingRequest())
    if release_after is not None:
        async def release() -> None:
            await asyncio.sleep(release_after)
            await test_service.unlock_time_skipping(UnlockTimeSkippingRequest())
        asyncio.get_running_loop().create_task(release())


async def test_a_failed_sleep_rpc_waits_for_the_servers_sleep(time_skipping_env, wf_task_queue):
    env = time_skipping_env
    rpc_sleep = _short_deadline_sleep(env)
    async with Worker(env.client, task_queue=wf_task_queue, workflows=[HourTimer]):
        await env.client.start_workflow(HourTimer.run, id=f"hour-{uuid.uuid4().hex[:6]}", task_queue=wf_task_queue)
        await _assert_time_held(env)

        # The RPC does fail: the clock moves at wall speed, the deadline comes first.
        await _extra_lock(env, release_after=1.0)
        start = await env.get_current_time()
        with pytest.raises(RPCError):
            await rpc_sleep(60)
        await asyncio.sleep(1.5)  # the extra lock goes; the server's sleep ends and relocks
        assert (await env.get_current_time()) - start >= timedelta(seconds=60)
        await _assert_time_held(env)

        # The recovering sleep: the same failure, then the minute passed and the lock is back.
        done = len(timeskip.recoveries)
        await _extra_lock(env, release_after=1.0)
        start = await env.get_current_time()
        await timeskip.recovering_sleep(env, 60, rpc_sleep=rpc_sleep)
        assert (await env.get_current_time()) - start >= timedelta(seconds=60)
        assert len(timeskip.recoveries) == done + 1 and "sleep(60 s)" in timeskip.recoveries[-1]
        await _assert_time_held(env)

        # The fixture's env.sleep is the recovering one, and works as usual.
        start = await env.get_current_time()
        await env.sleep(5)
        assert (await env.get_current_time()) - start >= timedelta(seconds=5)
        assert len(timeskip.recoveries) == done + 1
        await _assert_time_held(env)


async def test_a_sleep_whose_clock_never_gets_there_raises(time_skipping_env, wf_task_queue):
    env = time_skipping_env
    done = len(timeskip.recoveries)
    await _extra_lock(env, release_after=None)  # time stays at wall speed: 60 s never come in 1 s
    with pytest.raises(RPCError):
        await timeskip.recovering_sleep(env, 60, rpc_sleep=_short_deadline_sleep(env), wall_bound=1.0)
    assert len(timeskip.recoveries) == done
