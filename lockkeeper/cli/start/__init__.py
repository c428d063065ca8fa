"""``lockkeeper start <procedure>``: one module per procedure (flags → input → start).

Every subcommand takes the common options ``--id``, ``--cluster``, ``--dry-run``, ``--wait`` and
``-o table|json|yaml`` and prints the workflow ID; :mod:`.shared` does the starting
(:func:`lockkeeper.starter.start_procedure`).
"""

from __future__ import annotations

import typer


def register(start_app: typer.Typer) -> None:
    """Add every procedure's ``start`` subcommand."""
    from lockkeeper.cli.start.cluster_upgrade import start_cluster_upgrade
    from lockkeeper.cli.start.control_plane import start_control_plane_upgrade
    from lockkeeper.cli.start.drain import start_drain
    from lockkeeper.cli.start.etcd import start_etcd_backup, start_etcd_restore
    from lockkeeper.cli.start.gluster import start_gluster_recovery
    from lockkeeper.cli.start.machineconfig import start_machineconfig_rollout
    from lockkeeper.cli.start.network_migration import start_network_migration
    from lockkeeper.cli.start.node_selectors import start_node_selector_migration
    from lockkeeper.cli.start.node_upgrade import start_node_upgrade
    from lockkeeper.cli.start.runtime_migration import start_runtime_migration
    from lockkeeper.cli.start.vxlan_port import start_vxlan_port_change

    start_app.command("machineconfig-rollout")(start_machineconfig_rollout)
    start_app.command("drain")(start_drain)
    start_app.command("etcd-backup")(start_etcd_backup)
    start_app.command("etcd-restore")(start_etcd_restore)
    start_app.command("runtime-migration")(start_runtime_migration)
    start_app.command("node-upgrade")(start_node_upgrade)
    start_app.command("network-migration")(start_network_migration)
    start_app.command("control-plane-upgrade")(start_control_plane_upgrade)
    start_app.command("node-selector-migration")(start_node_selector_migration)
    start_app.command("cluster-upgrade")(start_cluster_upgrade)
    start_app.command("vxlan-port-change")(start_vxlan_port_change)
    start_app.command("gluster-recovery")(start_gluster_recovery)
