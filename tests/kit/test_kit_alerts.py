"""The kit's alert gate (workflows.kit.alerts) on the time-skipping server, through the probe of
alert_probes.py, with a fake ``check_alerts`` activity registered by name: it waits while alerts
fire and passes when they clear; fail-closed blocks and says so; fail-open passes and warns; a
person overrides one wait with the ``proceed`` gate; an abort ends the wait at once; the Temporal
UI's current details name the blocking alerts (labels, since when) or say Prometheus cannot be asked."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from tests.support.alert_probes import AlertGateProbeWorkflow, AlertProbeInput, AlertProbeResult
from tests.support.kit_fakes import poll, refused
from temporalio import activity
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowHandle
from temporalio.worker import Worker

from activities.alerts.models import CHECK_ALERTS, ActiveAlert, AlertsAnswer, CheckAlertsInput
from workflows.kit.alerts import AlertGatePolicy
from workflows.kit.models import ApprovalRules, ControlInput, DecideInput, RejectInput
from workflows.kit.procedure import ProcedureWorkflow

URL = "http://prometheus.test:9090"
NODE_DOWN = ActiveAlert(name="KubeNodeNotReady", state="firing", active_at=datetime(2025, 1, 1, 10, 0, 3, tzinfo=UTC),
                        labels={"alertname": "KubeNodeNotReady", "node": "worker-2", "severity": "warning"},
                        value="0e+00", summary="Node is not ready.")
BRICK_DOWN = ActiveAlert(name="GlusterBrickStatus", state="firing", active_at=datetime(2025, 1, 1, 10, 1, 0, tzinfo=UTC),
                         labels={"alertname": "GlusterBrickStatus", "hostname": "10.0.0.12", "severity": "critical"})
FIRING = AlertsAnswer(ok=False, blocking=[NODE_DOWN], active=2, ignored=1, ignored_by={"filter": 1}, url=URL)
FIRING_MORE = AlertsAnswer(ok=False, blocking=[NODE_DOWN, BRICK_DOWN], active=3, ignored=1, ignored_by={"filter": 1}, url=URL)
CLEAR = AlertsAnswer(ok=True, active=1, ignored=1, ignored_by={"filter": 1}, url=URL)
DOWN = AlertsAnswer(ok=False, url=URL, error="ClientConnectorError: Cannot connect to host prometheus.test:9090")
NODE_LINE = 'KubeNodeNotReady{node="worker-2",severity="warning"} firing since 2025-01-01 10:00:03 UTC'
WHERE = "node/worker-1"
BOARD = f"alerts/{WHERE}"
GATE = f"{BOARD}/1"


class AlertsFake:
    """Scripted ``check_alerts``: ``answers`` in order, the last one repeated. From call
    ``hold_from`` on (1-based), a call waits for ``release`` first (``held`` is set)."""

    def __init__(self, *answers: AlertsAnswer, hold_from: int | None = None) -> None:
        self.answers = list(answers)
        self.calls: list[CheckAlertsInput] = []
        self.hold_from = hold_from
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    def activity(self) -> Callable[..., Any]:
        fake = self

        @activity.defn(name=CHECK_ALERTS)
        async def check_alerts(inp: CheckAlertsInput) -> AlertsAnswer:
            fake.calls.append(inp)
            if fake.hold_from is not None and len(fake.calls) >= fake.hold_from:
                fake.held.set()
                await fake.release.wait()
            return fake.answers.pop(0) if len(fake.answers) > 1 else fake.answers[0]

        return check_alerts


@asynccontextmanager
async def probe(env: Any, task_queue: str, fake: AlertsFake, **inp: Any) -> AsyncIterator[WorkflowHandle]:
    inp.setdefault("policy", AlertGatePolicy(url=URL, filter="^Watchdog$", poll_seconds=60))
    async with Worker(env.client, task_queue=task_queue, workflows=[AlertGateProbeWorkflow], activities=[fake.activity()]):
        yield await env.client.start_workflow(AlertGateProbeWorkflow.run, AlertProbeInput(**inp),
                                              id=f"alert-probe-{uuid.uuid4().hex[:8]}", task_queue=task_queue,
                                              result_type=AlertProbeResult)


def waiting_at(gate_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda s: any(g["id"] == gate_id and g["state"] == "waiting" for g in s["gates"])


async def test_waits_while_alerts_fire_and_passes_when_they_clear(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, AlertsFake(FIRING, FIRING_MORE, CLEAR)
    async with probe(env, wf_task_queue, fake) as h:
        st = await poll(h, waiting_at(GATE))
        hs = st["health"][BOARD]
        assert hs["state"] == "waiting" and hs["polls"] == 1 and hs["last"] == f"{NODE_LINE} (1 ignored)"
        gate = next(g for g in st["gates"] if g["id"] == GATE)
        assert gate["choices"] == ["proceed"] and gate["kind"] == "step"
        assert st["phase"] == "waiting-approval"
        assert st["waiting_for"] == (f"approval of gate {GATE}: alerts block {WHERE}: {NODE_LINE} (1 ignored); "
                                     f"decide proceed to start {WHERE} anyway")
        assert st["step"] == BOARD and st["step_doing"] == f"waiting for alerts to clear: {NODE_LINE} (1 ignored)"
        result = await h.result()  # the test server skips the 60 s timers
        st = await h.query("status", result_type=dict)
    assert st["health"][BOARD]["state"] == "ok" and st["health"][BOARD]["last"] == "no blocking alert (1 ignored)"
    answer = result.answers[0]
    assert (answer.outcome, answer.passed, answer.polls, answer.episode, answer.gate_id) == ("clear", True, 3, 1, GATE)
    assert (answer.until - answer.since).total_seconds() >= 120  # two durable timers between three checks
    assert answer.last is not None and answer.last.ok
    assert [c.filter for c in fake.calls] == ["^Watchdog$"] * 3 and fake.calls[0].url == URL
    # The override gate was opened with the wait and cancelled when the alerts cleared.
    assert [(r.gate_id, r.action, r.comment) for r in result.gate_history][1:] == [(GATE, "cancelled", "alerts cleared")]
    # One notification-worthy event per episode, then what changed and how it ended.
    assert [e.kind for e in result.events] == ["blocked", "changed", "cleared"]
    assert result.events[0].alerts == [NODE_LINE] and result.events[0].gate_id == GATE
    assert result.events[1].alerts == [NODE_LINE, BRICK_DOWN.line()]


async def test_passes_at_once_when_nothing_blocks(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, AlertsFake(CLEAR)
    async with probe(env, wf_task_queue, fake, wheres=["batch-1", "batch-2"]) as h:
        result = await h.result()
    assert [(a.where, a.outcome, a.polls, a.gate_id) for a in result.answers] == [("batch-1", "clear", 1, None),
                                                                                   ("batch-2", "clear", 1, None)]
    assert result.gate_history == [] and result.events == []


async def test_fail_closed_blocks_and_says_so(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, AlertsFake(DOWN, DOWN, CLEAR)
    async with probe(env, wf_task_queue, fake) as h:
        st = await poll(h, waiting_at(GATE))
        said = f"Prometheus could not be asked: {DOWN.error} (fail-closed: waiting)"
        assert st["health"][BOARD]["state"] == "waiting" and st["health"][BOARD]["last"] == said
        assert st["warnings"] == [f"{BOARD}: Prometheus could not be asked: {DOWN.error}; waiting (fail-closed)"]
        assert said in st["waiting_for"]
        result = await h.result()
    assert result.answers[0].outcome == "clear" and result.answers[0].polls == 3
    assert [e.kind for e in result.events] == ["blocked", "cleared"] and result.events[0].error == DOWN.error


async def test_fail_open_passes_and_warns(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, AlertsFake(DOWN)
    policy = AlertGatePolicy(url=URL, fail_open=True, poll_seconds=60)
    async with probe(env, wf_task_queue, fake, policy=policy, wheres=["node/a", "node/b"]) as h:
        result = await h.result()
        st = await h.query("status", result_type=dict)
    assert [(a.outcome, a.passed, a.polls) for a in result.answers] == [("fail-open", True, 1)] * 2
    assert result.gate_history == []  # nothing waited, nothing to override
    line = f"Prometheus could not be asked: {DOWN.error}; passed without the alert check (fail-open)"
    assert st["warnings"] == [f"alerts/node/a: {line}", f"alerts/node/b: {line}"]
    assert st["health"]["alerts/node/a"] == {**st["health"]["alerts/node/a"], "state": "ok", "last": line}
    assert [(e.kind, e.streak) for e in result.events] == [("fail-open", 1), ("fail-open", 2)]  # the kit tells the first


async def test_fail_open_after_alerts_still_waits_for_the_alerts(time_skipping_env, wf_task_queue):
    # Fail-open is about an unreachable Prometheus: alerts it reports still block.
    env, fake = time_skipping_env, AlertsFake(FIRING, DOWN)
    policy = AlertGatePolicy(url=URL, fail_open=True, poll_seconds=60)
    async with probe(env, wf_task_queue, fake, policy=policy) as h:
        await poll(h, waiting_at(GATE))
        result = await h.result()
    assert result.answers[0].outcome == "fail-open" and result.answers[0].polls == 2
    assert [e.kind for e in result.events] == ["blocked", "fail-open"]
    assert [(r.action, r.comment) for r in result.gate_history][1:] == [
        ("cancelled", "Prometheus could not be asked: passed (fail-open)")]


async def test_a_person_overrides_one_wait(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, AlertsFake(FIRING)
    rules = ApprovalRules(requested_by="alice", four_eyes=True)
    async with probe(env, wf_task_queue, fake, wheres=["node/a", "node/b"], rules=rules) as h:
        await poll(h, waiting_at("alerts/node/a/1"))
        decide = ProcedureWorkflow.decide

        def choice(who: str, what: str = "proceed") -> DecideInput:
            return DecideInput(node="alerts/node/a/1", gate_id="alerts/node/a/1", decision=what, identity=who,
                               comment="the node is being replaced")

        assert "four-eyes" in await refused(h.execute_update(decide, choice("alice")))
        assert "'skip' is not one of its choices (proceed)" in await refused(h.execute_update(decide, choice("bob", "skip")))
        res = await h.execute_update(decide, choice("bob"))
        assert res.message == "proceed decided on gate alerts/node/a/1 by bob"
        # Only that wait: the next place asks Prometheus again and waits again.
        st = await poll(h, waiting_at("alerts/node/b/1"))
        assert st["health"]["alerts/node/a"]["state"] == "ok"
        assert any("overridden by bob" in w for w in st["warnings"])
        await h.execute_update(ProcedureWorkflow.abort, ControlInput(identity="carol", reason="done for today"))
        result = await h.result()
    a, b = result.answers
    assert (a.outcome, a.passed, a.decided_by, a.gate_id) == ("overridden", True, "bob", "alerts/node/a/1")
    assert (b.outcome, b.passed) == ("stopped", False) and result.outcome == "aborted"
    decided = [r for r in result.gate_history if r.action == "decided"]
    assert [(r.gate_id, r.by, r.decision, r.comment) for r in decided] == [
        ("alerts/node/a/1", "bob", "proceed", "the node is being replaced")]
    assert [(e.kind, e.where) for e in result.events] == [("blocked", "node/a"), ("overridden", "node/a"),
                                                          ("blocked", "node/b"), ("stopped", "node/b")]
    assert result.events[1].by == "bob"


async def test_abort_ends_the_wait_between_checks(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, AlertsFake(FIRING)
    policy = AlertGatePolicy(url=URL, poll_seconds=3600)
    async with probe(env, wf_task_queue, fake, policy=policy) as h:
        await poll(h, waiting_at(GATE))
        await h.execute_update(ProcedureWorkflow.abort, ControlInput(identity="carol"))
        result = await h.result()
        st = await h.query("status", result_type=dict)
    answer = result.answers[0]
    assert answer.outcome == "stopped" and not answer.passed and answer.polls == 1
    assert (answer.until - answer.since).total_seconds() < 3600  # not after the timer
    assert [(r.gate_id, r.action) for r in result.gate_history] == [(GATE, "opened"), (GATE, "cancelled")]
    assert st["health"][BOARD]["state"] == "stopped" and len(fake.calls) == 1


async def test_abort_ends_the_wait_during_a_check(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, AlertsFake(FIRING, hold_from=2)
    async with probe(env, wf_task_queue, fake) as h:
        await poll(h, waiting_at(GATE))
        await env.sleep(61)  # the poll timer fires: the second check starts and hangs
        await asyncio.wait_for(fake.held.wait(), 20)
        await h.execute_update(ProcedureWorkflow.abort, ControlInput(identity="carol"))
        result = await asyncio.wait_for(h.result(), 20)  # the check in flight is not waited for
        fake.release.set()
    answer = result.answers[0]
    assert (answer.outcome, answer.polls, result.outcome) == ("stopped", 1, "aborted")
    assert len(fake.calls) == 2 and [e.kind for e in result.events] == ["blocked", "stopped"]


async def test_rejecting_the_override_keeps_waiting_for_the_alerts(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, AlertsFake(FIRING, FIRING, CLEAR)
    async with probe(env, wf_task_queue, fake) as h:
        await poll(h, waiting_at(GATE))
        await h.execute_update(ProcedureWorkflow.reject, RejectInput(gate_id=GATE, identity="bob", comment="wait for it"))
        st = await poll(h, lambda s: not waiting_at(GATE)(s))
        assert st["health"][BOARD]["state"] == "waiting"  # no gate, still waiting for the alerts
        result = await h.result()
    assert (result.answers[0].outcome, result.answers[0].polls) == ("clear", 3)
    assert [(r.action, r.by) for r in result.gate_history] == [("opened", "lockkeeper"), ("rejected", "bob")]


async def test_without_the_override_gate_status_shows_the_health_wait(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, AlertsFake(FIRING, CLEAR)
    policy = AlertGatePolicy(url=URL, filter="^Watchdog$", poll_seconds=60, override=False)
    async with probe(env, wf_task_queue, fake, policy=policy) as h:
        st = await poll(h, lambda s: s["health"].get(BOARD, {}).get("polls") == 1)
        assert st["gates"] == [] and st["phase"] == "running"
        assert st["waiting_for"] == f"health check {BOARD} ({NODE_LINE} (1 ignored))"
        result = await h.result()
    assert (result.answers[0].outcome, result.answers[0].gate_id, result.answers[0].episode) == ("clear", None, 1)
    assert result.gate_history == []
    assert [(e.kind, e.gate_id) for e in result.events] == [("blocked", None), ("cleared", None)]


async def ui_details(handle: WorkflowHandle) -> str:
    """The workflow's current details, as the Temporal UI reads them (the built-in metadata query)."""
    meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return meta.current_details


def _utc(iso: str) -> str:
    return datetime.fromisoformat(iso).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


async def test_the_ui_details_name_the_blocking_alerts_with_labels_and_since_when(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, AlertsFake(FIRING, CLEAR)
    async with probe(env, wf_task_queue, fake) as h:
        st = await poll(h, waiting_at(GATE))
        text = await ui_details(h)
        waiting_since = _utc(st["health"][BOARD]["since"])
        # The alert with its labels and since when it fires, where it blocks and since when it waits ...
        assert f"- `{BOARD}` waiting since {waiting_since}: {NODE_LINE} (1 ignored)" in text, text
        assert "**Blocking alerts**" in text
        # ... and the command that overrides this one wait.
        assert f"lockkeeper decide {h.id} {GATE} proceed -m REASON" in text, text
        await h.result()
        text = await ui_details(h)
    assert "Blocking alerts" not in text and NODE_LINE not in text, text


async def test_the_ui_details_say_when_prometheus_cannot_be_asked(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, AlertsFake(DOWN, CLEAR)
    async with probe(env, wf_task_queue, fake) as h:
        await poll(h, waiting_at(GATE))
        text = await ui_details(h)
        assert f"`{BOARD}` waiting since" in text
        assert f"Prometheus could not be asked: {DOWN.error} (fail-closed: waiting)" in text, text
        await h.result()
