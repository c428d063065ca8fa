"""The deadline guard's part in the kit (issue 41): ``DrainGateState.ask_by`` opens the drain's
decision gate by that instant at the latest, with or without ``decide_after``, also after a
``wait`` on an earlier gate, and only once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from activities.cluster.models import DrainReport
from workflows.kit.drain import DrainGateState
from workflows.kit.models import DrainDecision, GateState

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_no_decide_after_asks_at_the_escalation() -> None:
    st = DrainGateState("w1", None, None, DrainDecision.WAIT)
    st.on_blocked(at(1), DrainReport())
    assert st.next_ask is None  # without the guard: never asked
    st.ask_by = at(45)
    st.on_blocked(at(2), DrainReport())
    assert not st.should_open(at(44.9)) and st.should_open(at(45))
    assert abs(st.sleep_for(at(44), 60.0) - 60.0) < 1e-9 and st.sleep_for(at(44.5), 60.0) == 30.0
    st.open(at(45))
    assert "escalated before the daemon's drain deadline" in st.records[-1].comment
    assert st.ask_by is None


def test_a_later_decide_after_is_cut_to_the_escalation_also_after_a_wait() -> None:
    st = DrainGateState("w1", 1800.0, None, DrainDecision.WAIT)  # asks at 30 min, then at 60 min after a wait
    st.ask_by = at(45)
    st.on_blocked(at(0), DrainReport())
    assert st.next_ask == at(30)
    st.open(at(30))
    assert st.ask_by == at(45) and "escalated" not in st.records[-1].comment
    st.gate.state = GateState.DECIDED
    st.ask_again(at(31))
    assert st.next_ask == at(61)
    st.on_blocked(at(32), DrainReport())
    assert st.next_ask == at(45)


def test_an_escalation_already_past_asks_now() -> None:
    st = DrainGateState("w1", None, None, DrainDecision.WAIT)
    st.ask_by = at(45)
    st.on_blocked(at(50), DrainReport())
    assert st.should_open(at(50))
