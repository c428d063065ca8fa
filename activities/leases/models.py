"""Input and result of :func:`activities.leases.activities.find_held_leases`."""

from __future__ import annotations

from pydantic import BaseModel, Field


class FindHeldLeasesInput(BaseModel):
    """``lease_ids``: lease workflow IDs (``lease/<cluster>/...``, see
    :func:`workflows.kit.scopes.scope_workflow_id`), at least one, each non-empty."""

    lease_ids: list[str] = Field(min_length=1)


class FindHeldLeasesResult(BaseModel):
    """``held``: the IDs of the input whose latest run is running, in input order."""

    held: list[str] = Field(default_factory=list)
