"""lockkeeper's own Kubernetes error types (kopf ``_cogs/clients/errors.py`` style).

The gateway (:mod:`activities.kube.gateway`) maps every ``kubernetes.client.exceptions.ApiException``
and every transport error to one of these, so no other module needs to know the client.
Each error carries the API's ``Status`` body when there was one (``status``, ``reason``,
``message``, ``details``), as the kube-apiserver writes it
(apimachinery ``pkg/api/errors/errors.go``).

When an activity lets one of these escape, Temporal records the class name as the failure
type (``"NotFound"``, ``"Conflict"``, ...), so a workflow's retry policy can name them in
``non_retryable_error_types``. Which ones are worth retrying is flagged by
:attr:`KubeError.transient`.
"""

from __future__ import annotations

import json
from typing import Any


class KubeError(Exception):
    """An error from the Kubernetes API or from reaching it.

    ``status`` is the HTTP code (0 when no response arrived), ``reason`` the Status reason
    (``NotFound``, ``Conflict``, ``TooManyRequests``...), ``message`` the API's own wording,
    ``details`` the Status ``details`` dict (``name``, ``kind``, ``causes``), ``body`` the
    decoded Status body (``{}`` when the answer was not a Status).
    """

    #: Whether retrying the same request later can succeed without a human changing anything.
    transient: bool = False

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        reason: str = "",
        details: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason
        self.details = details or {}
        self.body = body or {}
        self.retry_after = retry_after

    @property
    def causes(self) -> list[dict[str, Any]]:
        """``details.causes`` of the Status (``[{"reason", "message", "field"?}]``)."""
        causes = self.details.get("causes") or []
        return [c for c in causes if isinstance(c, dict)]

    def __str__(self) -> str:
        if self.status:
            return f"{self.message} ({self.status} {self.reason})".rstrip()
        return self.message


class KubeconfigError(KubeError):
    """The kubeconfig (or in-cluster service account) cannot be loaded: missing file, bad
    YAML, unknown context, no cluster server. Raised when the gateway is built."""


class BadRequest(KubeError):
    """400: the request is malformed (our bug, or a server that does not support it)."""


class Unauthorized(KubeError):
    """401: the credentials were refused (expired token?)."""


class Forbidden(KubeError):
    """403: RBAC denies the verb; the message names the missing permission."""


class NotFound(KubeError):
    """404: the object (or the resource type) does not exist."""


class Conflict(KubeError):
    """409 Conflict: stale resourceVersion or failed precondition. Re-read and retry."""

    transient = True


class AlreadyExists(Conflict):
    """409 AlreadyExists: POST of a name that exists."""

    transient = False


class Gone(KubeError):
    """410 Expired/Gone: a watch or continue token is too old; re-list."""

    transient = True


class UnsupportedMediaType(KubeError):
    """415: the server refused the patch/body content type."""


class Invalid(KubeError):
    """422 Invalid: the object fails validation; ``causes`` name the fields."""


class TooManyRequests(KubeError):
    """429: throttled, or (eviction) refused because of a PodDisruptionBudget.

    For an eviction the Status ``message`` is "Cannot evict pod as it would violate the pod's
    disruption budget." and ``causes`` carry the budget's own sentence
    (``{"reason": "DisruptionBudget", "message": "The disruption budget X needs 1 healthy pods
    and has 1 currently"}``). ``retry_after`` is the ``Retry-After`` header in seconds, if any
    (the apiserver sends none for a PDB violation, 10 while the budget is being processed).
    """

    transient = True

    @property
    def disruption_budget_messages(self) -> list[str]:
        """The ``DisruptionBudget`` causes' messages, in order."""
        return [str(c.get("message", "")) for c in self.causes if c.get("reason") == "DisruptionBudget"]


class ServerError(KubeError):
    """5xx other than 503/504: the server failed (InternalError). Usually transient."""

    transient = True


class Unavailable(KubeError):
    """503/504, a connection failure, a reset or a client-side timeout: try again later."""

    transient = True


class Unreachable(Unavailable):
    """No connection could be made at all: connection refused, no route to the host, or the
    server's host name does not resolve (DNS). Transient for a procedure in the middle of its
    work (the API server may be restarting); a read-only preflight fails at once instead
    (``activities.cluster.base.planning_failure``)."""


_BY_STATUS: dict[int, type[KubeError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    415: UnsupportedMediaType,
    422: Invalid,
    429: TooManyRequests,
    503: Unavailable,
    504: Unavailable,
}


def parse_status_body(body: str | bytes | None) -> dict[str, Any]:
    """Decode a ``Status`` JSON body; ``{}`` when the body is empty or not a JSON object."""
    if not body:
        return {}
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def error_for_status(
    status: int,
    *,
    body: str | bytes | None = None,
    reason: str | None = None,
    retry_after: str | float | None = None,
    what: str = "",
) -> KubeError:
    """Build the :class:`KubeError` subclass matching an HTTP status and Status body.

    ``reason`` is the HTTP reason phrase (used when the body is no Status), ``what`` a short
    description of the request for messages without a Status (e.g. ``"patch nodes worker-1"``).
    """
    parsed = parse_status_body(body)
    api_reason = str(parsed.get("reason") or reason or "")
    message = str(parsed.get("message") or "")
    if not message:
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
        message = (text.strip() or reason or "error")[:500]
        if what:
            message = f"{message} ({what})"
    details = parsed.get("details") if isinstance(parsed.get("details"), dict) else {}
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else KubeError
    if cls is Conflict and api_reason == "AlreadyExists":
        cls = AlreadyExists
    seconds: float | None = None
    if retry_after not in (None, ""):
        try:
            seconds = float(retry_after)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            seconds = None
    return cls(message, status=status, reason=api_reason, details=details, body=parsed, retry_after=seconds)
