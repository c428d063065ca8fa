"""A host-command trap for the real etcd world of the fault matrix (tests/support/etcd_world.py): the
members' ``etcd``, ``etcdctl``, ``etcdutl`` and the worker's ``mv`` are small wrappers that run
this script, which looks for an armed trap matching the command, then runs the real program.

``python trapshim.py NAME REAL TRAPS_DIR ARGS...``:

- a trap (``TRAPS_DIR/<id>.trap``, JSON: ``match`` words that must all appear in ``NAME ARGS``,
  ``exclude`` words that must not, ``on`` ``call``/``stop``, ``action`` ``hold``/``fail``,
  ``times``, ``hits``, ``log``) is claimed under a lock, once per ``times``; ``on`` ``any``
  claims calls and stops alike;
- ``count``: the command is only logged (the fault matrix's coverage test reads every command
  of a happy run), then runs;
- ``fail``: the command is refused (``stderr`` and exit code 1) and the real program never runs;
- ``hold``: ``<id>.held`` is written and the command waits until ``<id>.release`` exists, then
  runs (it lands, as a request the apiserver already had);
- ``etcd`` (a member's process): the wrapper stays the parent of the real etcd (same process
  group, so a stop's ``killpg`` reaches both; the child dies with the wrapper) and a SIGTERM
  is matched as ``etcd stop <name>`` (``on: stop``): ``hold`` keeps the wrapper alive (the stop
  unconfirmed) until released; a start is matched as ``etcd start <name> ARGS``.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def claim(traps: Path, words: list[str], on: str = "call") -> dict[str, Any] | None:
    """The first armed trap matching ``words`` (its hit counted), or None."""
    text = " ".join(words)
    if not any(traps.glob("*.trap")):
        return None
    with open(traps / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for f in sorted(traps.glob("*.trap")):
            trap = json.loads(f.read_text())
            if trap.get("on", "call") not in (on, "any") or trap["hits"] >= trap["times"]:
                continue
            if all(w in text for w in trap["match"]) and not any(w in text for w in trap.get("exclude", [])):
                trap["hits"] += 1
                trap["log"].append(text)
                f.write_text(json.dumps(trap))
                return trap
    return None


def hold(traps: Path, trap: dict[str, Any]) -> None:
    (traps / f"{trap['id']}.held").write_text(str(os.getpid()))
    while not (traps / f"{trap['id']}.release").exists():
        time.sleep(0.05)


def act(traps: Path, trap: dict[str, Any]) -> None:
    """Refuse (exit 1) or hold per the trap's action (a ``count`` trap only logged it)."""
    if trap["action"] == "count":
        return
    if trap["action"] == "fail":
        sys.stderr.write(f"{trap.get('message') or 'refused by the fault matrix'} ({trap['id']})\n")
        sys.exit(1)
    hold(traps, trap)


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def run_etcd(real: str, traps: Path, args: list[str]) -> int:
    name = next((a.split("=", 1)[1] for a in args if a.startswith("--name=")), "?")
    trap = claim(traps, ["etcd", "start", name, *args])
    if trap is not None:
        act(traps, trap)
    child = subprocess.Popen([real, *args], preexec_fn=_die_with_parent)  # noqa: PLW1509 - pdeathsig only
    state = {"stopping": False}

    def on_term(signum: int, frame: Any) -> None:
        # Runs between the main thread's waits: never wait for the child here (Popen.wait holds a
        # lock the interrupted wait owns); the main thread sees the child exit.
        if state["stopping"]:
            return  # a second stop while the first is held: it waits for the same release
        state["stopping"] = True
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signal.SIGTERM)
        stop = claim(traps, ["etcd", "stop", name], on="stop")
        if stop is not None and stop["action"] == "hold":
            hold(traps, stop)

    signal.signal(signal.SIGTERM, on_term)
    code = child.wait()
    return 0 if state["stopping"] else code


def main() -> int:
    name, real, traps_dir, *args = sys.argv[1:]
    traps = Path(traps_dir)
    if name == "etcd":
        return run_etcd(real, traps, args)
    trap = claim(traps, [name, *args])
    if trap is not None:
        act(traps, trap)
    os.execv(real, [real, *args])
    return 127


if __name__ == "__main__":
    sys.exit(main())
