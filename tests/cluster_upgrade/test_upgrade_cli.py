"""The start options of the upgrade procedures: serial and command parsing, and a cluster-upgrade
plan file validated (and refused) by pydantic before anything starts."""

from __future__ import annotations

import pytest
import typer
from pydantic import ValidationError

from lockkeeper.cli.start.node_upgrade import parse_argv, parse_serial
from workflows.cluster_upgrade.models import ClusterUpgradeInput

CP = {"masters": [{"name": "m1", "api_url": "https://m1:8443", "access": {"backend": "ssh", "host": "m1"}}],
      "action": {"kind": "external", "argv": ["ansible-playbook", "-l", "{master}"]}}


@pytest.mark.parametrize(("raw", "value"), [("50%", "50%"), ("2", 2), (" 1 ", 1), ("33.3%", "33.3%"), (" 25 % ", "25%")])
def test_parse_serial(raw: str, value: int | str) -> None:
    assert parse_serial(raw) == value


@pytest.mark.parametrize("raw", ["x", "-1", "%", "1.5", "0", "0%", "101%"])
def test_bad_serial(raw: str) -> None:
    with pytest.raises(typer.BadParameter):
        parse_serial(raw)


def test_parse_argv_is_split_not_shelled() -> None:
    assert parse_argv("ansible-playbook -e 'a=b c' x.yml", "--x") == ["ansible-playbook", "-e", "a=b c", "x.yml"]
    with pytest.raises(typer.BadParameter):
        parse_argv("'unclosed", "--x")


def test_plan_file_validated_and_etcd_phase_feeds_the_control_plane() -> None:
    inp = ClusterUpgradeInput(plan={"control_plane": CP, "etcd_backup": {
        "members": [{"name": "m1", "peer_url": "https://10.0.0.10:2380", "client_url": "https://10.0.0.10:2379",
                     "data_dir": "/var/lib/etcd", "control": {"kind": "static-pod", "manifest": "/etc/origin/node/pods/etcd.yaml"}}]}})
    assert inp.plan.control_plane is not None and inp.plan.control_plane.etcd_backup_skip_reason == "taken by the etcd-backup phase"
    assert [m.name for m in inp.plan.control_plane.health_members()] == ["m1"]  # the health preflight checks that phase's members


@pytest.mark.parametrize(
    ("plan", "words"),
    [
        ({}, "the plan has no phase"),
        ({"control_plane": {**CP, "masters": []}}, "masters"),
        ({"control_plane": CP}, "etcd backup barrier is required"),
        ({"infra_nodes": {"selection": {"label_selector": "region=infra"}, "action": {"argv": ["x"]}, "policy": {"serial": "half"}}},
         "invalid maxUnavailable 'half'"),
        ({"node_selectors": {"mapping": {"region": {"a": "b"}}}}, "must be KEY=VALUE"),
    ],
)
def test_bad_plan_refused_before_anything_starts(plan: dict, words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        ClusterUpgradeInput(plan=plan)


def test_control_plane_without_etcd_members_or_reason_refused_by_the_start_check() -> None:
    # Not a model validator (a stored input must still decode on replay): the CLI and the
    # workflow's preflight ask etcd_health_problem().
    inp = ClusterUpgradeInput(plan={"control_plane": {**CP, "etcd_backup_skip_reason": "no etcd"}})
    assert inp.plan.control_plane is not None
    assert "etcd health check needs members" in (inp.plan.control_plane.etcd_health_problem() or "")
    ok = inp.plan.control_plane.model_copy(update={"etcd_health_skip_reason": "no etcd on this lab"})
    assert ok.etcd_health_problem() is None


MS = ["master01", "master02", "master03"]


def test_api_urls_template_ports_and_per_master() -> None:
    from lockkeeper.cli.start.control_plane import api_urls

    assert api_urls(MS, [], []) == {m: f"https://{m}:8443" for m in MS}
    assert api_urls(MS, ["http://127.0.0.1:{port}"], ["master01=18443", "master02=18444", "master03=18445"]) == {
        "master01": "http://127.0.0.1:18443", "master02": "http://127.0.0.1:18444", "master03": "http://127.0.0.1:18445"}
    assert api_urls(MS, ["https://{master}.lan:{port}", "master02=https://10.0.0.11:443"], ["master03=9443"]) == {
        "master01": "https://master01.lan:8443", "master02": "https://10.0.0.11:443", "master03": "https://master03.lan:9443"}


@pytest.mark.parametrize(
    ("urls", "ports", "words"),
    [
        (["https://{host}:8443"], [], "unknown placeholder {host}"),
        (["https://{master}:1", "https://{master}:2"], [], "one template only"),
        (["master09=https://x:1"], [], "'master09' is not a --master"),
        ([], ["master09=1"], "NAME a --master"),
        ([], ["master01=http"], "bad port"),
        ([], ["master01=70000"], "bad port"),
    ],
)
def test_api_urls_refused(urls: list[str], ports: list[str], words: str) -> None:
    from lockkeeper.cli.start.control_plane import api_urls

    with pytest.raises(typer.BadParameter, match=words):
        api_urls(MS, urls, ports)
