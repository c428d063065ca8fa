"""Gate decisions shared by every procedure's update validators: which gate, and who may decide.

DESIGN.md "Gate": approvals carry an identity; the optional four-eyes rule forbids the
requester to approve their own procedure's gates; an optional list names the allowed
approvers. Enforced in the Update validators (not only in the CLI), so a refused decision never
reaches history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workflows.models import Gate


def check_approver(
    identity: str,
    *,
    approving: bool,
    requested_by: str,
    four_eyes: bool,
    allowed_approvers: list[str],
    procedure: str = "procedure",
) -> None:
    """Raise ValueError (the validator's message) when ``identity`` may not decide.

    ``approving``: the four-eyes rule applies to approvals only; anyone allowed may reject.
    ``procedure`` names the thing in the message ("rollout", "restore").
    """
    if not identity.strip():
        raise ValueError("an identity is required to decide a gate")
    if approving and four_eyes and identity == requested_by:
        raise ValueError(f"four-eyes rule: {identity} requested this {procedure} and may not approve its gates")
    if allowed_approvers and identity not in allowed_approvers:
        raise ValueError(f"{identity} is not an allowed approver ({', '.join(allowed_approvers)})")


def find_waiting_gate(gates: dict[str, Gate], gate_id: str | None) -> Gate:
    """The gate an approve/reject addresses; ``gate_id`` None means the only waiting gate.

    Raises ValueError (the validator's message) for an unknown gate, a gate that is not
    waiting, no waiting gate, or several waiting gates when none is named.
    """
    from workflows.models import GateState

    waiting = [g for g in gates.values() if g.state == GateState.WAITING]
    if gate_id is None:
        if not waiting:
            raise ValueError("no gate is waiting for a decision")
        if len(waiting) > 1:
            raise ValueError(f"several gates are waiting ({', '.join(g.id for g in waiting)}); name one")
        return waiting[0]
    gate = gates.get(gate_id)
    if gate is None:
        known = ", ".join(g.id for g in waiting) or "none"
        raise ValueError(f"unknown gate {gate_id!r}; waiting gates: {known}")
    if gate.state != GateState.WAITING:
        raise ValueError(f"gate {gate_id!r} is not waiting for a decision (state {gate.state})")
    return gate
