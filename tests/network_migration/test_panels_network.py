"""The network migration's status/result panel (lockkeeper/panels_network.py): named by the
procedure's CLI module, drawn through lockkeeper.panels for ``status`` and results."""

from __future__ import annotations

import io

from rich.console import Console

from workflows.kit.models import HealthStatus
from workflows.network_migration.models import NetworkMigrationResult, NetworkMigrationStatus, NodeReboot, PoolProgress


def render(renderable: object) -> str:
    buf = io.StringIO()
    Console(file=buf, width=200, color_system=None).print(renderable)
    return buf.getvalue()


def status(**kw: object) -> NetworkMigrationStatus:
    base: dict[str, object] = dict(
        workflow_id="network-migration-r1-x", cluster="r1", step="wait-pools",
        pools=[PoolProgress(name="worker", updated=1, machines=3, conditions="Updated=False Updating=True Degraded=False"),
               PoolProgress(name="master", updated=3, machines=3, conditions="Updated=True Updating=False Degraded=False", paused=True)],
        baseline={"worker": "rendered-worker-412d", "master": "rendered-master-8e1d"},
        guard_behind=["pool worker: Updated=False", "node qsu-worker-02 on rendered-worker-412d"],
        plan=[["qsu-worker-01", "qsu-worker-02"], ["qsu-master-01"]],
    )
    base.update(kw)
    return NetworkMigrationStatus(**base)  # type: ignore[arg-type]


def test_the_spec_names_the_panel() -> None:
    from lockkeeper import panels, panels_network

    assert panels._views("network-migration") == (panels_network.panel, panels_network.panel)


def test_status_panel_shows_pools_guard_and_plan() -> None:
    import lockkeeper.cli.start.network_migration  # noqa: F401
    from lockkeeper import panels

    out = render(panels.status_panel("network-migration", status()))
    assert "step: wait-pools" in out and "not switched yet" in out
    assert "worker" in out and "1/3" in out and "rendered-worker-412d" in out and "Updated=False Updating=True" in out
    assert "guard pools-settled: 2 behind" in out and "node qsu-worker-02 on rendered-worker-412d" in out
    assert "reboot plan: 2 batches: qsu-worker-01, qsu-worker-02 | qsu-master-01" in out


def test_status_panel_shows_reboots_and_a_holding_guard() -> None:
    import lockkeeper.cli.start.network_migration  # noqa: F401
    from lockkeeper import panels

    st = status(step="reboots", switched=True, guard_behind=[], health={"pools-settled": HealthStatus(name="pools-settled", state="ok")},
                reboots=[NodeReboot(node="qsu-worker-01", state="done", commands_sent=1, detail="reboot command exit 0"),
                         NodeReboot(node="qsu-worker-02", state="rebooting", commands_sent=1),
                         NodeReboot(node="qsu-master-01", master=True)], takeovers=["network-migration-r1-x/takeover-1"])
    out = render(panels.status_panel("network-migration", st))
    assert "network type switched to OVNKubernetes" in out and "guard pools-settled: holds" in out
    assert "Reboots (1/3 done)" in out and "reboot command exit 0" in out and "rebooting" in out
    assert "network-migration-r1-x/takeover-1" in out


def test_result_panel_names_the_lease_holder() -> None:
    import lockkeeper.cli.start.network_migration  # noqa: F401
    from lockkeeper import panels

    res = NetworkMigrationResult(procedure="network-migration", workflow_id="network-migration-r1-y", outcome="refused",
                                 message="sdn on cluster r1 is held by migration network-migration-r1-x; nothing was changed",
                                 lease_holder="network-migration-r1-x")
    out = render(panels.result_panel("network-migration", res))
    assert "refused: the lease is held by network-migration-r1-x" in out and "nothing was changed" in out
