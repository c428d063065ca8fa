"""``gluster_healthy``: the GlusterFS health gate every procedure can use (procedures-spec §1.7,
§2.5, §3.2 step 4.5).

Healthy means: every brick online (no ``Online N``, none missing from ``volume status``, no
disconnected peer), no volume down, and ``heal info`` clean on the named volumes (or every
replicated volume): as many brick blocks as ``volume info`` has bricks, each ``Status:
Connected`` with 0 entries, no split-brain.

:class:`GlusterHealth` waits for it with :func:`workflows.kit.health.wait_until` (durable timers
between ``read_gluster`` calls, backing off from ``interval_seconds`` to ``max_interval_seconds``):

- while it waits, the heal progress of every volume (entries now, at the first poll, the lowest,
  whether falling, since when) is in ``progress`` (the procedure shows it in ``status``) and the
  kit's health board says e.g. ``heal: vol_x 37 entries (was 120, falling)``;
- entries that do not fall for ``stall_after_seconds`` end the wait as ``stalled`` (no waiting
  forever), as does ``timeout_seconds``; :meth:`GlusterHealth.gate` then opens gate
  ``gluster-health/<name>/<n>``: approve waits again, reject (or the gate's timeout) stops;
- a split-brain entry ends the wait at once (``split-brain``): a person must resolve it.

R3a uses it after each host and at the end; R3d, R4 and R5 use it between nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.gluster.models import GlusterReadInput, GlusterTarget
    from workflows.shared.glusterfs import calls
    from workflows.shared.glusterfs.models import Assessment, GlusterHealthParams, HealProgress, QuorumRule
    from workflows.shared.glusterfs.assess import assess
    from workflows.kit.inputs import GatePolicy
    from workflows.kit.control import Control
    from workflows.kit.gates import Gates
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.kit.models import HealthStatus

Outcome = Literal["healthy", "timed-out", "stalled", "split-brain", "volume-down", "stopped"]


@dataclass
class HealthResult:
    """How a wait ended, the last assessment, and the words for a person."""

    outcome: Outcome
    assessment: Assessment | None = None
    detail: str = ""


def unhealthy_reasons(a: Assessment, volumes: list[str] | None) -> list[str]:
    """Why ``a`` is not healthy for ``volumes`` (None = all): offline bricks, down volumes,
    unmapped hosts, heal problems. Empty = healthy."""
    out = list(a.fatal) + list(a.unmapped)
    out += [f"offline {b}" for b in a.offline]
    for v in a.volumes:
        if volumes is None or v.name in volumes:
            out += [f"{v.name}: {p}" for p in v.heal_problems]
    return out


def update_progress(progress: dict[str, HealProgress], a: Assessment, volumes: list[str] | None, now: datetime) -> None:
    """Fold one poll into ``progress`` (per volume: entries, first, lowest, previous, falling,
    when it last fell)."""
    for v in a.volumes:
        if (volumes is not None and v.name not in volumes) or v.heal_skipped:
            continue
        hp = progress.get(v.name)
        if hp is None:
            hp = progress[v.name] = HealProgress(volume=v.name, first=v.heal_entries, last_progress_at=now)
        hp.previous, hp.entries, hp.polled_at, hp.problems = hp.entries, v.heal_entries, now, list(v.heal_problems)
        hp.falling = hp.previous is not None and v.heal_entries is not None and v.heal_entries < hp.previous
        if v.heal_entries is not None and (hp.lowest is None or v.heal_entries < hp.lowest):
            hp.lowest = v.heal_entries
            hp.last_progress_at = now
        if not v.heal_problems:
            hp.last_progress_at = now


def progress_line(progress: dict[str, HealProgress]) -> str:
    """``heal: vol_a 37 entries (was 120, falling); vol_b clean`` for the health board."""
    parts = []
    for hp in progress.values():
        if not hp.problems:
            parts.append(f"{hp.volume} clean")
            continue
        n = "?" if hp.entries is None else str(hp.entries)
        trend = "falling" if hp.falling else "not falling"
        was = f"was {hp.first}, " if hp.first is not None and hp.first != hp.entries else ""
        parts.append(f"{hp.volume} {n} entries ({was}{trend})")
    return "heal: " + "; ".join(parts) if parts else "heal: no replicated volume"


@dataclass
class GlusterHealth:
    """The gate for one procedure run. ``target``: where the pods are; ``params``: intervals,
    timeout, stall; ``gates``/``control``: the procedure's (gate and abort); ``board``: the
    kit's health board (status ``health``); ``progress``: heal progress per volume (status);
    ``on_change``: the procedure's ``touch``; ``rule``: the quorum rule for "volume down"."""

    target: GlusterTarget
    params: GlusterHealthParams
    gates: Gates
    control: Control
    board: dict[str, HealthStatus]
    progress: dict[str, HealProgress]
    on_change: Callable[[], None] = lambda: None
    rule: QuorumRule = "per-volume"
    short_call_s: float = 30.0
    read_attempts: int = 5
    command_timeout_s: float = 120.0
    last: Assessment | None = None
    _gates_opened: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of_procedure(cls, proc: Any, *, namespace: str, timeout_s: float, short_call_s: float) -> GlusterHealth:
        """The gate of a procedure ``proc`` (a :class:`workflows.kit.procedure.ProcedureWorkflow`:
        its gates, control, status ``health`` board and ``touch``) on the GlusterFS pods of
        ``namespace``, read every 5 s until ``timeout_s`` seconds; ``short_call_s`` bounds one read."""
        return cls(target=GlusterTarget(namespace=namespace), params=GlusterHealthParams(timeout_seconds=timeout_s, interval_seconds=5.0),
                   gates=proc.gates, control=proc.control, board=proc.kit_status.health, progress={}, on_change=proc.touch,
                   short_call_s=short_call_s)

    async def read(self, volumes: list[str] | None, *, heal: bool = True, exclude_node: str | None = None) -> Assessment:
        """One read (with heal info on ``volumes`` unless ``heal`` is False; the CLI never in
        ``exclude_node``'s pod, None: the target's) and its assessment."""
        target = self.target if exclude_node is None else self.target.model_copy(update={"exclude_node": exclude_node})
        report = await calls.read(GlusterReadInput(target=target, heal=heal, heal_volumes=volumes, attempts=self.read_attempts,
                                                   command_timeout_seconds=self.command_timeout_s), self.short_call_s)
        self.last = assess(report, self.rule)
        return self.last

    async def wait(self, name: str, volumes: list[str] | None = None) -> HealthResult:
        """Wait until healthy on ``volumes`` (None = every volume), the timeout, a stall, a
        split-brain, a volume down, or an abort (see the module doc)."""
        p = self.params
        stop_reason: list[Outcome] = []
        deadline = workflow.now() + timedelta(seconds=p.timeout_seconds)
        for v in list(self.progress):
            if volumes is None or v in volumes:
                del self.progress[v]  # a new wait measures its own progress

        async def check() -> Check:
            a = await self.read(volumes)
            now = workflow.now()
            update_progress(self.progress, a, volumes, now)
            reasons = unhealthy_reasons(a, volumes)
            if any(v.split_brain for v in a.volumes if volumes is None or v.name in volumes):
                stop_reason.append("split-brain")
            elif any(v.fatal for v in a.volumes):
                stop_reason.append("volume-down")
            elif reasons and p.stall_after_seconds is not None and not a.offline:
                waiting = [hp for hp in self.progress.values() if hp.problems]
                last = max((hp.last_progress_at for hp in waiting if hp.last_progress_at), default=now)
                if waiting and (now - last).total_seconds() >= p.stall_after_seconds:
                    stop_reason.append("stalled")
            detail = progress_line(self.progress)
            if a.offline:
                detail = f"bricks offline: {', '.join(a.offline)}; {detail}"
            self.on_change()
            return Check(not reasons, detail)

        hs = await wait_until(check, name=name, backoff=Backoff(initial=p.interval_seconds, maximum=p.max_interval_seconds), deadline=deadline,
                              stop=lambda: bool(stop_reason) or self.control.abort, board=self.board,
                              on_poll=lambda _: self.on_change())
        a = self.last
        reasons = "; ".join(unhealthy_reasons(a, volumes)) if a else ""
        if hs.state == "ok":
            return HealthResult("healthy", a, hs.last)
        if hs.state == "timed-out":
            return HealthResult("timed-out", a, f"not healthy after {p.timeout_seconds:.0f}s: {reasons}")
        if stop_reason:
            what = stop_reason[0]
            words = {"stalled": f"heal made no progress for {p.stall_after_seconds:.0f}s", "split-brain": "split-brain entries",
                     "volume-down": "a volume is down"}.get(what, what)
            return HealthResult(what, a, f"{words}: {reasons}")
        return HealthResult("stopped", a, "aborted")

    async def gate(self, name: str, volumes: list[str] | None = None, *, policy: GatePolicy | None = None) -> HealthResult:
        """:meth:`wait`, and when it ends timed out or stalled, gate ``gluster-health/<name>/<n>``
        (approve: wait again; reject: return the failed result; ``policy``: how the gate waits,
        the procedure's ``gates``; None waits until decided). Split-brain, a volume down and an
        abort return at once."""
        while True:
            result = await self.wait(name, volumes)
            if result.outcome not in ("timed-out", "stalled"):
                return result
            n = self._gates_opened[name] = self._gates_opened.get(name, 0) + 1
            gate_id = f"gluster-health/{name}/{n}"
            what = f"GlusterFS not healthy ({result.outcome}): {result.detail}. Approve to wait again, reject to stop."
            answer = await self.gates.step(gate_id, what, policy or GatePolicy(), again=True)
            self.on_change()
            if not answer.passed:
                return result
