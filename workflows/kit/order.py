"""The order of node reports: a node run signals its reports without awaiting each one, and two
signals from one workflow task are two transfer tasks on the server, which may overtake each
other. Each report carries ``(attempt, seq)``; the parent keeps the latest (:func:`overtaken`)."""

from __future__ import annotations


def overtaken(report: tuple[int, int | None], latest: tuple[int, int | None] | None) -> bool:
    """Whether a report numbered ``(attempt, seq)`` was sent before ``latest`` (the numbers of the
    report already taken): by attempt, then by seq. False when either has no seq (reports from
    before the numbers existed are taken as they come) or nothing was taken yet."""
    if latest is None or report[1] is None or latest[1] is None:
        return False
    return (report[0], report[1]) < (latest[0], latest[1])
