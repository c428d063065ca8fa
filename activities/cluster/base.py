"""The shared base of activity classes that talk to one cluster through the gateway.

Activities are bound methods of classes holding a lazily built :class:`KubeGateway` (the
factory runs on the first activity; a kubeconfig problem is then a non-retryable
``KubeconfigError``, and a transient failure is retried with the next activity). Each class
names its activities in ``ACTIVITIES``; :meth:`GatewayActivities.activities` returns the bound
methods of every class in the MRO, so a class combining several (``ClusterActivities``) lists
them all. The activities are synchronous (the client blocks): run them on the worker's
ThreadPoolExecutor.

Read-only planning activities (a procedure's preflight) wrap their requests in
:meth:`GatewayActivities.planning_errors`, so an API error fails them fast with a stable type
(``ApiUnreachable``, ``ApiUnauthorized``, ``ApiForbidden``; ``ApiUnavailable`` retryable) instead
of being retried forever like the activities in the middle of a procedure.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from activities.context import fail
from activities.cluster.models import (
    API_ERROR,
    API_FORBIDDEN,
    API_UNAUTHORIZED,
    API_UNAVAILABLE,
    API_UNREACHABLE,
)
from activities.kube.errors import Forbidden, KubeconfigError, KubeError, NotFound, Unauthorized, Unreachable

if TYPE_CHECKING:
    from activities.kube.gateway import KubeGateway

#: A Node update that loses a race (409) is re-read and retried this many times.
CONFLICT_RETRIES = 5


def planning_failure(exc: KubeError) -> tuple[str, bool]:
    """How a read-only planning activity reports ``exc``: ``(failure type, retryable)``.

    :class:`~activities.kube.errors.Unreachable` (connection refused, DNS) → ``ApiUnreachable``;
    401 → ``ApiUnauthorized``; 403 → ``ApiForbidden``; every transient error (5xx, 429,
    timeouts, a reset, 409/410) → ``ApiUnavailable``, retryable; anything else → ``ApiError``.
    """
    if isinstance(exc, Unreachable):
        return API_UNREACHABLE, False
    if isinstance(exc, Unauthorized):
        return API_UNAUTHORIZED, False
    if isinstance(exc, Forbidden):
        return API_FORBIDDEN, False
    if exc.transient:
        return API_UNAVAILABLE, True
    return API_ERROR, False


class ConflictExhausted(Exception):
    """The object kept changing under our conditional patches; the activity is retried later."""


class GatewayActivities:
    """Base of the cluster activity classes (see the module docstring).

    ``gateway_factory`` builds the :class:`KubeGateway`; register the bound methods, e.g.
    ``Worker(..., activities=cls(factory).activities(), activity_executor=ThreadPoolExecutor(...))``.
    """

    #: Names of the activity methods this class defines (in registration order).
    ACTIVITIES: ClassVar[tuple[str, ...]] = ()

    def __init__(self, gateway_factory: Callable[[], KubeGateway]) -> None:
        self._factory = gateway_factory
        self._gateway: KubeGateway | None = None
        self._lock = threading.Lock()

    @property
    def gateway(self) -> KubeGateway:
        """The gateway; a kubeconfig problem is a non-retryable ``KubeconfigError``."""
        if self._gateway is None:
            with self._lock:
                if self._gateway is None:
                    try:
                        self._gateway = self._factory()
                    except KubeconfigError as exc:
                        raise fail("KubeconfigError", str(exc)) from None
        return self._gateway

    @contextlib.contextmanager
    def planning_errors(self, *, policy_decides: bool = False) -> Iterator[None]:
        """Turn a :class:`~activities.kube.errors.KubeError` escaping the block into an
        ``ApplicationError`` of :func:`planning_failure`'s type: connection
        refused / DNS (``ApiUnreachable``), 401 (``ApiUnauthorized``), 403 (``ApiForbidden``) and
        other non-transient answers (``ApiError``) non-retryable; 5xx, 429, timeouts
        (``ApiUnavailable``) retryable, so the caller's planning retry policy bounds them (see
        :func:`planning_failure`). The
        message names the API server and carries the API's own message.

        ``policy_decides``: every type is raised retryable and the caller's retry policy decides
        (``workflows.kit.calls.PLANNING_RETRY`` lists the fail-fast types as non-retryable, the
        default policy retries them): for an activity a procedure calls both while planning and
        in the middle of its work."""
        try:
            yield
        except KubeError as exc:
            type_, retryable = planning_failure(exc)
            server = self._gateway.server if self._gateway is not None else "(not connected)"
            text = str(exc)
            message = text if server in text else f"API server {server}: {text}"
            raise fail(type_, message, retryable=retryable or policy_decides) from None

    def activities(self) -> list[Callable[..., Any]]:
        """Every activity of this class and its bases, bound, for a Worker's ``activities=``."""
        names: list[str] = []
        for cls in reversed(type(self).__mro__):
            for name in cls.__dict__.get("ACTIVITIES", ()):
                if name not in names:
                    names.append(name)
        return [getattr(self, name) for name in names]

    def _node(self, name: str) -> dict[str, Any]:
        """GET the Node; a missing one is a non-retryable ``NodeNotFound``."""
        try:
            return self.gateway.get_node(name)
        except NotFound:
            raise fail("NodeNotFound", f"node {name} not found") from None
