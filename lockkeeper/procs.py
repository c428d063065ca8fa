"""A lockkeeper worker in a child process, for the demo and the end-to-end tests.

The tests kill it with SIGKILL mid-rollout and start it again; the workflows must resume where
they stopped. The child is ``python -m workers.worker`` with its settings in the environment
only (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``LOCKKEEPER_TASK_QUEUE``, ``KUBECONFIG``),
exactly as an operator would run ``lockkeeper worker``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from lockkeeper.devserver import ChildProcess, popen_child
from workers.worker import READY_EVENT


class WorkerProcessError(RuntimeError):
    """The worker exited before it was ready, or did not become ready in time (log tail in the message)."""


class WorkerProcess(ChildProcess):
    """Start / stop / kill -9 / restart a worker child process.

    ``address``: Temporal ``host:port``; ``kubeconfig``: path to the cluster's kubeconfig;
    ``task_queue``, ``namespace``; ``env``: extra variables (e.g. ``LOCKKEEPER_LOG_LEVEL``,
    ``LOCKKEEPER_BUILD_ID``). ``module``: what ``python -m`` runs, default ``workers.worker``
    (the versioning test runs a second build of the workflow code so). Logs (JSON lines) are
    appended to ``log_path`` (default: a temp-dir file named after the queue).
    """

    def __init__(
        self,
        *,
        address: str,
        kubeconfig: str | Path | None,
        task_queue: str = "lockkeeper",
        namespace: str = "default",
        env: dict[str, str] | None = None,
        log_path: str | Path | None = None,
        ready_timeout: float = 30.0,
        stop_timeout: float = 15.0,
        module: str = "workers.worker",
    ) -> None:
        self.address = address
        self.kubeconfig = Path(kubeconfig) if kubeconfig else None
        self.task_queue = task_queue
        self.namespace = namespace
        self.extra_env = dict(env or {})
        self.log_path = Path(log_path) if log_path else Path(
            os.environ.get("TMPDIR", "/tmp"), f"lockkeeper-worker-{task_queue}-{os.getpid()}.log"
        )
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.module = module
        self._proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def environment(self) -> dict[str, str]:
        """The child's environment: ours minus any ``TEMPORAL_*``/``LOCKKEEPER_*``, plus its settings."""
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "LOCKKEEPER_", "KUBE"))
        }
        env.update(
            TEMPORAL_ADDRESS=self.address,
            TEMPORAL_NAMESPACE=self.namespace,
            LOCKKEEPER_TASK_QUEUE=self.task_queue,
            LOCKKEEPER_LOG_FORMAT="json",
            LOCKKEEPER_GRACEFUL_SHUTDOWN_SECONDS="5",
            PYTHONUNBUFFERED="1",
        )
        if self.kubeconfig:
            env["KUBECONFIG"] = str(self.kubeconfig)
        env.update(self.extra_env)
        return env

    async def start(self, *, wait_ready: bool = True) -> None:
        """Start the worker (no-op if running) and, by default, wait until it polls its queue."""
        if self.running:
            return
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._proc = popen_child(
            [sys.executable, "-m", self.module], env=self.environment(), log_path=self.log_path
        )
        self.starts += 1
        if wait_ready:
            await self._wait_ready(offset)

    async def _wait_ready(self, offset: int) -> None:
        deadline = time.monotonic() + self.ready_timeout
        needle = f'"event": "{READY_EVENT}"'.encode()
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise WorkerProcessError(
                    f"worker exited with code {self._proc.returncode} before it was ready:\n{self.log_tail()}"
                )
            try:
                with open(self.log_path, "rb") as f:
                    f.seek(offset)
                    if needle in f.read():
                        return
            except OSError:
                pass
            await asyncio.sleep(0.05)
        raise WorkerProcessError(f"worker not ready after {self.ready_timeout:.0f}s:\n{self.log_tail()}")

    async def restart(self, *, hard: bool = True) -> None:
        """Kill (``hard``) or stop, then start again and wait until ready."""
        await (self.kill() if hard else self.stop())
        await self.start()

