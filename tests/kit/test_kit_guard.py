"""The kit guard (:mod:`workflows.kit.guard`) inside a procedure, on the time-skipping server:
a guard that holds lets the step run; one that does not refuses it with what is behind (in the
refusal, in ``guard_behind`` and in the ``health`` board); the waiting form passes once the check
holds and refuses at its deadline. The check is a fake activity registered by name."""

from __future__ import annotations

import uuid
from typing import Any

from tests.support.kit_guard_probe import PROBE_CHECK, GuardProbeInput, GuardProbeResult, GuardProbeStatus, GuardProbeWorkflow, ProbeAnswer
from temporalio import activity
from temporalio.worker import Worker


class Answers:
    """``answers`` given in order (the last one repeats); ``asked`` what each call got."""

    def __init__(self, *answers: ProbeAnswer) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    @activity.defn(name=PROBE_CHECK)
    async def check(self, what: str) -> ProbeAnswer:
        self.asked.append(what)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


async def run_probe(env: Any, tq: str, answers: Answers, inp: GuardProbeInput) -> tuple[GuardProbeResult, GuardProbeStatus]:
    async with Worker(env.client, task_queue=tq, workflows=[GuardProbeWorkflow], activities=[answers.check]):
        h = await env.client.start_workflow(GuardProbeWorkflow.run, inp, id=f"guard-{uuid.uuid4().hex[:8]}", task_queue=tq,
                                            result_type=GuardProbeResult)
        result = await h.result()
        st = await h.query(GuardProbeWorkflow.status, result_type=GuardProbeStatus)
    return result, st


async def test_guard_that_holds_lets_the_step_run(time_skipping_env, wf_task_queue):
    answers = Answers(ProbeAnswer(ok=True))
    result, st = await run_probe(time_skipping_env, wf_task_queue, answers, GuardProbeInput(what="pools"))
    assert result.outcome == "completed" and result.acted
    assert answers.asked == ["pools"], "one fresh check with the procedure's argument"
    assert st.health["probe-settled"].state == "ok" and st.health["probe-settled"].last == "all settled"
    assert st.guard_behind == []


async def test_guard_that_does_not_hold_refuses_naming_what_is_behind(time_skipping_env, wf_task_queue):
    behind = [f"pool p{i} on rendered-old" for i in range(7)]
    answers = Answers(ProbeAnswer(ok=False, behind=behind))
    result, st = await run_probe(time_skipping_env, wf_task_queue, answers, GuardProbeInput())
    assert result.outcome == "refused" and not result.acted
    assert result.refusal_type == "ProbeNotSettled"
    assert result.message == "refusing: the probe's things are not settled: " + "; ".join(behind)
    assert result.behind == behind and st.guard_behind == behind
    hs = st.health["probe-settled"]
    assert hs.state == "waiting" and hs.last == "; ".join(behind[:5]), "the board shows the first five"


async def test_waiting_guard_passes_once_the_check_holds(time_skipping_env, wf_task_queue):
    answers = Answers(*[ProbeAnswer(ok=False, behind=["worker 1/3 updated"])] * 3, ProbeAnswer(ok=True))
    result, st = await run_probe(time_skipping_env, wf_task_queue, answers, GuardProbeInput(mode="wait", deadline_seconds=600))
    assert result.outcome == "completed" and result.acted
    assert len(answers.asked) == 5, "four polls of the wait, then the fresh check before the step"
    assert st.health["probe-settled"].state == "ok"


async def test_waiting_guard_refuses_at_its_deadline(time_skipping_env, wf_task_queue):
    answers = Answers(ProbeAnswer(ok=False, behind=["worker 1/3 updated"]))
    result, _ = await run_probe(time_skipping_env, wf_task_queue, answers, GuardProbeInput(mode="wait", deadline_seconds=30))
    # polls at t=0, 5, 15, 25 (backoff 5, 10, 10) and t=35 past the deadline; then the require.
    assert result.outcome == "refused" and not result.acted and result.behind == ["worker 1/3 updated"]
    assert len(answers.asked) == 6
