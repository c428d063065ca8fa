"""Kit building blocks inside a procedure (time-skipping server, probes of kit_probes.py, fake
activities by name): a health wait visible in status, a barrier naming its failures and
re-checking every target on resume, records whose revert refuses a changed object, host steps
that check before acting, run a non-repeatable command at most once and open a gate on an
unknown outcome."""

from __future__ import annotations

import copy

from tests.support.kit_fakes import KitFake, gate_waiting, kit_worker, poll, start_probe
from tests.support.kit_probes import BarrierProbeWorkflow, HealthProbeWorkflow, HostProbeWorkflow, ProbeInput, RecordProbeWorkflow
from temporalio.exceptions import ApplicationError

from activities.cluster.models import ObjectRef
from workflows.kit.host import HostStep
from workflows.kit.models import ApproveInput, ControlInput, RejectInput
from workflows.kit.procedure import ProcedureWorkflow

# --- health --------------------------------------------------------------------------------------


async def test_health_wait_is_visible_in_status_then_passes(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    fake.health_answers = [(False, "2/3 API servers answer")] * 3
    async with kit_worker(env, fake, wf_task_queue):
        h = await start_probe(env, wf_task_queue, HealthProbeWorkflow, ProbeInput())
        st = await poll(h, lambda s: "api" in s["health"] and s["health"]["api"]["polls"] >= 1)
        assert st["health"]["api"]["state"] == "waiting" and st["health"]["api"]["last"] == "2/3 API servers answer"
        assert st["waiting_for"] == "health check api (2/3 API servers answer)"
        result = await h.result()
    assert result.outcome == "completed" and result.detail == "ok after 4 polls"


async def test_health_wait_gives_up_at_its_deadline(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    fake.health_answers = [(False, "NotReady")] * 100
    async with kit_worker(env, fake, wf_task_queue):
        h = await start_probe(env, wf_task_queue, HealthProbeWorkflow, ProbeInput(health_deadline_seconds=60))
        result = await h.result()
    # 5 + 10 + 20 + 20 s of backoff: the check at t=55 is still before the deadline, t=75 is not.
    assert result.outcome == "timed-out" and result.detail == "timed-out after 6 polls"


# --- barrier --------------------------------------------------------------------------------------


async def test_barrier_names_the_failed_targets(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    fake.target_fail = {"node-2": "image pull: manifest unknown", "node-4": "no space left on device"}
    targets = [f"node-{i}" for i in range(5)]
    async with kit_worker(env, fake, wf_task_queue):
        result = await (await start_probe(env, wf_task_queue, BarrierProbeWorkflow, ProbeInput(targets=targets))).result()
    assert result.outcome == "failed"
    assert result.failed == {"node-2": "image pull: manifest unknown", "node-4": "no space left on device"}
    assert result.done == ["node-0", "node-1", "node-3"]
    assert result.detail == "pre-pull failed on 2 of 5: node-2, node-4"


async def test_barrier_hold_pauses_and_rechecks_every_target_on_resume(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    fake.target_fail = {"node-1": "firewall port 4789 closed"}
    targets = ["node-0", "node-1", "node-2"]
    async with kit_worker(env, fake, wf_task_queue):
        h = await start_probe(env, wf_task_queue, BarrierProbeWorkflow, ProbeInput(targets=targets, hold=True))
        st = await poll(h, lambda s: s["phase"] == "paused")
        assert "pre-pull failed on 1 of 3: node-1" in st["paused_reason"]
        assert st["barriers"]["pre-pull"]["failed"] == {"node-1": "firewall port 4789 closed"}
        fake.target_fail.clear()
        await h.execute_update(ProcedureWorkflow.resume, ControlInput(identity="bob"))
        result = await h.result()
    assert result.outcome == "completed" and result.done == targets
    # Round two ran on every target again, not only on the failed one.
    assert sorted(fake.called("kit_target_step")) == sorted(targets * 2)


# --- records --------------------------------------------------------------------------------------

DS = ObjectRef(kind="DaemonSet", namespace="openshift-sdn", name="sdn")
ORIGINAL = {"metadata": {"resourceVersion": "1", "annotations": {"image.openshift.io/triggers": "[trigger]"}},
            "spec": {"template": {"spec": {"containers": [{"name": "sdn", "image": "sdn:v3.11"}]}}}}
CHANGE = {"/spec/template/spec/containers/0/image": "sdn:v3.11-patched",
          "/metadata/annotations/image.openshift.io~1triggers": "[]",
          "/metadata/annotations/lockkeeper.io~1changed": "yes"}


async def run_record_probe(env, tq, fake, meddle=None):
    fake.objects[DS.describe()] = copy.deepcopy(ORIGINAL)
    async with kit_worker(env, fake, tq):
        h = await start_probe(env, tq, RecordProbeWorkflow, ProbeInput(record=DS, record_values=CHANGE))
        st = await poll(h, gate_waiting("revert"))
        assert st["records"]["ds"]["state"] == "changed"
        if meddle:
            meddle(fake.objects[DS.describe()])
        await h.execute_update(ProcedureWorkflow.approve, ApproveInput(identity="bob"))
        return await h.result(), await h.query("status", result_type=dict)


async def test_record_revert_restores_exactly_the_originals(time_skipping_env, wf_task_queue):
    fake = KitFake()

    def unrelated(obj):  # somebody else's change to a field we never recorded survives the revert
        obj["metadata"]["labels"] = {"team": "net"}

    result, st = await run_record_probe(time_skipping_env, wf_task_queue, fake, unrelated)
    assert result.outcome == "completed" and st["records"]["ds"]["state"] == "reverted"
    obj = fake.objects[DS.describe()]
    assert obj["spec"] == ORIGINAL["spec"] and obj["metadata"]["annotations"] == ORIGINAL["metadata"]["annotations"]
    assert obj["metadata"]["labels"] == {"team": "net"}  # the field added by us was removed, theirs kept
    restore = fake.called("restore_fields")[0]
    assert restore.expected["/spec/template/spec/containers/0/image"] == "sdn:v3.11-patched"


async def test_record_revert_refuses_an_object_changed_since(time_skipping_env, wf_task_queue):
    fake = KitFake()

    def rollout_by_someone(obj):
        obj["spec"]["template"]["spec"]["containers"][0]["image"] = "sdn:v3.11.200"

    result, st = await run_record_probe(time_skipping_env, wf_task_queue, fake, rollout_by_someone)
    assert result.outcome == "refused" and "changed since" in result.detail
    assert st["records"]["ds"]["state"] == "refused"
    obj = fake.objects[DS.describe()]
    # Nothing was written back: their image stays, and so do our other changes (refused as a whole).
    assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == "sdn:v3.11.200"
    assert obj["metadata"]["annotations"]["image.openshift.io/triggers"] == "[]"


# --- host steps -----------------------------------------------------------------------------------


async def test_host_step_check_before_act_and_known_failure(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    fake.host_script = {"test": [0], "systemctl": [1]}  # the check passes; the second step exits 1
    steps = [HostStep(name="stop-docker", argv=["systemctl", "stop", "docker"], check=["test", "-e", "/done"]),
             HostStep(name="disable-docker", argv=["systemctl", "disable", "docker"])]
    async with kit_worker(env, fake, wf_task_queue):
        h = await start_probe(env, wf_task_queue, HostProbeWorkflow, ProbeInput(host_steps=steps))
        result = await h.result()
        st = await h.query("status", result_type=dict)
    assert result.outcome == "failed" and result.done == ["stop-docker (already done)"]
    assert [c.argv[0] for c in fake.called("run_node_command")] == ["test", "systemctl"]
    assert st["host_steps"]["stop-docker"]["state"] == "already-done"
    assert st["host_steps"]["disable-docker"]["state"] == "failed" and "exited 1" in st["host_steps"]["disable-docker"]["detail"]


async def test_non_repeatable_step_runs_once_and_unknown_outcome_opens_a_gate(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    # 1st run: the command hits its own timeout (it may have acted); after approval it runs again.
    # A retryable activity error on a non-repeatable step is not retried by Temporal.
    fake.host_script = {"reboot": ["timeout", 0], "mkfs": [ApplicationError("connection reset", type="NodeUnreachable")]}
    steps = [HostStep(name="reboot", argv=["reboot"], timeout_seconds=30), HostStep(name="format", argv=["mkfs", "/dev/sdb"])]
    async with kit_worker(env, fake, wf_task_queue):
        h = await start_probe(env, wf_task_queue, HostProbeWorkflow, ProbeInput(host_steps=steps))
        st = await poll(h, gate_waiting("host/reboot"))
        assert st["host_steps"]["reboot"]["state"] == "unknown"
        assert len(fake.called("run_node_command")) == 1  # not run again on its own
        await h.execute_update(ProcedureWorkflow.approve, ApproveInput(identity="bob", comment="node console shows it did not reboot"))
        result = await h.result()
    assert result.outcome == "failed" and result.done == ["reboot"]
    assert [c.argv[0] for c in fake.called("run_node_command")] == ["reboot", "reboot", "mkfs"]
    assert "connection reset" in result.detail
    assert [(r.gate_id, r.action) for r in result.gate_history] == [("host/reboot", "opened"), ("host/reboot", "approved")]


async def test_unknown_outcome_rejected_stops_without_running_again(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    fake.host_script = {"reboot": ["timeout"]}
    async with kit_worker(env, fake, wf_task_queue):
        h = await start_probe(env, wf_task_queue, HostProbeWorkflow, ProbeInput(host_steps=[HostStep(name="reboot", argv=["reboot"])]))
        await poll(h, gate_waiting("host/reboot"))
        await h.execute_update(ProcedureWorkflow.reject, RejectInput(identity="bob"))
        result = await h.result()
    assert result.outcome == "failed" and "may have acted" in result.detail
    assert len(fake.called("run_node_command")) == 1


async def test_a_lost_session_is_an_unknown_outcome_not_a_failure(time_skipping_env, wf_task_queue):
    """No exit status (the connection or the exec was lost mid-command): a step that is not safe
    to repeat asks a person (it may have acted); a repeatable one runs again."""
    env, fake = time_skipping_env, KitFake()
    fake.host_script = {"yum": ["lost", 0], "mkfs": ["lost"]}
    steps = [HostStep(name="install", argv=["yum", "-y", "install", "docker"], idempotent=True),
             HostStep(name="format", argv=["mkfs", "/dev/sdb"])]
    async with kit_worker(env, fake, wf_task_queue):
        h = await start_probe(env, wf_task_queue, HostProbeWorkflow, ProbeInput(host_steps=steps))
        st = await poll(h, gate_waiting("host/format"))
        assert st["host_steps"]["format"]["state"] == "unknown" and "no exit status" in st["host_steps"]["format"]["detail"]
        await h.execute_update(ProcedureWorkflow.reject, RejectInput(identity="bob"))
        result = await h.result()
    assert result.outcome == "failed" and result.done == ["install"] and "may have acted" in result.detail
    assert [c.argv[0] for c in fake.called("run_node_command")] == ["yum", "yum", "mkfs"]
