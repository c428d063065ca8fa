"""Activities of the SDN→OVN-Kubernetes network migration (issue 15): read the migration state
and the pools guard (``check_pools_settled``, usable by any procedure), delete a namespace."""
