"""skip-node and retry-node of the runtime migration (RuntimeMigrationWorkflow on a time-skipping
server, the in-memory world of tests/runtime_migration/test_runtime_migration_wf.py).

- retry-node after a failed scale-up (a known exit code, the gate rejected): the node holds at
  ``g1/stopped/1``; the retry repeats the scale-up only: one yum remove, one wipe, one reboot, one
  Node delete, the inventory hook once;
- skip-node before the destructive steps: a pending node is never touched, the node in flight
  stops at its approval gate; nothing destructive ran and the Node is untouched;
- skip-node once the host is being changed: refused while the node runs; after it stopped, it
  is left cordoned and the record ConfigMap says so.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError

from tests.runtime_migration.test_runtime_migration_wf import World, _approve, _input, _run, _status, _update, _waiting
from workflows.kit.models import NodeControlInput, RejectInput

pytestmark = pytest.mark.timeout(180)

DESTRUCTIVE = (["yum", "-y", "remove"], ["rm", "-rf"], ["systemctl", "reboot"], ["systemctl", "stop"])


async def _refused(h: WorkflowHandle, update: str, arg: NodeControlInput, text: str) -> None:
    """The update is rejected by its validator with a message containing ``text``."""
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await h.execute_update(update, arg)
    assert text in str(err.value.cause), err.value.cause


def _count(world: World, prefix: list[str]) -> int:
    return sum(1 for c in world.log if c[: len(prefix)] == prefix)


async def test_retry_node_repeats_only_the_stopped_step(time_skipping_env) -> None:
    env, world = time_skipping_env, World()
    world.fail_scaleup = 1

    async def body(h: WorkflowHandle) -> None:
        await _approve(env, h, "g1/destructive/approve-migration")
        await _approve(env, h, "g1/destructive/approve-delete")
        await _status(env, h, _waiting("g1/failed/scale-up"))
        await _refused(h, "retry_node", NodeControlInput(node="g1", identity="bob"), "only a node that stopped")
        await _update(env, h, "reject", RejectInput(gate_id="g1/failed/scale-up", identity="bob", comment="repo down"))
        st = await _status(env, h, _waiting("g1/stopped/1"))
        assert st.nodes["g1"].node_deleted and "retry-node" in next(g.comment for g in st.gates if g.id == "g1/stopped/1")
        await h.execute_update("retry_node", NodeControlInput(node="g1", identity="bob", comment="repo fixed"))
        await _approve(env, h, "post-check/install")

    result = await _run(env, world, body)
    assert result.outcome == "completed", result.message
    row = result.nodes[0].status
    assert row.attempt == 2 and row.phase == "done"
    assert [a[-1] for a in world.externals].count("scaleup.yml") == 2  # the failed one, then the retry
    assert [a for a in world.externals if a[0] == "hook" and a[1] != "restore"] == [["hook", "g1"]]  # inventory once
    assert (world.reboots, _count(world, ["yum", "-y", "remove"]), _count(world, ["rm", "-rf"])) == (1, 1, 1)
    assert _count(world, ["systemctl", "stop"]) == 4  # atomic-openshift-node, crio, docker, dnsmasq: once each
    assert world.node is not None and world.node["metadata"]["uid"] == "uid-2"
    assert any(r.gate_id == "g1/stopped/1" and r.action == "approved" and r.by == "bob" for r in result.gate_history)


async def test_skip_node_before_the_destructive_steps(time_skipping_env) -> None:
    env, world = time_skipping_env, World()
    inp = _input()
    inp.nodes = ["g1", "g2"]

    async def body(h: WorkflowHandle) -> None:
        await _status(env, h, _waiting("g1/destructive/approve-migration"))
        await _refused(h, "skip_node", NodeControlInput(node="g3", identity="bob"), "not part of this migration")
        await h.execute_update("skip_node", NodeControlInput(node="g2", identity="bob", comment="later"))
        await _refused(h, "skip_node", NodeControlInput(node="g2", identity="bob"), "already skipped")
        await h.execute_update("skip_node", NodeControlInput(node="g1", identity="bob"))

    result = await _run(env, world, body, inp)
    assert result.outcome == "completed", result.message
    assert [(r.node, r.outcome) for r in result.nodes] == [("g1", "skipped"), ("g2", "skipped")]
    assert "0 nodes migrated" in result.message and "skipped: g1, g2" in result.message
    assert not [c for c in world.log if any(c[: len(p)] == p for p in DESTRUCTIVE)], world.log
    assert world.node is not None and world.node["metadata"]["uid"] == "uid-1"
    assert "before the destructive steps" in (result.nodes[0].reason or "") and world.uncordoned == ["g1"]
    assert not result.findings  # no post-check without a migrated node


async def test_skip_node_after_the_destructive_steps_leaves_it_cordoned_with_its_record(time_skipping_env) -> None:
    env, world = time_skipping_env, World()

    async def body(h: WorkflowHandle) -> None:
        await _approve(env, h, "g1/destructive/approve-migration")
        await _status(env, h, _waiting("g1/destructive/approve-delete"))
        await _refused(h, "skip_node", NodeControlInput(node="g1", identity="bob"), "past its point of no return")
        await _update(env, h, "reject", RejectInput(gate_id="g1/destructive/approve-delete", identity="bob", comment="not now"))
        await _status(env, h, _waiting("g1/stopped/1"))
        await h.execute_update("skip_node", NodeControlInput(node="g1", identity="bob", comment="finish by hand"))

    result = await _run(env, world, body)
    assert result.outcome == "completed", result.message
    [res] = result.nodes
    assert res.outcome == "skipped" and "left cordoned" in (res.reason or "") and "ConfigMap openshift-config/" in (res.reason or "")
    assert world.uncordoned == [] and world.reboots == 1
    assert world.node is not None and world.node["metadata"]["uid"] == "uid-1"  # never deleted
    [data] = world.configmaps.values()
    assert "left cordoned" in data["g1.state"] and '"uid": "uid-1"' in data["g1.json"]


async def test_rejecting_the_hold_gate_ends_the_run_failed(time_skipping_env) -> None:
    env, world = time_skipping_env, World()

    async def body(h: WorkflowHandle) -> None:
        await _status(env, h, _waiting("g1/destructive/approve-migration"))
        await _update(env, h, "reject", RejectInput(gate_id="g1/destructive/approve-migration", identity="bob", comment="no"))
        await _status(env, h, _waiting("g1/stopped/1"))
        await _update(env, h, "reject", RejectInput(gate_id="g1/stopped/1", identity="bob", comment="stop here"))

    result = await _run(env, world, body)
    assert result.outcome == "failed" and "approve-migration" in (result.nodes[0].reason or "")
    assert not [c for c in world.log if any(c[: len(p)] == p for p in DESTRUCTIVE)], world.log


async def test_a_held_node_is_passed_over_and_the_run_waits_for_it_when_only_it_is_left(time_skipping_env) -> None:
    """Holds (issue 40) in the runtime migration's own node loop: g2 held while g1 waits at its
    gate; g3 goes next; with only g2 left the run waits, saying so, until g2 is released."""
    from workflows.kit.models import HoldInput, ReleaseInput

    env, world = time_skipping_env, World()
    inp = _input()
    inp.nodes = ["g1", "g2", "g3"]

    async def body(h: WorkflowHandle) -> None:
        await _status(env, h, _waiting("g1/destructive/approve-migration"))
        await h.execute_update("hold_node", HoldInput(node="g2", identity="bob", reason="brick rebuild first"))
        await _refused(h, "hold_node", HoldInput(node="g1", identity="bob", reason="x"), "is being migrated now")
        await _refused(h, "hold_node", HoldInput(node="g9", identity="bob", reason="x"), "not part of this migration")
        await h.execute_update("skip_node", NodeControlInput(node="g1", identity="bob"))
        await _status(env, h, _waiting("g3/destructive/approve-migration"))  # g3 before the held g2
        await h.execute_update("skip_node", NodeControlInput(node="g3", identity="bob"))
        st = await _status(env, h, lambda st: st.waiting_for is not None and st.waiting_for.startswith("hold on g2"))
        assert st.waiting_for == "hold on g2 until released (by bob: brick rebuild first)" and st.phase == "running"
        assert st.nodes["g2"].phase == "pending" and st.holds["g2"].by == "bob"
        await h.execute_update("release_node", ReleaseInput(node="g2", identity="carol"))
        await _status(env, h, _waiting("g2/destructive/approve-migration"))
        await h.execute_update("skip_node", NodeControlInput(node="g2", identity="bob"))

    result = await _run(env, world, body, inp)
    assert result.outcome == "completed", result.message
    assert [(r.node, r.outcome) for r in result.nodes] == [("g1", "skipped"), ("g3", "skipped"), ("g2", "skipped")]
    assert [(r["node"], r["action"], r["by"]) for r in result.hold_history] == [  # type: ignore[attr-defined]
        ("g2", "held", "bob"), ("g2", "released", "carol")]


async def test_no_node_starts_before_the_maintenance_window_opens(time_skipping_env) -> None:
    """Windows (issue 40) in the runtime migration's own node loop: the preflight runs, then the
    first node waits, visibly, on a timer for the window; it starts once the window opens."""
    from tests.kit.test_kit_windows_wf import window_around

    env, world = time_skipping_env, World()
    spec, start, _end = window_around(await env.get_current_time() + timedelta(hours=2), 60)
    inp = _input()
    inp.windows = [spec]
    seen: dict[str, object] = {}

    async def body(h: WorkflowHandle) -> None:
        st = await _status(env, h, lambda st: st.waiting_for is not None and st.waiting_for.startswith("the window from"))
        seen["waiting_for"], seen["deadline"], seen["phase"] = st.waiting_for, st.deadline, st.nodes["g1"].phase
        await env.sleep((start - await env.get_current_time()).total_seconds() + 1)
        st = await _status(env, h, _waiting("g1/destructive/approve-migration"))
        seen["opened_at"] = next(g.opened_at for g in st.gates if g.id == "g1/destructive/approve-migration")
        await h.execute_update("skip_node", NodeControlInput(node="g1", identity="bob"))

    result = await _run(env, world, body, inp)
    assert result.outcome == "completed", result.message
    assert seen["waiting_for"] == f"the window from {start.isoformat(timespec='seconds')} ({spec})"
    assert seen["deadline"] == start and seen["phase"] == "pending"
    assert seen["opened_at"] >= start
