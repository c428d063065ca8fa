"""The ``notify`` activity: POST a :class:`~activities.notify.models.NotifyEvent` as JSON to every
webhook in ``LOCKKEEPER_NOTIFY_URL``.

URLs are read by the worker (never from workflow input or history: a Slack webhook URL is a
secret). Each attempt posts to the URLs that have not answered 2xx yet (kept in the activity's
heartbeat details), so a retry after one of two receivers failed does not post twice to the other.
Any failure raises, and Temporal retries with the workflow's policy; the workflow never waits for
the outcome (:mod:`workflows.kit.notify`).
"""

from __future__ import annotations

import re
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.notify.models import NotifyEvent, NotifyResult

#: Activity name the workflows call.
NOTIFY = "notify"


def parse_urls(value: str | None) -> list[str]:
    """``LOCKKEEPER_NOTIFY_URL``: one or more http(s) URLs separated by commas or whitespace.
    Raises ValueError for an entry that is not an http(s) URL."""
    urls = [u for u in re.split(r"[,\s]+", value or "") if u]
    for u in urls:
        if not re.match(r"^https?://[^/\s]+", u):
            raise ValueError(f"LOCKKEEPER_NOTIFY_URL: {u!r} is not an http(s) URL")
    return urls


def _redact(url: str) -> str:
    # Webhook paths carry the secret (Slack: /services/T../B../token): log scheme and host only.
    m = re.match(r"^(https?://[^/]+)", url)
    return (m.group(1) + "/…") if m else "?"


class Notifier:
    """Holds the webhook URLs; ``notify`` is the activity. ``timeout``: seconds per POST."""

    def __init__(self, urls: list[str], timeout: float = 5.0) -> None:
        self.urls = list(urls)
        self.timeout = timeout

    @activity.defn(name=NOTIFY, no_thread_cancel_exception=True)
    async def notify(self, event: NotifyEvent) -> NotifyResult:
        """POST ``event`` to every URL not yet reached. Raises ``ApplicationError`` (retryable)
        naming the receivers that failed and why (status code or connection error)."""
        import aiohttp

        if not self.urls:
            return NotifyResult(skipped=True)
        details = activity.info().heartbeat_details
        done: set[str] = set(details[0]) if details else set()
        body: dict[str, Any] = event.model_dump(mode="json", exclude_none=True)
        failures: list[str] = []
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for url in self.urls:
                if url in done:
                    continue
                try:
                    async with session.post(url, json=body) as resp:
                        if 200 <= resp.status < 300:
                            done.add(url)
                            activity.heartbeat(sorted(done))
                        else:
                            failures.append(f"{_redact(url)}: HTTP {resp.status}")
                except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                    failures.append(f"{_redact(url)}: {type(exc).__name__} {exc}".strip())
        if failures:
            raise ApplicationError(f"webhook {event.event} not delivered: " + "; ".join(failures), type="NotifyFailed")
        return NotifyResult(sent=[_redact(u) for u in self.urls])
