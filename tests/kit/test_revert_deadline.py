"""Procedure-specific updates carry the decision deadline too (issue 18, "Decisions are confirmed
or never happen"): what ``lockkeeper revert`` sends (the kit's ``RevertInput``) decodes, stamped,
as each procedure's own revert model through the pydantic data converter the worker uses. (The
VXLAN port change's late revert is in tests/vxlan_port/test_workflow.py; the nodeSelector and
network migrations take the kit's model too.)
"""

from __future__ import annotations

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from lockkeeper.cli.decisions import stamp_decision
from workflows.kit.models import RevertInput as KitRevertInput

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("model", [KitRevertInput])
def test_the_cli_revert_decodes_stamped_as_each_procedures_model(model: type) -> None:
    sent, deadline = stamp_decision(KitRevertInput(identity="bob", reason="why", full=True), 30.0, "bob")
    assert deadline is not None and sent.sent_at is not None and sent.sent_at < deadline
    conv = pydantic_data_converter.payload_converter
    (payload,) = conv.to_payloads([sent])
    (got,) = conv.from_payloads([payload], [model])
    assert isinstance(got, model)
    assert (got.identity, got.reason, got.deadline, got.sent_at, got.connection_identity) == (
        "bob", "why", deadline, sent.sent_at, "bob")
    # A payload stored before the deadline fields existed still decodes.
    (old,) = conv.from_payloads(conv.to_payloads([{"identity": "bob"}]), [model])
    assert old.deadline is None and old.sent_at is None

