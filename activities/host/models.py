"""Inputs and results of host commands: the contract between workflows and node executors.

Plain pydantic v2 models, no Kubernetes, no asyncssh: workflows import them through
``workflow.unsafe.imports_passed_through()`` and the pydantic data converter carries them in
history. Nothing here holds a secret: SSH keys, known_hosts and cluster credentials come from the
worker's environment (see :mod:`activities.host.executors`).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field, model_validator

#: Default cap of captured stdout and stderr, each, in bytes (the rest is dropped, flagged
#: ``*_truncated``), so a chatty command cannot bloat workflow history.
DEFAULT_OUTPUT_CAP = 16 * 1024

#: Seconds the debug-pod backend waits for its pod to run before the command can start (an image
#: pull on a cold node is the usual wait). The executor's default and the call bound's share.
DEBUG_POD_START_SECONDS = 120.0
#: Seconds the SSH backend waits for the connection before the command can start.
SSH_CONNECT_SECONDS = 10.0


# --- node commands --------------------------------------------------------------------------------


class ExecBackend(StrEnum):
    """How a command reaches a node: ``local`` subprocess (loopback members, the simulator),
    ``ssh`` (asyncssh, host keys verified) or ``debug-pod`` (a privileged pod pinned to the node
    running the command under ``chroot /host``, as ``oc debug node/NAME`` does)."""

    LOCAL = "local"
    SSH = "ssh"
    DEBUG_POD = "debug-pod"


class HostAccess(BaseModel):
    """Where and how to run commands for one node.

    - ``backend``: see :class:`ExecBackend`.
    - ``host``/``port``/``user``: the SSH endpoint (``user`` None = the worker's
      ``LOCKKEEPER_SSH_USER`` or ``core``).
    - ``node``: the Kubernetes node name (debug-pod backend); ``namespace``: where the debug pod
      is created; ``image``: the debug pod's image (it only needs ``chroot``).
    """

    backend: ExecBackend = ExecBackend.LOCAL
    host: str = "127.0.0.1"
    port: int = Field(22, ge=1, le=65535)
    user: str | None = None
    node: str | None = None
    namespace: str = "default"
    image: str = "registry.access.redhat.com/ubi9/ubi-minimal:latest"

    @model_validator(mode="after")
    def _node_for_debug_pod(self) -> HostAccess:
        if self.backend == ExecBackend.DEBUG_POD and not self.node:
            raise ValueError("the debug-pod backend needs `node` (the Kubernetes node name)")
        return self

    def describe(self) -> str:
        """``local``, ``ssh core@10.0.0.1:22`` or ``debug-pod node/master-0`` for messages."""
        if self.backend == ExecBackend.SSH:
            return f"ssh {self.user or '?'}@{self.host}:{self.port}"
        if self.backend == ExecBackend.DEBUG_POD:
            return f"debug-pod node/{self.node}"
        return "local"

    def startup_seconds(self) -> float:
        """Seconds this backend may take before the command starts, on top of the command's own
        timeout: the debug pod's start (:data:`DEBUG_POD_START_SECONDS`), the SSH connection
        (:data:`SSH_CONNECT_SECONDS`), 0 for a local subprocess. A call's start-to-close bound
        that leaves this out times out while a slow node is still getting ready, and reports an
        unknown outcome for a command that never started."""
        if self.backend == ExecBackend.DEBUG_POD:
            return DEBUG_POD_START_SECONDS
        if self.backend == ExecBackend.SSH:
            return SSH_CONNECT_SECONDS
        return 0.0


class RunCommandInput(BaseModel):
    """Run ``argv`` on a node (no shell: each element is one argument, never interpolated).

    ``timeout_seconds``: the command is killed after this; ``stdin``: text fed to the command
    (file contents such as a manifest; never secrets, it is in history); ``env``: extra
    environment variables (non-secret); ``max_output_bytes``: cap for stdout and stderr each.
    """

    access: HostAccess = Field(default_factory=HostAccess)
    argv: list[str] = Field(min_length=1)
    timeout_seconds: float = Field(60.0, gt=0)
    stdin: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    max_output_bytes: int = Field(DEFAULT_OUTPUT_CAP, ge=256)

    def bound_seconds(self) -> float:
        """The longest the command can take on its backend: ``timeout_seconds`` plus
        :meth:`HostAccess.startup_seconds`. A caller's start-to-close is this plus its slack."""
        return self.timeout_seconds + self.access.startup_seconds()


class CommandResult(BaseModel):
    """What a command did: ``exit_code`` (None when it was killed on timeout or never started),
    ``stdout``/``stderr`` (UTF-8, invalid bytes replaced, capped), ``duration_seconds``."""

    argv: list[str]
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False
    duration_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Exit code 0 and not timed out."""
        return self.exit_code == 0 and not self.timed_out

    @property
    def session_lost(self) -> bool:
        """No exit status and not timed out: the session (SSH, a debug pod's exec) ended
        mid-command, so the command may or may not have acted."""
        return self.exit_code is None and not self.timed_out

    def summary(self, limit: int = 400) -> str:
        """One line for errors: argv[0], exit code and the tail of stderr (or stdout)."""
        what = "timed out" if self.timed_out else f"exit {self.exit_code}"
        text = (self.stderr.strip() or self.stdout.strip())[-limit:]
        return f"{self.argv[0]} {what}: {text}" if text else f"{self.argv[0]} {what}"


# --- debug-pod sweep -------------------------------------------------------------------------------


class SweepDebugPodsInput(BaseModel):
    """Delete the debug pods of workflow run ``run_id`` (their ``lockkeeper.io/run-id`` label) in
    ``namespaces`` and read back that they are gone."""

    run_id: str = Field(min_length=1)
    namespaces: list[str] = Field(min_length=1)


class SweepDebugPodsResult(BaseModel):
    """What a sweep did, pods as ``namespace/name``: ``deleted`` (deleted and read back gone),
    ``remaining`` (still there when the sweep gave up), ``errors`` (one line per failed request)."""

    deleted: list[str] = Field(default_factory=list)
    remaining: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
