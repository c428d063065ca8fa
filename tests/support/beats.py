"""What a workflow's history says of its activities' heartbeat timeouts and start-to-close bounds."""

from __future__ import annotations

from typing import Any


async def _scheduled(handle: Any, names: set[str], field: str) -> dict[str, list[float]]:
    """Activity name -> the timeout ``field`` (seconds, 0 for none) of each time the workflow of
    ``handle`` scheduled it, for every name in ``names`` (an empty list when never scheduled)."""
    out: dict[str, list[float]] = {n: [] for n in names}
    async for ev in handle.fetch_history_events():
        if ev.HasField("activity_task_scheduled_event_attributes"):
            attrs = ev.activity_task_scheduled_event_attributes
            if attrs.activity_type.name in out:
                out[attrs.activity_type.name].append(getattr(attrs, field).ToTimedelta().total_seconds())
    return out


async def heartbeat_timeouts(handle: Any, names: set[str]) -> dict[str, list[float]]:
    """Activity name -> the heartbeat timeout of each scheduling (see :func:`_scheduled`)."""
    return await _scheduled(handle, names, "heartbeat_timeout")


async def start_to_close(handle: Any, names: set[str]) -> dict[str, list[float]]:
    """Activity name -> the start-to-close timeout of each scheduling (see :func:`_scheduled`)."""
    return await _scheduled(handle, names, "start_to_close_timeout")


def all_within(timeouts: dict[str, list[float]], most: float) -> bool:
    """Every name was scheduled, each time with a heartbeat timeout in (0, ``most``] seconds."""
    return all(values and all(0 < v <= most for v in values) for values in timeouts.values())
