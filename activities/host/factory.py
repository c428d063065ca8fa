"""Picks the command backend for a host: :class:`ExecutorFactory`."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from activities.host.debug_pod import DebugPodExecutor, gateway_from_environment
from activities.host.executors import (
    ENV_SSH_KEY,
    ENV_SSH_KNOWN_HOSTS,
    ENV_SSH_SUDO,
    ENV_SSH_USER,
    LocalExecutor,
    NodeExecutor,
    SSHExecutor,
)
from activities.host.models import ExecBackend, HostAccess


_BOOL = TypeAdapter(bool)


def ssh_sudo(value: str | None, user: str) -> bool:
    """Whether SSH commands for ``user`` go through ``sudo -n``: ``value`` is
    ``LOCKKEEPER_SSH_SUDO``, read as the worker's settings read it (pydantic's booleans:
    ``true``/``false``, ``1``/``0``, ``yes``/``no``, ``on``/``off``); unset or empty, sudo is used
    for any user but ``root``, as the host commands need root (RHCOS's ``core`` has password-less
    sudo). Raises ValueError for any other value."""
    if value is None or not value.strip():
        return user != "root"
    try:
        return _BOOL.validate_python(value.strip())
    except ValidationError:
        raise ValueError(f"{ENV_SSH_SUDO}={value!r}: expected true or false") from None


class ExecutorFactory:
    """Builds the executor for a :class:`HostAccess` from the worker's environment (``environ``):
    ``LOCKKEEPER_SSH_KEY`` (private key file), ``LOCKKEEPER_SSH_KNOWN_HOSTS`` (default
    ``~/.ssh/known_hosts``), ``LOCKKEEPER_SSH_USER`` (default ``core``, the RHCOS user),
    ``LOCKKEEPER_SSH_SUDO`` (``true``/``false``; default: true for any user but ``root``, as
    host commands need root: see :func:`ssh_sudo`); the debug-pod backend's gateway from
    ``gateway_factory`` (default: the environment's kubeconfig, loaded on first use only, so
    host-only workers need none)."""

    def __init__(
        self, environ: Mapping[str, str] | None = None, gateway_factory: Callable[[], Any] | None = None
    ) -> None:
        self._env = dict(os.environ if environ is None else environ)
        self._gateway_factory = gateway_factory or gateway_from_environment
        self._gateway: Any = None
        self._lock = threading.Lock()
        self._local = LocalExecutor()
        ssh_sudo(self._env.get(ENV_SSH_SUDO), "root")  # a bad value fails the worker's start, not a command

    def _shared_gateway(self) -> Any:
        """One gateway for every debug-pod command, built on first use."""
        with self._lock:
            if self._gateway is None:
                self._gateway = self._gateway_factory()
            return self._gateway

    def debug_pod_gateway(self) -> Any:
        """The gateway the debug-pod commands use (built on first use; raises KubeError when the
        worker has no cluster access)."""
        return self._shared_gateway()

    def for_access(self, access: HostAccess) -> NodeExecutor:
        """The executor for ``access`` (a new SSH or debug-pod executor per call; one local)."""
        if access.backend == ExecBackend.LOCAL:
            return self._local
        if access.backend == ExecBackend.SSH:
            key = self._env.get(ENV_SSH_KEY)
            known = self._env.get(ENV_SSH_KNOWN_HOSTS) or os.path.expanduser("~/.ssh/known_hosts")
            user = access.user or self._env.get(ENV_SSH_USER) or "core"
            return SSHExecutor(
                access.host,
                port=access.port,
                user=user,
                known_hosts=known,
                client_keys=[key] if key else None,
                sudo=ssh_sudo(self._env.get(ENV_SSH_SUDO), user),
            )
        assert access.node is not None  # HostAccess validates it
        return DebugPodExecutor(
            access.node, namespace=access.namespace, image=access.image, gateway_factory=self._shared_gateway
        )
