"""The real etcd world of the fault matrix: a :class:`LocalEtcdCluster` whose members' ``etcd``,
``etcdctl`` and ``etcdutl`` (and the worker's ``mv``) go through host-command traps
(``trapshim.py``), and a snapshot and diff of what a procedure changes there (issue 39, "Proof
against the simulator's own view", for the procedures the simulator cannot run).

What is observed (:meth:`TrappedEtcd.observe`), by target, named as the procedures'
``left_changed`` names them (:mod:`workflows.etcd.changes`):

- ``etcd member <name>``: ``process`` running or stopped (the pid file's process, as the restore
  finds it), ``data`` the data dir's identity (the inode of its ``member/`` directory, or
  absent), ``membership`` its entry in the member list (ID, peer URLs, started), read from the
  first member whose peer endpoint ``/members`` answers (without quorum too);
- ``host <name>``: the files written beside the member: ``<backup_dir>/snapshot-<name>-*`` and
  ``<data_dir>.*`` (a data dir moved aside, a half restore);
- ``etcd key <key>``: the marker key's value (serializable read from any running member).

A field that cannot be observed in one of the two readings (no member serves the member list or
the key) is not compared: neither side can tell.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests.support.etcd_local import LocalEtcdCluster

from activities.etcd.members import parse_peer_members, running_process
from activities.etcd.models import EtcdMember, ProcessControl
from activities.host.executors import find_etcd_binary

SHIM = Path(__file__).with_name("trapshim.py")
#: Fields whose observation needs a serving member: compared only when both readings have them.
OBSERVED_WHEN_SERVED = ("membership", "value")

World = dict[str, dict[str, str]]


@dataclass(frozen=True)
class HostTrap:
    """Which command a trap catches: every word of ``match`` in ``NAME ARGS``, none of
    ``exclude``; ``on="stop"`` catches a member's SIGTERM (``match`` ``["etcd", "stop", NAME]``)."""

    match: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    on: str = "call"

    def matches_host(self, host: str, command: str, via: str) -> bool:
        """Does the trap catch ``command`` (``NAME ARGS`` as the shim logs it; ``host`` and ``via``
        are not used: every member is local)? The fault matrix's coverage check calls this."""
        return all(w in command for w in self.match) and not any(w in command for w in self.exclude)


@dataclass
class ArmedTrap:
    id: str
    dir: Path

    def state(self) -> dict:
        return json.loads((self.dir / f"{self.id}.trap").read_text())

    @property
    def hits(self) -> int:
        return int(self.state()["hits"])

    @property
    def held(self) -> bool:
        return (self.dir / f"{self.id}.held").exists()

    def release(self) -> None:
        (self.dir / f"{self.id}.release").write_text("go")


def _wrapper(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


class Shims:
    """The wrappers and the traps directory under ``root``, shared by every cluster of a module
    (and by its one worker, whose ``PATH`` is :attr:`path_env`): ``tools/etcd``, ``etcdctl``,
    ``etcdutl`` for the members, ``bin/mv`` for the worker."""

    def __init__(self, root: Path) -> None:
        self.traps = root / "traps"
        self.tools, self.bin_dir = root / "tools", root / "bin"
        for d in (self.traps, self.tools, self.bin_dir):
            d.mkdir(parents=True)
        py, shim, traps = sys.executable, SHIM, self.traps

        def passthrough(path: Path, name: str, real: str) -> None:
            # No trap armed: the real program at once (no Python start-up per etcdctl call).
            _wrapper(path, f'for f in "{traps}"/*.trap; do [ -e "$f" ] && exec "{py}" "{shim}" {name} "{real}" "{traps}" "$@"; done\n'
                           f'exec "{real}" "$@"\n')

        for name in ("etcdctl", "etcdutl"):
            passthrough(self.tools / name, name, find_etcd_binary(name))
        _wrapper(self.tools / "etcd", f'exec "{py}" "{shim}" etcd "{find_etcd_binary("etcd")}" "{traps}" "$@"\n')
        passthrough(self.bin_dir / "mv", "mv", next(p for p in ("/usr/bin/mv", "/bin/mv") if os.path.exists(p)))

    @property
    def path_env(self) -> dict[str, str]:
        """The worker's ``PATH``: the trapped ``mv`` first."""
        return {"PATH": f"{self.bin_dir}:{os.environ.get('PATH', '')}"}


class TrappedEtcd(LocalEtcdCluster):
    """A local cluster (``size`` members) whose tools are ``shims``' wrappers, so the traps in
    ``shims.traps`` catch their commands. The worker must run with ``shims.path_env`` so that its
    ``mv`` is trapped too."""

    def __init__(self, root: Path, shims: Shims, size: int = 3) -> None:
        super().__init__(root, size)
        self.traps = shims.traps
        tools = shims.tools
        members = []
        for m in self.members:
            assert isinstance(m.control, ProcessControl)
            control = ProcessControl(argv=[str(tools / "etcd"), *m.control.argv[1:]], state_dir=m.control.state_dir)
            members.append(m.model_copy(update={"etcdctl": str(tools / "etcdctl"), "etcdutl": str(tools / "etcdutl"), "control": control}))
        self.members = members

    def kill_all(self) -> None:
        """SIGKILL every process of this cluster: each member (:meth:`kill`), then any process
        whose command line names this cluster's directory (a wrapper a pid file no longer names)."""
        for m in self.members:
            self.kill(m.name)
        mine = str(self.root).encode()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                if mine in (proc / "cmdline").read_bytes():
                    os.kill(int(proc.name), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                continue

    # --- traps ---------------------------------------------------------------------------------------------

    def arm(self, trap: HostTrap, action: str, label: str, times: int = 1) -> ArmedTrap:
        """Arm ``trap`` with ``action`` (``hold``, ``fail``, ``count``) for its first ``times``
        matches (trapshim.py)."""
        tid = f"{label.replace('/', '-')}-{uuid.uuid4().hex[:6]}"
        spec = {"id": tid, "match": list(trap.match), "exclude": list(trap.exclude), "on": trap.on, "action": action,
                "times": times, "hits": 0, "log": []}
        tmp = self.traps / f"{tid}.tmp"
        tmp.write_text(json.dumps(spec))
        tmp.replace(self.traps / f"{tid}.trap")
        return ArmedTrap(tid, self.traps)

    def disarm_all(self) -> None:
        """Release every held command and remove every trap."""
        for f in self.traps.glob("*.trap"):
            (self.traps / f"{f.stem}.release").write_text("go")
        time.sleep(0.3)
        for f in self.traps.iterdir():
            f.unlink(missing_ok=True)

    # --- the snapshot and the diff ---------------------------------------------------------------------------

    def _peer_members(self, running: list[EtcdMember]) -> dict[str, str] | None:
        for m in running:
            try:
                with urllib.request.urlopen(f"{m.peer_url}/members", timeout=2) as resp:  # noqa: S310 - loopback test URL
                    infos = parse_peer_members(resp.read().decode())
            except (OSError, ValueError):
                continue
            out = {}
            for mine in self.members:
                e = next((i for i in infos if i.name == mine.name), None) or next((i for i in infos if mine.peer_url in i.peer_urls), None)
                out[mine.name] = "absent" if e is None else f"ID {e.id} peers {','.join(e.peer_urls)} {'started' if e.started else 'not started'}"
            return out
        return None

    def _key(self, key: str, running: list[EtcdMember]) -> str | None:
        for m in running:
            res = subprocess.run([self.etcdctl, f"--endpoints={m.client_url}", "--dial-timeout=1s", "--command-timeout=2s",
                                  "get", key, "--consistency=s", "--print-value-only"], capture_output=True, text=True, timeout=10)
            if res.returncode == 0:
                return res.stdout.strip() or "(absent)"
        return None

    def observe(self, marker: str | None = None) -> World:
        """The world now (module docstring); the member list and the key are read from the
        running members only."""
        out: World = {}
        running = []
        for m in self.members:
            assert isinstance(m.control, ProcessControl)
            member = out.setdefault(f"etcd member {m.name}", {})
            member["process"] = "running" if running_process(m, m.control) else "stopped"
            if member["process"] == "running":
                running.append(m)
            mdir = Path(m.data_dir) / "member"
            member["data"] = f"member dir inode {mdir.stat().st_ino}" if mdir.is_dir() else (
                "data dir without member/" if Path(m.data_dir).exists() else "absent")
            host = out.setdefault(f"host {m.name}", {})
            for f in sorted(Path(m.effective_backup_dir).glob(f"snapshot-{m.name}-*")):
                host[f"file {f}"] = "present"
            data = Path(m.data_dir)
            for f in sorted(data.parent.glob(data.name + ".*")):
                host[f"file {f}"] = "present"
        membership = self._peer_members(running)
        if membership is not None:
            for m in self.members:
                out[f"etcd member {m.name}"]["membership"] = membership[m.name]
        if marker is not None:
            value = self._key(marker, running)
            if value is not None:
                out[f"etcd key {marker}"] = {"value": value}
        return out

    async def settled(self, marker: str | None = None, timeout: float = 15.0) -> World:
        """:meth:`observe` until two readings half a second apart agree (a member just started comes
        up), or ``timeout`` seconds; the last reading."""
        end = time.monotonic() + timeout
        last = await asyncio.to_thread(self.observe, marker)
        while time.monotonic() < end:
            await asyncio.sleep(0.5)
            now = await asyncio.to_thread(self.observe, marker)
            if now == last:
                return now
            last = now
        return last


def diff(before: World, after: World) -> dict[str, list[str]]:
    """What changed, by target (one line per field; fields of :data:`OBSERVED_WHEN_SERVED` only
    when both readings have them; a file present on one side only is created or removed)."""
    out: dict[str, list[str]] = {}
    for target in sorted(set(before) | set(after)):
        b, a = before.get(target, {}), after.get(target, {})
        lines = []
        for f in sorted(set(b) | set(a)):
            if f in b and f in a:
                if b[f] != a[f]:
                    lines.append(f"{f}: {b[f]} -> {a[f]}")
            elif f.startswith("file "):
                lines.append(f"{f} {'created' if f in a else 'removed'}")
            elif f not in OBSERVED_WHEN_SERVED:
                lines.append(f"{f}: {b.get(f, '(none)')} -> {a.get(f, '(none)')}")
        if lines:
            out[target] = lines
    return out


@dataclass
class EtcdStep:
    """A mutating step of an etcd procedure: its ``name`` (as the plan names it) and the trap on
    its first command."""

    name: str
    trap: HostTrap
