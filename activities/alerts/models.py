"""Input and answer of the ``check_alerts`` activity (pure pydantic; workflows import them).

What a health gate asks Prometheus: which active alerts block now. The semantics follow kured's
alert gate (kubereboot/kured ``pkg/alerts/prometheus.go``: an alert whose name the filter regex
finds is ignored; with firing-only, pending alerts do not block), plus a severity list and a
label match. The alerts come from the Prometheus HTTP API ``GET /api/v1/alerts``
(https://prometheus.io/docs/prometheus/latest/querying/api/#alerts): each has ``labels``
(``alertname`` among them), ``annotations``, ``state`` (``pending`` or ``firing``), ``activeAt``
(RFC 3339) and ``value`` (the expression's value as a string, e.g. ``"1e+00"``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: Activity name the workflows call (activities.alerts.activities.check_alerts).
CHECK_ALERTS = "check_alerts"

#: Why an active alert did not block: its name matched the filter; it was pending and only firing
#: alerts block; its severity is not one of those that block; its labels do not match.
IgnoredBecause = Literal["filter", "pending", "severity", "labels"]

#: Alerts a one-line summary names at most (the rest are counted).
LINE_MAX_ALERTS = 5


def check_url(url: str) -> str:
    """``url`` stripped of a trailing ``/`` if it is an http(s) URL with a host; else ValueError."""
    url = url.strip()
    if not re.match(r"^https?://[^/\s]+", url):
        raise ValueError(f"the Prometheus URL must be http(s)://host[:port][/path], got {url!r}")
    return url.rstrip("/")


def check_filter(regex: str | None) -> str | None:
    """``regex`` if Python's ``re`` compiles it (None and "" mean no filter: None); else
    ValueError. The syntax is Python's; the RE2 subset kured's flag takes (Go ``regexp``) reads
    the same for the usual name patterns (``^Watchdog$``, ``KubeNode.*|Gluster.*``)."""
    if not regex:
        return None
    try:
        re.compile(regex)
    except re.error as exc:
        raise ValueError(f"the alert filter {regex!r} is not a valid regular expression: {exc}") from None
    return regex


class AlertQuery(BaseModel):
    """Which of a Prometheus's active alerts block, and how to reach it: the fields and checks
    that ``check_alerts``'s input (:class:`CheckAlertsInput`) and a procedure's alert-gate policy
    share, defined once here (see :class:`CheckAlertsInput` for each field). Unknown fields are
    refused. Raises pydantic's ValidationError for a URL that is not http(s) or a filter that
    does not compile."""

    model_config = ConfigDict(extra="forbid")

    url: str
    filter: str | None = None
    firing_only: bool = True
    severities: list[str] = Field(default_factory=list)
    match_labels: dict[str, str] = Field(default_factory=dict)
    bearer_token_file: str | None = None
    ca_file: str | None = None

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        return check_url(v)

    @field_validator("filter")
    @classmethod
    def _filter(cls, v: str | None) -> str | None:
        return check_filter(v)

    def with_timeout(self, timeout_seconds: float) -> CheckAlertsInput:
        """The ``check_alerts`` input asking this query, its HTTP exchange bounded at
        ``timeout_seconds`` (> 0, else ValidationError)."""
        return CheckAlertsInput(**self.model_dump(include=set(AlertQuery.model_fields)), timeout_seconds=timeout_seconds)


class CheckAlertsInput(AlertQuery):
    """Ask the Prometheus at ``url`` (base URL, e.g. ``https://prometheus-k8s.openshift-monitoring.svc:9091``)
    which active alerts block.

    - ``filter``: regular expression of alert names to IGNORE (searched, not anchored, as kured's
      ``--alert-filter-regexp``); None: no alert is ignored by name;
    - ``firing_only``: pending alerts do not block (True), or do (False);
    - ``severities``: only alerts whose ``severity`` label is one of these block; empty: any;
    - ``match_labels``: only alerts carrying every one of these label values block; empty: any;
    - ``bearer_token_file`` / ``ca_file``: paths ON THE WORKER of the token sent as
      ``Authorization: Bearer`` (read at each call, so a rotated service-account token is
      picked up) and of the CA bundle that verifies an https Prometheus (default: the system's);
    - ``timeout_seconds``: the whole HTTP exchange.

    The paths, never the token, travel in workflow input and history. Raises pydantic's
    ValidationError for a URL that is not http(s) or a filter that does not compile."""

    timeout_seconds: float = Field(10.0, gt=0)


class ActiveAlert(BaseModel):
    """One active alert as ``/api/v1/alerts`` lists it: ``name`` (its ``alertname``), every
    ``labels`` (``alertname`` included), ``state`` pending / firing, ``active_at`` (when it
    became active, UTC; None if Prometheus gave none), ``value`` (as Prometheus renders it),
    and the ``summary`` / ``description`` annotations ("" when absent; ``message``, the older
    mixins' single annotation, stands in for a missing description)."""

    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    state: str
    active_at: datetime | None = None
    value: str = ""
    summary: str = ""
    description: str = ""

    def label_text(self) -> str:
        """``{node="w1",severity="warning"}``: the labels but ``alertname``, sorted; "" for none."""
        pairs = [f'{k}="{v}"' for k, v in sorted(self.labels.items()) if k != "alertname"]
        return "{" + ",".join(pairs) + "}" if pairs else ""

    def line(self) -> str:
        """``KubeNodeNotReady{node="w1",severity="warning"} firing since 2025-01-01 10:00:03 UTC``."""
        since = f" since {self.active_at.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S UTC')}" if self.active_at else ""
        return f"{self.name}{self.label_text()} {self.state}{since}"


def alerts_line(alerts: list[ActiveAlert], limit: int = LINE_MAX_ALERTS) -> str:
    """The first ``limit`` alerts' :meth:`ActiveAlert.line` joined with ``; `` and ``(+N more)``;
    "" for none."""
    text = "; ".join(a.line() for a in alerts[:limit])
    if len(alerts) > limit:
        text += f" (+{len(alerts) - limit} more)"
    return text


class AlertsAnswer(BaseModel):
    """What ``check_alerts`` found.

    - ``ok``: Prometheus answered and no alert blocks;
    - ``blocking``: the alerts that block, oldest first (by ``active_at``, then name);
    - ``ignored``: how many active alerts did not block; ``ignored_by``: that count per reason
      (:data:`IgnoredBecause`; a filtered alert counts under ``filter`` only);
    - ``active``: how many active alerts Prometheus listed;
    - ``error``: why Prometheus could not be asked or what error it answered (connection refused,
      timeout, HTTP status, ``errorType: error`` of its error envelope, an unreadable token file),
      None when it answered. With an error nothing is known about the alerts: ``ok`` is False and
      the caller decides (fail closed: wait; fail open: go on);
    - ``url``: the Prometheus asked."""

    ok: bool
    blocking: list[ActiveAlert] = Field(default_factory=list)
    ignored: int = 0
    ignored_by: dict[str, int] = Field(default_factory=dict)
    active: int = 0
    error: str | None = None
    url: str = ""

    def line(self) -> str:
        """One line for status: the error, the blocking alerts, or ``no blocking alert``, plus
        ``(N ignored)`` when some were."""
        if self.error is not None:
            return f"Prometheus could not be asked: {self.error}"
        text = alerts_line(self.blocking) if self.blocking else "no blocking alert"
        return text + (f" ({self.ignored} ignored)" if self.ignored else "")
