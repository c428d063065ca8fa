"""The alert gate's semantics on canned ``/api/v1/alerts`` answers (no network): the filter
(names to ignore, searched as kured's ``--alert-filter-regexp``), firing-only, severities, label
match; error envelopes and bodies that are not Prometheus'; input validation; the policy's input."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from activities.alerts.activities import answer_from, ask_prometheus, classify
from activities.alerts.models import ActiveAlert, AlertQuery, AlertsAnswer, CheckAlertsInput, alerts_line
from workflows.kit.alerts import AlertGatePolicy

URL = "http://prometheus.example:9090"


def alert(name: str, state: str = "firing", at: str = "2025-01-01T10:00:03.123456789Z", **labels: str) -> dict:
    """One element of ``data.alerts`` as Prometheus 2.x renders it."""
    return {"labels": {"alertname": name, **labels}, "annotations": {"summary": f"{name} summary",
                                                                     "description": f"{name} description"},
            "state": state, "activeAt": at, "value": "0e+00"}


ALERTS = [
    alert("Watchdog", at="2025-01-01T09:00:00Z", severity="none"),
    alert("KubeNodeNotReady", node="worker-2", severity="warning"),
    alert("KubePodNotReady", "pending", "2025-01-01T10:00:05Z", namespace="app", pod="web-1", severity="warning"),
    alert("GlusterBrickStatus", at="2025-01-01T09:59:00+02:00", hostname="10.0.0.12", brick_path="/b", severity="critical"),
]


def answer(**inp: object) -> AlertsAnswer:
    body = json.dumps({"status": "success", "data": {"alerts": ALERTS}})
    return answer_from(200, body, CheckAlertsInput(url=URL, **inp))  # type: ignore[arg-type]


def names(a: AlertsAnswer) -> list[str]:
    return [b.name for b in a.blocking]


def test_every_firing_alert_blocks_oldest_first_without_a_filter() -> None:
    a = answer()
    # GlusterBrickStatus became active at 07:59 UTC (+02:00), Watchdog at 09:00, the node at 10:00:03.
    assert names(a) == ["GlusterBrickStatus", "Watchdog", "KubeNodeNotReady"]
    assert not a.ok and a.error is None and a.active == 4
    assert a.ignored == 1 and a.ignored_by == {"pending": 1}  # firing_only is the default
    node = a.blocking[2]
    assert node.labels == {"alertname": "KubeNodeNotReady", "node": "worker-2", "severity": "warning"}
    assert node.active_at == datetime(2025, 1, 1, 10, 0, 3, 123456, tzinfo=UTC)
    assert (node.state, node.value, node.summary, node.description) == (
        "firing", "0e+00", "KubeNodeNotReady summary", "KubeNodeNotReady description")
    assert node.line() == 'KubeNodeNotReady{node="worker-2",severity="warning"} firing since 2025-01-01 10:00:03 UTC'


def test_the_filter_names_alerts_to_ignore_searched_not_anchored() -> None:
    a = answer(filter="^Watchdog$")
    assert names(a) == ["GlusterBrickStatus", "KubeNodeNotReady"]
    assert a.ignored_by == {"filter": 1, "pending": 1}
    # As Go's MatchString: "Node" is found inside KubeNodeNotReady; the filter wins over pending.
    a = answer(filter="Node|Watchdog|Pod")
    assert names(a) == ["GlusterBrickStatus"] and a.ignored_by == {"filter": 3}
    a = answer(filter=".*")
    assert a.ok and a.blocking == [] and a.ignored == 4 and a.line() == "no blocking alert (4 ignored)"


def test_pending_alerts_block_only_when_firing_only_is_off() -> None:
    assert "KubePodNotReady" not in names(answer(filter="^Watchdog$"))
    a = answer(filter="^Watchdog$", firing_only=False)
    assert names(a) == ["GlusterBrickStatus", "KubeNodeNotReady", "KubePodNotReady"]
    assert a.blocking[-1].state == "pending" and a.ignored_by == {"filter": 1}


def test_only_the_listed_severities_block() -> None:
    a = answer(severities=["critical"])
    assert names(a) == ["GlusterBrickStatus"] and a.ignored_by == {"severity": 2, "pending": 1}
    a = answer(severities=["critical", "warning"], firing_only=False)
    assert names(a) == ["GlusterBrickStatus", "KubeNodeNotReady", "KubePodNotReady"]


def test_match_labels_narrow_what_blocks() -> None:
    a = answer(match_labels={"node": "worker-2"})
    assert names(a) == ["KubeNodeNotReady"] and a.ignored_by == {"labels": 2, "pending": 1}
    assert answer(match_labels={"node": "worker-9"}).ok


def test_no_active_alert_is_ok() -> None:
    a = answer_from(200, '{"status":"success","data":{"alerts":[]}}', CheckAlertsInput(url=URL))
    assert a.ok and a.active == 0 and a.line() == "no blocking alert"


@pytest.mark.parametrize(("status", "body", "error"), [
    (422, '{"status":"error","errorType":"execution","error":"query timed out"}', "HTTP 422: execution: query timed out"),
    (503, '{"status":"error","errorType":"unavailable","error":"TSDB not ready"}', "HTTP 503: unavailable: TSDB not ready"),
    (502, "<html>Bad Gateway</html>", "HTTP 502: not a Prometheus API answer: '<html>Bad Gateway</html>'"),
    (200, '{"status":"success","data":{}}', "HTTP 200: the answer has no data.alerts list"),
    (200, "[1, 2]", "HTTP 200: [1, 2]"),
])
def test_an_error_is_reported_never_raised(status: int, body: str, error: str) -> None:
    a = answer_from(status, body, CheckAlertsInput(url=URL))
    assert not a.ok and a.error == error and a.blocking == []
    assert a.line() == f"Prometheus could not be asked: {error}"


async def test_an_unreadable_token_file_is_reported(tmp_path: Path) -> None:
    a = await ask_prometheus(CheckAlertsInput(url=URL, bearer_token_file=str(tmp_path / "missing")))
    assert not a.ok and a.error is not None and "cannot read the bearer token file" in a.error and "missing" in a.error
    (tmp_path / "empty").write_text("\n")
    a = await ask_prometheus(CheckAlertsInput(url=URL, bearer_token_file=str(tmp_path / "empty")))
    assert a.error is not None and a.error.endswith("is empty")
    a = await ask_prometheus(CheckAlertsInput(url=URL, ca_file=str(tmp_path / "missing-ca.pem")))
    assert a.error is not None and "cannot load the CA file" in a.error


async def test_a_closed_port_is_reported() -> None:
    a = await ask_prometheus(CheckAlertsInput(url="http://127.0.0.1:9", timeout_seconds=5))
    assert not a.ok and a.error is not None and "ClientConnectorError" in a.error


def test_inputs_are_validated() -> None:
    with pytest.raises(ValidationError, match="must be http"):
        CheckAlertsInput(url="prometheus:9090")
    with pytest.raises(ValidationError, match="not a valid regular expression"):
        CheckAlertsInput(url=URL, filter="KubeNode(")
    assert CheckAlertsInput(url=URL + "/", filter="").url == URL and CheckAlertsInput(url=URL, filter="").filter is None
    with pytest.raises(ValidationError, match="not a valid regular expression"):
        AlertGatePolicy(url=URL, filter="[")
    with pytest.raises(ValidationError, match="greater than 0"):
        AlertGatePolicy(url=URL, poll_seconds=0)
    with pytest.raises(ValidationError, match="Extra inputs"):
        AlertGatePolicy(url=URL, filter_regexp="x")  # type: ignore[call-arg]


def test_the_policy_gives_the_activity_its_input() -> None:
    p = AlertGatePolicy(url=URL + "/", filter="^Watchdog$", firing_only=False, severities=["critical"],
                        match_labels={"cluster": "prod"}, bearer_token_file="/var/run/secrets/token",
                        ca_file="/etc/pki/ca.pem", timeout_seconds=3)
    assert p.check_input() == CheckAlertsInput(
        url=URL, filter="^Watchdog$", firing_only=False, severities=["critical"], match_labels={"cluster": "prod"},
        bearer_token_file="/var/run/secrets/token", ca_file="/etc/pki/ca.pem", timeout_seconds=3)
    assert (p.fail_open, p.poll_seconds, p.override) == (False, 30.0, True)


def test_an_alert_query_with_a_timeout_is_the_activity_input_with_every_field() -> None:
    q = AlertQuery(url=URL + "/", filter="^Watchdog$", firing_only=False, severities=["critical"],
                   match_labels={"cluster": "prod"}, bearer_token_file="/t", ca_file="/ca.pem")
    assert q.with_timeout(3) == CheckAlertsInput(
        url=URL, filter="^Watchdog$", firing_only=False, severities=["critical"], match_labels={"cluster": "prod"},
        bearer_token_file="/t", ca_file="/ca.pem", timeout_seconds=3)
    assert isinstance(CheckAlertsInput(url=URL), AlertQuery)
    with pytest.raises(ValidationError, match="greater than 0"):
        q.with_timeout(0)
    with pytest.raises(ValidationError, match="Extra inputs"):
        AlertQuery(url=URL, timeout_seconds=3)  # type: ignore[call-arg]


def test_a_line_names_at_most_five_alerts() -> None:
    many = [ActiveAlert(name=f"A{i}", labels={"alertname": f"A{i}"}, state="firing") for i in range(7)]
    assert alerts_line(many) == "A0 firing; A1 firing; A2 firing; A3 firing; A4 firing (+2 more)"


def test_classify_counts_each_ignored_alert_once() -> None:
    blocking, ignored = classify(ALERTS, CheckAlertsInput(url=URL, filter="Watchdog", firing_only=True, severities=["none"]))
    assert blocking == [] and ignored == {"filter": 1, "severity": 2, "pending": 1}


def test_the_worker_registers_check_alerts_once() -> None:
    from activities.alerts.models import CHECK_ALERTS
    from workers.registry import build_activities

    names = [a.__temporal_activity_definition.name for a in build_activities(lambda: None)]  # type: ignore[attr-defined]
    assert names.count(CHECK_ALERTS) == 1
