"""The simulator's own view of "what changed": snapshots of the whole simulated world and diffs.

A fault-matrix test takes a snapshot before a procedure, drives it (abort, failed step, killed
worker), and asks the simulator what differs now; it judges "restored" or the procedure's "left
changed" list by that answer, not by lockkeeper's own account.

- :mod:`~clustersim.snapshots.world`: what a snapshot captures (API objects, hosts, masters,
  GlusterFS, SDN) and what it leaves out, and why;
- :mod:`~clustersim.snapshots.objects` / :mod:`~clustersim.snapshots.state`: the comparison rules;
- :mod:`~clustersim.snapshots.ignore`: entry keys and ignore patterns;
- :mod:`~clustersim.snapshots.targets`: what changed named as lockkeeper's ``left_changed``
  names it (``DaemonSet openshift-sdn/sdn``, ``host node01``): ``by_target``, ``targets``;
- :mod:`~clustersim.snapshots.models`: the JSON shapes (``Diff``, ``DiffOptions``, ...);
- :mod:`~clustersim.snapshots.registry`: the ``/_sim/snapshots`` endpoints every ``ClusterSim`` serves;
- :mod:`~clustersim.snapshots.client`: ``take``/``diff``/``delete``/``Snapshot`` for tests.
"""

from clustersim.snapshots.client import (
    Snapshot,
    SnapshotClientError,
    delete,
    diff,
    list_snapshots,
    settle,
    take,
    take_info,
)
from clustersim.snapshots.models import (
    Diff,
    DiffOptions,
    FieldChange,
    IgnoredCount,
    ObjectChange,
    PodCount,
    PodGroupChange,
    Reboot,
    Restart,
    SnapshotInfo,
    StateChange,
)
from clustersim.snapshots.targets import by_target, targets

__all__ = ["Diff", "DiffOptions", "FieldChange", "IgnoredCount", "ObjectChange", "PodCount", "PodGroupChange",
           "Reboot", "Restart", "Snapshot", "SnapshotClientError", "SnapshotInfo", "StateChange", "by_target", "delete",
           "diff", "list_snapshots", "settle", "take", "take_info", "targets"]
