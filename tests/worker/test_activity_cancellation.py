"""Synchronous activities are cancelled cooperatively, never by an exception raised into their
thread.

By default the SDK raises ``CancelledError`` into a cancelled synchronous activity's thread
(``PyThreadState_SetAsyncExc``), wherever that thread is. In a 5,000-node benchmark a burst of
heartbeat timeouts cancelled hundreds of watches and drains at once; one exception landed between
a logging handler's ``acquire()`` and its ``try``, the lock stayed held, and every thread of the
worker, the event loop's included, then waited on it for good (py-spy: 181 threads in
``Handler.acquire``). The same can leave a urllib3 pool or the gateway's locks broken. Our
activities check for cancellation themselves (``activities.context.check_cancelled`` and
``pause``, and watch windows of at most a heartbeat interval), so every synchronous activity is
declared with ``no_thread_cancel_exception=True``."""

from __future__ import annotations

import inspect
import logging
import threading
import time

import pytest
from temporalio import activity
from temporalio.exceptions import CancelledError
from temporalio.testing import ActivityEnvironment

from activities.context import check_cancelled
from activities.kube.gateway import KubeGateway
from workers import registry


def _registered() -> list:
    gateway = KubeGateway.__new__(KubeGateway)  # never called: the activities use their gateway only when they run
    return [*registry.build_activities(gateway), *registry.build_host_activities()]


def test_every_synchronous_activity_is_cancelled_cooperatively() -> None:
    acts = _registered()
    sync = [fn for fn in acts if not inspect.iscoroutinefunction(fn)]
    assert len(sync) > 40, len(sync)
    raised_into = [
        activity._Definition.must_from_callable(fn).name
        for fn in sync
        if not activity._Definition.must_from_callable(fn).no_thread_cancel_exception
    ]
    assert raised_into == []


def test_a_cancelled_activity_ends_at_its_own_check_with_the_logging_lock_free() -> None:
    """An activity that logs in a loop and checks for cancellation ends with CancelledError from
    its own check; the root handler's lock is free afterwards."""
    started = threading.Event()

    @activity.defn(name="logs_until_cancelled", no_thread_cancel_exception=True)
    def logs_until_cancelled() -> None:
        while True:
            started.set()
            activity.logger.info("still here")
            check_cancelled()
            time.sleep(0.001)

    env = ActivityEnvironment()
    result: list[BaseException] = []

    def run() -> None:
        try:
            env.run(logs_until_cancelled)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            result.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(10)
    env.cancel()
    thread.join(10)
    assert not thread.is_alive()
    assert len(result) == 1 and isinstance(result[0], CancelledError)
    for handler in logging.getLogger().handlers:
        assert handler.lock is None or handler.lock.acquire(timeout=1)
        if handler.lock is not None:
            handler.lock.release()


@pytest.mark.parametrize("name", ["wait_for_node", "wait_for_node_done", "drain_when_asked", "drain_node", "list_pool_nodes"])
def test_the_long_running_node_activities_are_among_them(name: str) -> None:
    names = {activity._Definition.must_from_callable(fn).name: fn for fn in _registered()}
    assert activity._Definition.must_from_callable(names[name]).no_thread_cancel_exception
