"""What a workflow's history says of its activities' heartbeat timeouts and start-to-close bounds."""

from __future__ import annotations

from typing import Any


async def heartbeat_timeouts(handle: Any, names: set[str]) -> dict[str, list[float]]:
    """Activity name -> the heartbeat timeout (seconds, 0 for none) of each time the workflow of
    ``handle`` scheduled it, for every name in ``names`` (an empty list when never scheduled)."""
    out: dict[str, list[float]] = {n: [] for n in names}
    async for ev in handle.fetch_history_events():
        if ev.HasField("activity_task_scheduled_event_attributes"):
            attrs = ev.activity_task_scheduled_event_attributes
            if attrs.activity_type.name in out:
                out[attrs.activity_type.name].append(attrs.heartbeat_timeout.ToTimedelta().total_seconds())
    return out


def all_within(timeouts: dict[str, list[float]], most: float) -> bool:
    """Every name was scheduled, each time with a heartbeat timeout in (0, ``most``] seconds."""
    return all(values and all(0 < v <= most for v in values) for values in timeouts.values())


async def start_to_close(handle: Any, names: set[str]) -> dict[str, list[float]]:
    """Activity name -> the start-to-close timeout (seconds) of each time the workflow of
    ``handle`` scheduled it, for every name in ``names`` (an empty list when never scheduled)."""
    out: dict[str, list[float]] = {n: [] for n in names}
    async for ev in handle.fetch_history_events():
        if ev.HasField("activity_task_scheduled_event_attributes"):
            attrs = ev.activity_task_scheduled_event_attributes
            if attrs.activity_type.name in out:
                out[attrs.activity_type.name].append(attrs.start_to_close_timeout.ToTimedelta().total_seconds())
    return out
