"""Which nodes the window starts together (issue 16).

A node window that starts one child per workflow task waits for each start (the start command,
then the child's started event and a new task) before it looks at the next node: about 0.1 s a
node on the dev server, so at most 7 to 10 node starts a second whatever maxUnavailable allows
(a 600-node pool with maxUnavailable 60 kept only about 25 nodes in flight). A procedure that
turns ``NodeBatches.start_together`` on starts every node the window has room for in one task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workflows.kit.batches import Group, NodeBatches

#: ``workflow.patched`` id of a procedure whose window starts its free places together.
PATCH_START_TOGETHER = "window-starts-together"

#: Node starts per workflow task at most: each start costs the task its command, the child's
#: input and a status refresh, so a window of 200 (a 2,000-node pool) is opened in 8 tasks, not
#: one that grows with maxUnavailable. 25 per round trip of about 0.1 s is over 200 starts a second.
MAX_STARTS_PER_TASK = 25


def next_starts(batches: NodeBatches, group: Group, first: str) -> list[str]:
    """``first`` (the window's next node, cleared to start) and the queue's next nodes after it,
    as long as the window has room (at most :data:`MAX_STARTS_PER_TASK` in all) and none of them
    waits for a gate (a planned ``node`` gate before it, or the canary's gate after the first
    node): in queue order."""
    room = min(batches._limit(group) - len(batches.in_flight(group)), MAX_STARTS_PER_TASK)
    out = [first]
    for node in group.queue:
        if node == first:
            continue
        if len(out) >= room or batches._canary_pending(group, node) is not None:
            break
        if any(g.before_node == node and g.id not in batches.gates.passed for g in group.gates):
            break
        out.append(node)
    return out
