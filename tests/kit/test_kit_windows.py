"""Maintenance windows, the pure part (workflows/kit/windows.py): parsing, the next opening,
windows over midnight, a union, DST changes, and a seeded property check that a node window
asking ``next_opening`` never starts a node outside a window (an independent wall-clock check)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from workflows.kit.windows import DAY_NAMES, is_open, next_opening, open_interval, parse_window, parse_windows
from workflows.machineconfig.models import MachineConfigRolloutInput
from workflows.runtime_migration.models import RuntimeMigrationInput

UTC = timezone.utc


def at(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_a_spec_parses_days_times_and_zone():
    w = parse_window("Mon-Fri 22:00-06:00 Europe/Berlin")
    assert w.days == frozenset(range(5)) and (w.start, w.end) == (22 * 60, 6 * 60) and w.zone == "Europe/Berlin"
    assert parse_window("Fri-Mon 01:00-02:00 UTC").days == frozenset({4, 5, 6, 0})
    assert parse_window("sat,Sun 00:00-24:00 UTC").days == frozenset({5, 6})
    assert parse_window("daily  02:00-04:00   America/New_York").spec == "daily 02:00-04:00 America/New_York"


@pytest.mark.parametrize(("spec", "words"), [
    ("Mon-Fri 22:00-06:00", "expected DAYS HH:MM-HH:MM ZONE"),
    ("Mon-Fry 22:00-06:00 UTC", "days 'Mon-Fry'"),
    ("Mon 22-06 UTC", "time '22' is not HH:MM"),
    ("Mon 25:00-06:00 UTC", "not a time of day"),
    ("Mon 24:00-06:00 UTC", "24:00 only as an end"),
    ("Mon 10:60-11:00 UTC", "not a time of day"),
    ("Mon 10:00-10:00 UTC", "start and end are the same time"),
    ("Mon 10:00-11:00 Mars/Olympus", "unknown time zone 'Mars/Olympus'"),
    ("Mon 10:00-11:00 ../etc/passwd", "unknown time zone"),
    ("Mon 10:00:11:00 UTC", "are not HH:MM-HH:MM"),
])
def test_bad_specs_are_refused_naming_what_is_wrong(spec, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        parse_window(spec)


def test_the_input_models_refuse_a_bad_window_before_anything_starts():
    with pytest.raises(ValidationError, match="unknown time zone"):
        MachineConfigRolloutInput(windows=["Mon 10:00-11:00 Nowhere/Town"])
    with pytest.raises(ValidationError, match="expected DAYS"):
        RuntimeMigrationInput(nodes=["n1"], host_access={}, target_runtime="docker", windows=["weekends"])
    assert MachineConfigRolloutInput(windows=["Sat 00:00-24:00 UTC"]).windows == ["Sat 00:00-24:00 UTC"]
    assert MachineConfigRolloutInput().windows == []


def test_no_window_means_always_open():
    assert is_open([], at(2026, 11, 29, 3)) and next_opening([], at(2026, 11, 29, 3)) == at(2026, 11, 29, 3)


def test_an_overnight_window_belongs_to_its_start_day():
    ws = parse_windows(["Fri 22:00-06:00 UTC"])  # Friday 2026-11-27 22:00 to Saturday 06:00
    assert is_open(ws, at(2026, 11, 28, 5, 59))  # Saturday morning: Friday's window
    assert not is_open(ws, at(2026, 11, 28, 6, 0))
    assert not is_open(ws, at(2026, 11, 27, 5, 0))  # Friday morning: Thursday has no window
    assert next_opening(ws, at(2026, 11, 28, 6, 0)) == at(2026, 12, 4, 22, 0)
    assert open_interval(ws, at(2026, 11, 27, 23)) == (at(2026, 11, 27, 22), at(2026, 11, 28, 6))


def test_windows_are_a_union_and_adjoining_ones_merge():
    ws = parse_windows(["Mon-Fri 22:00-06:00 Europe/Berlin", "Sat 00:00-24:00 UTC"])
    # Friday 22:00 Berlin (21:00 UTC) to Saturday 06:00 Berlin, then all Saturday UTC: one span.
    assert open_interval(ws, at(2026, 11, 28, 12)) == (at(2026, 11, 27, 21), at(2026, 11, 29, 0))
    assert not is_open(ws, at(2026, 11, 29, 12))  # Sunday: closed
    assert next_opening(ws, at(2026, 11, 29, 12)) == at(2026, 11, 30, 21)  # Monday 22:00 Berlin
    assert next_opening(ws, at(2026, 11, 24, 12)) == at(2026, 11, 24, 21)  # Tuesday 22:00 Berlin


def test_a_window_keeps_its_local_time_across_dst_changes():
    ws = parse_windows(["Sun 02:00-04:00 America/New_York"])
    # Before the spring change (EST, -5): 07:00 UTC; the Sunday after it (EDT, -4): 06:00 UTC.
    assert next_opening(ws, at(2026, 3, 1, 0)) == at(2026, 3, 1, 7)
    assert next_opening(ws, at(2026, 3, 14, 0)) == at(2026, 3, 15, 6)
    # The day of the change itself, 2026-03-08: 02:00 does not exist; the window opens at the
    # end of the gap (03:00 EDT = 07:00 UTC) and still closes at 04:00 EDT (08:00 UTC).
    assert next_opening(ws, at(2026, 3, 7, 12)) == at(2026, 3, 8, 7)
    assert open_interval(ws, at(2026, 3, 8, 7, 30)) == (at(2026, 3, 8, 7), at(2026, 3, 8, 8))
    # The autumn change (2026-11-01): 02:00-04:00 EST is 07:00-09:00 UTC, a three-hour-long
    # night from 01:00 EDT is not counted twice.
    assert open_interval(ws, at(2026, 11, 1, 8)) == (at(2026, 11, 1, 7), at(2026, 11, 1, 9))
    berlin = parse_windows(["Mon-Fri 22:00-06:00 Europe/Berlin"])
    # Berlin leaves summer time on 2026-10-25: Friday 23rd opens at 20:00 UTC, Monday 26th at 21:00 UTC.
    assert next_opening(berlin, at(2026, 10, 23, 12)) == at(2026, 10, 23, 20)
    assert next_opening(berlin, at(2026, 10, 24, 12)) == at(2026, 10, 26, 21)


ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "America/Santiago"]


def _wall_open(specs: list[str], t: datetime) -> bool:
    """An independent check: is ``t``, read as wall-clock time in each window's zone, inside it?"""
    for spec in specs:
        days_text, times, zone = spec.split()
        a, b = times.split("-")
        start = int(a[:2]) * 60 + int(a[3:])
        end = int(b[:2]) * 60 + int(b[3:])
        days = {DAY_NAMES.index(d) for d in days_text.split(",")}
        local = t.astimezone(ZoneInfo(zone))
        minute = local.hour * 60 + local.minute + local.second / 60
        if end > start:
            if local.weekday() in days and start <= minute < end:
                return True
        else:  # over midnight: the start day's evening or the next day's morning
            if local.weekday() in days and minute >= start:
                return True
            if (local.weekday() - 1) % 7 in days and minute < end:
                return True
    return False


def test_property_no_node_starts_outside_a_window_over_20_random_schedules():
    rng = random.Random(40)
    for _ in range(20):
        specs = []
        for _ in range(rng.randint(1, 3)):
            days = sorted(rng.sample(range(7), rng.randint(1, 3)))
            start = rng.randrange(0, 24 * 60, 15)
            end = (start + rng.randrange(30, 12 * 60, 15)) % (24 * 60)
            specs.append(f"{','.join(DAY_NAMES[d] for d in days)} {start // 60:02d}:{start % 60:02d}-"
                         f"{end // 60:02d}:{end % 60:02d} {rng.choice(ZONES)}")
        ws = parse_windows(specs)
        t = at(2026, 1, 1) + timedelta(minutes=rng.randrange(0, 365 * 24 * 60))
        for _ in range(40):  # a node window: the next node starts at the next opening, runs, the next one...
            t = next_opening(ws, t)
            assert t is not None and is_open(ws, t)
            assert _wall_open(specs, t), (specs, t)
            t += timedelta(minutes=rng.randrange(1, 600))
