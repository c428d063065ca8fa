"""`python -m clustersim` (the sim CLI) serves a scenario, prints its kubeconfig and stops on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path


async def test_serve_prints_kubeconfig_and_stops_on_sigterm(tmp_path: Path, kubectl_path: str) -> None:
    kc = tmp_path / "kubeconfig"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "clustersim", "serve", "--scenario", "r2-pdb-blocked", "--time-scale", "0.01",
        "--kubeconfig-out", str(kc), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        first = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip()
        url = (await asyncio.wait_for(proc.stdout.readline(), 10)).decode().strip()
        assert first == f"KUBECONFIG={kc}"
        assert url.startswith("URL=http://127.0.0.1:")
        assert url.removeprefix("URL=") in kc.read_text()
        get = await asyncio.create_subprocess_exec(kubectl_path, "--kubeconfig", str(kc), "get", "nodes",
                                                   "-o", "name", stdout=asyncio.subprocess.PIPE)
        out, _ = await asyncio.wait_for(get.communicate(), 30)
        assert get.returncode == 0
        assert "node/okd-worker-01" in out.decode().split()
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = await asyncio.wait_for(proc.wait(), 20)
    assert rc == 0
    assert "stopped" in (await proc.stderr.read()).decode()


async def test_scenarios_lists_bundled_scenarios() -> None:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "clustersim", "scenarios",
                                                stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0
    names = [line.split("\t")[0] for line in out.decode().splitlines()]
    assert {"r1-ovn-interrupted", "r2-pdb-blocked"} <= set(names)


def test_serve_lines_describe_components() -> None:
    """`sim serve` prints the SSH client settings, host map and master API URLs of the components."""
    from types import SimpleNamespace

    from clustersim.cli import component_lines

    hosts = SimpleNamespace(client_env=lambda: {"LOCKKEEPER_SSH_KEY": "/k", "CLUSTERSIM_SSH_MAP": "/m.json"},
                            ssh_map={"n2": "127.0.0.1:2", "n1": "127.0.0.1:1"})
    masters = SimpleNamespace(masters={"m1": object()}, api_url=lambda m: f"http://127.0.0.1:9/{m}")
    sim = SimpleNamespace(url="http://127.0.0.1:8", components={"hosts": hosts, "masters": masters})
    assert component_lines(sim) == ["CLUSTERSIM_SSH_MAP=/m.json", "LOCKKEEPER_SSH_KEY=/k",
                                    "SSH_HOST n1=127.0.0.1:1", "SSH_HOST n2=127.0.0.1:2",
                                    "MASTER_API m1=http://127.0.0.1:9/m1", "EXEC_LOG=http://127.0.0.1:8/_sim/exec"]
    assert component_lines(SimpleNamespace(url="u", components={})) == ["EXEC_LOG=u/_sim/exec"]


async def test_serve_writes_the_scenarios_files(tmp_path: Path) -> None:
    """`serve --write-files DIR` writes R4's inventory and hook and the stand-in link, and says where."""
    files = tmp_path / "r4"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "clustersim", "serve", "--scenario", "r4-crio-to-docker", "--time-scale", "0.01",
        "--write-files", str(files), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        while not lines or not lines[-1].startswith("FILE inventory_hook.py="):
            lines.append((await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip())
            assert lines[-1], f"serve ended early: {lines}"
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = await asyncio.wait_for(proc.wait(), 20)
    assert rc == 0
    assert lines[-4:] == [f"ANSIBLE_INVENTORY={files / 'inventory'}", f"FILE bin/ansible-playbook={files / 'bin' / 'ansible-playbook'}",
                          f"FILE inventory={files / 'inventory'}", f"FILE inventory_hook.py={files / 'inventory_hook.py'}"]
    assert (files / "bin" / "ansible-playbook").resolve() == (Path(sys.executable).parent / "clustersim-ansible-playbook").resolve()
    # the hook moves a node to [new_nodes] as the README's R4 run needs
    hook = await asyncio.create_subprocess_exec(sys.executable, str(files / "inventory_hook.py"), str(files / "inventory"),
                                                "to-new", "gluster1.demo")
    assert await asyncio.wait_for(hook.wait(), 30) == 0
    inventory = (files / "inventory").read_text()
    assert "[new_nodes]\ngluster1.demo openshift_use_crio=False openshift_node_group_name=node-config-infra\n" in inventory
    assert "gluster1.demo openshift_node_group_name=node-config-infra-crio" not in inventory


async def test_write_files_refused_for_a_scenario_without_files(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "clustersim", "serve", "--scenario", "r2-pdb-blocked", "--time-scale", "0.01",
        "--write-files", str(tmp_path / "x"), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    assert "ships no files" in err.decode() and not (tmp_path / "x").exists()
