"""Input and result of the ``notify`` activity (pure pydantic; workflows import them).

The JSON body a webhook receives is :class:`NotifyEvent` as ``model_dump(mode="json")``: its
``text`` follows Slack's incoming-webhook message format (``{"text": "..."}``, mrkdwn), so a
Slack or Mattermost webhook URL works as is; the other fields are for programs.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

#: The events a procedure notifies about.
EventKind = Literal[
    "gate-opened", "gate-decided", "gate-timed-out", "node-degraded", "drain-blocked", "paused", "failed", "completed",
    "alerts-blocking", "alerts-cleared", "alerts-skipped", "node-held", "node-released", "hold-expired",
    "window-wait",
]


class NotifyEvent(BaseModel):
    """One notification. ``text``: one Slack-style line for people; ``gate`` / ``command``: the
    gate and the exact command that answers it; ``node``: the node concerned; ``report``: the
    blocked-drain report (``DrainReport`` as JSON); ``at``: when it happened (workflow time, UTC)."""

    event: EventKind
    text: str
    procedure: str
    workflow_id: str
    cluster: str
    at: datetime
    gate: str | None = None
    command: str | None = None
    node: str | None = None
    by: str | None = None
    outcome: str | None = None
    report: dict[str, Any] | None = None


class NotifyResult(BaseModel):
    """``sent``: URLs that answered 2xx; ``skipped``: True when no URL is configured."""

    sent: list[str] = Field(default_factory=list)
    skipped: bool = False
