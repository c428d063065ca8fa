"""Stored histories (tests/workflows/histories/*.json) replay against the current workflows.

Record after a deliberate, patched change with
``LOCKKEEPER_WRITE_HISTORY=1 pytest tests/workflows -k full_rollout`` (it records one node run of
the full two-pool rollout as ``node_rollout_writes_in_calls.json``, and the parent run when its file
is missing; rename the file when the node run's shape changes again, and keep the old files). The drain and
etcd histories come from ``LOCKKEEPER_WRITE_HISTORY=1 pytest tests/workflows/test_recorded_histories.py``.
"""

from __future__ import annotations

import pytest
from replay import HISTORIES, replay_history_file

#: file -> the workflow ID it was recorded under (children and owners are named after it).
HISTORY_IDS = {
    "machineconfig_rollout_full.json": "rollout-full",
    "node_rollout_full.json": "rollout-full/node/worker-0/1",
    # The same node run with its short calls as local activities (patch node-run-local-calls).
    "node_rollout_local_calls.json": "rollout-full/node/worker-0/1",
    # Started with NodeRolloutInput.features: no patch markers (workflows/kit/features.py).
    "node_rollout_features.json": "rollout-full/node/worker-0/1",
    # Past the drain hand-off one wait_for_node_done answers the uncordon (feature handshake-tail-in-one-call).
    "node_rollout_tail.json": "rollout-full/node/worker-0/1",
    # No step signalled to the parent (feature node-steps-by-query; status asks the run).
    "node_rollout_quiet.json": "rollout-full/node/worker-0/1",
    # The drain request, cordon and first pass in one drain_when_asked (feature drain-when-asked).
    "node_rollout_drain_asked.json": "rollout-full/node/worker-0/1",
    # desiredConfig set by the first drain_when_asked, the drain hand-off by wait_for_node_done
    # (features desired-config-in-drain-call, drain-hand-off-in-tail-call): no local call.
    "node_rollout_writes_in_calls.json": "rollout-full/node/worker-0/1",
    # A node run skipped during its first drain_when_asked, rolled back once the call had ended
    # (feature stop-settles-call; tests/workflows/test_stop_settles.py records it).
    "node_rollout_stop_settles.json": "rollout-stop-settles-skip/node/worker-0/1",
    # A rollout across continue-as-new (tests/workflows/test_scale_continue_as_new.py): the first
    # run ends in ContinuedAsNew, the last starts from the carried state.
    "machineconfig_rollout_can_first.json": "rollout-can",
    "machineconfig_rollout_can_last.json": "rollout-can",
    # A large plan's rollout (leases in the window) whose node runs each took their node's lease
    # as a child (patch node-run-holds-node-lease), recorded before node-run-is-node-lease.
    "machineconfig_rollout_window.json": "rollout-window",
    "node_rollout_lease_child.json": "rollout-window/node/worker-0/1",
    # The same rollout whose node runs are their node leases (patch node-run-is-node-lease;
    # tests/workflows/test_node_run_leases.py records them).
    "machineconfig_rollout_window_run_lease.json": "rollout-window",
    "node_rollout_is_lease.json": "lease/window-history/node:worker-0",
    # ... whose probe of the planned nodes is one find_held_leases activity (patch lease-probe-by-activity).
    "machineconfig_rollout_window_probe_activity.json": "rollout-window",
    # Recorded by tests/workflows/test_recorded_histories.py before the kit moved these workflows.
    "node_drain_full.json": "drain-history",
    "etcd_backup_partial.json": "etcd-backup-history",
    "etcd_restore_force_new.json": "etcd-restore-history",
    "etcd_restore_gate_timeout.json": "etcd-restore-timeout-history",
    # The same runs on the kit (its patches taken: drain lease, LockkeeperStatus, etcd lease).
    "node_drain_kit.json": "drain-history",
    "etcd_backup_kit.json": "etcd-backup-history",
    "etcd_restore_force_new_kit.json": "etcd-restore-history",
    "etcd_restore_gate_timeout_kit.json": "etcd-restore-timeout-history",
    # The same drain and restore whose lease release waits for the leases to close (kit patch
    # kit-lease-release-waits-closed; its 60 s timer cancelled once they have).
    "node_drain_release_closed.json": "drain-history",
    "etcd_restore_release_closed.json": "etcd-restore-history",
    # A reboot command whose session went down with the host, judged by the node's bootID
    # (patch drain-reboot-by-boot).
    "node_drain_reboot_by_boot.json": "drain-history",
    # The SDN->OVN migration with leases, takeover, reboots and every gate
    # (tests/workflows/test_network_migration_history.py).
    "network_migration_full.json": "network-migration-history",
    # The runtime migration (R4): a failed scale-up, the hold gate, retry-node, the post-check
    # per node group; both runs of the retried node (tests/workflows/test_runtime_migration_history.py).
    "runtime_migration_full.json": "runtime-migration-history",
    "runtime_migration_node_first.json": "runtime-migration-history/node/g1",
    "runtime_migration_node_retry.json": "runtime-migration-history/node/g1",
}


@pytest.mark.parametrize("name", sorted(HISTORY_IDS))
async def test_stored_history_replays(name):
    path = HISTORIES / name
    assert path.exists(), f"missing stored history {path}"
    result = await replay_history_file(path, HISTORY_IDS[name])
    assert result.replay_failure is None
    assert result.history.events, "the stored history has no events"
