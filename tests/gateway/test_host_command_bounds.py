"""A host command's call bound leaves room for its backend to start: the debug pod's start (an
image pull on a cold node) or the SSH connection comes before the command's own timeout, and a
bound without it reports an unknown outcome for a command that never started."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from activities.host.models import (
    DEBUG_POD_START_SECONDS,
    SSH_CONNECT_SECONDS,
    ExecBackend,
    HostAccess,
    RunCommandInput,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("access", "startup"),
    [
        (HostAccess(), 0.0),
        (HostAccess(backend=ExecBackend.SSH, host="10.0.0.5"), SSH_CONNECT_SECONDS),
        (HostAccess(backend=ExecBackend.DEBUG_POD, node="okd-worker-01"), DEBUG_POD_START_SECONDS),
    ],
)
def test_a_command_is_bounded_by_its_timeout_and_its_backends_start(access: HostAccess, startup: float) -> None:
    assert access.startup_seconds() == startup
    assert RunCommandInput(access=access, argv=["true"], timeout_seconds=45).bound_seconds() == 45 + startup


def test_the_executors_wait_no_longer_than_the_bound_allows() -> None:
    from activities.host.debug_pod import DebugPodExecutor
    from activities.host.executors import SSHExecutor

    assert DebugPodExecutor("n").start_timeout == DEBUG_POD_START_SECONDS
    assert SSHExecutor("h", user="core", known_hosts="/dev/null").connect_timeout == SSH_CONNECT_SECONDS


def _run_node_command_calls() -> list[tuple[str, ast.Call]]:
    calls = []
    for path in sorted((ROOT / "workflows").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args:
                first = node.args[0]
                name = first.attr if isinstance(first, ast.Attribute) else getattr(first, "id", None)
                if name == "RUN_NODE_COMMAND":
                    calls.append((f"{path.relative_to(ROOT)}:{node.lineno}", node))
    return calls


def test_every_run_node_command_call_takes_its_bound_from_the_command() -> None:
    calls = _run_node_command_calls()
    # The kit's host steps (run and command) and its boot ID read are the only callers: every
    # procedure runs host commands and reboots through them (issue 36), and the scan must find
    # them, or it checks nothing.
    assert [w.split(":")[0] for w, _ in calls] == ["workflows/kit/host.py"] * 2, [w for w, _ in calls]
    loose = []
    for where, call in calls:
        bound = [k.value for k in call.keywords if k.arg in ("start_to_close_timeout", "seconds")]
        if not bound or "bound_seconds" not in ast.unparse(bound[0]):
            loose.append(where)
    assert loose == [], f"bounded without the backend's start: {loose}"
