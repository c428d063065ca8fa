"""Committed store events and the subscriptions that receive them (watch streams, agents)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Event:
    """A committed change. ``object``/``old`` are the stored dicts: READ ONLY."""

    type: str
    resource: str
    object: dict
    old: dict | None
    rv: int
    _line: bytes | None = field(default=None, repr=False, compare=False)

    def line(self) -> bytes:
        """The watch-stream line ``{"type":T,"object":{...}}\\n``, serialized once and cached."""
        if self._line is None:
            self._line = (json.dumps({"type": self.type, "object": self.object}, separators=(",", ":"))
                          + "\n").encode()
        return self._line


class Subscription:
    """Receives every committed Event (optionally filtered by resource key and object name) in
    commit order."""

    def __init__(self, on_close: Callable[[Subscription], None], resources: frozenset[str] | None,
                 names: frozenset[str] | None = None, node_names: frozenset[str] | None = None) -> None:
        self._on_close = on_close
        self.resources = resources
        #: Only events whose object has one of these names (None: every name).
        self.names = names
        #: Only events whose object, or its state before a change, has one of these
        #: ``spec.nodeName`` values (None: every object).
        self.node_names = node_names
        self.queue: asyncio.Queue[Event] = asyncio.Queue()
        self.closed = False

    def wants(self, ev: Event, name: str) -> bool:
        """Whether ``ev`` (its object named ``name``) passes this subscription's filters."""
        if self.resources is not None and ev.resource not in self.resources:
            return False
        if self.names is not None and name not in self.names:
            return False
        if self.node_names is None:
            return True
        return any(((o or {}).get("spec") or {}).get("nodeName") in self.node_names for o in (ev.object, ev.old))

    async def get(self) -> Event:
        """Next event (waits)."""
        return await self.queue.get()

    def close(self) -> None:
        """Stop receiving events (idempotent)."""
        self.closed = True
        self._on_close(self)

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        if self.closed and self.queue.empty():
            raise StopAsyncIteration
        return await self.queue.get()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
