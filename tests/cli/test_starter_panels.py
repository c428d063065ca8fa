"""Pure parts of the starter (ID scheme, which leases a start must check) and the panels
(each procedure's own view, the generic view for any procedure, success of a result)."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field
from rich.console import Console

from lockkeeper import panels
from lockkeeper.starter import _lease_ids_to_check, new_workflow_id, quote
from workflows import PROCEDURES
from workflows.kit.models import ProcedureStatus


def render(renderable: Any) -> str:
    console = Console(width=200, file=io.StringIO())
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_workflow_ids_follow_the_spec_prefix_cluster_and_time() -> None:
    spec = next(s for s in PROCEDURES if s.name == "drain")
    wid = new_workflow_id(spec, "prod", "worker-3", now=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert wid.startswith("drain-prod-worker-3-20260102-030405-") and len(wid.rsplit("-", 1)[1]) == 4
    assert new_workflow_id(spec, "prod") != new_workflow_id(spec, "prod")


def test_lease_precheck_covers_the_scope_and_its_cluster() -> None:
    ids, whole = _lease_ids_to_check(["node/c1/n1", "pool/c1/worker"])
    assert ids == ["lease/c1/node:n1", "lease/c1/@cluster", "lease/c1/worker"] and whole == set()
    ids, whole = _lease_ids_to_check(["cluster/c2"])
    assert ids == ["lease/c2/@cluster"] and whole == {"c2"}


def test_quote_escapes_visibility_literals() -> None:
    assert quote("it's") == "'it\\'s'"


class _Member(BaseModel):
    state: str
    restarted: bool = False


class _SomeStatus(ProcedureStatus):
    step: str = "stop-members"
    members: dict[str, _Member] = Field(default_factory=dict)
    log: list[str] = Field(default_factory=list)


class _SomeResult(BaseModel):
    outcome: str
    message: str = ""


def test_generic_panel_shows_base_fields_and_the_procedures_own() -> None:
    st = _SomeStatus(procedure="gluster-recovery", workflow_id="g-1", cluster="c1", phase="waiting-approval",
                     waiting_for="approval of gate stop-members", members={"m1": _Member(state="running")},
                     log=["preflight ok"], leases=["gluster/c1"])
    text = render(panels.status_panel("gluster-recovery", st))
    for expected in ("g-1", "waiting-approval", "approval of gate stop-members", "stop-members", "Members", "m1",
                     "running", "preflight ok", "gluster/c1"):
        assert expected in text, (expected, text)


def test_result_success_by_ok_flag_or_outcome() -> None:
    assert panels.result_ok(_SomeResult(outcome="completed"))
    assert panels.result_ok(_SomeResult(outcome="dry-run"))
    assert not panels.result_ok(_SomeResult(outcome="aborted"))

    class Backup(BaseModel):
        ok: bool
        message: str = ""

    assert not panels.result_ok(Backup(ok=False)) and panels.result_ok(Backup(ok=True))
    assert "outcome aborted" in render(panels.result_panel("etcd-restore", _SomeResult(outcome="aborted")))


def test_rollout_keeps_its_own_panel() -> None:
    spec = next(s for s in PROCEDURES if s.name == "machineconfig-rollout")
    st = spec.status_model(workflow_id="rollout-1", cluster="c1")
    text = render(panels.status_panel(spec.name, st))
    assert "rollout-1" in text and "nodes: 0 done" in text  # the rollout view's totals line


def test_the_generic_view_prints_brackets_as_text_not_as_rich_markup() -> None:
    """A batch list such as ``[node01][node02]`` in a field, a table cell or a gate comment is
    what the operator must read; rich would take ``[node01]`` for a style tag and drop it."""

    class Planned(ProcedureStatus):
        batches: str = "[node01.example.com][node02.example.com]"
        nodes: dict[str, dict[str, str]] = Field(default_factory=lambda: {"node03": {"step": "[action] upgrade"}})

    text = render(panels.procedure_view(Planned(procedure="node-upgrade", workflow_id="wf-1", cluster="c")))
    assert "[node01.example.com][node02.example.com]" in text
    assert "[action] upgrade" in text
