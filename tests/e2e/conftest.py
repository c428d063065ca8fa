"""End-to-end fixtures: clustersim in the test's event loop, lockkeeper workers as child processes
(so they can be SIGKILLed), the session's embedded Temporal dev server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from clustersim import ClusterSim

pytestmark = pytest.mark.e2e


@pytest_asyncio.fixture(loop_scope="session")
async def worker_for(
    dev_server: Any, worker_process_factory: Callable[..., Any], task_queue: str
) -> Callable[..., Awaitable[Any]]:
    """``await worker_for(sim)`` → a started worker process on the session dev server and the
    test's task queue, pointed at ``sim``'s kubeconfig."""

    async def make(sim: ClusterSim, **kwargs: Any) -> Any:
        proc = worker_process_factory(
            address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue, **kwargs
        )
        await proc.start()
        return proc

    return make
