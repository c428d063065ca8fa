"""Procedure-specific updates carry the decision deadline too (issue 18, "Decisions are confirmed
or never happen"): a ``revert`` that reaches the VXLAN port change after its deadline is refused
and nothing is reverted, a timely one (with matching identities) reverts the run; and what
``lockkeeper revert`` sends (the kit's ``RevertInput``) decodes, stamped, as each
procedure's own revert model through the pydantic data converter the worker uses.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker
from test_vxlan_wf import STOCK, TRIG, World, make_input, until, waiting

from lockkeeper.cli.decisions import stamp_decision
from workflows.kit.models import RevertInput as KitRevertInput
from workflows import WORKFLOWS
from workflows.network_migration.models import RevertInput as NetworkRevertInput
from workflows.node_selectors.models import RevertRequest
from workflows.runtime_migration.models import UnknownOutcomeInput
from workflows.vxlan_port.models import RevertInput, VxlanPortChangeResult

pytestmark = pytest.mark.timeout(180)


async def test_a_late_revert_is_refused_and_nothing_is_reverted_then_a_timely_one_reverts(
        time_skipping_env, wf_task_queue) -> None:
    world = World()
    client = time_skipping_env.client
    async with Worker(client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=world.activities()):
        h = await client.start_workflow("VxlanPortChangeWorkflow", make_input(), id=f"vx-{uuid.uuid4().hex[:6]}",
                                        task_queue=wf_task_queue, result_type=VxlanPortChangeResult)
        await until(h, lambda s: waiting(s, "fanout"))
        now = datetime.now(UTC)
        late = RevertInput(identity="bob", reason="too late", sent_at=now - timedelta(minutes=5),
                           deadline=now - timedelta(minutes=4))
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await h.execute_update("revert", late)
        msg = str(info.value.cause)
        assert "revert by bob" in msg and "refused, nothing was decided" in msg and "deadline" in msg, msg
        mismatch = RevertInput(identity="mallory", connection_identity="bob", deadline=now + timedelta(hours=1))
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await h.execute_update("revert", mismatch)
        assert "differs from the connection's identity" in str(info.value.cause)
        st = await until(h, lambda s: waiting(s, "fanout"))
        assert not st.revert_requested, st
        ok = RevertInput(identity="bob", connection_identity="bob", sent_at=now, deadline=now + timedelta(hours=1))
        answer = await h.execute_update("revert", ok)
        assert answer["mode"] == "in-run" and "revert requested by bob" in answer["message"], answer
        result = await h.result()
    assert result.outcome == "reverted", result.message
    assert (world.ds_image, world.ds_triggers) == (STOCK, TRIG)


@pytest.mark.parametrize("model", [RevertRequest, NetworkRevertInput, RevertInput])
def test_the_cli_revert_decodes_stamped_as_each_procedures_model(model: type) -> None:
    sent, deadline = stamp_decision(KitRevertInput(identity="bob", reason="why", full=True), 30.0, "bob")
    assert deadline is not None and sent.sent_at is not None and sent.sent_at < deadline
    conv = pydantic_data_converter.payload_converter
    (payload,) = conv.to_payloads([sent])
    (got,) = conv.from_payloads([payload], [model])
    assert isinstance(got, model)
    assert (got.identity, got.reason, got.deadline, got.sent_at, got.connection_identity) == (
        "bob", "why", deadline, sent.sent_at, "bob")
    assert getattr(got, "full", True) is True  # vxlan keeps --full; the others ignore it
    # A payload stored before the deadline fields existed still decodes.
    (old,) = conv.from_payloads(conv.to_payloads([{"identity": "bob"}]), [model])
    assert old.deadline is None and old.sent_at is None


def test_resolve_unknown_input_carries_the_deadline_fields() -> None:
    inp = UnknownOutcomeInput(gate_id="g1/unknown/reboot", choice="rerun", identity="bob")
    assert inp.deadline is None
    stamped, deadline = stamp_decision(inp, 10.0, None)
    assert stamped.deadline == deadline and stamped.sent_at is not None and stamped.connection_identity is None
