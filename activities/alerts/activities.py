"""``check_alerts``: ask Prometheus which active alerts block a health gate.

One ``GET {url}/api/v1/alerts`` (Prometheus HTTP API, https://prometheus.io/docs/prometheus/
latest/querying/api/#alerts: a JSON envelope ``{"status": "success" | "error", "data":
{"alerts": [...]}, "errorType", "error"}``), then the gate's semantics over the active alerts
(:func:`classify`, see :mod:`activities.alerts.models`).

The client is aiohttp, not a Prometheus client library:

- ``prometheus-api-client`` (PyPI; 0.7.2 needs requests and dateparser, with pandas, numpy and
  matplotlib only as extras now) has no call for ``/api/v1/alerts``: it queries series, and the
  ``ALERTS`` series kured queries carries neither the annotations nor ``activeAt`` that status
  shows; it is also blocking (requests), so it would need a thread per call;
- ``prometheus-client``, the official Python library, exposes metrics and does not query;
- the endpoint is one GET returning a small JSON document. aiohttp is already a runtime
  dependency (the ``notify`` activity), is async, and takes the bearer token (a header) and the
  CA bundle (an ``ssl.SSLContext``) directly.

An unreachable Prometheus never raises: the answer's ``error`` says what happened, and the
caller decides whether that blocks (fail closed) or passes (fail open).
"""

from __future__ import annotations

import json
import re
import ssl
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from temporalio import activity

from activities.alerts.models import CHECK_ALERTS, ActiveAlert, AlertsAnswer, CheckAlertsInput

#: Characters of a non-JSON body quoted in an error.
BODY_QUOTE = 200


def parse_alert(raw: dict[str, Any]) -> ActiveAlert:
    """One element of ``data.alerts`` as an :class:`ActiveAlert` (missing fields empty; an
    unreadable ``activeAt`` is None)."""
    labels = {str(k): str(v) for k, v in (raw.get("labels") or {}).items()}
    notes = raw.get("annotations") or {}
    active_at = None
    if raw.get("activeAt"):
        try:
            active_at = datetime.fromisoformat(str(raw["activeAt"])).astimezone(UTC)
        except ValueError:
            active_at = None
    return ActiveAlert(
        name=labels.get("alertname", ""), labels=labels, state=str(raw.get("state", "")), active_at=active_at,
        value=str(raw.get("value", "")), summary=str(notes.get("summary", "")),
        description=str(notes.get("description") or notes.get("message") or ""),
    )


def classify(raw_alerts: list[dict[str, Any]], input: CheckAlertsInput) -> tuple[list[ActiveAlert], dict[str, int]]:
    """The blocking alerts of ``raw_alerts`` (``data.alerts``), oldest first, and the count of
    the others per reason. In order, an alert is ignored when: the ``filter`` regex finds its
    name (``re.search``, as Go's ``MatchString`` in kured); it is not firing and ``firing_only``;
    ``severities`` is not empty and its ``severity`` label is not in it; a ``match_labels`` value
    differs. Pure."""
    rx = re.compile(input.filter) if input.filter else None
    blocking: list[ActiveAlert] = []
    ignored: dict[str, int] = {}
    for raw in raw_alerts:
        alert = parse_alert(raw)
        reason = None
        if rx is not None and rx.search(alert.name):
            reason = "filter"
        elif input.firing_only and alert.state != "firing":
            reason = "pending"
        elif input.severities and alert.labels.get("severity") not in input.severities:
            reason = "severity"
        elif any(alert.labels.get(k) != v for k, v in input.match_labels.items()):
            reason = "labels"
        if reason is None:
            blocking.append(alert)
        else:
            ignored[reason] = ignored.get(reason, 0) + 1
    far = datetime.max.replace(tzinfo=UTC)
    blocking.sort(key=lambda a: (a.active_at or far, a.name, a.label_text()))
    return blocking, ignored


def answer_from(status: int, text: str, input: CheckAlertsInput) -> AlertsAnswer:
    """The answer for an HTTP ``status`` and body ``text`` from ``/api/v1/alerts``: the
    classified alerts of a success envelope, else an ``error`` naming the status and Prometheus'
    ``errorType: error`` (or the start of a body that is not a Prometheus answer)."""
    try:
        body = json.loads(text)
    except ValueError:
        return AlertsAnswer(ok=False, url=input.url, error=f"HTTP {status}: not a Prometheus API answer: {text[:BODY_QUOTE]!r}")
    if not isinstance(body, dict) or body.get("status") != "success":
        what = f"{body.get('errorType', '?')}: {body.get('error', '?')}" if isinstance(body, dict) else repr(body)[:BODY_QUOTE]
        return AlertsAnswer(ok=False, url=input.url, error=f"HTTP {status}: {what}")
    alerts = (body.get("data") or {}).get("alerts")
    if not isinstance(alerts, list):
        return AlertsAnswer(ok=False, url=input.url, error=f"HTTP {status}: the answer has no data.alerts list")
    blocking, ignored = classify([a for a in alerts if isinstance(a, dict)], input)
    return AlertsAnswer(ok=not blocking, blocking=blocking, ignored=sum(ignored.values()), ignored_by=ignored,
                        active=len(alerts), url=input.url)


def _request_options(input: CheckAlertsInput) -> tuple[dict[str, str], ssl.SSLContext | bool] | str:
    """Headers (the bearer token read now) and the TLS setting, or the error that prevents the call."""
    headers = {"Accept": "application/json"}
    if input.bearer_token_file:
        try:
            token = Path(input.bearer_token_file).read_text().strip()
        except OSError as exc:
            return f"cannot read the bearer token file {input.bearer_token_file}: {exc.strerror or exc}"
        if not token:
            return f"the bearer token file {input.bearer_token_file} is empty"
        headers["Authorization"] = f"Bearer {token}"
    tls: ssl.SSLContext | bool = True
    if input.ca_file:
        try:
            tls = ssl.create_default_context(cafile=input.ca_file)
        except (OSError, ssl.SSLError) as exc:
            return f"cannot load the CA file {input.ca_file}: {exc}"
    return headers, tls


async def ask_prometheus(input: CheckAlertsInput) -> AlertsAnswer:
    """GET ``/api/v1/alerts`` of ``input.url`` and answer (see the module doc). Never raises for
    Prometheus' or the network's trouble: the answer's ``error`` names it."""
    options = _request_options(input)
    if isinstance(options, str):
        return AlertsAnswer(ok=False, url=input.url, error=options)
    headers, tls = options
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=input.timeout_seconds)) as session:
            async with session.get(f"{input.url}/api/v1/alerts", headers=headers, ssl=tls) as resp:
                status, text = resp.status, await resp.text(errors="replace")
    except TimeoutError:
        return AlertsAnswer(ok=False, url=input.url, error=f"no answer within {input.timeout_seconds:g}s")
    except (aiohttp.ClientError, OSError, ssl.SSLError) as exc:
        return AlertsAnswer(ok=False, url=input.url, error=f"{type(exc).__name__}: {exc}")
    return answer_from(status, text, input)


@activity.defn(name=CHECK_ALERTS)
async def check_alerts(input: CheckAlertsInput) -> AlertsAnswer:
    """Which active alerts of the Prometheus at ``input.url`` block now (:class:`AlertsAnswer`).

    Reads only. Never raises for an unreachable Prometheus or an error it answers (``error``
    says so). The input was validated when it was built (a filter that does not compile or a
    URL that is not http(s) never reaches a worker)."""
    answer = await ask_prometheus(input)
    activity.logger.debug("alerts at %s: %s", input.url, answer.line())
    return answer


def alert_activities() -> list[Callable[..., Any]]:
    """The activities of this package, for the worker's registry."""
    return [check_alerts]
