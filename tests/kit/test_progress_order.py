"""Node reports are signalled without waiting for each other, so two can arrive out of order
(each is its own transfer task on the server). The parents keep the latest by sequence number:
the kit's NodeBoard (``NodeProgress.seq``) and its report inbox (``ChildReport.seq``, which the
runtime migration's rows travel in). Seen in a run of R4: the node row showed step ``safety`` while
the node waited at its gate ``approve-migration``, whose row had arrived first."""

from __future__ import annotations

from workflows.kit.board import NodeBoard
from workflows.kit.models import NodePhase, NodeProgress, NodeStatus


def board() -> tuple[NodeBoard, list[int]]:
    changes: list[int] = []
    nodes = {"w1": NodeStatus(name="w1", pool="worker", phase=NodePhase.RUNNING, attempt=1)}
    b = NodeBoard(procedure="p", cluster="c", nodes=nodes, gate_history=[], warnings=[],
                  on_change=lambda: changes.append(1))
    return b, changes


def report(step: str, seq: int | None, attempt: int = 1) -> NodeProgress:
    return NodeProgress(node="w1", attempt=attempt, seq=seq, phase=NodePhase.RUNNING, step=step)


def test_the_board_keeps_the_latest_report_of_an_attempt() -> None:
    b, changes = board()
    b.on_progress(report("reboot", 2))
    b.on_progress(report("drain", 1))  # sent first, arrived second
    assert b.nodes["w1"].step == "reboot" and len(changes) == 1
    b.on_progress(report("uncordon", 3))
    assert b.nodes["w1"].step == "uncordon"
    # Reports without a number (runs recorded before it existed) are taken as they come.
    b.on_progress(report("legacy", None))
    assert b.nodes["w1"].step == "legacy"


def test_a_new_attempt_starts_its_numbers_again() -> None:
    b, _ = board()
    b.on_progress(report("reboot", 7))
    b.nodes["w1"].attempt = 2  # retry-node
    b.on_progress(report("drain", 1, attempt=2))
    assert b.nodes["w1"].step == "drain"
    b.on_progress(report("late", 8, attempt=1))  # the old attempt's: not this attempt's at all
    assert b.nodes["w1"].step == "drain"
