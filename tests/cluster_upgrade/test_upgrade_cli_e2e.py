"""The upgrade procedures' ``lockkeeper start`` commands against a real dev server, a real worker
process and clustersim ``r3-okd310-upgrade``: dry runs print the plan (batches, canary, masters
excluded), the selector migration names the blocked object and exits 2 (refused, nothing written), the cluster upgrade's plan
file prints every phase, nothing written; and a whole control-plane upgrade started, approved and
finished from the CLI as the README gives it."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.node_upgrade.test_upgrade_nodes_e2e import SHIM, control_plane_on_310

pytestmark = pytest.mark.e2e

LOCKKEEPER = str(Path(sys.executable).parent / "lockkeeper")
SCALE = 0.02


async def lk(dev_server: Any, task_queue: str, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(LOCKKEEPER, "--address", dev_server.address, "--task-queue", task_queue, *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


def node_state(sim: Any) -> dict[str, Any]:
    return {n["metadata"]["name"]: (dict(n["metadata"]["labels"]), n["status"]["nodeInfo"]["kubeletVersion"], n["spec"].get("unschedulable"))
            for n in sim.store.list("nodes")}


async def test_start_commands_dry_run(dev_server: Any, sim_factory: Any, worker_for: Any, task_queue: str, tmp_path: Path) -> None:
    sim = await sim_factory("r3-okd310-upgrade", time_scale=SCALE)
    await worker_for(sim)
    before = node_state(sim)
    node_upgrade = ("start", "node-upgrade", "--selector", "region=infra", "--serial", "50%", "--canary-count", "1",
                    "--master", "master01.example.com", "--action-command", f"{SHIM} x.yml -l {{node}}", "--dry-run")
    code, out, err = await lk(dev_server, task_queue, *node_upgrade)
    # R3's order: the masters first. Before, the dry run names the version skew and exits 2.
    assert code == 2 and "skew" in (out + err), (code, out, err)
    await control_plane_on_310(sim)
    code, out, err = await lk(dev_server, task_queue, *node_upgrade)
    assert code == 0, (out, err)
    assert "canary: [node01.example.com] then approval gate" in out and "batches: [node02.example.com]" in out, out
    code, out, err = await lk(dev_server, task_queue, "start", "node-upgrade", "--selector", "region=nowhere",
                              "--action-command", "x {node}", "--dry-run")
    assert code != 0 and "no nodes matched" in (out + err), (out, err)
    code, out, err = await lk(dev_server, task_queue, "start", "node-selector-migration", "--map",
                              "region=infra=node-role.kubernetes.io/infra=true", "--dry-run")
    assert code == 2 and "docker-registry" in err and "no schedulable node carries" in err, (code, out, err)
    plan = {"compute_nodes": {"selection": {"label_selector": "node-role.kubernetes.io/compute=true"}, "policy": {"serial": "50%"},
                              "action": {"argv": ["ansible-playbook", "-l", "{node}"]}},
            "infra_nodes": {"selection": {"label_selector": "region=infra"}, "policy": {"serial": "50%", "canary": 1},
                            "action": {"argv": ["ansible-playbook", "-l", "{node}"]}}}
    (tmp_path / "upgrade.yaml").write_text(yaml.safe_dump(plan))
    # Issue 39: each phase's own dry run lists its preconditions; a program the worker does not
    # have would refuse that phase, so the dry run exits 2 naming the phase and the program.
    code, out, err = await lk(dev_server, task_queue, "start", "cluster-upgrade", "--plan", str(tmp_path / "upgrade.yaml"), "--dry-run")
    assert code == 2, (code, out, err)
    assert "refused today: phase infra-nodes: ansible-playbook on the worker: not found" in " ".join(err.split()), err
    assert "infra-nodes: failed" in out and "FAILED" in out and "worker-executable" in out, out
    for phase in ("compute_nodes", "infra_nodes"):
        plan[phase]["action"]["argv"] = [SHIM, "-l", "{node}"]
    (tmp_path / "upgrade.yaml").write_text(yaml.safe_dump(plan))
    code, out, err = await lk(dev_server, task_queue, "start", "cluster-upgrade", "--plan", str(tmp_path / "upgrade.yaml"), "--dry-run")
    assert code == 0, err
    assert "infra-nodes: done" in out and "compute-nodes: done" in out and "control-plane: skipped" in out, out
    assert "preconditions (" in out and "FAILED" not in out, out
    assert "batches: [node03.example.com][node04.example.com]" in out, out
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"infra_nodes": {"selection": {"label_selector": "region=infra"}}}))
    code, out, err = await lk(dev_server, task_queue, "start", "cluster-upgrade", "--plan", str(tmp_path / "bad.yaml"))
    assert code != 0 and "action" in err, err
    assert node_state(sim) == before


async def test_control_plane_api_url_template_with_per_master_ports(dev_server: Any, sim_factory: Any, worker_for: Any,
                                                                    task_queue: str) -> None:
    """The simulator serves each master's API on its own loopback port: ``--api-url`` with
    ``{port}`` and one ``--api-port`` per master reaches the workflow (its dry run names each
    master's own URL, and lists every precondition it checked: the masters, the action's program
    on the worker, master-restart and master-logs on each master over the ``--ssh-map``); a bad
    placeholder is refused before anything starts."""
    sim = await sim_factory("r3-okd310-upgrade", time_scale=SCALE)
    env = sim.components["hosts"].client_env()
    await worker_for(sim, env=env)
    masters = ["master01.example.com", "master02.example.com", "master03.example.com"]
    comp = sim.components["masters"]
    args = ["start", "control-plane-upgrade", "--ssh-map", env["CLUSTERSIM_SSH_MAP"],
            "--action-command", f"{SHIM} upgrade_control_plane.yml -l {{master}}",
            "--etcd-backup-skip-reason", "simulator", "--etcd-health-skip-reason", "simulator", "--api-url", "http://127.0.0.1:{port}",
            "--dry-run", "--wait"]
    for m in masters:
        args += ["--master", m, "--api-port", f"{m}={comp.api_url(m).rsplit(':', 1)[1]}"]
    code, out, err = await lk(dev_server, task_queue, *args)
    assert code == 0, (out, err)
    for m in masters:
        assert f"{m} {comp.api_url(m)}" in out + err, (out, err)
        assert f"ok       host-executable    master-restart on {m}" in out, out
    assert "preconditions (10 checked, 0 failed)" in out, out
    # An external action names no release: the version check says why it is not run (issue 41).
    assert "not run  update-step" in out and "give it (--to-version, target_version)" in " ".join(out.split()), out
    code, out, err = await lk(dev_server, task_queue, "start", "control-plane-upgrade", "--master", masters[0], "--action-command", "x",
                              "--etcd-backup-skip-reason", "s", "--etcd-health-skip-reason", "s", "--api-url", "https://{host}:8443")
    assert code == 2 and "unknown placeholder {host}" in err, (code, out, err)


async def test_control_plane_upgrade_runs_from_the_cli_with_the_simulators_ssh_map(
        dev_server: Any, sim_factory: Any, worker_for: Any, task_queue: str, temporal_client: Any, tmp_path: Path) -> None:
    """The whole R3d masters run as the README gives it: ``--ssh-map`` (the file ``sim serve``
    prints, each master on its own loopback port), each master's own API from its ``MASTER_API``
    URL, a static-pod manifest; the gate before the first master answered with ``approve``."""
    from tests.control_plane.test_upgrade_control_plane_e2e import r3_without_brick_fault
    from workflows.control_plane.models import ControlPlaneResult

    sim = await sim_factory(r3_without_brick_fault(), time_scale=SCALE)  # R3a's brick fault is fixed first
    env = sim.components["hosts"].client_env()
    await worker_for(sim, env=env)
    hosts = sim.components["hosts"].hosts
    masters = ["master01.example.com", "master02.example.com", "master03.example.com"]
    ca = "/etc/origin/master/freeipa_ldap_ca.crt"  # R3d's missing LDAP CA, put where 3.10 reads it
    hosts[masters[0]].files[ca] = hosts[masters[0]].files["/etc/origin/master/ipa-ca.crt"]
    manifest = tmp_path / "apiserver.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: master-api, namespace: kube-system}\n")
    args = ["start", "control-plane-upgrade", "--ssh-map", env["CLUSTERSIM_SSH_MAP"],
            "--static-pod", f"/etc/origin/node/pods/apiserver.yaml={manifest}",
            "--etcd-backup-skip-reason", "simulator", "--etcd-health-skip-reason", "simulator", "-o", "json"]
    for m in masters:
        args += ["--master", m, "--api-url", f"{m}={sim.components['masters'].api_url(m)}"]
    code, out, err = await lk(dev_server, task_queue, *args)
    assert code == 0, (out, err)
    wf_id = json.loads(out)["workflow_id"]
    gate = f"master/{masters[0]}"
    for _ in range(120):
        code, out, err = await lk(dev_server, task_queue, "approve", wf_id, gate, "-m", "CHG-2")
        if code == 0:
            break
        await asyncio.sleep(0.5)  # the gate opens after the preflight
    assert code == 0, (out, err, (await lk(dev_server, task_queue, "status", wf_id))[1][-2000:])
    handle = temporal_client.get_workflow_handle(wf_id, result_type=ControlPlaneResult)
    result = await asyncio.wait_for(handle.result(), 300)
    assert result.outcome == "completed", result.message
    assert result.started_at is not None and result.finished_at is not None and result.finished_at > result.started_at
    code, out, err = await lk(dev_server, task_queue, "status", wf_id)
    assert code == 0 and "total time" in out, (out, err)
    for m in masters:  # reached over SSH at the map's address, one manifest and one restart each
        assert hosts[m].files["/etc/origin/node/pods/apiserver.yaml"] == manifest.read_text()
        assert any(r.via == "ssh" and r.argv[0].endswith("master-restart") for r in hosts[m].log), m
    bad = tmp_path / "map.json"
    bad.write_text(json.dumps({masters[0]: "127.0.0.1:22"}))
    code, out, err = await lk(dev_server, task_queue, *[a if a != env["CLUSTERSIM_SSH_MAP"] else str(bad) for a in args])
    assert code == 2 and "has no address for master02.example.com, master03.example.com" in err, (code, err)


async def test_selector_migration_reads_master_config_through_the_ssh_map(dev_server: Any, sim_factory: Any, worker_for: Any,
                                                                          task_queue: str) -> None:
    """Issue 39 case 2: ``--master`` with ``--ssh-map`` reaches the simulator's masters, reads
    ``projectConfig.defaultNodeSelector: region=primary`` in master-config.yaml, and the run is
    refused before any write (exit 2), naming each master; without ``--master`` the dry run says
    the file was not checked."""
    sim = await sim_factory("r3-okd310-upgrade", time_scale=SCALE)
    env = sim.components["hosts"].client_env()  # type: ignore[attr-defined]
    await worker_for(sim, env=env)
    await control_plane_on_310(sim)
    for n in ("node01.example.com", "node02.example.com"):  # the infra nodes carry 3.10's label (no capacity block)
        sim.store.mutate("nodes", n, None, lambda o: o["metadata"]["labels"].update({"node-role.kubernetes.io/infra": "true"}))
    before = node_state(sim)
    base = ["start", "node-selector-migration", "--map", "region=infra=node-role.kubernetes.io/infra=true", "--dry-run"]
    code, out, err = await lk(dev_server, task_queue, *base)
    assert code == 0 and "NOT CHECKED: master-config.yaml projectConfig.defaultNodeSelector" in out, (code, out, err)
    masters = [a for m in ("master01.example.com", "master02.example.com", "master03.example.com") for a in ("--master", m)]
    code, out, err = await lk(dev_server, task_queue, *base, *masters, "--ssh-map", env["CLUSTERSIM_SSH_MAP"])
    assert code == 2 and "refused before any change" in err, (code, out, err)
    assert all(f"MasterConfig {m}" in err for m in masters[1::2]), err
    assert "no --map covers region=primary" in err and "new projects could not schedule" in err, err
    assert node_state(sim) == before
