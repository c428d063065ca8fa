"""The shared base of activity classes that talk to one cluster through the gateway.

Activities are bound methods of classes holding a lazily built :class:`KubeGateway` (the
factory runs on the first activity; a kubeconfig problem is then a non-retryable
``KubeconfigError``, and a transient failure is retried with the next activity). Each class
names its activities in ``ACTIVITIES``; :meth:`GatewayActivities.activities` returns the bound
methods of every class in the MRO, so a class combining several (``ClusterActivities``) lists
them all. The activities are synchronous (the client blocks): run them on the worker's
ThreadPoolExecutor.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from activities.context import fail
from activities.kube.errors import KubeconfigError, NotFound

if TYPE_CHECKING:
    from activities.kube.gateway import KubeGateway

#: A Node update that loses a race (409) is re-read and retried this many times.
CONFLICT_RETRIES = 5


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
