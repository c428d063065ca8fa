"""``lockkeeper start <procedure>``: one module per procedure (flags → input → start).

Every subcommand takes the common options ``--id``, ``--cluster``, ``--dry-run``, ``--wait``,
``--queue`` (added to each by :func:`.shared.with_common_options`) and ``-o table|json|yaml``
and prints the workflow ID; :mod:`.shared` does the starting
(:func:`lockkeeper.starter.start_procedure`: no worker on the task queue → exit 3, unless
``--queue``).
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
    from lockkeeper.cli.start.shared import with_common_options
    from lockkeeper.cli.start.vxlan_port import start_vxlan_port_change

    start_app.command("machineconfig-rollout")(with_common_options(start_machineconfig_rollout))
    start_app.command("drain")(with_common_options(start_drain))
    start_app.command("etcd-backup")(with_common_options(start_etcd_backup))
    start_app.command("etcd-restore")(with_common_options(start_etcd_restore))
    start_app.command("runtime-migration")(with_common_options(start_runtime_migration))
    start_app.command("node-upgrade")(with_common_options(start_node_upgrade))
    start_app.command("network-migration")(with_common_options(start_network_migration))
    start_app.command("control-plane-upgrade")(with_common_options(start_control_plane_upgrade))
    start_app.command("node-selector-migration")(with_common_options(start_node_selector_migration))
    start_app.command("cluster-upgrade")(with_common_options(start_cluster_upgrade))
    start_app.command("vxlan-port-change")(with_common_options(start_vxlan_port_change))
    start_app.command("gluster-recovery")(with_common_options(start_gluster_recovery))
