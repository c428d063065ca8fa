"""``lockkeeper start gluster-recovery`` / ``diagnose gluster`` parsing and the report view
(typer CliRunner; no server: validation happens before any connection)."""

from __future__ import annotations

import io

from rich.console import Console
from typer.testing import CliRunner

from activities.gluster.models import Brick, BrickStatus, GlusterPod, GlusterReport, NodeAddresses, VolumeInfo, VolumeStatus
from lockkeeper import cli
from lockkeeper.cli.common import CliError
from lockkeeper.cli.gluster import assessment_view, diagnosis_data
from workflows.shared.glusterfs.assess import assess

runner = CliRunner()
HOSTS = {"10.0.0.10": "master01", "10.0.0.11": "master02", "10.0.0.12": "master03"}


def _seed_report() -> GlusterReport:
    bricks = [Brick(host=h, path=f"/b/{i}") for i, h in enumerate(["10.0.0.11", "10.0.0.12", "10.0.0.10"])]
    return GlusterReport(
        exec_pod="glusterfs-storage-dz8qj",
        pods=[GlusterPod(name=f"gfs-{n}", uid=n, node=n, pod_ip=ip, host_ip=ip, phase="Running", ready=True) for ip, n in HOSTS.items()],
        nodes=[NodeAddresses(name=n, addresses=[ip], ready=True) for ip, n in HOSTS.items()],
        info=[VolumeInfo(name="reg", type="Replicate", status="Started", replica_count=3, brick_count=3, bricks=bricks)],
        status=[VolumeStatus(name="reg", bricks=[BrickStatus(host=b.host, path=b.path, online=b.host != "10.0.0.12") for b in bricks])],
    )


def test_report_view_names_the_offline_brick_and_the_host_to_restart() -> None:
    a = assess(_seed_report())
    buf = io.StringIO()
    Console(file=buf, width=200, color_system=None).print(assessment_view(a))
    text = buf.getvalue()
    assert "10.0.0.12:/b/1" in text and "Online N" in text
    assert "restart host 10.0.0.12 (node master03, pod gfs-master03): safe to restart" in text
    assert "NOT healthy" in text
    data = diagnosis_data(_seed_report(), a)
    assert data["healthy"] is False and data["assessment"]["hosts"][0]["host"] == "10.0.0.12"


def test_start_gluster_recovery_help_and_validation() -> None:
    res = runner.invoke(cli.app, ["start", "gluster-recovery", "--help"], env={"COLUMNS": "240"})
    assert res.exit_code == 0
    for flag in ("--check-only", "--namespace", "--cluster", "--allow-start-force", "--max-restarts"):
        assert flag in res.output
    bad = runner.invoke(cli.app, ["start", "gluster-recovery", "--quorum-rule", "most"])
    assert isinstance(bad.exception, CliError) and bad.exception.code == 2  # `lockkeeper`'s main: exit 2 with the message
    assert "invalid input: quorum_rule: Input should be 'per-volume' or 'per-replica-set'" in str(bad.exception)
    zero = runner.invoke(cli.app, ["start", "gluster-recovery", "--max-restarts", "0"])
    assert isinstance(zero.exception, CliError) and zero.exception.code == 2
    assert "max_restarts_per_host: Input should be greater than or equal to 1" in str(zero.exception)


def test_diagnose_gluster_help_and_bad_rule() -> None:
    res = runner.invoke(cli.app, ["diagnose", "gluster", "--help"], env={"COLUMNS": "240"})
    assert res.exit_code == 0 and "--namespace" in res.output and "--no-heal" in res.output
    bad = runner.invoke(cli.app, ["diagnose", "gluster", "--quorum-rule", "most"])
    assert bad.exit_code == 2


def test_gluster_activities_are_registered_once_and_the_procedure_is_known() -> None:
    from workers.registry import build_activities
    from workflows import PROCEDURES
    from workflows.gluster import SPEC
    from workflows.shared.glusterfs import calls

    names = [a.__temporal_activity_definition.name for a in build_activities(lambda: None)]  # type: ignore[attr-defined]
    called = {v for k, v in vars(calls).items() if k.isupper() and isinstance(v, str) and v.islower() and "_" in v}
    assert called == {"read_gluster", "delete_gluster_pod", "find_gluster_replacement", "gluster_volume_start_force"}
    assert all(names.count(n) == 1 for n in called), names
    assert SPEC in PROCEDURES and SPEC.workflow_type == "GlusterRecoveryWorkflow"
