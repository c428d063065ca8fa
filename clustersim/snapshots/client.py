"""A small asyncio client of a running simulator's ``/_sim/snapshots`` endpoints, for tests.

``base_url`` is the simulator's URL (``ClusterSim.url``, ``URL=`` of ``lockkeeper sim serve``).
Plain functions::

    sid = await take(sim.url, "before")
    ...                                   # drive the procedure
    d = await diff(sim.url, sid, ignore=["ConfigMap/*/lockkeeper-record-*"])
    assert d.empty, "\\n".join(d.lines())
    await delete(sim.url, sid)

``settle(sim.url)`` first waits until the world stops changing (a scenario's start-up). Or a
context manager that deletes its snapshot on exit::

    async with Snapshot(sim.url, "before") as snap:
        ...
        d = await snap.diff(ignore=[...])

Every call raises :class:`SnapshotClientError` when the simulator answers an error (with its
status and message) and ``aiohttp.ClientError`` when it cannot be reached. ``session``: an
``aiohttp.ClientSession`` to reuse (default: one per call).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

import aiohttp

from clustersim.snapshots.models import Diff, PodsMode, SnapshotInfo


class SnapshotClientError(RuntimeError):
    """The simulator refused a snapshot request: ``status`` (HTTP) and its ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


@asynccontextmanager
async def _session(session: aiohttp.ClientSession | None) -> AsyncIterator[aiohttp.ClientSession]:
    if session is not None:
        yield session
        return
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as own:
        yield own


async def _call(method: str, url: str, session: aiohttp.ClientSession | None, **kwargs: Any) -> Any:
    async with _session(session) as s, s.request(method, url, **kwargs) as resp:
        try:
            body = await resp.json(content_type=None)
        except ValueError:
            body = {"error": (await resp.text())[:500]}
        if resp.status >= 400:
            msg = body.get("error") if isinstance(body, dict) else None
            raise SnapshotClientError(resp.status, str(msg or body))
        return body


def _base(base_url: str) -> str:
    return base_url.rstrip("/") + "/_sim/snapshots"


async def take(base_url: str, name: str = "", *, session: aiohttp.ClientSession | None = None) -> str:
    """Take a snapshot of the whole simulated world now; returns its id (e.g. ``s3``)."""
    return str((await take_info(base_url, name, session=session)).id)


async def take_info(base_url: str, name: str = "", *, session: aiohttp.ClientSession | None = None) -> SnapshotInfo:
    """Like :func:`take`, returning the whole :class:`SnapshotInfo` (counts, capture time)."""
    body = await _call("POST", _base(base_url), session, json={"name": name})
    return SnapshotInfo.model_validate(body)


async def list_snapshots(base_url: str, *, session: aiohttp.ClientSession | None = None) -> list[SnapshotInfo]:
    """The snapshots the simulator holds, in the order taken."""
    body = await _call("GET", _base(base_url), session)
    return [SnapshotInfo.model_validate(i) for i in body["snapshots"]]


async def diff(base_url: str, snapshot_id: str, *, ignore: Iterable[str] = (), pods: PodsMode = "owners",
               include_events: bool = False, include_leases: bool = False, include_status: bool = False,
               to: str | None = None, session: aiohttp.ClientSession | None = None) -> Diff:
    """What changed since snapshot ``snapshot_id`` (or up to snapshot ``to``): a :class:`Diff`.

    Options are :class:`~clustersim.snapshots.models.DiffOptions`'s (``ignore`` patterns:
    :mod:`clustersim.snapshots.ignore`). Raises SnapshotClientError 404 for an unknown snapshot,
    400 for a bad option."""
    params: list[tuple[str, str]] = [("ignore", p) for p in ignore]
    params += [("pods", pods), ("include_events", str(include_events).lower()),
               ("include_leases", str(include_leases).lower()), ("include_status", str(include_status).lower())]
    if to:
        params.append(("to", to))
    body = await _call("GET", f"{_base(base_url)}/{snapshot_id}/diff", session, params=params)
    return Diff.model_validate(body)


async def delete(base_url: str, snapshot_id: str, *, session: aiohttp.ClientSession | None = None) -> None:
    """Drop snapshot ``snapshot_id`` (SnapshotClientError 404 when the simulator has none)."""
    await _call("DELETE", f"{_base(base_url)}/{snapshot_id}", session)


async def settle(base_url: str, quiet_seconds: float = 0.5, timeout: float = 60.0, *,
                 session: aiohttp.ClientSession | None = None) -> None:
    """Wait until the simulated world stays unchanged for ``quiet_seconds`` (wall seconds): a
    snapshot, the pause, an empty diff (reboots and restarts allowed), repeated until one is
    empty. Take a test's "before" snapshot after this, or a scenario's own start-up (pods
    becoming Ready, a DeploymentConfig finishing its rollout) counts as changes. Raises
    TimeoutError (with the last diff's lines) after ``timeout`` wall seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        sid = await take(base_url, "settle", session=session)
        try:
            await asyncio.sleep(quiet_seconds)
            d = await diff(base_url, sid, session=session)
        finally:
            await delete(base_url, sid, session=session)
        if d.empty:
            return
        if loop.time() > end:
            raise TimeoutError(f"the simulator did not settle in {timeout} s; still changing:\n" + "\n".join(d.lines()))


class Snapshot:
    """``async with Snapshot(url, name) as snap``: takes a snapshot on entry (``snap.id``),
    ``await snap.diff(...)`` takes :func:`diff`'s options, deletes the snapshot on exit (an
    already deleted one is fine)."""

    def __init__(self, base_url: str, name: str = "", *, session: aiohttp.ClientSession | None = None) -> None:
        self.base_url = base_url
        self.name = name
        self.session = session
        self.id = ""

    async def __aenter__(self) -> Snapshot:
        self.id = await take(self.base_url, self.name, session=self.session)
        return self

    async def diff(self, **options: Any) -> Diff:
        """:func:`diff` of this snapshot (keyword options as there)."""
        return await diff(self.base_url, self.id, session=self.session, **options)

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        try:
            await delete(self.base_url, self.id, session=self.session)
        except SnapshotClientError as err:
            if err.status != 404:
                raise
