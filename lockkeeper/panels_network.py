"""The status and result panels of the SDN→OVN network migration (``network-migration``).

Named by the procedure's spec (``ProcedureSpec.panels`` = ``lockkeeper.panels_network:PANELS``);
rich and the panels' helpers load when a panel is drawn.

What it shows, beyond the generic view (:func:`lockkeeper.panels.procedure_view`): the step and
the switch; per pool updated/machines, conditions, paused and the rendered config it started
from; the ``pools-settled`` guard (holds, or what is behind); the takeover rollouts; the reboots
(per node state, commands sent, detail) with a done count; a lease refusal's holder.
"""

from __future__ import annotations

from typing import Any


PROCEDURE = "network-migration"
#: Fields this panel draws itself (the generic view skips them).
OWN_FIELDS = frozenset({"pools", "reboots", "plan", "guard_behind", "baseline", "takeovers", "step", "switched", "lease_holder"})


def _summary(model: Any) -> Any:
    from rich.text import Text

    step = getattr(model, "step", None)
    t = Text()
    if step is not None:
        t.append(f"step: {step}", style="bold")
    switched = getattr(model, "switched", None)
    if switched is not None:
        t.append(f"   network type {'switched to ' + str(getattr(model, 'to', '')) if switched else 'not switched yet'}")
    if getattr(model, "reverting", False):
        t.append("   REVERTING", style="bold yellow")
    holder = getattr(model, "lease_holder", "")
    if holder:
        t.append(f"\nrefused: the lease is held by {holder}", style="bold red")
    return t


def pools_table(model: Any) -> Any:
    """Per pool: updated of machines, conditions, paused, and the rendered config the run
    started from (its baseline)."""
    from rich.table import Table

    baseline = getattr(model, "baseline", None) or {}
    t = Table(title="Pools", title_justify="left")
    for col in ("pool", "updated", "conditions", "paused", "started from"):
        t.add_column(col, overflow="fold")
    for p in getattr(model, "pools", None) or []:
        t.add_row(p.name, f"{p.updated}/{p.machines}", p.conditions or "-", "yes" if p.paused else "no", baseline.get(p.name, "-"))
    return t


def guard_text(model: Any) -> Any:
    """The ``pools-settled`` guard: holds, or the first ten things behind."""
    from rich.text import Text

    behind = list(getattr(model, "guard_behind", None) or [])
    health = (getattr(model, "health", None) or {}).get("pools-settled")
    if not behind:
        held = health is not None and health.state == "ok"
        return Text("guard pools-settled: " + ("holds" if held else "not checked yet"), style="green" if held else "dim")
    t = Text(f"guard pools-settled: {len(behind)} behind (no switch until every pool is Updated)", style="yellow")
    for b in behind[:10]:
        t.append(f"\n  {b}")
    if len(behind) > 10:
        t.append(f"\n  ... {len(behind) - 10} more")
    return t


def reboots_table(model: Any) -> Any:
    """Per node of the reboot plan: batch, master, state, reboot commands sent, detail."""
    from rich.table import Table

    batch_of = {n: i + 1 for i, batch in enumerate(getattr(model, "plan", None) or []) for n in batch}
    reboots = list(getattr(model, "reboots", None) or [])
    done = sum(1 for r in reboots if r.state == "done")
    t = Table(title=f"Reboots ({done}/{len(reboots)} done)", title_justify="left")
    for col in ("batch", "node", "master", "state", "commands", "detail"):
        t.add_column(col, overflow="fold")
    for r in reboots:
        t.add_row(str(batch_of.get(r.node, "-")), r.node, "yes" if r.master else "", r.state, str(r.commands_sent), r.detail or "-",
                  style={"done": "green", "rebooting": "cyan"}.get(r.state, ""))
    return t


def panel(model: Any) -> Any:
    """The status or result panel of a network migration (see the module doc)."""
    from rich.console import Group
    from rich.text import Text

    from lockkeeper.panels import procedure_view

    parts: list[Any] = [procedure_view(model, skip=OWN_FIELDS), _summary(model)]
    if getattr(model, "pools", None):
        parts.append(pools_table(model))
    if hasattr(model, "guard_behind"):
        parts.append(guard_text(model))
    takeovers = getattr(model, "takeovers", None) or []
    if takeovers:
        parts.append(Text("takeover rollouts (lockkeeper playing the machine-config-controller): " + ", ".join(takeovers)))
    if getattr(model, "reboots", None):
        parts.append(reboots_table(model))
    elif getattr(model, "plan", None):
        plan = model.plan
        parts.append(Text(f"reboot plan: {len(plan)} batches: " + " | ".join(", ".join(b) for b in plan)))
    return Group(*parts)


#: The network migration's (status panel, result panel), named by its spec's ``panels``.
PANELS = (panel, panel)
