"""Pure parts of the network migration: the pools guard, preflight refusals, reboot batches."""

from __future__ import annotations

from activities.network_migration.models import MigrationState, NodeState, PoolState, pools_settled
from workflows.network_migration.models import NetworkMigrationInput
from workflows.network_migration.plan import preflight_problems, reboot_batches, signature


def _state(**pool_kw: object) -> MigrationState:
    pool = PoolState(name="worker", updated=True, target="rendered-worker-new", machine_count=2, updated_machine_count=2,
                     nodes=["w1", "w2"])
    pool = pool.model_copy(update=pool_kw)
    nodes = [NodeState(name="w1", pool="worker", current_config="rendered-worker-new"),
             NodeState(name="w2", pool="worker", current_config="rendered-worker-new")]
    return MigrationState(config_type="OpenShiftSDN", status_type="OpenShiftSDN", pools=[pool], nodes=nodes)


def test_guard_holds_when_every_pool_and_node_is_at_the_newest_config() -> None:
    assert pools_settled(_state(), {"worker": "rendered-worker-old"}).ok


def test_guard_names_pool_conditions() -> None:
    res = pools_settled(_state(updated=False, updating=True, updated_machine_count=1))
    assert not res.ok and res.behind[0] == "pool worker: Updated=False, Updating=True (1/2 updated)"
    assert not pools_settled(_state(degraded=True)).ok


def test_guard_names_a_node_not_at_its_pools_newest_config() -> None:
    st = _state()
    st.nodes[1].current_config = "rendered-worker-old"
    res = pools_settled(st)
    assert res.behind == ["node w2 (worker): currentConfig rendered-worker-old, pool at rendered-worker-new"]


def test_guard_requires_a_config_rendered_since_the_baseline() -> None:
    res = pools_settled(_state(), {"worker": "rendered-worker-new"})
    assert not res.ok and "still the one from before the change" in res.behind[0]


def test_preflight_refuses_bad_input() -> None:
    st = _state()
    assert preflight_problems(st, "OVNKubernetes") == []
    st.config_type = "OVNKubernetes"
    assert "already OVNKubernetes" in preflight_problems(st, "OVNKubernetes")[0]
    assert preflight_problems(_state(degraded=True), "OVNKubernetes") == ["pool worker is Degraded"]
    assert preflight_problems(_state(paused=True), "OVNKubernetes") == ["pool worker is paused"]


def test_reboot_batches_masters_last_one_at_a_time() -> None:
    nodes = [NodeState(name="m2", master=True, pool="master"), NodeState(name="m1", master=True, pool="master"),
             NodeState(name="w2", pool="worker"), NodeState(name="i1", pool="infra"), NodeState(name="w1", pool="worker")]
    assert reboot_batches(nodes, 2) == [["i1", "w1"], ["w2"], ["m1"], ["m2"]]
    assert reboot_batches(nodes, 1) == [["i1"], ["w1"], ["w2"], ["m1"], ["m2"]]


def test_progress_signature_changes_with_annotations() -> None:
    a, b = _state(), _state()
    b.nodes[0].desired_config = "x"
    assert signature(a) != signature(b) and signature(a) == signature(_state())


def test_input_defaults() -> None:
    i = NetworkMigrationInput()
    assert i.to == "OVNKubernetes" and i.reboot_via == "debug-pod" and i.reboot_command == ["systemctl", "reboot"]


def test_a_pause_across_the_kubelet_ca_rotation_is_refused_naming_the_date() -> None:
    """Issue 41: the kube-apiserver-to-kubelet-signer (365 days) is rotated at 292 days, i.e. 73
    days before it expires; a paused pool does not get the new CA."""
    from datetime import UTC, datetime, timedelta

    from activities.network_migration.models import CertExpiry, PoolState
    from workflows.network_migration.plan import kubelet_ca_problems, pause_bound_seconds

    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    signer = "CN=kube-apiserver-to-kubelet-signer,OU=openshift"
    soon = CertExpiry(subject=signer, expiry=now + timedelta(days=73, hours=2))
    pools = [PoolState(name="master", cert_expirys=[soon]), PoolState(name="worker", cert_expirys=[soon])]
    assert pause_bound_seconds(8, 300, 120) == 1260
    [msg] = kubelet_ca_problems(pools, now, pause_seconds=3 * 3600)
    assert msg.startswith("the kubelet CA rotates on 2026-03-01 14:00 UTC") and "pools master, worker" in msg
    assert kubelet_ca_problems(pools, now, pause_seconds=3600) == []  # the pause ends before the rotation
    # Rotated already but the old CA not yet removed: a pause now still keeps the new CA from the nodes.
    rotating = [PoolState(name="worker", cert_expirys=[CertExpiry(subject=signer, expiry=now + timedelta(days=10))])]
    assert kubelet_ca_problems(rotating, now, pause_seconds=60)
    other = [PoolState(name="worker", cert_expirys=[CertExpiry(subject="CN=admin-kubeconfig-signer", expiry=soon.expiry)])]
    assert kubelet_ca_problems(other, now, pause_seconds=3 * 3600) == []
