"""Maintenance windows: when a node procedure may start a node (issue 40).

A window is a weekly schedule in a time zone, written ``DAYS HH:MM-HH:MM ZONE``:

- ``DAYS``: ``Mon`` .. ``Sun``, a range ``Mon-Fri`` (``Fri-Mon`` wraps over the week's end), or
  several joined by commas (``Mon,Wed,Fri-Sat``); ``daily`` is ``Mon-Sun``;
- ``HH:MM-HH:MM``: local start and end (24-hour); the end may be ``24:00``; an end before the
  start crosses midnight and the window belongs to its start day (``Fri 22:00-06:00`` is
  Friday 22:00 to Saturday 06:00);
- ``ZONE``: an IANA time zone (``Europe/Berlin``, ``UTC``, ``America/New_York``) read with the
  standard library's :mod:`zoneinfo` (the ``tzdata`` package where the system has no zone files).

Several windows are a union. The semantics are the system-upgrade-controller's: no node starts
outside a window, nodes in flight finish, and the next window goes on with the next node of the
order. Times are local wall-clock times in the zone, so a window stays at 22:00 across a DST
change; a local start that does not exist on the day the clocks go forward (02:30 in a zone that
jumps from 02:00 to 03:00) opens at the first instant after the gap, an ambiguous one (the
clocks go back) at its first occurrence.

Pure functions: no I/O but the zone files, no clock (the caller hands in ``now``, in a workflow
``workflow.now()``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_DAY = {d.lower(): i for i, d in enumerate(DAY_NAMES)}
_TIME = re.compile(r"^(\d{2}):(\d{2})$")
EXAMPLE = "e.g. 'Mon-Fri 22:00-06:00 Europe/Berlin' or 'Sat 00:00-24:00 UTC'"


@dataclass(frozen=True)
class Window:
    """One parsed window: ``days`` (0 = Monday) it starts on, local ``start`` / ``end`` in
    minutes after midnight (``end`` <= ``start``: it ends the next day; 1440: midnight),
    ``zone`` its IANA name, ``spec`` as the operator wrote it."""

    spec: str
    days: frozenset[int]
    start: int
    end: int
    zone: str

    @property
    def tz(self) -> ZoneInfo:
        return _zone(self.zone)

    def intervals_near(self, now: datetime) -> list[tuple[datetime, datetime]]:
        """This window's occurrences (UTC, start inclusive, end exclusive) that start from two
        local days before ``now`` to eight after: every one that may contain ``now`` and the
        next opening."""
        tz = self.tz
        today = now.astimezone(tz).date()
        out = []
        for offset in range(-2, 9):
            day = today + timedelta(days=offset)
            if day.weekday() not in self.days:
                continue
            length = self.end - self.start if self.end > self.start else self.end + 1440 - self.start
            start = _local(day, self.start, tz)
            end = _local(day + timedelta(days=(self.start + length) // 1440), (self.start + length) % 1440, tz)
            if end > start:
                out.append((start, end))
        return out


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def _local(day: date, minutes: int, tz: ZoneInfo) -> datetime:
    """The UTC instant of local ``day`` + ``minutes`` in ``tz`` (a time in a DST gap: the first
    instant after it; an ambiguous one: its first occurrence)."""
    naive = datetime.combine(day, time(minutes // 60, minutes % 60))
    aware = naive.replace(tzinfo=tz)
    utc = aware.astimezone(timezone.utc)
    if utc.astimezone(tz).replace(tzinfo=None) != naive:  # in a gap: zoneinfo read it with the old offset
        # fold=0 in a gap maps past the gap (02:30 -> 03:30 new time): step back to the gap's end.
        probe = utc
        while probe.astimezone(tz).replace(tzinfo=None) > naive and (utc - probe) < timedelta(hours=3):
            probe -= timedelta(minutes=1)
        utc = probe + timedelta(minutes=1)
    return utc


def _parse_time(text: str, spec: str, *, end: bool) -> int:
    m = _TIME.match(text)
    if m is None:
        raise ValueError(f"window {spec!r}: time {text!r} is not HH:MM ({EXAMPLE})")
    h, mi = int(m.group(1)), int(m.group(2))
    if mi > 59 or h > 24 or (h == 24 and (mi != 0 or not end)):
        raise ValueError(f"window {spec!r}: time {text!r} is not a time of day (00:00 to 23:59; 24:00 only as an end)")
    return h * 60 + mi


def _parse_days(text: str, spec: str) -> frozenset[int]:
    if text.lower() == "daily":
        return frozenset(range(7))
    days: set[int] = set()
    for part in text.split(","):
        ends = part.split("-")
        if len(ends) > 2 or any(e.lower() not in _DAY for e in ends):
            raise ValueError(f"window {spec!r}: days {text!r}: use Mon, Tue, Wed, Thu, Fri, Sat, Sun, a range "
                             f"like Mon-Fri, several joined by commas, or daily ({EXAMPLE})")
        a, b = _DAY[ends[0].lower()], _DAY[ends[-1].lower()]
        i = a
        days.add(i)
        while i != b:
            i = (i + 1) % 7
            days.add(i)
    return frozenset(days)


def parse_window(spec: str) -> Window:
    """Parse one ``DAYS HH:MM-HH:MM ZONE``; raises ValueError saying what is wrong."""
    parts = spec.split()
    if len(parts) != 3:
        raise ValueError(f"window {spec!r}: expected DAYS HH:MM-HH:MM ZONE ({EXAMPLE})")
    days_text, times_text, zone = parts
    days = _parse_days(days_text, spec)
    if times_text.count("-") != 1:
        raise ValueError(f"window {spec!r}: times {times_text!r} are not HH:MM-HH:MM ({EXAMPLE})")
    a, b = times_text.split("-")
    start, end = _parse_time(a, spec, end=False), _parse_time(b, spec, end=True)
    if start == end % 1440 and not (start == 0 and end == 1440):
        raise ValueError(f"window {spec!r}: start and end are the same time (for a whole day write 00:00-24:00)")
    try:
        _zone(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"window {spec!r}: unknown time zone {zone!r} (an IANA name like Europe/Berlin or UTC)") from None
    return Window(spec=" ".join(parts), days=days, start=start, end=end, zone=zone)


def parse_windows(specs: Sequence[str]) -> list[Window]:
    """Parse every spec (the first bad one raises ValueError)."""
    return [parse_window(s) for s in specs]


def check_specs(specs: list[str]) -> list[str]:
    """Pydantic validator of an input's ``windows``: parse each (ValueError names the bad one)."""
    parse_windows(specs)
    return specs


def _utc(now: datetime) -> datetime:
    return now if now.tzinfo is not None else now.replace(tzinfo=timezone.utc)


def open_interval(windows: Sequence[Window], now: datetime) -> tuple[datetime, datetime] | None:
    """The union's interval that contains ``now`` (start, end: the end of overlapping and
    adjoining windows together), None when every window is closed."""
    now = _utc(now)
    spans = sorted(iv for w in windows for iv in w.intervals_near(now))
    current: tuple[datetime, datetime] | None = None
    for s, e in spans:
        if current is not None and s <= current[1]:
            current = (current[0], max(current[1], e))
        elif current is not None and current[0] <= now < current[1]:
            break
        else:
            current = (s, e)
    if current is not None and current[0] <= now < current[1]:
        return current
    return None


def is_open(windows: Sequence[Window], now: datetime) -> bool:
    """True when no window is given or ``now`` is inside one of them."""
    return not windows or open_interval(windows, now) is not None


def next_opening(windows: Sequence[Window], now: datetime) -> datetime | None:
    """When a node may start next: ``now`` when a window is open (or none is given), else the
    start of the next one (at most a week away)."""
    now = _utc(now)
    if is_open(windows, now):
        return now
    starts = [s for w in windows for s, _ in w.intervals_near(now) if s > now]
    return min(starts) if starts else None


def describe(windows: Sequence[Window]) -> str:
    """The windows as the operator wrote them, joined (the plan's and status' line)."""
    return "; ".join(w.spec for w in windows)
