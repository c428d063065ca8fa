"""The kit's Preflight in a procedure (time-skipping server, preflight_probe.py, fake activities
registered by name): a failed precondition refuses the procedure with one line per problem before
anything else runs (no write scheduled, the check is the only activity in history), the results
are in ``status.preconditions``, ``input`` checks are judged in the workflow, and a not-run
check blocks only in strict mode."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from tests.support.preflight_probe import PreflightProbeInput, PreflightProbeResult, PreflightProbeWorkflow
from temporalio import activity
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from activities.host.models import ExecBackend, HostAccess
from activities.preflight.models import (
    CHECK_PRECONDITIONS,
    CheckPreconditionsInput,
    CheckPreconditionsResult,
    InputCheck,
    LabelUnreferenced,
    NamesExist,
    PortFree,
    Precondition,
    PreconditionResult,
    PreconditionState,
    WorkerExecutable,
)
from workflows.kit.preflight import PRECONDITION_FAILED

SSH = HostAccess(backend=ExecBackend.SSH, host="10.0.0.20")


class FakeChecks:
    """``check_preconditions`` answering from ``answers`` (subject → state and its detail, or why
    not run; ok otherwise)
    and ``kit_step`` (a write): both record their calls."""

    def __init__(self, answers: dict[str, tuple[str, str]] | None = None) -> None:
        self.answers = answers or {}
        self.checked: list[list[Precondition]] = []
        self.writes: list[int] = []

    def activities(self) -> list[Any]:
        fake = self

        @activity.defn(name=CHECK_PRECONDITIONS)
        async def check_preconditions(inp: CheckPreconditionsInput) -> CheckPreconditionsResult:
            fake.checked.append(list(inp.preconditions))
            out = []
            for p in inp.preconditions:
                state, detail = fake.answers.get(p.subject(), ("ok", "fine"))
                not_run = state == "not-run"  # the text is then why it was not run
                out.append(PreconditionResult(precondition=p, state=PreconditionState(state), detail="" if not_run else detail,
                                              why_not_run=detail if not_run else None,
                                              checked_at=datetime.now(UTC)))
            return CheckPreconditionsResult(results=out)

        @activity.defn(name="kit_step")
        async def kit_step(i: int) -> int:
            fake.writes.append(i)
            return i

        return [check_preconditions, kit_step]


@asynccontextmanager
async def worker(env: Any, fake: FakeChecks, task_queue: str) -> AsyncIterator[Worker]:
    async with Worker(env.client, task_queue=task_queue, workflows=[PreflightProbeWorkflow], activities=fake.activities()) as w:
        yield w


async def start(env: Any, task_queue: str, inp: PreflightProbeInput) -> WorkflowHandle:
    return await env.client.start_workflow(PreflightProbeWorkflow.run, inp, id=f"preflight-{uuid.uuid4().hex[:8]}",
                                           task_queue=task_queue, result_type=PreflightProbeResult)


async def scheduled_activities(handle: WorkflowHandle) -> list[str]:
    history = await handle.fetch_history()
    return [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")]


PRECONDITIONS: list[Precondition] = [
    WorkerExecutable(program="ansible-playbook", why="the upgrade action runs it for each node"),
    PortFree(port=53, node="node01", access=SSH, why="the new VXLAN port"),
    NamesExist(names=["node01"], role="canary"),
    LabelUnreferenced(label="region", covered=["region=infra"]),
    InputCheck(about="--action-command", ok=False, detail="no {node} in the command: it would run on every node at once"),
]
FAILING = {
    "ansible-playbook on the worker": ("failed", "not found on the worker's PATH"),
    "port 53/udp on node01": ("failed", "a well-known cluster port: 53/tcp+udp (DNS)"),
    "node label region": ("not-run", "no master access given"),
}


async def test_a_failed_preflight_refuses_before_anything_else_runs(time_skipping_env, wf_task_queue) -> None:
    env, fake = time_skipping_env, FakeChecks(FAILING)
    async with worker(env, fake, wf_task_queue):
        handle = await start(env, wf_task_queue, PreflightProbeInput(preconditions=PRECONDITIONS, steps=3))
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
        status = await handle.query("status", result_type=dict)
    err = info.value.cause
    assert isinstance(err, ApplicationError) and err.type == PRECONDITION_FAILED and err.non_retryable
    assert err.message.split("\n") == [
        "ansible-playbook on the worker: not found on the worker's PATH (needed: the upgrade action runs it for each node)",
        "port 53/udp on node01: a well-known cluster port: 53/tcp+udp (DNS) (needed: the new VXLAN port)",
        "--action-command: no {node} in the command: it would run on every node at once",
    ]
    (details,) = err.details
    assert [d["state"] for d in details] == ["failed", "failed", "ok", "not-run", "failed"]
    assert [d["precondition"]["kind"] for d in details] == [p.kind for p in PRECONDITIONS]
    # Nothing ran before the refusal but the check, once, without the input check it judged itself.
    assert fake.writes == []
    assert await scheduled_activities(handle) == [CHECK_PRECONDITIONS]
    assert fake.checked == [PRECONDITIONS[:4]]
    assert [r["state"] for r in status["preconditions"]] == ["failed", "failed", "ok", "not-run", "failed"]
    assert status["preconditions"][4]["detail"].startswith("no {node}")


async def test_a_passing_preflight_lists_every_check_then_the_procedure_writes(time_skipping_env, wf_task_queue) -> None:
    env, fake = time_skipping_env, FakeChecks({"node label region": ("not-run", "no master access given")})
    checks = [*PRECONDITIONS[:4], InputCheck(about="--action-command", ok=True, detail="{node} is in the command")]
    async with worker(env, fake, wf_task_queue):
        handle = await start(env, wf_task_queue, PreflightProbeInput(preconditions=checks, steps=2))
        result = await handle.result()
        status = await handle.query("status", result_type=dict)
    assert fake.writes == [0, 1] and result.writes == 2
    assert [line.split()[0] for line in result.lines] == ["ok", "ok", "ok", "not", "ok"]
    assert result.lines[3] == "not run  label-unreferenced node label region: not run: no master access given"
    assert result.lines[4] == "ok       input              --action-command: {node} is in the command"
    assert await scheduled_activities(handle) == [CHECK_PRECONDITIONS, "kit_step", "kit_step"]
    assert len(status["preconditions"]) == 5


async def test_strict_mode_refuses_a_check_that_was_not_run(time_skipping_env, wf_task_queue) -> None:
    env, fake = time_skipping_env, FakeChecks({"node label region": ("not-run", "no master access given")})
    async with worker(env, fake, wf_task_queue):
        handle = await start(env, wf_task_queue, PreflightProbeInput(preconditions=[PRECONDITIONS[3]], strict=True))
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    err = info.value.cause
    assert isinstance(err, ApplicationError) and err.type == PRECONDITION_FAILED
    assert err.message == "node label region: not run: no master access given"
    assert fake.writes == []


async def test_input_checks_alone_need_no_activity(time_skipping_env, wf_task_queue) -> None:
    env, fake = time_skipping_env, FakeChecks()
    async with worker(env, fake, wf_task_queue):
        handle = await start(env, wf_task_queue, PreflightProbeInput(preconditions=[PRECONDITIONS[4]]))
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    assert isinstance(info.value.cause, ApplicationError) and info.value.cause.message.startswith("--action-command: no {node}")
    assert fake.checked == [] and await scheduled_activities(handle) == []
