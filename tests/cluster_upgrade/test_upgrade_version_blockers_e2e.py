"""Issue 41's cluster-version blockers end to end (dev server, clustersim ``r3-okd310-upgrade``:
OKD 3.9, the ``lockkeeper`` command): an update of the cluster's version goes one minor version
at a time and never back, and its etcd backup is a visible precondition.

- ``control-plane-upgrade --to-version 3.11`` (3.9 -> 3.11) and ``--to-version 3.8`` (a
  downgrade) are refused before any write: the dry run lists the failed check and exits 2, the
  real start exits 2 naming it, and the simulator's snapshot diff is empty (no object, no host
  file, no restart) and its request record holds no write. ``--to-version 3.10`` passes, and the
  dry run says the etcd backup is skipped and why.
- Neither an etcd backup nor ``--etcd-backup-skip-reason``: refused before anything starts.
- ``cluster-upgrade`` whose plan's control plane goes to 3.11 is refused before its first phase
  (the GlusterFS recovery, which would delete a pod), nothing written.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from clustersim import snapshots
from tests.support.harness import write_requests
from tests.cluster_upgrade.test_upgrade_cli_e2e import lk
from tests.node_upgrade.test_upgrade_nodes_e2e import SHIM

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

MASTERS = ["master01.example.com", "master02.example.com", "master03.example.com"]


def _cp_args(sim: Any, env: dict[str, str], *extra: str) -> list[str]:
    comp = sim.components["masters"]
    args = ["start", "control-plane-upgrade", "--cluster", f"ver-{uuid.uuid4().hex[:6]}", "--ssh-map", env["CLUSTERSIM_SSH_MAP"],
            "--action-command", f"{SHIM} upgrade_control_plane.yml -l {{master}}", "--etcd-health-skip-reason", "simulator",
            *extra]
    for m in MASTERS:
        args += ["--master", m, "--api-url", f"{m}={comp.api_url(m)}"]
    return args


async def _no_change(sim: Any, sid: str) -> None:
    d = await snapshots.diff(sim.url, sid)
    assert d.empty, d.lines()
    assert write_requests(sim.requests) == [], [(e.verb, e.resource, e.name) for e in write_requests(sim.requests)]


async def test_control_plane_upgrade_refuses_two_minor_versions_and_a_downgrade(
        dev_server: Any, sim_factory: Any, worker_for: Any, task_queue: str) -> None:
    sim = await sim_factory("r3-okd310-upgrade", time_scale=0.05)
    env = sim.components["hosts"].client_env()
    await worker_for(sim, env=env)
    await snapshots.settle(sim.url)
    sid = await snapshots.take(sim.url, "before")
    sim.requests.clear()

    # One minor version: the check passes; the etcd backup is a precondition that says it is skipped and why.
    code, out, err = await lk(dev_server, task_queue, *_cp_args(sim, env, "--to-version", "3.10",
                                                                "--etcd-backup-skip-reason", "no etcd in this test", "--dry-run"))
    text = " ".join(out.split())
    assert code == 0, (out, err)
    assert ("ok update-step update of the cluster's version to 3.10: 3.9 -> 3.10: one minor version (now 3.9, the API "
            "server's /version v1.9.1+a0ce1bc657)") in text, out
    assert "ok input etcd backup: skipped: no etcd in this test" in text, out

    # Two minor versions at once: the dry run lists it and exits 2; the start is refused, exit 2.
    skip = _cp_args(sim, env, "--to-version", "3.11", "--etcd-backup-skip-reason", "no etcd in this test")
    code, out, err = await lk(dev_server, task_queue, *skip, "--dry-run")
    assert code == 2, (code, out, err)
    assert "FAILED update-step update of the cluster's version to 3.11: 3.9 -> 3.11 is 2 minor versions at once" in " ".join(
        out.split()), out
    code, out, err = await lk(dev_server, task_queue, *skip)
    assert code == 2, (code, out, err)
    assert "refused before any change" in err and "upgrade to 3.10 first" in " ".join(err.split()), err

    # A downgrade: refused, exit 2.
    code, out, err = await lk(dev_server, task_queue, *_cp_args(sim, env, "--to-version", "3.8",
                                                                "--etcd-backup-skip-reason", "no etcd in this test"))
    assert code == 2, (code, out, err)
    assert "3.9 -> 3.8 is a downgrade" in " ".join(err.split()), err

    # Neither an etcd backup nor a reason for none: refused before anything starts.
    code, out, err = await lk(dev_server, task_queue, *_cp_args(sim, env, "--to-version", "3.10"))
    assert code == 2, (code, out, err)
    assert "etcd backup barrier is required" in err, err

    await _no_change(sim, sid)
    for m in MASTERS:  # only the checks' lookups ran on the masters: no restart, no action
        ran = [r.argv for r in sim.components["hosts"].hosts[m].log]
        assert all(a[:2] == ["command", "-v"] for a in ran), (m, ran)


async def test_cluster_upgrade_refuses_two_minor_versions_before_its_first_phase(
        dev_server: Any, sim_factory: Any, worker_for: Any, task_queue: str, tmp_path: Path) -> None:
    sim = await sim_factory("r3-okd310-upgrade", time_scale=0.05)
    env = sim.components["hosts"].client_env()
    await worker_for(sim, env=env)
    comp = sim.components["masters"]
    ssh_map = json.loads(Path(env["CLUSTERSIM_SSH_MAP"]).read_text())
    masters = [{"name": m, "api_url": comp.api_url(m), "gluster_host": True,
                "access": {"backend": "ssh", "host": ssh_map[m].split(":")[0], "port": int(ssh_map[m].split(":")[1])}}
               for m in MASTERS]
    plan = {
        "gluster": {"namespace": "glusterfs"},
        "control_plane": {"masters": masters, "target_version": "3.11", "etcd_backup_skip_reason": "no etcd in this test",
                          "etcd_health_skip_reason": "no etcd in this test",
                          "action": {"kind": "external", "argv": [SHIM, "upgrade_control_plane.yml", "-l", "{master}"]}},
    }
    path = tmp_path / "upgrade.yaml"
    path.write_text(yaml.safe_dump(plan))
    await snapshots.settle(sim.url)
    sid = await snapshots.take(sim.url, "before")
    sim.requests.clear()
    base = ("start", "cluster-upgrade", "--plan", str(path), "--cluster", f"cu-{uuid.uuid4().hex[:6]}")

    code, out, err = await lk(dev_server, task_queue, *base, "--dry-run")
    assert code == 2, (code, out, err)
    text = " ".join(out.split())
    assert "control-plane: failed" in text and "FAILED update-step update of the cluster's version to 3.11" in text, out
    assert "ok input etcd backup: skipped: no etcd in this test" in text, out

    code, out, err = await lk(dev_server, task_queue, *base)
    assert code == 2, (code, out, err)
    assert "3.9 -> 3.11 is 2 minor versions at once" in " ".join(err.split()), err
    await _no_change(sim, sid)
