"""Fault injection and the request record of the simulated API server.

``FaultInjector`` decides, per API request (paths under /api and /apis only), whether to answer
with an injected 500, 503 or 429 (+ ``Retry-After``), or to hang for ``timeout_seconds`` and then
drop the connection; ``latency_seconds`` delays every request it lets through (a slow API server:
a write lands that much after it was sent). Rates are probabilities in [0, 1] and can be limited to some verbs
(``MUTATING_VERBS`` for writes only) and resources. It can also drop every open watch stream and
answer the next N watches with a 410 Expired ERROR event.

``RequestRecord`` keeps every request the server handled (``RequestEntry``) for tests to query.
Both are driven from Python (``sim.faults`` / ``sim.requests``) or over HTTP (``/_sim/...``).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

MUTATING_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass(frozen=True)
class RequestEntry:
    """One handled request. ``verb`` is the Kubernetes verb (get, list, watch, create, update,
    patch, delete, deletecollection) or the lower-case HTTP method for non-resource paths;
    ``resource`` the plural ("" for discovery), ``code`` the HTTP status (0 = connection dropped),
    ``time`` Unix seconds when the request arrived (entries are added when the response is done,
    so a watch appears once its stream ends)."""

    verb: str
    resource: str
    group: str
    subresource: str
    namespace: str
    name: str
    user_agent: str
    code: int
    time: float
    method: str
    path: str


class RequestRecord:
    """Bounded in-memory log of handled requests (newest last)."""

    def __init__(self, maxlen: int = 100_000) -> None:
        self._entries: deque[RequestEntry] = deque(maxlen=maxlen)

    @property
    def maxlen(self) -> int:
        """Entries kept: the oldest are dropped beyond it."""
        return self._entries.maxlen or 0

    def add(self, entry: RequestEntry) -> None:
        """Append one entry."""
        self._entries.append(entry)

    def entries(self, **match: Any) -> list[RequestEntry]:
        """Entries whose fields equal every keyword given, e.g. ``entries(verb="create", subresource="eviction")``."""
        return [e for e in self._entries if all(getattr(e, k) == v for k, v in match.items())]

    def count(self, **match: Any) -> int:
        """Number of entries matching (see ``entries``)."""
        return len(self.entries(**match))

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()

    def to_json(self) -> list[dict]:
        """All entries as JSON-ready dicts."""
        return [asdict(e) for e in self._entries]

    def __len__(self) -> int:
        return len(self._entries)


@dataclass
class FaultDecision:
    """What to do with one request: ``kind`` is "ok", "error" (``code``) or "timeout"; an "ok"
    request is served after ``delay`` seconds."""

    kind: str
    code: int = 0
    delay: float = 0.0


class FaultInjector:
    """Probabilistic API faults (see module doc). All rates default to 0 (no faults)."""

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)
        self._watch_stops: set[asyncio.Event] = set()
        self.clear()

    def clear(self) -> None:
        """Reset every rate and pending forced expiry."""
        self.error_rates: dict[int, float] = {500: 0.0, 503: 0.0, 429: 0.0}
        self.timeout_rate = 0.0
        self.timeout_seconds = 5.0
        self.latency_seconds = 0.0
        self.retry_after_seconds = 1
        self.verbs: frozenset[str] | None = None
        self.resources: frozenset[str] | None = None
        self.expire_watches = 0

    def reseed(self, seed: int) -> None:
        """Roll the same dice from here on (a test that needs its failures to land)."""
        self._rng.seed(seed)

    def configure(self, *, error_500: float | None = None, error_503: float | None = None,
                  error_429: float | None = None, timeout: float | None = None,
                  timeout_seconds: float | None = None, retry_after_seconds: int | None = None,
                  latency_seconds: float | None = None,
                  verbs: list[str] | str | None = None, resources: list[str] | None = None,
                  expire_watches: int | None = None) -> None:
        """Set rates (probabilities 0..1) and filters; ``verbs="mutating"`` means MUTATING_VERBS.

        Unspecified arguments keep their value. ``verbs=[]``/``resources=[]`` remove the filter.
        Raises ValueError for a rate outside [0, 1].
        """
        for code, rate in ((500, error_500), (503, error_503), (429, error_429)):
            if rate is not None:
                self.error_rates[code] = _rate(rate)
        if timeout is not None:
            self.timeout_rate = _rate(timeout)
        if timeout_seconds is not None:
            self.timeout_seconds = float(timeout_seconds)
        if latency_seconds is not None:
            if latency_seconds < 0:
                raise ValueError(f"latency_seconds must be >= 0, got {latency_seconds}")
            self.latency_seconds = float(latency_seconds)
        if retry_after_seconds is not None:
            self.retry_after_seconds = int(retry_after_seconds)
        if verbs is not None:
            self.verbs = MUTATING_VERBS if verbs == "mutating" else (frozenset(verbs) or None)
        if resources is not None:
            self.resources = frozenset(resources) or None
        if expire_watches is not None:
            self.expire_watches = int(expire_watches)

    def configure_from_json(self, body: dict) -> None:
        """``POST /_sim/faults`` body: the ``configure`` keywords; ``{"clear": true}`` resets first;
        ``{"drop_watches": true}`` drops open watch streams."""
        body = dict(body)
        if body.pop("clear", False):
            self.clear()
        drop = body.pop("drop_watches", False)
        self.configure(**body)
        if drop:
            self.drop_watches()

    def decide(self, verb: str, resource: str) -> FaultDecision:
        """Roll the dice for one API request."""
        if self.verbs is not None and verb not in self.verbs:
            return FaultDecision("ok")
        if self.resources is not None and resource not in self.resources:
            return FaultDecision("ok")
        roll = self._rng.random()
        acc = 0.0
        for code in (500, 503, 429):
            acc += self.error_rates[code]
            if roll < acc:
                return FaultDecision("error", code)
        acc += self.timeout_rate
        if roll < acc:
            return FaultDecision("timeout")
        return FaultDecision("ok", delay=self.latency_seconds)

    def take_forced_expiry(self) -> bool:
        """True (and consume one) when the next watch must get 410 Expired."""
        if self.expire_watches > 0:
            self.expire_watches -= 1
            return True
        return False

    def expire_next_watch(self, count: int = 1) -> None:
        """Answer the next ``count`` watch requests with an ERROR 410 Expired event."""
        self.expire_watches += count

    # Watch streams register a stop event so that they can be dropped on demand.
    def register_watch(self) -> asyncio.Event:
        """Used by the server: an Event that, when set, ends that watch stream abruptly."""
        ev = asyncio.Event()
        self._watch_stops.add(ev)
        return ev

    def unregister_watch(self, ev: asyncio.Event) -> None:
        """Used by the server when a watch stream ends."""
        self._watch_stops.discard(ev)

    def drop_watches(self) -> int:
        """Drop every open watch stream (the connection closes without a final chunk); returns how many."""
        n = len(self._watch_stops)
        for ev in list(self._watch_stops):
            ev.set()
        return n

    @property
    def open_watches(self) -> int:
        """Number of watch streams currently open."""
        return len(self._watch_stops)

    def to_json(self) -> dict:
        """Current settings."""
        return {"error_500": self.error_rates[500], "error_503": self.error_rates[503],
                "error_429": self.error_rates[429], "timeout": self.timeout_rate,
                "timeout_seconds": self.timeout_seconds, "retry_after_seconds": self.retry_after_seconds,
                "latency_seconds": self.latency_seconds,
                "verbs": sorted(self.verbs) if self.verbs else None,
                "resources": sorted(self.resources) if self.resources else None,
                "expire_watches": self.expire_watches, "open_watches": self.open_watches}


def _rate(x: float) -> float:
    x = float(x)
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"rate must be within [0, 1], got {x}")
    return x


def now() -> float:
    """Unix seconds (for RequestEntry.time)."""
    return time.time()
