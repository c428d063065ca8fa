"""Issue 36 for the etcd backup and restore: their inputs are the kit's :class:`ProcedureInput`
(nested ``approvals``, ``gates``, ``calls``) without flat copies; the start flags are aliases of
those fields, and ``-f input.yaml`` / ``--set KEY=VALUE`` build the same input. The start is
stopped where it would contact Temporal: the test reads the validated input it would send."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lockkeeper.cli.common import CliError
from tests.support.startcapture import capture_starts, start
from workflows.control_plane.models import ControlPlaneUpgradeInput
from workflows.etcd.models import EtcdBackupInput, EtcdRestoreInput, RestoreStrategy
from workflows.kit.inputs import ProcedureInput
from workflows.kit.models import GateTimeoutOutcome

MEMBERS = [
    {"name": f"m{i}", "peer_url": f"http://10.0.0.{i}:2380", "client_url": f"http://10.0.0.{i}:2379",
     "data_dir": "/var/lib/etcd", "host": {"backend": "ssh", "host": f"10.0.0.{i}"},
     "control": {"kind": "systemd", "unit": "etcd"}}
    for i in (1, 2, 3)
]
FLAT = ("requested_by", "four_eyes", "allowed_approvers", "gate_timeout_seconds", "gate_timeout_outcome",
        "heartbeat_timeout_seconds")


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The inputs the start commands would start their workflow with (tests/support/startcapture.py)."""
    return capture_starts(monkeypatch)


def write(tmp_path: Path, name: str, data: Any) -> str:
    f = tmp_path / name
    f.write_text(json.dumps(data))  # JSON is YAML
    return str(f)


@pytest.mark.parametrize("model", [EtcdBackupInput, EtcdRestoreInput])
def test_etcd_inputs_are_procedure_inputs_without_flat_copies(model: type) -> None:
    assert issubclass(model, ProcedureInput)
    assert not set(FLAT) & set(model.model_fields), sorted(set(FLAT) & set(model.model_fields))
    with pytest.raises(ValueError, match="four_eyes"):  # the old flat shape is refused, never ignored
        model.model_validate({"members": MEMBERS, "four_eyes": True})
    with pytest.raises(ValueError, match="take no alert gate"):  # the base's alerts would be ignored: refused
        model.model_validate({"members": MEMBERS, "alerts": {"url": "http://prometheus:9090"}})


def test_restore_flags_are_aliases_of_the_nested_fields(tmp_path: Path, sent: list[Any]) -> None:
    members = write(tmp_path, "members.yaml", MEMBERS)
    res = start("etcd-restore", "--members", members, "--strategy", "force-new-cluster", "--survivor", "m2",
                "--four-eyes", "--allowed-approver", "bob", "--gate-timeout", "600", "--gate-timeout-outcome", "abort",
                "--cluster", "prod")
    assert res.exit_code == 0, (res.output, res.exception)
    inp = sent[0]
    assert isinstance(inp, EtcdRestoreInput)
    assert inp.cluster == "prod" and inp.survivor == "m2"
    assert inp.approvals.requested_by == "alice" and inp.approvals.four_eyes and inp.approvals.allowed_approvers == ["bob"]
    assert inp.gates.timeout_seconds == 600 and inp.gates.timeout_outcome == GateTimeoutOutcome.ABORT


def test_restore_from_a_file_with_flags_and_set_over_it(tmp_path: Path, sent: list[Any]) -> None:
    f = write(tmp_path, "input.yaml", {"members": MEMBERS, "strategy": "snapshot-restore", "snapshot": "/backup/s.db",
                                       "survivor": "m3", "cluster": "lab", "gates": {"timeout_seconds": 60},
                                       "calls": {"heartbeat_seconds": 4}, "join_timeout_seconds": 90})
    res = start("etcd-restore", "-f", f, "--survivor", "m1", "--set", "approvals.four_eyes=true",
                "--set", "gates.timeout_outcome=approve")
    assert res.exit_code == 0, (res.output, res.exception)
    inp = sent[0]
    assert inp.strategy == RestoreStrategy.SNAPSHOT_RESTORE and inp.snapshot == "/backup/s.db"
    assert inp.survivor == "m1" and inp.cluster == "lab"  # the flag over the file; --cluster not given: the file's
    assert inp.approvals.four_eyes and inp.approvals.requested_by == "alice"
    assert inp.gates.timeout_seconds == 60 and inp.gates.timeout_outcome == GateTimeoutOutcome.APPROVE
    assert inp.calls.heartbeat_seconds == 4 and inp.join_timeout_seconds == 90


def test_backup_from_a_file_and_set(tmp_path: Path, sent: list[Any]) -> None:
    f = write(tmp_path, "input.yaml", {"members": MEMBERS, "attempts": 3})
    res = start("etcd-backup", "-f", f, "--set", "snapshot_timeout_seconds=30", "--set", "calls.heartbeat_seconds=5")
    assert res.exit_code == 0, (res.output, res.exception)
    inp = sent[0]
    assert isinstance(inp, EtcdBackupInput)
    assert inp.attempts == 3 and inp.snapshot_timeout_seconds == 30 and inp.calls.heartbeat_seconds == 5
    assert [m.name for m in inp.members] == ["m1", "m2", "m3"]


def test_backup_members_file_and_attempts_flag(tmp_path: Path, sent: list[Any]) -> None:
    members = write(tmp_path, "members.yaml", {"members": MEMBERS})
    res = start("etcd-backup", "--members", members, "--attempts", "4")
    assert res.exit_code == 0, (res.output, res.exception)
    assert sent[0].attempts == 4 and sent[0].cluster


@pytest.mark.parametrize(("args", "says"), [
    (("etcd-backup",), "give --members"),
    (("etcd-restore", "--strategy", "force-new-cluster"), "give --members"),
    (("etcd-backup", "-f", "{input}", "--set", "approvals.four_eyes=maybe"), "four_eyes"),
    (("etcd-restore", "-f", "{input}", "--survivor", "m9"), "unknown survivor"),
    (("etcd-restore", "-f", "{input}", "--set", "gates.timeout_seconds=-1"), "timeout_seconds"),
])
def test_a_bad_etcd_input_is_refused_before_starting(tmp_path: Path, sent: list[Any], args: tuple[str, ...], says: str) -> None:
    f = write(tmp_path, "input.yaml", {"members": MEMBERS})
    res = start(*(a.replace("{input}", f) for a in args))
    text = str(res.exception) if isinstance(res.exception, CliError) else res.output
    assert res.exit_code == 2 or (isinstance(res.exception, CliError) and res.exception.code == 2), (res.exit_code, res.output)
    assert says in " ".join(text.split()), text
    assert not sent


def test_the_control_plane_barrier_embeds_the_nested_backup_input() -> None:
    """The control-plane upgrade's ``etcd_backup`` barrier is an :class:`EtcdBackupInput`: the
    nested shape validates there, and the barrier runs it without search attributes."""
    cp = ControlPlaneUpgradeInput.model_validate({
        "masters": [{"name": "m1", "api_url": "https://m1:8443", "access": {"backend": "ssh", "host": "m1"}}],
        "action": {"kind": "external", "argv": ["ansible-playbook", "-l", "{master}"]},
        "etcd_backup": {"members": MEMBERS, "calls": {"heartbeat_seconds": 5}},
    })
    assert cp.etcd_backup is not None and cp.etcd_backup.calls.heartbeat_seconds == 5
    assert cp.etcd_backup.model_copy(update={"search_attributes": False}).search_attributes is False
