"""One asyncssh server per simulated host on loopback, and the client key material.

Per run, :class:`KeyMaterial` generates an ed25519 client key pair and writes it with a
``known_hosts`` file (``[127.0.0.1]:PORT ssh-ed25519 AAAA...``, OpenSSH's format for a host on a
non-default port) and a node -> ``127.0.0.1:PORT`` map (JSON). Each :class:`HostSSHServer` has its
own ed25519 host key, accepts only the client key (public-key authentication, any user name),
and runs every session's ``process.command`` through ``shlex.split`` into the host interpreter:
stdout/stderr are written back and ``process.exit(code)`` sends the exit status. A command
that reboots the host aborts the connection, so the client sees a lost connection and no exit
status. A client's ``signal`` request (RFC 4254 section 6.9) ends the command where it is, as
OpenSSH 7.9 and later do; a host whose ``openssh`` is older (RHEL 7's 7.4p1) ignores it, and the
command runs on after its client is gone, bounded only by a ``timeout`` it runs under. While the
host is down (reboot, ``ssh_down`` fault) the listener is closed: connections are refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncssh

from clustersim.hosts.ctx import SessionDropped
from clustersim.hosts.interp import unwrap
from clustersim.loops import cancel_and_wait

log = logging.getLogger(__name__)

#: ``run(argv, stdin) -> (stdout, stderr, code)``; raises SessionDropped for a reboot.
RunCommand = Callable[[list[str], bytes], Awaitable[tuple[str, str, int]]]
#: Real seconds a command that does not read stdin waits for input the client sends right away.
#: A real sshd forks the command after the client's first writes arrive; answering faster than
#: that would close the channel under a client that writes its input just after opening it.
STDIN_GRACE = 0.05
#: Real seconds between two looks for a client's signal while a command runs.
SIGNAL_POLL = 0.05


def reads_stdin(argv: list[str]) -> bool:
    """Whether ``argv`` reads its standard input to the end (then the server waits for the
    client's EOF as a real command would; other commands wait at most STDIN_GRACE)."""
    argv = unwrap(argv)[0]
    while argv[:1] == ["env"]:
        argv = [a for a in argv[1:] if "=" not in a] if len(argv) > 1 else []
    if not argv:
        return False
    cmd, args = argv[0].rsplit("/", 1)[-1], argv[1:]
    operands = [a for a in args if not a.startswith("-")]
    if cmd == "tee":
        return True
    if cmd == "install":
        return "/dev/stdin" in args
    if cmd == "cat":
        return not operands
    if cmd == "grep":
        return len(operands) <= 1
    return False


async def _signal(process: asyncssh.SSHServerProcess) -> str:
    """The first signal the client sends (RFC 4254 section 6.9): asyncssh raises it from a read of
    stdin, which returns at once once stdin is at its end, hence the short rest between reads."""
    while True:
        try:
            data = await process.stdin.read()
        except asyncssh.SignalReceived as exc:
            return str(exc.signal)
        except (asyncssh.Error, OSError):
            data = ""
        if not data:
            await asyncio.sleep(SIGNAL_POLL)


async def _unless_signalled(
    process: asyncssh.SSHServerProcess, command: Awaitable[tuple[str, str, int]]
) -> tuple[str, str, int] | None:
    """Run ``command`` until it ends or the client signals it, as OpenSSH 7.9 and later do for a
    command session: the command is then cancelled where it is (a pull still sleeping never lands),
    the exit carries the signal, and None comes back. Without a signal, a client that goes away
    leaves the command running to its end, as any sshd does without a pty."""
    run = asyncio.ensure_future(command)
    sig = asyncio.ensure_future(_signal(process))
    try:
        await asyncio.wait({run, sig}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # the server stops: the command goes with the session
        run.cancel()
        raise
    finally:
        sig.cancel()
    if run.done():
        return run.result()
    run.cancel()
    with contextlib.suppress(BaseException):
        await run
    with contextlib.suppress(asyncssh.Error, OSError):
        process.exit_with_signal(sig.result())
    return None


def command_argv(command: str) -> list[str]:
    """The argv for an SSH ``exec`` request: ``shlex.split(command)``; a command line with shell
    operators (``;``, ``&&``, ``|``, redirections) becomes ``["sh", "-c", command]`` so the
    interpreter's small ``sh -c`` decides (it runs ``;``/``&&`` lists and refuses the rest)
    instead of the operators turning into arguments. Raises ValueError for unbalanced quotes."""
    lex = shlex.shlex(command, posix=True, punctuation_chars=";&|<>")
    lex.whitespace_split = True
    tokens = list(lex)
    if any(t and set(t) <= set(";&|<>") for t in tokens):
        return ["sh", "-c", command]
    return shlex.split(command)


class KeyMaterial:
    """Client key pair, known_hosts and host map files in ``directory``.

    Attributes: ``client_key_path`` (OpenSSH private key, mode 0600), ``client_pub_path``,
    ``known_hosts_path``, ``ssh_map_path`` (JSON node -> "127.0.0.1:port"), ``client_key``.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.client_key = asyncssh.generate_private_key("ssh-ed25519", comment="lockkeeper-clustersim")
        self.client_key_path = directory / "id_ed25519"
        self.client_pub_path = directory / "id_ed25519.pub"
        self.known_hosts_path = directory / "known_hosts"
        self.ssh_map_path = directory / "ssh_map.json"
        fd = os.open(self.client_key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(self.client_key.export_private_key("openssh"))
        self.client_pub_path.write_bytes(self.client_key.export_public_key("openssh"))
        self.authorized = asyncssh.import_authorized_keys(self.client_pub_path.read_text())

    def write_maps(self, entries: dict[str, tuple[int, str]]) -> None:
        """Write known_hosts and the host map for ``entries``: node -> (port, host public key line)."""
        lines = [f"[127.0.0.1]:{port} {pub}\n" for _, (port, pub) in sorted(entries.items())]
        self.known_hosts_path.write_text("".join(lines))
        self.ssh_map_path.write_text(json.dumps({n: f"127.0.0.1:{p}" for n, (p, _) in sorted(entries.items())},
                                                indent=2) + "\n")


class _Server(asyncssh.SSHServer):
    def __init__(self, owner: HostSSHServer) -> None:
        self.owner = owner
        self.conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        """Track the connection so a reboot can abort it."""
        self.conn = conn
        self.owner.connections.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection."""
        if self.conn is not None:
            self.owner.connections.discard(self.conn)

    def begin_auth(self, username: str) -> bool:
        """Always require authentication (public key only)."""
        return True  # always authenticate (public key only, checked against the client key)

    def password_auth_supported(self) -> bool:
        """Passwords are never accepted."""
        return False


class HostSSHServer:
    """The SSH server of one host (see module docstring). ``run`` executes a command on the
    host; ``port`` 0 picks a free port at the first ``open`` and keeps it afterwards;
    ``honours_signals`` says, when a command starts, whether this sshd ends it on the client's
    ``signal`` request (OpenSSH 7.9 and later)."""

    def __init__(self, name: str, run: RunCommand, keys: KeyMaterial, port: int = 0,
                 honours_signals: Callable[[], bool] = lambda: True) -> None:
        self.name = name
        self._run = run
        self._honours_signals = honours_signals
        self.keys = keys
        self.port = port
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self.host_key_line = self.host_key.export_public_key("openssh").decode().strip()
        self.connections: set[asyncssh.SSHServerConnection] = set()
        self._acceptor: asyncssh.SSHAcceptor | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def listening(self) -> bool:
        """The listener is open (False while the host is down or ssh_down is set)."""
        return self._acceptor is not None

    async def open(self) -> None:
        """Start listening on 127.0.0.1 (the same port after the first time)."""
        if self._acceptor is not None:
            return
        self._acceptor = await asyncssh.create_server(
            lambda: _Server(self), "127.0.0.1", self.port,
            server_host_keys=[self.host_key], authorized_client_keys=self.keys.authorized,
            process_factory=self._handle, reuse_address=True, allow_scp=False, agent_forwarding=False,
            x11_forwarding=False, line_editor=False,
        )
        self.port = self._acceptor.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening (new connections are refused); open sessions are left alone."""
        acc, self._acceptor = self._acceptor, None
        if acc is not None:
            acc.close()
            await acc.wait_closed()

    def abort_sessions(self) -> None:
        """Drop every connection at once (a reboot: no exit status, no clean close)."""
        for conn in list(self.connections):
            conn.abort()
        self.connections.clear()

    async def stop(self) -> None:
        """Close the listener, abort sessions and wait for running command tasks."""
        await self.close()
        self.abort_sessions()
        await cancel_and_wait(list(self._tasks))

    async def _handle(self, process: asyncssh.SSHServerProcess) -> None:
        # asyncssh runs this coroutine in a task of its own: track it so stop() can end
        # commands still running (a pull that sleeps pull_seconds).
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        command = process.command or ""
        try:
            argv = command_argv(command)
        except ValueError as exc:
            process.stderr.write(f"sh: -c: line 0: syntax error: {exc}\n")
            process.exit(2)
            return
        stdin = b""
        reads = reads_stdin(argv)
        with contextlib.suppress(asyncssh.Error, asyncio.IncompleteReadError, TimeoutError):
            data = await asyncio.wait_for(process.stdin.read(), None if reads else STDIN_GRACE)
            stdin = data.encode() if isinstance(data, str) else data
        try:
            if self._honours_signals():
                ran = await _unless_signalled(process, self._run(argv, stdin))
            else:  # OpenSSH before 7.9: a signal request is refused, the command runs to its end
                ran = await self._run(argv, stdin)
            if ran is None:
                return
            out, err, code = ran
        except SessionDropped:
            conn = process.channel.get_connection()
            conn.abort()
            return
        except Exception as exc:  # a simulator bug must not look like a hung session
            log.exception("host %s: command %r failed", self.name, argv)
            process.stderr.write(f"clustersim: internal error running {argv!r}: {exc!r}\n")
            process.exit(1)
            return
        try:
            if out:
                process.stdout.write(out)
            if err:
                process.stderr.write(err)
            process.exit(code)
        except (asyncssh.Error, OSError, BrokenPipeError):
            pass  # the client went away
