"""Fake activities for the kit's probes (kit_probes.py), registered under their names, plus the
helpers the kit tests share (worker, start, status polling, update refusals).

``KitFake`` holds the fake world: ``step_started`` / ``step_release`` gate the ``kit_step``
activity so a test can act while a step runs; ``health_answers`` scripts ``kit_health``;
``target_fail`` names targets whose ``kit_target_step`` fails; ``objects`` is an in-memory API
(JSON documents) for the record activities, which apply RFC 6902 patches with ``jsonpatch``
(``test`` ops included) as the API server does; ``host_script`` scripts ``run_node_command``.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import jsonpatch
import pytest
from jsonpointer import resolve_pointer
from tests.support.wf_fakes import preflight_activity  # noqa: F401 - re-exported for the kit tests
from tests.support.kit_probes import PROBES, ProbeInput, ProbeResult
from temporalio import activity
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from activities.cluster.models import (
    CHECK_CLUSTER_HEALTH,
    ClusterHealthInput,
    ClusterHealthResult,
    FieldRecord,
    FieldValue,
    PatchObjectInput,
    PatchObjectResult,
    RestoreFieldsInput,
    RestoreFieldsResult,
    SnapshotFieldsInput,
)
from activities.host.models import CommandResult, RunCommandInput
from workflows import WORKFLOWS

_ABSENT = object()


def _field(obj: dict[str, Any], path: str) -> FieldValue:
    value = resolve_pointer(obj, path, _ABSENT)
    return FieldValue(path=path, present=False) if value is _ABSENT else FieldValue(path=path, present=True, value=copy.deepcopy(value))


class KitFake:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.step_started = asyncio.Event()
        self.step_release = asyncio.Event()
        self.step_release.set()
        self.health_answers: list[tuple[bool, str]] = []
        self.target_fail: dict[str, str] = {}
        self.objects: dict[str, dict[str, Any]] = {}
        self.host_script: dict[str, list[Any]] = {}
        #: answers of ``cat /proc/sys/kernel/random/boot_id`` in order, the last one kept (None: no answer)
        self.boot_ids: list[str | None] = []
        #: object key -> {path: value} a "controller" puts back after every write (read-back tests)
        self.sticky: dict[str, dict[str, Any]] = {}
        #: answers of ``check_cluster_health`` in order, the last one kept: a list of not-Ready node names
        self.cluster_health: list[list[str]] = []

    def called(self, name: str) -> list[Any]:
        return [a for n, a in self.calls if n == name]

    def activities(self) -> list[Callable]:
        fake = self

        @activity.defn(name="kit_step")
        async def kit_step(i: int) -> int:
            fake.calls.append(("kit_step", i))
            fake.step_started.set()
            await fake.step_release.wait()
            return i

        @activity.defn(name="kit_health")
        async def kit_health(_: Any) -> tuple[bool, str]:
            fake.calls.append(("kit_health", None))
            return fake.health_answers.pop(0) if fake.health_answers else (True, "healthy")

        @activity.defn(name="kit_target_step")
        async def kit_target_step(target: str) -> str:
            fake.calls.append(("kit_target_step", target))
            if target in fake.target_fail:
                raise ApplicationError(fake.target_fail[target], type="StepFailed", non_retryable=True)
            return f"{target} ok"

        def key(ref: Any) -> str:
            return ref.describe()

        @activity.defn(name="snapshot_fields")
        async def snapshot_fields(inp: SnapshotFieldsInput) -> FieldRecord:
            fake.calls.append(("snapshot_fields", inp))
            obj = fake.objects[key(inp.ref)]
            return FieldRecord(ref=inp.ref, resource_version=obj["metadata"]["resourceVersion"],
                               fields=[_field(obj, p) for p in inp.paths])

        def write(ref: Any, ops: list[dict[str, Any]]) -> None:
            obj = fake.objects[key(ref)]
            try:
                new = jsonpatch.apply_patch(obj, ops)
            except jsonpatch.JsonPatchTestFailed as exc:
                raise ApplicationError(f"{ref.describe()} changed since it was recorded: {exc}", type="RecordChanged",
                                       non_retryable=True) from None
            new["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
            for path, value in fake.sticky.get(key(ref), {}).items():
                new = jsonpatch.apply_patch(new, [{"op": "add", "path": path, "value": value}])
            fake.objects[key(ref)] = new

        @activity.defn(name="patch_object")
        async def patch_object(inp: PatchObjectInput) -> PatchObjectResult:
            fake.calls.append(("patch_object", inp))
            tests = [{"op": "test", "path": f.path, "value": f.value} for f in (inp.record.fields if inp.record else []) if f.present]
            write(inp.ref, tests + list(inp.ops))
            return PatchObjectResult(changed=True, resource_version=fake.objects[key(inp.ref)]["metadata"]["resourceVersion"])

        @activity.defn(name="restore_fields")
        async def restore_fields(inp: RestoreFieldsInput) -> RestoreFieldsResult:
            fake.calls.append(("restore_fields", inp))
            tests = [{"op": "test", "path": p, "value": v} for p, v in inp.expected.items()]
            ops = [{"op": "add", "path": f.path, "value": f.value} if f.present else {"op": "remove", "path": f.path}
                   for f in inp.record.fields]
            write(inp.record.ref, tests + ops)
            now = fake.objects[key(inp.record.ref)]
            differences = [f"{f.path}: recorded {f.value!r}, now {_field(now, f.path).value!r}" for f in inp.record.fields
                           if _field(now, f.path) != f]
            return RestoreFieldsResult(restored=[f.path for f in inp.record.fields], differences=differences)

        @activity.defn(name="run_node_command")
        async def run_node_command(inp: RunCommandInput) -> CommandResult:
            fake.calls.append(("run_node_command", inp))
            if inp.argv[:2] == ["cat", "/proc/sys/kernel/random/boot_id"] and fake.boot_ids:
                bid = fake.boot_ids.pop(0) if len(fake.boot_ids) > 1 else fake.boot_ids[0]
                return CommandResult(argv=inp.argv, exit_code=0, stdout=bid + "\n") if bid else CommandResult(argv=inp.argv, exit_code=255)
            script = fake.host_script.get(inp.argv[0], [])
            answer = script.pop(0) if script else 0
            if isinstance(answer, Exception):
                raise answer
            if answer == "timeout":
                return CommandResult(argv=inp.argv, exit_code=None, timed_out=True, stderr="killed after timeout")
            if answer == "lost":  # the session ended mid-command: no exit status
                return CommandResult(argv=inp.argv, exit_code=None)
            return CommandResult(argv=inp.argv, exit_code=int(answer), stdout="ok" if answer == 0 else "", stderr="" if answer == 0 else "boom")

        @activity.defn(name=CHECK_CLUSTER_HEALTH)
        async def check_cluster_health(inp: ClusterHealthInput) -> ClusterHealthResult:
            fake.calls.append(("check_cluster_health", activity.info().task_queue))
            bad = (fake.cluster_health.pop(0) if len(fake.cluster_health) > 1 else fake.cluster_health[0]) if fake.cluster_health else []
            return ClusterHealthResult(ok=not bad, nodes=3, not_ready_nodes=list(bad))

        return [kit_step, kit_health, kit_target_step, snapshot_fields, patch_object, restore_fields, run_node_command,
                check_cluster_health]


@asynccontextmanager
async def kit_worker(env: Any, fake: KitFake, task_queue: str, extra: Sequence[Callable] = ()) -> AsyncIterator[Worker]:
    """A worker for the probes, every lockkeeper workflow (leases), ``fake``'s activities and
    ``extra`` ones (e.g. a ``check_preconditions`` stand-in)."""
    async with Worker(env.client, task_queue=task_queue, workflows=[*PROBES, *WORKFLOWS],
                      activities=[*fake.activities(), *extra]) as w:
        yield w


async def start_probe(env: Any, task_queue: str, wf: type, inp: ProbeInput, wf_id: str | None = None) -> WorkflowHandle:
    return await env.client.start_workflow(wf.run, inp, id=wf_id or f"probe-{uuid.uuid4().hex[:8]}", task_queue=task_queue,
                                           result_type=ProbeResult)


async def status_of(handle: WorkflowHandle) -> dict[str, Any]:
    return await handle.query("status", result_type=dict)


async def poll(handle: WorkflowHandle, pred: Callable[[dict[str, Any]], bool], timeout: float = 20) -> dict[str, Any]:
    """Poll ``status`` (as a dict) until ``pred`` holds; fails with the last status."""
    loop = asyncio.get_running_loop()
    end, last = loop.time() + timeout, None
    while loop.time() < end:
        last = await status_of(handle)
        if pred(last):
            return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"condition not reached; last status: {last}")


async def refused(coro: Any) -> str:
    """Run an update its validator must refuse; return the refusal message."""
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await coro
    cause = info.value.cause
    assert isinstance(cause, ApplicationError)
    return cause.message


def gate_waiting(gate_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda s: any(g["id"] == gate_id and g["state"] == "waiting" for g in s["gates"])
