"""Worker versioning's rules that need no dev server (:mod:`workers.versioning`): every registered
workflow runs PINNED, the versioned/unversioned split is made in one place, the time-skipping
test server is refused as a versioned worker's server, and the pre-start check's reasons why a
new run would wait. The dev-server behaviour is in tests/worker/test_versioning.py."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from temporalio.common import VersioningBehavior
from temporalio.workflow import _Definition

from workers.settings import Settings
from workers.versioning import Poller, QueueWorkers, VersioningRefused, check_server, deployment_config


@pytest.mark.parametrize("host_only", [False, True])
def test_every_registered_workflow_is_pinned(host_only: bool) -> None:
    """The worker's default behaviour is PINNED and no workflow class declares another one: node
    runs and leases must stay on their parent's build, the rollout's continue-as-new on the build
    that wrote its carried state (the module doc of workers.versioning says why for each). A
    class that wants AUTO_UPGRADE must change this test and that docstring together."""
    from workers.registry import all_workflows

    config = deployment_config(Settings(host_only=host_only))
    assert config is not None and config.use_worker_versioning
    assert config.default_versioning_behavior == VersioningBehavior.PINNED
    declared = {
        cls.__name__: _Definition.must_from_class(cls).versioning_behavior for cls in all_workflows(host_only=host_only)
    }
    assert "LeaseWorkflow" in declared
    if not host_only:
        assert {"MachineConfigRolloutWorkflow", "NodeRolloutWorkflow", "NodeDrainWorkflow"} <= set(declared)
    others = {n: b for n, b in declared.items() if b not in (None, VersioningBehavior.UNSPECIFIED, VersioningBehavior.PINNED)}
    assert not others, f"workflows that would not run PINNED: {others}"


def test_the_version_comes_from_the_settings_and_off_means_unversioned() -> None:
    config = deployment_config(Settings(deployment_name="ops", build_id="7"))
    assert config is not None
    assert (config.version.deployment_name, config.version.build_id) == ("ops", "7")
    assert deployment_config(Settings(versioning=False)) is None


async def test_the_time_skipping_test_server_is_refused_as_a_versioned_workers_server() -> None:
    """The workflow tests' time-skipping server has no worker deployments: their workers are the
    SDK's own ``Worker`` without a deployment config (unversioned); a versioned lockkeeper worker
    there stops at once with the setting to use, instead of polling for tasks it would never get."""
    from temporalio.testing import WorkflowEnvironment

    binary = shutil.which("temporal-test-server") or str(Path(sys.executable).parent / "temporal-test-server")
    env = await WorkflowEnvironment.start_time_skipping(test_server_existing_path=binary)
    try:
        with pytest.raises(VersioningRefused, match="not yet supported in test server.*LOCKKEEPER_VERSIONING=false"):
            await check_server(env.client, Settings())
    finally:
        await env.shutdown()


def _queue(*pollers: Poller, current: str | None = None, ramping: str | None = None, pct: float = 0.0) -> QueueWorkers:
    return QueueWorkers(task_queue="lk", pollers=list(pollers), deployment="lockkeeper", current=current,
                        ramping=ramping, ramping_percentage=pct)


V1 = Poller("w1@host", "lockkeeper", "0.1.0")
V2 = Poller("w2@host", "lockkeeper", "0.2.0")
PLAIN = Poller("w0@host")


def test_a_new_run_waits_when_no_worker_of_the_build_it_goes_to_polls() -> None:
    # Unversioned queue, unversioned worker; a versioned queue with its current build polling: fine.
    assert _queue(PLAIN).gap() is None
    assert _queue(V1, V2, current="0.1.0").gap() is None
    assert _queue(V1, current="0.1.0").serving() == [V1]
    # Nobody at all.
    assert _queue().gap() == "no worker polls task queue 'lk'"
    # A deployment without a current version: new runs go to unversioned workers, and none polls.
    gap = _queue(V2).gap()
    assert gap is not None and "has no current version" in gap and "lockkeeper deployment promote 0.2.0" in gap
    # The current build's workers are gone; a newer build polls.
    gap = _queue(V2, current="0.1.0").gap()
    assert gap is not None and "no worker of build 0.1.0, the current version" in gap, gap
    assert "lockkeeper deployment promote 0.2.0" in gap and "LOCKKEEPER_BUILD_ID=0.1.0" in gap, gap
    # A ramping build without workers takes its share of new runs: they would wait too.
    gap = _queue(V1, current="0.1.0", ramping="0.3.0", pct=10).gap()
    assert gap is not None and "build 0.3.0, the ramping (10%) version" in gap, gap
    assert _queue(V1, current="0.1.0", ramping="0.3.0", pct=0).gap() is None
    assert [p.label() for p in (V1, PLAIN)] == ["w1@host (build 0.1.0)", "w0@host (unversioned)"]


def test_with_several_builds_polling_the_operator_picks_the_one_to_promote() -> None:
    gap = _queue(V1, V2, Poller("w3@host", "lockkeeper", "0.3.0"), current="0.4.0").gap()
    assert gap is not None and "promote BUILD` with one of 0.1.0, 0.2.0, 0.3.0" in gap, gap
    gap = _queue(V1, V2).gap()
    assert gap is not None and "has no current version" in gap and "one of 0.1.0, 0.2.0" in gap, gap
