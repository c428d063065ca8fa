"""Temporal refuses a payload above 2 MB (``limit.blobSize.error``; the SDK raises TMPRL1103
before sending). The MachineConfig preflight lists every node of the pools it rolls, so its
result grows with the pool: at 5,000 nodes it passed the limit and the rollout was refused at its
first step (benchmarks/rollout_overhead.py --nodes 5000). A node leaves its unset fields out of
JSON now, which moves the limit from about 3,900 to about 4,400 nodes with the handshake
annotations every node carries once the daemon has run (measured on the simulator: 2.34 MB for
5,000 nodes, still too large), and the preflight now returns its nodes in pages of
``preflight_page_size`` (1,000 by default). This checks that 4,000 such nodes fit, and that they
decode to the same models; and that the status and the result of a 5,000-node rollout, one entry
per node, fit too (the status was 1.98 MB before its nodes left their ``null`` fields out)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.contrib.pydantic import pydantic_data_converter

from activities.cluster.models import NodeInfo
from activities.machineconfig.models import PoolInfo, PreflightResult
from workflows.kit.models import NodePhase, NodeResult, NodeStatus
from workflows.kit.plan import batches
from workflows.machineconfig.models import MachineConfigRolloutResult, PoolPlan, RolloutPlan, RolloutStatus

TEMPORAL_PAYLOAD_LIMIT = 2 * 1024 * 1024


def test_a_4000_node_preflight_fits_in_one_payload_and_round_trips() -> None:
    config = "rendered-worker-" + "0123456789abcdef" * 2
    nodes = [
        NodeInfo(name=f"worker-{i:04d}", pool="worker", zone="zone-a", created=datetime(2026, 1, 1, tzinfo=UTC),
                 current_config=config, desired_config=config, state="Done", reason="",
                 desired_drain=f"uncordon-{config}", last_applied_drain=f"uncordon-{config}", ready=True,
                 resource_version=str(1_000_000 + i))
        for i in range(4000)
    ]
    nodes[7] = nodes[7].model_copy(update={"desired_drain": "drain-abc", "cordoned_by": "lockkeeper", "unschedulable": True})
    nodes[8] = NodeInfo(name="new-node")  # nothing set: its JSON is its name and two booleans
    result = PreflightResult(pools=[PoolInfo(name="worker", target_config="rendered-worker-" + "f" * 32, nodes=nodes)],
                             network_type="OVNKubernetes")
    converter = pydantic_data_converter.payload_converter
    payload = converter.to_payloads([result])[0]
    assert len(payload.data) < 0.95 * TEMPORAL_PAYLOAD_LIMIT, len(payload.data)
    assert b"null" not in payload.data.split(b'"nodes"', 1)[1].split(b'"conditions"', 1)[0]
    assert converter.from_payloads([payload], [PreflightResult])[0] == result


def test_python_dumps_keep_every_field() -> None:
    """Only JSON drops the unset fields; ``model_dump()`` (the CLI, the tests) keeps them."""
    assert NodeInfo(name="n").model_dump()["reason"] is None
    assert "reason" not in NodeInfo(name="n").model_dump(mode="json")


def test_a_5000_node_status_and_result_fit_and_round_trip() -> None:
    names = [f"worker-{i:04d}" for i in range(5000)]
    t = datetime(2026, 1, 1, tzinfo=UTC)
    plan = RolloutPlan(machine_config_nodes=True, pools=[PoolPlan(name="worker", target_config="rendered-worker-" + "f" * 32, size=5000, max_unavailable=500,
                                       capacity=500, nodes=names, batches=batches(names, 500))])
    status = RolloutStatus(plan=plan, nodes={
        n: NodeStatus(name=n, pool="worker", phase=NodePhase.DONE, step="done", started_at=t, finished_at=t + timedelta(seconds=3),
                      attempt=1, run_id=f"mcr-0123456789/node/{n}/1")
        for n in names
    })
    status.nodes["worker-0007"] = status.nodes["worker-0007"].model_copy(update={"warning": "drain blocked by pdb/x", "phase": NodePhase.BLOCKED})
    result = MachineConfigRolloutResult(outcome="completed", plan=plan, nodes={
        n: NodeResult(name=n, pool="worker", phase=NodePhase.DONE, attempts=1, duration_seconds=23.456, drain_seconds=2.1,
                      reboot_seconds=20.3)
        for n in names
    })
    converter = pydantic_data_converter.payload_converter
    for model, kind, limit in ((status, RolloutStatus, 0.75), (result, MachineConfigRolloutResult, 0.6)):
        payload = converter.to_payloads([model])[0]
        assert len(payload.data) < limit * TEMPORAL_PAYLOAD_LIMIT, (kind.__name__, len(payload.data))
        assert converter.from_payloads([payload], [kind])[0] == model
    assert status.model_dump()["nodes"]["worker-0001"]["warning"] is None  # Python dumps keep every field
