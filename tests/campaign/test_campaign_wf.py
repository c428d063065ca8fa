"""CampaignWorkflow's control reaching its children (time-skipping server, kit probes as the
clusters' procedure, fake activities by name): pause of the campaign pauses every running child
and resume resumes them; abort aborts them, each ending as its own procedure's abort does."""

from __future__ import annotations

import uuid

from tests.support.kit_fakes import KitFake, kit_worker, poll, preflight_activity, status_of
from tests.support.kit_probes import StepsProbeWorkflow
from tests.support.replay import record

from workflows.campaign.models import CampaignInput, CampaignResult
from workflows.campaign.workflow import CampaignWorkflow
from workflows.kit.models import ControlInput, RejectInput
from workflows.kit.procedure import ProcedureWorkflow


def _campaign(steps: int) -> CampaignInput:
    return CampaignInput(procedure="probe", workflow_type=StepsProbeWorkflow.__name__, input={"steps": steps},
                         clusters=[{"name": "a"}, {"name": "b"}], waves="2", approve_each="none", search_attributes=False)


async def _started(env, task_queue: str, steps: int):
    cid = f"campaign-{uuid.uuid4().hex[:8]}"
    h = await env.client.start_workflow(CampaignWorkflow.run, _campaign(steps), id=cid, task_queue=task_queue,
                                        result_type=CampaignResult)
    await poll(h, lambda s: [c["state"] for c in s["clusters"]] == ["running", "running"])
    return h, [env.client.get_workflow_handle(f"{cid}/{n}") for n in ("a", "b")]


async def test_pause_and_resume_of_the_campaign_reach_every_running_child(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    fake.step_release.clear()
    async with kit_worker(env, fake, wf_task_queue, [preflight_activity()]):
        h, children = await _started(env, wf_task_queue, steps=2)
        await poll(h, lambda s: len(fake.called("kit_step")) == 2)  # each child is in its first step
        await h.execute_update(ProcedureWorkflow.pause, ControlInput(identity="bob", reason="change freeze"))
        for child in children:
            st = await poll(child, lambda s: s["phase"] == "paused")
            assert "campaign paused: change freeze" in st["paused_reason"]
        fake.step_release.set()  # the steps in flight finish; no child starts its next one
        for child in children:
            await poll(child, lambda s: s["phase"] == "paused" and s["waiting_for"].startswith("resume"))
        assert len(fake.called("kit_step")) == 2
        await h.execute_update(ProcedureWorkflow.resume, ControlInput(identity="bob"))
        res = await h.result()
        await record(h, "CampaignWorkflow.pause-resume")
    assert res.outcome == "completed", res.message
    assert [c.state for c in res.clusters] == ["done", "done"]
    assert len(fake.called("kit_step")) == 4


async def test_abort_of_the_campaign_aborts_every_running_child(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    fake.step_release.clear()
    async with kit_worker(env, fake, wf_task_queue, [preflight_activity()]):
        h, children = await _started(env, wf_task_queue, steps=3)
        await poll(h, lambda s: len(fake.called("kit_step")) == 2)
        await h.execute_update(ProcedureWorkflow.abort, ControlInput(identity="bob", reason="wrong fleet"))
        for child in children:  # the campaign's abort reaches each child while its step runs
            await poll(child, lambda s: s["abort_requested"])
        fake.step_release.set()
        res = await h.result()
        child_results = [await c.result() for c in children]
        st = await status_of(h)
    assert res.outcome == "aborted" and res.message == "wrong fleet"
    assert [c.state for c in res.clusters] == ["aborted", "aborted"]
    for r in child_results:  # each ended as the probe's own abort ends: at its next safe point
        assert r["outcome"] == "aborted" and "campaign aborted: wrong fleet" in r["detail"] and r["done"] == ["0"]
    assert st["phase"] == "aborted"


async def test_no_more_clusters_in_flight_than_the_cap(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    fake.step_release.clear()
    inp = CampaignInput(procedure="probe", workflow_type=StepsProbeWorkflow.__name__, input={"steps": 1},
                        clusters=[{"name": n} for n in "abcd"], waves="4", max_clusters_in_flight=2, approve_each="none",
                        search_attributes=False)
    async with kit_worker(env, fake, wf_task_queue, [preflight_activity()]):
        h = await env.client.start_workflow(CampaignWorkflow.run, inp, id=f"campaign-{uuid.uuid4().hex[:8]}",
                                            task_queue=wf_task_queue, result_type=CampaignResult)
        st = await poll(h, lambda s: len(fake.called("kit_step")) == 2)
        assert [c["state"] for c in st["clusters"]] == ["running", "running", "pending", "pending"]
        fake.step_release.set()
        res = await h.result()
        events = [e async for e in h.fetch_history_events()]
    assert res.outcome == "completed" and [c.state for c in res.clusters] == ["done"] * 4
    in_flight = peak = 0
    for e in events:  # the history itself: children started and not yet closed
        name = e.WhichOneof("attributes")
        if name == "start_child_workflow_execution_initiated_event_attributes":
            in_flight += 1
            peak = max(peak, in_flight)
        elif name == "child_workflow_execution_completed_event_attributes":
            in_flight -= 1
    assert peak == 2


async def test_the_next_wave_waits_for_the_soak(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    inp = CampaignInput(procedure="probe", workflow_type=StepsProbeWorkflow.__name__, input={"steps": 1},
                        clusters=[{"name": "a"}, {"name": "b"}], waves="1,rest", soak_seconds=3600, soak_checks=None,
                        approve_each="none", search_attributes=False)
    async with kit_worker(env, fake, wf_task_queue, [preflight_activity()]):
        h = await env.client.start_workflow(CampaignWorkflow.run, inp, id=f"campaign-{uuid.uuid4().hex[:8]}",
                                            task_queue=wf_task_queue, result_type=CampaignResult)
        res = await h.result()  # the test server skips the hour
        events = [e async for e in h.fetch_history_events()]
    assert res.outcome == "completed" and [c.state for c in res.clusters] == ["done", "done"]
    a, b = res.clusters
    assert (b.started_at - a.ended_at).total_seconds() >= 3600, "wave 2 started only after the soak"
    timers = [e.timer_started_event_attributes.start_to_fire_timeout.seconds for e in events
              if e.WhichOneof("attributes") == "timer_started_event_attributes"]
    assert timers == [3600]


async def test_the_soak_restarts_while_a_completed_cluster_is_unhealthy(time_skipping_env, wf_task_queue):
    """The soak's checks run on the completed clusters (issue 38): a node NotReady in cluster a
    after its wave keeps wave 2 waiting and restarts the soak; once a is healthy again, wave 2
    starts a full soak later. The check ran on the cluster's own queue."""
    env, fake = time_skipping_env, KitFake()
    fake.cluster_health = [[], ["a-node-2"], ["a-node-2"], []]  # green, red, red, then green for good
    inp = CampaignInput(procedure="probe", workflow_type=StepsProbeWorkflow.__name__, input={"steps": 1},
                        clusters=[{"name": "a"}, {"name": "b"}], waves="1,rest", soak_seconds=600,
                        soak_checks={"poll_seconds": 60, "red_timeout_seconds": 3600}, approve_each="none",
                        search_attributes=False)
    async with kit_worker(env, fake, wf_task_queue, [preflight_activity()]):
        h = await env.client.start_workflow(CampaignWorkflow.run, inp, id=f"campaign-{uuid.uuid4().hex[:8]}",
                                            task_queue=wf_task_queue, result_type=CampaignResult)
        res = await h.result()
    assert res.outcome == "completed" and [c.state for c in res.clusters] == ["done", "done"]
    checks = fake.called("check_cluster_health")
    assert checks and set(checks) == {wf_task_queue}, checks  # cluster a's queue (the test's own here)
    a, b = res.clusters
    # green at 0, red at 60 and 120 (the soak starts again), green from 180: wave 2 at 180 + 600
    waited = (b.started_at - a.ended_at).total_seconds()
    assert 780 <= waited < 900, waited
    assert len(checks) >= 4 + 600 // 60 - 1, len(checks)
    assert a.health is not None and a.health.startswith("healthy"), a.health


async def test_a_soak_red_too_long_asks_a_person(time_skipping_env, wf_task_queue):
    """Red beyond ``red_timeout_seconds``: gate ``soak/2/1`` names the cluster and what is
    wrong; rejecting it aborts the campaign before wave 2."""
    env, fake = time_skipping_env, KitFake()
    fake.cluster_health = [["a-node-2"]]
    inp = CampaignInput(procedure="probe", workflow_type=StepsProbeWorkflow.__name__, input={"steps": 1},
                        clusters=[{"name": "a"}, {"name": "b"}], waves="1,rest", soak_seconds=600,
                        soak_checks={"poll_seconds": 60, "red_timeout_seconds": 300}, approve_each="none",
                        search_attributes=False)
    async with kit_worker(env, fake, wf_task_queue, [preflight_activity()]):
        h = await env.client.start_workflow(CampaignWorkflow.run, inp, id=f"campaign-{uuid.uuid4().hex[:8]}",
                                            task_queue=wf_task_queue, result_type=CampaignResult)
        await poll(h, lambda s: s["clusters"][0]["health"] is not None)
        await env.sleep(400)  # the test server skips past the red timeout
        st = await poll(h, lambda s: any(g["id"] == "soak/2/1" and g["state"] == "waiting" for g in s["gates"]))
        gate = next(g for g in st["gates"] if g["id"] == "soak/2/1")
        assert "a: nodes not Ready: a-node-2" in gate["comment"], gate
        assert [c["state"] for c in st["clusters"]] == ["done", "pending"]
        await h.execute_update(ProcedureWorkflow.reject, RejectInput(gate_id="soak/2/1", identity="bob", comment="node broken"))
        res = await h.result()
    assert res.outcome == "aborted" and "soak/2/1" in res.message
    assert [c.state for c in res.clusters] == ["done", "not-started"]


async def test_no_cluster_starts_outside_the_campaign_window(time_skipping_env, wf_task_queue):
    """Issue 40's windows on the campaign level: closed now, so nothing starts; the window opens
    and the canary starts and ends; the wave gate is answered after the window closed (gates may
    be answered at any time), so the next cluster waits for the next day's window."""
    from datetime import timedelta

    from workflows.kit.models import ApproveInput

    env, fake = time_skipping_env, KitFake()
    opens = (await env.get_current_time()).replace(second=0, microsecond=0) + timedelta(hours=1)
    closes = opens + timedelta(hours=1)
    spec = f"daily {opens:%H:%M}-{closes:%H:%M} UTC"
    inp = _campaign(1).model_copy(update={"waves": "1,rest", "windows": [spec], "approve_each": "wave"})
    async with kit_worker(env, fake, wf_task_queue, [preflight_activity()]):
        h = await env.client.start_workflow(CampaignWorkflow.run, inp, id=f"campaign-{uuid.uuid4().hex[:8]}",
                                            task_queue=wf_task_queue, result_type=CampaignResult)
        st = await poll(h, lambda s: "maintenance window from" in (s["waiting_for"] or ""))
        assert [c["state"] for c in st["clusters"]] == ["pending", "pending"] and st["window_opens_at"], st
        assert fake.called("kit_step") == []
        await env.sleep(timedelta(minutes=70))  # inside the window: the canary starts and ends
        await poll(h, lambda s: any(g["id"] == "wave/2" and g["state"] == "waiting" for g in s["gates"]))
        await env.sleep(timedelta(hours=1))  # the window closes while the wave gate waits
        await h.execute_update(ProcedureWorkflow.approve, ApproveInput(gate_id="wave/2", identity="bob", comment="go"))
        st = await poll(h, lambda s: "maintenance window from" in (s["waiting_for"] or ""))
        assert [c["state"] for c in st["clusters"]] == ["done", "pending"], st["clusters"]
        res = await h.result()  # the time-skipping server skips to the next day's window
    assert res.outcome == "completed", res.message
    def inside(t):  # the daily window, which may span midnight
        o, e, x = opens.time(), closes.time(), t.time()
        return o <= x < e if o < e else (x >= o or x < e)

    for c in res.clusters:  # every start inside the window
        assert c.started_at is not None and inside(c.started_at), (c.name, c.started_at, spec)
    assert res.clusters[1].started_at - res.clusters[0].started_at >= timedelta(hours=20), res.clusters


async def test_a_cluster_queue_without_a_worker_refuses_the_campaign_before_any_child(time_skipping_env, wf_task_queue):
    """Issue 39: the kit checks the campaign's preconditions before its first child; a queue no
    worker polls refuses it (one line per problem) and no cluster's procedure starts."""
    env, fake = time_skipping_env, KitFake()
    checks = preflight_activity({f"a worker on {wf_task_queue} (cluster b)": "no worker polled it within 120 s"})
    async with kit_worker(env, fake, wf_task_queue, [checks]):
        res = await env.client.execute_workflow(CampaignWorkflow.run, _campaign(1), id=f"campaign-{uuid.uuid4().hex[:8]}",
                                                task_queue=wf_task_queue, result_type=CampaignResult)
    assert res.outcome == "refused", res.message
    assert res.problems == [f"a worker on {wf_task_queue} (cluster b): no worker polled it within 120 s "
                            "(needed: probe on b runs on its own worker)"], res.problems
    assert [p.kind for c in checks.calls for p in c.preconditions] == ["queue-polled", "queue-polled"]
    assert not fake.called("kit_step") and all(c.state == "pending" and not c.child_id for c in res.clusters)


async def test_the_dry_run_runs_each_cluster_procedures_own_dry_run_and_nothing_else(time_skipping_env, wf_task_queue):
    """The campaign's dry run: the workers' queues and, for a procedure with a dry run (drain),
    that dry run on every cluster, listed with its result; no cluster's procedure runs."""
    env, fake = time_skipping_env, KitFake()
    checks = preflight_activity({"node no-such-node": "no Node named no-such-node"})
    inp = CampaignInput(procedure="drain", workflow_type="NodeDrainWorkflow", input={"node": "worker-0", "search_attributes": False},
                        clusters=[{"name": "a"}, {"name": "b", "overrides": {"node": "no-such-node"}}], waves="1,rest",
                        search_attributes=False, dry_run=True, procedure_has_dry_run=True, nested_approvals=True)
    async with kit_worker(env, fake, wf_task_queue, [checks]):
        cid = f"campaign-{uuid.uuid4().hex[:8]}"
        res = await env.client.execute_workflow(CampaignWorkflow.run, inp, id=cid, task_queue=wf_task_queue, result_type=CampaignResult)
    assert res.outcome == "dry-run" and "wave 1: a | wave 2: b" in res.message and "1 precondition(s) failed" in res.message
    lines = {r.precondition.subject(): (r.state, r.detail) for r in res.preconditions}
    assert lines["drain dry run on cluster a"][0] == "ok"
    assert lines["drain dry run on cluster b"][0] == "failed"
    assert lines["drain dry run on cluster b"][1].startswith("node no-such-node: no Node named no-such-node")
    assert [k for c in checks.calls for k in (p.kind for p in c.preconditions)].count("queue-polled") == 4  # refused-first, then listed
    assert not fake.calls and all(c.state == "pending" for c in res.clusters)


async def test_what_a_failed_child_leaves_changed_is_in_the_campaign_outcome(time_skipping_env, wf_task_queue):
    """Issue 39: a child that fails past its point of no return returns no result; what it leaves
    changed reaches the campaign in its last report, and the campaign's outcome lists it under
    the cluster's name (the completed campaign lists its failed clusters' items)."""
    from tests.support.kit_fakes import gate_waiting
    from tests.support.kit_probes import TemplateProbeInput, TemplateProbeWorkflow

    from activities.cluster.models import ObjectRef
    from workflows.kit.models import ApproveInput

    env, fake = time_skipping_env, KitFake()
    ref = ObjectRef(kind="DaemonSet", name="sdn", namespace="openshift-sdn")
    image = "/spec/template/spec/containers/0/image"
    fake.objects[ref.describe()] = {"metadata": {"name": "sdn", "resourceVersion": "1"},
                                    "spec": {"template": {"spec": {"containers": [{"image": "openshift/node:v3.11"}]}}}}
    shared = TemplateProbeInput(search_attributes=False, record=ref, record_values={image: "custom:1"}, pnr=True,
                                fail="disk full").model_dump(mode="json", exclude={"cluster"})
    inp = CampaignInput(procedure="template-probe", workflow_type=TemplateProbeWorkflow.__name__, reports=True,
                        nested_approvals=True, input=shared, clusters=[{"name": "a"}], waves="1", approve_each="none",
                        failure_budget=1, search_attributes=False)
    async with kit_worker(env, fake, wf_task_queue, [preflight_activity()]):
        cid = f"campaign-{uuid.uuid4().hex[:8]}"
        h = await env.client.start_workflow(CampaignWorkflow.run, inp, id=cid, task_queue=wf_task_queue, result_type=CampaignResult)
        await poll(h, lambda s: s["clusters"][0]["state"] == "running")
        child = env.client.get_workflow_handle(f"{cid}/a")
        await poll(child, gate_waiting("go"))
        await child.execute_update(ProcedureWorkflow.approve, ApproveInput(gate_id="go", identity="bob"))
        res = await h.result()
        reports = [e.workflow_execution_signaled_event_attributes.signal_name async for e in h.fetch_history_events()
                   if e.HasField("workflow_execution_signaled_event_attributes")]
    assert res.outcome == "completed" and res.failed == ["a"], res.message
    # Milestones only (issue 38: the campaign's history stays small): the gate opened, the gate
    # closed, the failure with what it leaves changed; no report per step of the child.
    assert reports == ["child_report"] * 3, reports
    (item,) = res.left_changed
    assert item.target == "a: DaemonSet openshift-sdn/sdn" and image in item.what, item
    assert item.undo == f"lockkeeper revert {cid}/a --full" and res.next_commands == [item.undo]
    assert [i.target for i in res.clusters[0].changed] == ["DaemonSet openshift-sdn/sdn"]
    assert "left changed: a: DaemonSet openshift-sdn/sdn" in res.message
