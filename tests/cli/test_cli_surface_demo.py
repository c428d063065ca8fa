"""Issue 18 item 7: ``lockkeeper demo --interactive`` shows its approve hint above the live view,
and the printed command really approves the gate.

The demo runs as the real console script with stdout on a pseudo-terminal (so rich draws its live
view) and this test acts as the operator: it reads the screen, and for every hint it runs the
exact ``lockkeeper approve`` command shown there. The demo must then repair the cluster (exit 0).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import struct
import sys
import termios
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(600)

LOCKKEEPER = str(Path(sys.executable).parent / "lockkeeper")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
HINT = re.compile(r"TEMPORAL_ADDRESS=(\S+) LOCKKEEPER_TASK_QUEUE=(\S+) lockkeeper approve (\S+) (\S+)")


def test_approve_hint_is_printed_through_the_live_console() -> None:
    """The printing path on its own: the hint goes to the live view's console (stdout), above the
    view, not to stderr where the view would draw over it."""
    import io

    from rich.console import Console
    from rich.live import Live

    from lockkeeper.demo import approve_hint, print_hint

    screen, errors = io.StringIO(), io.StringIO()
    out = Console(file=screen, force_terminal=True, width=200)
    err = Console(file=errors, force_terminal=True, width=200)
    with Live("view 1", console=out, auto_refresh=False) as live:
        print_hint(live, err, approve_hint("127.0.0.1:7233", "mcr-demo-1", "canary/master"))
        live.update("view 2", refresh=True)
    text = ANSI.sub("", screen.getvalue())
    assert "lockkeeper approve mcr-demo-1 canary/master" in text and errors.getvalue() == ""
    # Printed above the live view: the hint comes before the view's last state.
    assert text.index("lockkeeper approve") < text.rindex("view 2")
    print_hint(None, err, "plain")
    assert "plain" in errors.getvalue()


async def test_interactive_demo_can_be_approved_from_its_hint(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 400, 0, 0))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "LOCKKEEPER_", "KUBE"))}
    proc = await asyncio.create_subprocess_exec(
        LOCKKEEPER, "demo", "--interactive", "--state-dir", str(tmp_path / "demo"), "--timeout", "420",
        stdout=slave, stderr=slave, stdin=asyncio.subprocess.DEVNULL,
        env={**base, "TERM": "xterm", "COLUMNS": "400", "LINES": "60"},
    )
    os.close(slave)
    os.set_blocking(master, False)
    screen: list[str] = []
    loop = asyncio.get_running_loop()

    def drain() -> None:
        # Read the terminal all the time: a full pty buffer would block the demo's own event
        # loop (its live view writes to it), and with it the demo's in-process worker.
        try:
            while chunk := os.read(master, 65536):
                screen.append(ANSI.sub("", chunk.decode(errors="replace")))
        except (BlockingIOError, OSError):
            pass

    loop.add_reader(master, drain)
    approved: list[tuple[str, str]] = []
    results: list[tuple[int, str]] = []

    async def approve(address: str, queue: str, wid: str, gate: str) -> None:
        # Exactly the command the hint shows. "Nothing was decided" (exit 3) is safe to send
        # again, as an operator would, if the demo's in-process worker is slow on a loaded machine.
        env = {**base, "TEMPORAL_ADDRESS": address, "LOCKKEEPER_TASK_QUEUE": queue}
        for _ in range(4):
            p = await asyncio.create_subprocess_exec(
                LOCKKEEPER, "approve", wid, gate, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )
            _, e = await asyncio.wait_for(p.communicate(), 120)
            results.append((p.returncode or 0, e.decode()))
            if p.returncode != 3 or "nothing was decided" not in e.decode():
                return

    approvals: list[asyncio.Task[None]] = []
    deadline = time.monotonic() + 540
    try:
        while proc.returncode is None and time.monotonic() < deadline:
            for address, queue, wid, gate in HINT.findall("".join(screen)):
                if (wid, gate) not in approved:
                    approved.append((wid, gate))
                    approvals.append(asyncio.create_task(approve(address, queue, wid, gate)))
            try:
                await asyncio.wait_for(proc.wait(), 0.5)
            except TimeoutError:
                pass
        await asyncio.gather(*approvals)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        drain()
        loop.remove_reader(master)
        os.close(master)
    text = "".join(screen)
    tail = text[-4000:]
    assert approved, f"no approve hint on the screen:\n{tail}"
    assert all(code == 0 or (code == 3 and "nothing was decided" in e) for code, e in results), (results, tail)
    assert sum(code == 0 for code, _ in results) == len(approved), (results, tail)
    assert proc.returncode == 0, f"demo exit {proc.returncode}; approved {approved}:\n{tail}"
    assert "cluster repaired" in text
