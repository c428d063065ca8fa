"""The gluster_healthy gate's pure parts: heal progress per volume and the words in status."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from workflows.shared.glusterfs.health import progress_line, unhealthy_reasons, update_progress
from workflows.shared.glusterfs.models import Assessment, HealProgress, VolumeAssessment

T0 = datetime(2026, 1, 1, 10, 2, tzinfo=UTC)


def _a(**entries: int | None) -> Assessment:
    return Assessment(volumes=[VolumeAssessment(name=v, status="Started", heal_entries=n,
                                                heal_problems=[f"brick x: {n} entries to heal"] if n else [])
                               for v, n in entries.items()])


def test_progress_falls_then_stalls() -> None:
    progress: dict[str, HealProgress] = {}
    update_progress(progress, _a(vol_a=120, vol_b=0), None, T0)
    assert progress["vol_a"].first == 120 and not progress["vol_a"].falling
    update_progress(progress, _a(vol_a=37, vol_b=0), None, T0 + timedelta(seconds=10))
    hp = progress["vol_a"]
    assert (hp.entries, hp.previous, hp.lowest, hp.falling, hp.last_progress_at) == (37, 120, 37, True, T0 + timedelta(seconds=10))
    assert progress_line(progress) == "heal: vol_a 37 entries (was 120, falling); vol_b clean"
    update_progress(progress, _a(vol_a=40, vol_b=0), None, T0 + timedelta(seconds=400))
    hp = progress["vol_a"]
    assert not hp.falling and hp.last_progress_at == T0 + timedelta(seconds=10)  # no new low: the stall clock runs
    assert "not falling" in progress_line(progress)


def test_only_named_volumes_are_followed_and_reasons_name_them() -> None:
    progress: dict[str, HealProgress] = {}
    a = _a(vol_a=5, vol_b=3)
    update_progress(progress, a, ["vol_b"], T0)
    assert list(progress) == ["vol_b"]
    assert unhealthy_reasons(a, ["vol_b"]) == ["vol_b: brick x: 3 entries to heal"]
    assert len(unhealthy_reasons(a, None)) == 2
