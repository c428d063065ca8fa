"""The controller's side of a MachineConfigNode as lockkeeper writes it (issue 41,
activities/machineconfig/mcnstatus.py): the drain controller's conditions and words, the
daemon's conditions untouched, and nothing to write when it already says so (idempotent)."""

from __future__ import annotations

from datetime import UTC, datetime

from activities.machineconfig.mcnstatus import controller_status

ANN = {"machineconfiguration.openshift.io/desiredConfig": "rendered-b",
       "machineconfiguration.openshift.io/currentConfig": "rendered-a"}
T = datetime(2026, 11, 1, tzinfo=UTC)


def mcn() -> dict:
    return {"metadata": {"name": "w1", "resourceVersion": "7"}, "status": {
        "configVersion": {"current": "rendered-a", "desired": "not-yet-set"},
        "irreconcilableChanges": [{"fieldPath": "spec.config.storage.disks", "diff": "x"}],
        "conditions": [
            {"type": "UpdatePrepared", "status": "True", "reason": "UpdatePrepared", "message": "daemon's",
             "lastTransitionTime": "2026-10-31T00:00:00Z"},
            {"type": "UpdateExecuted", "status": "False", "reason": "NotYetOccurred", "message": "n",
             "lastTransitionTime": "2026-10-31T00:00:00Z"},
            {"type": "Cordoned", "status": "False", "reason": "NotYetOccurred", "message": "n",
             "lastTransitionTime": "2026-10-31T00:00:00Z"},
        ]}}


def by_type(status: dict) -> dict:
    return {c["type"]: c for c in status["conditions"]}


def test_cordoned_then_drained_then_uncordoned_and_idempotent() -> None:
    obj = mcn()
    st = controller_status(obj, "cordoned", ANN, T)
    c = by_type(st)
    assert (c["UpdateExecuted"]["status"], c["UpdateExecuted"]["reason"]) == ("Unknown", "Cordoned")
    assert (c["Cordoned"]["status"], c["Cordoned"]["reason"]) == ("True", "UpdateExecutedCordoned")
    assert c["Cordoned"]["message"] == "Cordoned node. The node is reporting Unschedulable = true"
    assert c["UpdatePrepared"]["message"] == "daemon's"  # the daemon's side is left alone
    assert st["configVersion"] == {"current": "rendered-a", "desired": "rendered-b"}  # current: the daemon's
    assert st["irreconcilableChanges"] == obj["status"]["irreconcilableChanges"]
    assert obj["status"]["conditions"][2]["status"] == "False", "the input is not modified"
    assert controller_status({**obj, "status": st}, "cordoned", ANN, T) is None

    st = controller_status({**obj, "status": st}, "drained", ANN, T, drain="drain-rendered-b")
    c = by_type(st)
    assert (c["Drained"]["status"], c["Cordoned"]["status"]) == ("True", "True")
    assert c["Drained"]["message"].endswith("current drainer: drain-rendered-b")
    st = controller_status({**obj, "status": st}, "uncordoned", ANN, T)
    c = by_type(st)
    assert (c["UpdateComplete"]["status"], c["UpdateComplete"]["reason"], c["Uncordoned"]["status"]) == (
        "True", "Uncordoned", "True")
    assert [x["type"] for x in st["conditions"]][:3] == ["UpdatePrepared", "UpdateExecuted", "Cordoned"]
    assert controller_status({**obj, "status": st}, "uncordoned", ANN, T) is None


class Gateway:
    """A gateway answering list and patch from scripted outcomes (an exception is raised)."""

    def __init__(self, listed: object, patched: list[object]) -> None:
        self.listed, self.patched, self.patches = listed, list(patched), 0

    def list_machine_config_nodes(self, node: str) -> list[dict]:
        if isinstance(self.listed, Exception):
            raise self.listed
        return [mcn()]

    def patch(self, kind: str, name: str, patch: dict, subresource: str) -> None:
        self.patches += 1
        outcome = self.patched.pop(0)
        if isinstance(outcome, Exception):
            raise outcome


def test_a_refused_read_or_write_is_not_reported_and_only_unexpected_errors_are_logged() -> None:
    from activities.kube.errors import Conflict, Forbidden, KubeError, NotFound
    from activities.machineconfig.mcnstatus import ATTEMPTS, report_controller_step

    said: list[str] = []
    for quiet in (NotFound("gone"), Forbidden("no")):
        assert not report_controller_step(Gateway(quiet, []), "w1", "cordoned", ANN, log=said.append)
        assert not report_controller_step(Gateway(None, [quiet]), "w1", "cordoned", ANN, log=said.append)
    assert said == []
    assert not report_controller_step(Gateway(KubeError("down"), []), "w1", "cordoned", ANN, log=said.append)
    assert not report_controller_step(Gateway(None, [KubeError("boom")]), "w1", "cordoned", ANN, log=said.append)
    assert said == ["MachineConfigNode w1: not read (down); cordoned not reported",
                    "MachineConfigNode w1: cordoned not reported (boom)"]
    gw = Gateway(None, [Conflict("c"), None])
    assert report_controller_step(gw, "w1", "cordoned", ANN) and gw.patches == 2
    gw = Gateway(None, [Conflict("c")] * ATTEMPTS)
    assert not report_controller_step(gw, "w1", "cordoned", ANN) and gw.patches == ATTEMPTS
