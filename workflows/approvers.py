"""Who may decide a gate: the one approver policy every procedure's update validators apply.

DESIGN.md "Gate": approvals carry an identity; the optional four-eyes rule forbids the
requester to approve their own procedure's gates; an optional list names the allowed
approvers. Enforced in the Update validators (not only in the CLI), so a refused decision never
reaches history.
"""

from __future__ import annotations


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
