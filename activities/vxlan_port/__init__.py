"""Activities of the live VXLAN port change (R5): the SDN DaemonSet, its pods, the fast fan-out,
the ClusterNetwork, master readiness and master-config.yaml (procedures-spec §7)."""
