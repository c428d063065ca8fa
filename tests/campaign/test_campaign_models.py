"""Campaign input (issue 38): the wave spec, the per-cluster input, the per-cluster task queues
of the worker and the starter, and the refusal that names the cluster without a worker."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from lockkeeper.starter import NoWorker, procedure_queue
from workers.settings import Settings, cluster_task_queue
from workflows.campaign import SPEC as CAMPAIGN
from workflows.campaign.models import CampaignInput, parse_waves, wave_sizes
from workflows.drain import SPEC as DRAIN


@pytest.mark.parametrize(("spec", "total", "sizes"), [
    ("1,rest", 3, [1, 2]), ("1,10%,rest", 20, [1, 2, 17]), ("1,25%,rest", 20, [1, 5, 14]), ("2", 5, [2, 3]),
    ("1,rest", 1, [1]), ("50%", 3, [2, 1]), ("1,1,1,rest", 2, [1, 1]),
])
def test_wave_sizes(spec: str, total: int, sizes: list[int]) -> None:
    assert wave_sizes(spec, total) == sizes


@pytest.mark.parametrize(("spec", "why"), [("0,rest", "at least 1"), ("rest,1", "last"), ("150%", "(0, 100]"), ("x", "not a count"),
                                           ("1,,2", "comma-separated")])
def test_bad_wave_specs_are_refused(spec: str, why: str) -> None:
    with pytest.raises(ValueError, match="waves") as info:
        parse_waves(spec)
    assert why in str(info.value)


def test_wave_plan_and_child_input_merge_overrides() -> None:
    inp = CampaignInput(procedure="drain", workflow_type="NodeDrainWorkflow", reports=True, requested_by="alice",
                        input={"node": "w1", "gates": {"timeout_seconds": 60, "timeout_outcome": "reject"}},
                        clusters=[{"name": "a"}, {"name": "b", "overrides": {"node": "w9", "gates": {"timeout_seconds": 5}}},
                                  {"name": "c"}], waves="1,rest")
    assert inp.wave_plan() == [["a"], ["b", "c"]]
    child = inp.child_input(inp.clusters[1], "campaign-1")
    assert child == {"node": "w9", "gates": {"timeout_seconds": 5, "timeout_outcome": "reject"}, "cluster": "b",
                     "requested_by": "alice", "report_to": "campaign-1", "report_progress": False}
    assert inp.input["node"] == "w1", "the shared input is not changed"
    with pytest.raises(ValidationError, match="listed twice"):
        CampaignInput(procedure="drain", workflow_type="W", clusters=[{"name": "a"}, {"name": "a"}])
    with pytest.raises(ValidationError, match="cluster name"):
        CampaignInput(procedure="drain", workflow_type="W", clusters=[{"name": "Prod EU"}])


def test_per_cluster_queues_for_the_worker_and_the_starter() -> None:
    plain = Settings(task_queue="lk", cluster="east")
    assert plain.for_worker().task_queue == "lk" and procedure_queue(plain, DRAIN, "east") == "lk"  # today's single queue
    per = Settings(task_queue="lk", cluster="east", cluster_queues=True)
    assert per.for_worker().task_queue == "lk-east" == cluster_task_queue("lk", "east")
    assert per.for_worker().for_worker().task_queue == "lk-east", "applied once"
    assert procedure_queue(per, DRAIN, "west") == "lk-west"
    assert procedure_queue(per, CAMPAIGN, "fleet") == "lk", "a campaign stays on the central queue"


def test_no_worker_for_a_cluster_names_it() -> None:
    msg = str(NoWorker("lk-north", "default", cluster="north"))
    assert "cluster 'north'" in msg and "'lk-north'" in msg and "lockkeeper worker --cluster north" in msg
    assert "cluster" not in str(NoWorker("lk", "default")).split("(")[0]


def test_the_ui_details_of_a_campaign_summarise_the_fleet() -> None:
    from workflows.campaign.models import CampaignStatus, ClusterRun
    from workflows.kit.details import fleet_lines, render
    from workflows.kit.models import ProcedureStatus

    st = CampaignStatus(procedure="campaign", workflow_id="c1", cluster="fleet", waves=2, current_wave=2, clusters=[
        ClusterRun(name="east", wave=1, state="done", child_id="c1/east"),
        ClusterRun(name="west", wave=2, state="running", child_id="c1/west"),
        ClusterRun(name="north", wave=2, state="failed", child_id="c1/north"),
        ClusterRun(name="south", wave=2, state="pending")])
    text = render(st, phase="running", gates=[], paused_reason=None, noun="campaign")
    assert "**Clusters** done: 1, failed: 1, pending: 1, running: 1 (wave 2 of 2)" in text
    assert "| west | 2 | running | `c1/west` |" in text and "| north | 2 | failed | `c1/north` |" in text
    assert "east |" not in text and "south |" not in text, "only clusters in flight or ended badly get a row"
    assert fleet_lines(ProcedureStatus()) == []


def test_start_campaign_refuses_before_connecting(tmp_path, monkeypatch) -> None:
    """Without per-cluster queues a campaign would run every cluster's procedure with one worker's
    credentials: refused (exit 2). With them, an input that does not fit one cluster is refused
    naming that cluster (exit 2), before anything connects (no server runs here)."""
    from typer.testing import CliRunner

    from lockkeeper import cli

    for k in [k for k in __import__("os").environ if k.startswith("LOCKKEEPER_")]:
        monkeypatch.delenv(k)
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("clusters:\n  - name: east\n  - name: west\n    overrides: {node: null}\n")
    argv = ["--address", "127.0.0.1:1", "start", "campaign", "--procedure", "drain", "--clusters", str(fleet), "--set", "node=w1"]
    res = CliRunner().invoke(cli.app, argv)
    assert res.exit_code == 2 and "LOCKKEEPER_CLUSTER_QUEUES=true" in res.output, res.output
    monkeypatch.setenv("LOCKKEEPER_CLUSTER_QUEUES", "true")
    res = CliRunner().invoke(cli.app, argv)
    assert res.exit_code == 2 and "cluster west: node" in res.output and "cluster east" not in res.output, res.output
    res = CliRunner().invoke(cli.app, [*argv[:5], "campaign", *argv[6:]])
    assert res.exit_code == 2 and "cannot run" in res.output, res.output


def test_a_procedure_input_child_gets_the_requester_nested_and_validates() -> None:
    """A campaign of a procedure whose input is a ProcedureInput (the rollout, extra fields
    forbidden): the requester goes to ``approvals.requested_by``, so every child's input
    validates; a flat ``requested_by`` would be refused."""
    from workflows.machineconfig.models import MachineConfigRolloutInput

    inp = CampaignInput(procedure="machineconfig-rollout", workflow_type="MachineConfigRolloutWorkflow", nested_approvals=True,
                        input={"pools": ["worker"]}, clusters=[{"name": "east"}, {"name": "west", "overrides": {
                            "approvals": {"four_eyes": True}}}], requested_by="alice")
    east, west = (inp.child_input(c, "campaign-1") for c in inp.clusters)
    assert east["approvals"] == {"requested_by": "alice"} and "requested_by" not in east
    assert west["approvals"] == {"requested_by": "alice", "four_eyes": True}
    for data in (east, west):
        assert MachineConfigRolloutInput.model_validate(data).approvals.requested_by == "alice"
    flat = CampaignInput(procedure="machineconfig-rollout", workflow_type="MachineConfigRolloutWorkflow",
                         input={"pools": ["worker"]}, clusters=[{"name": "east"}], requested_by="alice")
    with pytest.raises(ValueError, match="requested_by"):
        MachineConfigRolloutInput.model_validate(flat.child_input(flat.clusters[0], "campaign-1"))


def test_the_campaign_input_is_a_procedure_input_and_reads_its_old_flat_fields() -> None:
    """Issue 36: the campaign's approvals and gate policy are the kit's nested groups (unknown
    fields refused); an input stored before (flat ``requested_by``, ``four_eyes``,
    ``allowed_approvers``, ``gate_timeout_seconds``) reads into them, a nested value winning."""
    from workflows.kit.inputs import ProcedureInput

    base = {"procedure": "drain", "workflow_type": "NodeDrainWorkflow", "clusters": [{"name": "a"}]}
    nested = CampaignInput.model_validate({**base, "approvals": {"requested_by": "alice", "four_eyes": True},
                                           "gates": {"timeout_seconds": 60}})
    assert isinstance(nested, ProcedureInput) and nested.cluster == "fleet"
    assert nested.requested_by == "alice" and nested.approvals.four_eyes and nested.gates.timeout_seconds == 60
    old = CampaignInput.model_validate({**base, "requested_by": "alice", "four_eyes": True, "allowed_approvers": ["bob"],
                                        "gate_timeout_seconds": 60, "search_attributes": False})
    assert old.approvals == nested.approvals.model_copy(update={"allowed_approvers": ["bob"]})
    assert old.gates == nested.gates and not old.search_attributes
    both = CampaignInput.model_validate({**base, "requested_by": "alice", "approvals": {"requested_by": "carol"}})
    assert both.requested_by == "carol"
    with pytest.raises(ValidationError, match="extra"):
        CampaignInput.model_validate({**base, "gate_timeout": 5})
    assert "requested_by" not in nested.model_dump() and "gate_timeout_seconds" not in nested.model_dump()
