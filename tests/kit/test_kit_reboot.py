"""The kit's reboot (workflows.kit.host.reboot): sent once, confirmed by a new boot ID only, a
gate with explicit choices when no new boot ID comes, stopped at once by an abort, a lost call
sent again only to a node up on the same boot ID after a grace (time-skipping
server, RebootProbeWorkflow of kit_probes.py, host commands faked by name in kit_fakes.py)."""

from __future__ import annotations

import uuid

from temporalio.exceptions import ApplicationError

from tests.support.kit_fakes import KitFake, gate_waiting, kit_worker, poll
from tests.support.kit_probes import ProbeResult, RebootProbeInput, RebootProbeWorkflow

from workflows.kit.models import ControlInput, DecideInput
from workflows.kit.procedure import ProcedureWorkflow


async def _start(env, tq: str, inp: RebootProbeInput):
    return await env.client.start_workflow(RebootProbeWorkflow.run, inp, id=f"reboot-{uuid.uuid4().hex[:8]}", task_queue=tq,
                                           result_type=ProbeResult)


def _sent(fake: KitFake) -> list[list[str]]:
    return [c.argv for c in fake.called("run_node_command") if c.argv[0] != "cat"]


async def test_a_lost_session_and_a_new_boot_id_is_a_reboot(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    fake.boot_ids = ["b1", None, None, "b2"]
    fake.host_script["systemctl"] = ["lost"]  # the session goes down with the host
    async with kit_worker(env, fake, wf_task_queue):
        result = await (await _start(env, wf_task_queue, RebootProbeInput(search_attributes=False))).result()
    assert result.outcome == "completed" and result.message == "rebooted (boot ID b1 -> b2)" and result.detail == "b2"
    assert _sent(fake) == [["systemctl", "reboot"]]  # once


async def test_a_failed_command_is_no_reboot(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    fake.boot_ids = ["b1"]
    fake.host_script["systemctl"] = [1]
    async with kit_worker(env, fake, wf_task_queue):
        result = await (await _start(env, wf_task_queue, RebootProbeInput(search_attributes=False))).result()
    assert result.outcome == "failed-reboot" and result.message.startswith("systemctl reboot exited 1")


async def test_no_new_boot_id_asks_with_explicit_choices(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    fake.boot_ids = ["b1"]  # never changes
    async with kit_worker(env, fake, wf_task_queue):
        h = await _start(env, wf_task_queue, RebootProbeInput(search_attributes=False, timeout_seconds=30))
        await env.sleep(60)  # the test server skips the reboot timeout
        st = await poll(h, gate_waiting("reboot/n1/1"))
        (gate,) = [g for g in st["gates"] if g["id"] == "reboot/n1/1"]
        assert gate["choices"] == ["wait", "rerun", "mark-done"] and "boot ID still b1" in gate["comment"]
        await h.execute_update(ProcedureWorkflow.decide, DecideInput(node="reboot/n1/1", decision="rerun", identity="ops"))
        await env.sleep(60)
        await poll(h, gate_waiting("reboot/n1/2"))
        assert _sent(fake) == [["systemctl", "reboot"], ["systemctl", "reboot"]]  # rerun sends again
        await h.execute_update(ProcedureWorkflow.decide, DecideInput(node="reboot/n1/2", decision="mark-done", identity="ops"))
        result = await h.result()
    assert result.outcome == "completed" and result.message == "marked rebooted by ops"


async def test_an_abort_stops_the_wait_at_once(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    fake.boot_ids = ["b1"]
    async with kit_worker(env, fake, wf_task_queue):
        h = await _start(env, wf_task_queue, RebootProbeInput(search_attributes=False, timeout_seconds=3600))
        await poll(h, lambda s: s["health"].get("reboot/n1", {}).get("state") == "waiting")
        await h.execute_update(ProcedureWorkflow.abort, ControlInput(identity="ops", reason="enough"))
        result = await h.result()
    assert result.outcome == "aborted" and "enough" in result.message


async def test_a_lost_call_on_a_node_that_moved_is_not_sent_again(time_skipping_env, wf_task_queue):
    """The network migration's rule as the kit's option: the call was lost, but the node's boot
    ID changed within the grace: it got the command, which is not sent again."""
    env, fake = time_skipping_env, KitFake()
    fake.boot_ids = ["b1", "b2"]
    fake.host_script["systemctl"] = [ApplicationError("worker lost", non_retryable=True)]
    async with kit_worker(env, fake, wf_task_queue):
        result = await (await _start(env, wf_task_queue, RebootProbeInput(search_attributes=False, grace_seconds=30))).result()
    assert result.outcome == "completed" and result.message == "rebooted (boot ID b1 -> b2)", result.message
    assert _sent(fake) == [["systemctl", "reboot"]]


async def test_a_lost_call_on_a_node_up_on_the_same_boot_id_is_sent_once_more_then_fails_on_timeout(time_skipping_env, wf_task_queue):
    """The call was lost and the node answered on the same boot ID for the whole grace: the
    command never reached it and is sent once more (never a third time); with
    ``on_timeout="fail"`` no new boot ID in time is a RebootFailed of kind ``not-rebooted``."""
    env, fake = time_skipping_env, KitFake()
    fake.boot_ids = ["b1"]  # never changes
    fake.host_script["systemctl"] = [ApplicationError("worker lost", non_retryable=True), ApplicationError("lost again", non_retryable=True)]
    async with kit_worker(env, fake, wf_task_queue):
        h = await _start(env, wf_task_queue, RebootProbeInput(search_attributes=False, grace_seconds=30, timeout_seconds=60,
                                                              on_timeout="fail"))
        result = await h.result()
    assert result.outcome == "failed-reboot" and result.detail == "not-rebooted", result
    assert result.message.startswith("no new boot ID within 60s"), result.message
    assert _sent(fake) == [["systemctl", "reboot"], ["systemctl", "reboot"]]
