"""The client's exceptions as the project's error types (:mod:`activities.kube.errors`).

Duck-typed over ``kubernetes.client.exceptions.ApiException`` (``status``, ``reason``,
``headers``, ``body``), so this module needs no client import. The Status body is kept, in the
kube-apiserver's own wording (apimachinery ``pkg/api/errors/errors.go``).
"""

from __future__ import annotations

import re
from typing import Any

from activities.kube.errors import KubeError, Unavailable, error_for_status
from activities.kube.kubeconfig import mask_secrets

_HANDSHAKE = re.compile(r"Handshake status (\d{3})")


def map_api_exception(exc: Any, what: str) -> KubeError:
    """An ApiException → our error type; status 0 (no answer) is ``Unavailable``. ``what``
    describes the request for messages without a Status (``"patch nodes worker-1"``)."""
    status = int(exc.status or 0)
    headers = exc.headers or {}
    retry_after = headers.get("Retry-After") if hasattr(headers, "get") else None
    if status == 0:
        return Unavailable(f"{what}: {mask_secrets(str(exc.reason or exc))}")
    body = exc.body if isinstance(exc.body, str | bytes) else None
    return error_for_status(status, body=body, reason=str(exc.reason or ""), retry_after=retry_after, what=what)


def map_exec_exception(exc: Any, what: str) -> KubeError:
    """A refused exec websocket arrives as ``ApiException(status=0)`` whose reason is the
    websocket client's "Handshake status 404 Not Found -+-+- {headers} -+-+- {body}": map the
    handshake's HTTP status and Status body like any other answer (a missing pod is NotFound,
    not a transient error)."""
    reason = str(exc.reason or "")
    m = _HANDSHAKE.search(reason)
    if not exc.status and m:
        body = reason.rsplit("-+-+-", 1)[1].strip() if reason.count("-+-+-") >= 2 else None
        return error_for_status(int(m.group(1)), body=body, reason=reason.split("-+-+-")[0].strip(), what=what)
    return map_api_exception(exc, what)
