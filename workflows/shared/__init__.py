"""Pieces several procedures share that are not procedure-agnostic enough for the kit: they sit
below the procedures and above the kit (the layers contract in pyproject.toml). Today the
GlusterFS assessment and health gate (:mod:`.glusterfs`), which the GlusterFS recovery, the
node and control-plane upgrades and the runtime migration use."""
