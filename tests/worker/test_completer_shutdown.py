"""The Completer's calls submitted while the worker's loop shuts down: asyncio.run cancels the
tasks still pending, and the callback on their cancelled future must neither raise nor log
(concurrent.futures logs "exception calling callback" for a raising callback, and the worker
then prints it after "worker stopped", as CI saw in tests/deploy/test_shutdown.py)."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from activities.cluster.completion import Completer


def test_a_call_cancelled_by_the_loop_shutting_down_is_dropped_quietly(caplog: pytest.LogCaptureFixture) -> None:
    loop = asyncio.new_event_loop()
    started = threading.Event()
    outcomes: list[BaseException | None] = []

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    runner = threading.Thread(target=loop.run_forever)
    runner.start()
    completer = Completer(client=None, loop=loop)  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, logger="concurrent.futures"):
        completer._submit(forever(), "node worker-0000: heartbeat", outcomes.append)
        assert started.wait(5)

        async def cancel_all() -> None:  # what asyncio.run does with the tasks left at its end
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()
            await asyncio.sleep(0.05)

        asyncio.run_coroutine_threadsafe(cancel_all(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        runner.join(5)
    loop.close()
    assert outcomes == []  # no outcome reported for a call the shutdown dropped
    assert not [r for r in caplog.records if "exception calling callback" in r.getMessage()], caplog.text

    # After the loop closed, a call is dropped at submission (the server's timeouts retry it).
    async def never() -> None:  # pragma: no cover - closed before it runs
        raise AssertionError

    completer._submit(never(), "node worker-0000: complete", outcomes.append)
    assert outcomes == []
