"""One WATCH window from a resourceVersion, shared by every wait that follows objects by watching
(a node's annotations or Ready condition, the drain's pods going away).

The pattern (Kubernetes API concepts, "Efficient detection of changes"): a resourceVersion to
start from (a LIST's, or none: the API server then sends the current objects first as ADDED
events, one request instead of two), then WATCH in windows of at most
:data:`activities.context.HEARTBEAT_INTERVAL_SECONDS`, so the caller can heartbeat and notice a
cancellation between windows. A change is seen as soon as the API server sends it. An expired
resourceVersion (410 Gone) or a broken stream re-lists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from activities.context import log, pause
from activities.kube import objects
from activities.kube.errors import Gone, Unavailable, Unreachable

#: Seconds to wait before re-listing after a broken watch stream.
RELIST_PAUSE_SECONDS = 0.5


def watch_window(
    events: Callable[[str | None, int], Iterable[tuple[str, dict[str, Any]]]],
    rv: str | None,
    seconds: int,
    on_event: Callable[[str, dict[str, Any]], bool],
    relist: Callable[[], str | None],
    what: str,
    *,
    resume: bool = False,
) -> str | None:
    """Follow one WATCH window: ``events(rv, seconds)`` yields ``(type, object)`` pairs (the
    gateway's watch); every event but BOOKMARK goes to ``on_event(type, object)``, which returns
    True to end the window early. Returns the last resourceVersion seen (BOOKMARKs included).

    On 410 Gone, or a broken stream (``Unavailable``: logged as ``"<what>: watch broke"``, then a
    pause of :data:`RELIST_PAUSE_SECONDS`), calls ``relist()`` (the caller reloads its objects)
    and returns the resourceVersion it gives. With ``resume``, a stream broken with no answer
    (a read timeout of a slow API server, a reset; not ``Unreachable``: no connection at all)
    returns the last resourceVersion seen instead, after the same pause, and the next window
    watches on from there, as client-go's reflector does: a LIST of every object is the most
    expensive request there is, on a server already slow (issue 40, thousands of nodes). An
    answer such as 503 still re-lists, so an outage still fails the caller's LIST.
    Whatever ``on_event`` or ``relist`` raise propagates (e.g. ``NodeNotFound``)."""
    try:
        for type_, obj in events(rv, seconds):
            rv = objects.meta(obj).get("resourceVersion") or rv
            if type_ == "BOOKMARK":
                continue
            if on_event(type_, obj):
                break
    except Gone:
        return relist()
    except Unavailable as exc:
        if resume and rv and exc.status == 0 and not isinstance(exc, Unreachable):
            log().warning(f"{what}: watch broke ({exc}); watching on from resourceVersion {rv}")
            pause(RELIST_PAUSE_SECONDS)
            return rv
        log().warning(f"{what}: watch broke ({exc}); re-listing")
        pause(RELIST_PAUSE_SECONDS)
        return relist()
    return rv
