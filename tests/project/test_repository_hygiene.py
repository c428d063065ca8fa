"""No committed file names an absolute path of a particular machine.

A path such as a developer's checkout, home directory or pytest's temporary directory breaks a
clone on any other machine (a test reading it fails, a doc pointing at it misleads) and tells
nothing a relative path or a name would not. The scan covers every file ``git ls-files`` lists
(every file under the repository root, build and VCS folders aside, when this is no git work
tree), text files only (a file with a NUL byte is binary and skipped), except the few in
:data:`SKIP`.

Flagged: the starts of machine-specific trees, i.e. a path beginning with the folder ``work``,
``root``, ``Users``, ``home/<user>``, ``tmp/pytest-of-<user>`` (pytest's temporary folders) or
macOS' ``var/folders``, and the Windows and WSL user folders (``C:`` or ``/mnt/c`` followed by
``Users``); only where a path starts (not ``/var/lib/work/``, ``~/work/`` or a URL's path).
Paths of the simulated hosts (``/etc/origin/...``, ``/var/lib/...``, ``/usr/bin/...``) and the
README's example ``/tmp/<name>`` files are not machine paths and stay allowed. The needles are
assembled from parts so that this file does not match its own patterns.
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Files not scanned, each with its reason. Keep it short: a new entry needs a reason here.
SKIP: dict[str, str] = {}

_SEP = "/"  # see the module docstring: the needles are assembled from parts
_NEEDLES = [
    _SEP + "work" + _SEP,
    _SEP + "root" + _SEP,
    _SEP + "Users" + _SEP,
    _SEP + "home" + _SEP + r"[^/\s\"'\\]+" + _SEP,
    _SEP + "tmp" + _SEP + "pytest-of-",
    _SEP + "var" + _SEP + "folders" + _SEP,
    _SEP + "mnt" + _SEP + "[a-z]" + _SEP + "Users" + _SEP,
]
#: A path start: not preceded by a word character, a dot, ``~``, ``$`` or ``-`` (so
#: ``/var/lib/work/``, ``~/work/``, ``$HOME/work/`` and ``https://host/work/`` do not match).
MACHINE_PATH = re.compile(
    r"(?<![\w.~$-])(?:" + "|".join(_NEEDLES) + r")"
    + r"|\b[A-Za-z]:(?:\\\\|\\|/)(?:Users|Documents and Settings)(?:\\\\|\\|/)"
)

_NOT_SOURCES = {".git", ".venv", "build", "dist", "__pycache__", ".pytest_cache", ".lockkeeper"}


def machine_paths(text: str) -> list[str]:
    """The machine-path starts found in ``text`` (see the module docstring), in order."""
    return [m.group(0) for m in MACHINE_PATH.finditer(text)]


def tracked_files() -> list[str]:
    """Repository-relative paths of the committed files (``git ls-files``); without git, every
    file under the root outside VCS, virtualenv, cache and build folders."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.CalledProcessError):
        found = []
        for dirpath, dirnames, filenames in os.walk(ROOT):
            dirnames[:] = [d for d in dirnames if d not in _NOT_SOURCES and not d.endswith(".egg-info")]
            found += [str(Path(dirpath, f).relative_to(ROOT)) for f in filenames]
        return sorted(found)
    return [p for p in out.decode().split("\0") if p]


def skipped(path: str) -> bool:
    """Whether ``path`` matches an entry of :data:`SKIP`."""
    return any(fnmatch.fnmatch(path, pattern) for pattern in SKIP)


def test_the_pattern_flags_machine_paths_and_not_in_cluster_paths() -> None:
    s = _SEP
    flagged = [f"{s}work{s}main{s}.venv{s}lib", f'File "{s}root{s}.pyenv{s}versions{s}3.11', f"{s}home{s}alice{s}src",
               f"{s}Users{s}bob{s}lockkeeper", f"{s}tmp{s}pytest-of-carol{s}pytest-3", f"{s}var{s}folders{s}xy{s}T",
               "C:" + "\\" + "Users\\dave\\repo", "C:" + "\\\\" + "Users\\\\dave", f"{s}mnt{s}c{s}Users{s}erin", f"file://{s}work{s}x"]
    allowed = [f"{s}etc{s}origin{s}master{s}master-config.yaml", f"{s}var{s}lib{s}heketi{s}mounts",
               f"{s}usr{s}bin{s}oc", f"{s}usr{s}share{s}ansible{s}openshift-ansible{s}playbooks",
               f"{s}tmp{s}r3.env", f"{s}var{s}lib{s}work{s}x", f"~{s}work{s}x", f"$HOME{s}work{s}x",
               f"https:{s}{s}example.com{s}work{s}x", f"{s}homepage{s}", f"src{s}root{s}x", f"{s}etc{s}origin{s}node{s}pods{s}"]
    assert [t for t in flagged if not machine_paths(t)] == []
    assert [t for t in allowed if machine_paths(t)] == []


def test_no_committed_file_names_a_machine_path() -> None:
    files = tracked_files()
    assert "README.md" in files and "pyproject.toml" in files, files[:20]
    for pattern in SKIP:
        assert any(fnmatch.fnmatch(p, pattern) for p in files), f"SKIP entry {pattern!r} matches nothing: drop it"
    found: list[str] = []
    for path in files:
        if skipped(path):
            continue
        full = ROOT / path
        if not full.is_file():  # deleted in the work tree, not yet committed
            continue
        data = full.read_bytes()
        if b"\0" in data:
            continue
        for lineno, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            found += [f"{path}:{lineno}: {hit!r} in {line.strip()[:120]!r}" for hit in machine_paths(line)]
    assert not found, "absolute paths of a machine in committed files:\n" + "\n".join(found)


def test_recorded_histories_are_stored_machine_neutral() -> None:
    """The history recorder (tests/support/replay.py) strips the recording machine's paths from
    stack traces, so a re-recorded history never needs a SKIP entry here."""
    from tests.support.replay import _ROOT, machine_neutral

    s = "/"
    venv = f"{s}opt{s}ci{s}venv{s}lib{s}python3.12{s}site-packages{s}temporalio{s}worker{s}_activity.py"
    debian = f"{s}usr{s}lib{s}python3{s}dist-packages{s}aiohttp{s}client.py"
    trace = f'File \\"{_ROOT}{s}tests{s}support{s}etcd_fakes.py\\", line 105; File \\"{venv}\\"; File \\"{debian}\\"'
    neutral = machine_neutral(trace)
    assert neutral == ('File \\"tests/support/etcd_fakes.py\\", line 105; '
                       'File \\"site-packages/temporalio/worker/_activity.py\\"; File \\"dist-packages/aiohttp/client.py\\"')
    assert machine_paths(neutral) == []
