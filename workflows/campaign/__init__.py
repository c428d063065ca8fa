"""Campaigns (issue 38): one procedure across a fleet of clusters, in waves, each cluster's run a
child on that cluster's own task queue: :mod:`.workflow`, :mod:`.models`. ``SPEC`` for the
registry: a central procedure (it stays on the base task queue and needs no cluster credentials,
so a host-only worker may run it)."""

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.campaign.models import PROCEDURE_CAMPAIGN, CampaignInput, CampaignResult, CampaignStatus
    from workflows.kit.spec import PRIORITY_CONTROL, ProcedureSpec
from workflows.campaign.workflow import CampaignWorkflow

SPEC = ProcedureSpec(
    name=PROCEDURE_CAMPAIGN,
    priority=PRIORITY_CONTROL,
    workflow=CampaignWorkflow,
    input_model=CampaignInput,
    status_model=CampaignStatus,
    result_model=CampaignResult,
    id_prefix="campaign",
    task_queue="host",
    central=True,
    start="lockkeeper.cli.start.campaign:start_campaign",
    panels="lockkeeper.campaign_view:CAMPAIGN_PANELS",
)

__all__ = ["SPEC", "CampaignWorkflow"]
