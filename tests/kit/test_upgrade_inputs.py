"""Issue 36 for the node upgrade, the control-plane upgrade and the nodeSelector migration: their
inputs are the kit's :class:`ProcedureInput` with nested approvals, gate policy, call timeouts
and (node upgrade) :class:`DrainPolicy` and ``MaxUnavailable``; their start flags are aliases of
those fields, and ``-f input.yaml`` / ``--set KEY=VALUE`` build the same input. The start is
stopped where it would contact Temporal: the test reads the validated input it would send."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from tests.support.startcapture import refused, start, write

from workflows.control_plane.models import ControlPlaneUpgradeInput
from workflows.kit.inputs import DrainPolicy, ProcedureInput
from workflows.kit.models import GateTimeoutOutcome
from workflows.node_selectors.models import NodeSelectorMigrationInput
from workflows.node_upgrade.models import NodeUpgradeInput

MASTER = {"name": "m1", "api_url": "https://m1:8443", "access": {"backend": "ssh", "host": "10.0.0.1", "port": 2201}}


@pytest.mark.parametrize("model", [NodeUpgradeInput, ControlPlaneUpgradeInput, NodeSelectorMigrationInput])
def test_the_three_inputs_are_procedure_inputs_without_their_flat_copies(model: type) -> None:
    assert issubclass(model, ProcedureInput)
    for flat in ("requested_by", "four_eyes", "allowed_approvers", "gate_timeout_seconds", "activity_timeout_seconds"):
        assert flat not in model.model_fields, (model, flat)


def test_node_upgrade_flags_are_aliases_of_the_nested_fields(sent: list[Any]) -> None:
    res = start("node-upgrade", "--selector", "region=infra", "--action-command", "ansible-playbook up.yml -l {node}",
                "--serial", "50%", "--decide-after", "120", "--drain-timeout", "300", "--drain-on-timeout", "proceed",
                "--four-eyes", "--allowed-approver", "bob", "--cluster", "c1")
    assert res.exit_code == 0, res.output
    (inp,) = sent
    assert isinstance(inp, NodeUpgradeInput)
    assert (inp.approvals.requested_by, inp.approvals.four_eyes, inp.approvals.allowed_approvers) == ("alice", True, ["bob"])
    assert inp.policy.serial == "50%" and inp.cluster == "c1"
    # the upgrade's drain defaults (30 s a pass) with the flags' fields set: one DrainPolicy
    assert inp.drain == DrainPolicy(wait_seconds=30.0, decide_after_seconds=120.0, timeout_seconds=300.0, on_timeout="proceed")


def test_node_upgrade_from_a_file_with_flags_and_set_over_it(sent: list[Any], tmp_path: Path) -> None:
    f = write(tmp_path, {"selection": {"label_selector": "region=infra"}, "policy": {"serial": 1, "canary": 1},
                         "action": {"kind": "host", "argv": ["upgrade", "{node}"]},
                         "host_access": {"n1": {"backend": "ssh", "host": "10.0.0.5"}},
                         "gates": {"timeout_seconds": 900, "timeout_outcome": "abort"}, "drain": {"wait_seconds": 5}})
    res = start("node-upgrade", "-f", f, "--action-on", "host", "--decide-after", "60", "--set", "policy.serial=25%",
                "--set", "calls.short_call_seconds=20")
    assert res.exit_code == 0, res.output
    (inp,) = sent
    assert inp.selection.label_selector == "region=infra" and inp.action.kind == "host" and "n1" in inp.host_access
    assert inp.policy.serial == "25%" and inp.policy.canary == 1  # --set over the file; the rest from the file
    assert inp.gates.timeout_seconds == 900 and inp.gates.timeout_outcome == GateTimeoutOutcome.ABORT
    assert (inp.drain.wait_seconds, inp.drain.decide_after_seconds) == (5.0, 60.0)  # a partial drain keeps the rest
    assert inp.calls.short_call_seconds == 20 and inp.approvals.requested_by == "alice"


@pytest.mark.parametrize(("args", "words"), [
    (["--serial", "0"], "--serial"),
    (["--serial", "150%"], "--serial"),
    (["--set", "policy.serial=half"], "invalid maxUnavailable 'half'"),
    (["--set", "gate_timeout_seconds=60"], "gate_timeout_seconds: Extra inputs are not permitted"),
    (["--drain-on-timeout", "proceed"], "drain.on_timeout 'proceed' needs drain.timeout_seconds"),
])
def test_node_upgrade_refuses_a_bad_value_before_starting(sent: list[Any], args: list[str], words: str) -> None:
    res = start("node-upgrade", "--selector", "a=b", "--action-command", "x {node}", *args)
    assert words in refused(res)
    assert sent == []


def test_node_upgrade_without_a_selection_or_action_names_what_is_missing(sent: list[Any]) -> None:
    res = start("node-upgrade", "--action-command", "x {node}")
    assert "selection: Field required" in refused(res)
    assert sent == []


@pytest.mark.parametrize("flag", ["-f", "--input"])
def test_control_plane_from_a_file_with_flags_over_it(sent: list[Any], tmp_path: Path, flag: str) -> None:
    f = write(tmp_path, {"masters": [MASTER], "action": {"kind": "external", "argv": ["play", "-l", "{master}"]},
                         "etcd_backup_skip_reason": "lab", "etcd_health_skip_reason": "lab",
                         "approvals": {"four_eyes": True}})
    res = start("control-plane-upgrade", flag, f, "--approve-each", "--api-ready-timeout", "30", "--set", "gates.timeout_seconds=600")
    assert res.exit_code == 0, res.output
    (inp,) = sent
    assert isinstance(inp, ControlPlaneUpgradeInput)
    assert [m.name for m in inp.masters] == ["m1"] and inp.action.argv == ["play", "-l", "{master}"]
    assert inp.approve_each and inp.api_ready_timeout_seconds == 30 and inp.gates.timeout_seconds == 600
    assert inp.approvals.four_eyes and inp.approvals.requested_by == "alice"


def test_control_plane_flags_alone_build_the_same_shape(sent: list[Any]) -> None:
    res = start("control-plane-upgrade", "--master", "m1", "--action-command", "play -l {master}", "--etcd-backup-skip-reason", "lab",
                "--etcd-health-skip-reason", "lab")
    assert res.exit_code == 0, res.output
    (inp,) = sent
    assert inp.masters[0].api_url == "https://m1:8443" and inp.approve_each is False and inp.calls.short_call_seconds == 10
    res = start("control-plane-upgrade", "--action-command", "play -l {master}")
    assert "give --master (repeatable) or --input" in refused(res)


def test_control_plane_windows_come_from_the_input_and_a_bad_one_is_refused(sent: list[Any]) -> None:
    """The masters run in the kit's node window, so the input's maintenance windows apply to
    them; the start command has no ``--window`` flag: ``-f`` / ``--set windows=...`` give them."""
    base = ("control-plane-upgrade", "--master", "m1", "--action-command", "play -l {master}", "--etcd-backup-skip-reason", "lab",
            "--etcd-health-skip-reason", "lab")
    res = start(*base, "--set", 'windows=["Sat 02:00-04:00 UTC"]')
    assert res.exit_code == 0, res.output
    assert sent.pop().windows == ["Sat 02:00-04:00 UTC"]
    assert "windows" in refused(start(*base, "--set", 'windows=["Caturday 02:00-04:00 UTC"]'))


def test_node_selector_migration_from_a_file_and_flags(sent: list[Any], tmp_path: Path) -> None:
    res = start("node-selector-migration", "--map", "region=infra=node-role.kubernetes.io/infra=true", "--no-approve",
                "--revert-window", "60")
    assert res.exit_code == 0, res.output
    inp = sent.pop()
    assert isinstance(inp, NodeSelectorMigrationInput)
    assert inp.mapping == {"region=infra": {"node-role.kubernetes.io/infra": "true"}}
    assert (inp.approve_plan, inp.approve_label_removal, inp.revert_window_seconds) == (False, False, 60)
    assert inp.drop_keys == ["zone"] and inp.remove_labels == ["region", "zone"] and inp.calls.short_call_seconds == 15
    f = write(tmp_path, {"mapping": {"region=infra": {"node-role.kubernetes.io/infra": "true"}}, "remove_labels": ["region"]})
    res = start("node-selector-migration", "-f", f, "--set", "gates.timeout_seconds=120")
    assert res.exit_code == 0, res.output
    inp = sent.pop()
    assert inp.remove_labels == ["region"] and inp.gates.timeout_seconds == 120 and inp.approve_plan
    assert inp.approvals.requested_by == "alice"


def test_a_bad_serial_in_a_plan_file_is_refused_by_the_model() -> None:
    with pytest.raises(ValidationError, match="invalid maxUnavailable"):
        NodeUpgradeInput(selection={"label_selector": "a=b"}, action={"argv": ["x", "{node}"]}, policy={"serial": 0})


def test_control_plane_update_target_is_given_or_the_static_pod_image_tag() -> None:
    """Issue 41: the release a control-plane upgrade goes to, for the one-minor-version check."""
    base: dict[str, Any] = {"masters": [{"name": "m1", "api_url": "https://m1:8443", "access": {"backend": "local"}}],
                            "etcd_backup_skip_reason": "test"}
    pod = "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: api\n    image: registry:5000/openshift/origin-control-plane:v3.10.0\n"
    static = {"kind": "static-pods", "manifests": [{"path": "/etc/origin/node/pods/apiserver.yaml", "content": pod}]}
    external = {"kind": "external", "argv": ["ansible-playbook", "x.yml"]}
    assert ControlPlaneUpgradeInput.model_validate({**base, "action": static}).update_target() == "3.10"
    assert ControlPlaneUpgradeInput.model_validate({**base, "action": static, "target_version": "3.11"}).update_target() == "3.11"
    assert ControlPlaneUpgradeInput.model_validate({**base, "action": external}).update_target() is None
