"""GlusterCli's handling of the CLI's failure strings (procedures-spec §2.6) over a scripted
exec: the lock error is retried in the same pod, ``Connection failed`` and an exec that cannot
start move to the next pod, and a pod that keeps failing ends the call with a typed error.
(The same code runs against clustersim's GlusterFS pods in test_gluster_sim.py.)"""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError

from activities.gluster.activities import GlusterCli
from activities.gluster.models import GlusterPod
from activities.kube.errors import BadRequest
from activities.kube.gateway import ExecOutput

BUSY = "Another transaction is in progress for vol_x. Please try again after some time.\n"
DOWN = "Connection failed. Please check if gluster daemon is operational.\n"


class ScriptedExec:
    """``exec_in_pod`` answering from a per-pod list of (stdout, stderr, code) or exceptions."""

    def __init__(self, script: dict[str, list]) -> None:
        self.script = script
        self.calls: list[tuple[str, list[str]]] = []

    def exec_in_pod(self, namespace: str, name: str, argv: list[str], *, timeout: float, **_: object) -> ExecOutput:
        self.calls.append((name, argv))
        item = self.script[name].pop(0)
        if isinstance(item, Exception):
            raise item
        out, err, code = item
        return ExecOutput(code, out.encode(), err.encode(), False)


PODS = [GlusterPod(name=n, uid=n, node=n, phase="Running", ready=True) for n in ("gfs-a", "gfs-b")]


def _cli(script: dict[str, list], **kw: object) -> tuple[GlusterCli, ScriptedExec, list[float]]:
    gw = ScriptedExec(script)
    sleeps: list[float] = []
    return GlusterCli(gw, "glusterfs", PODS, sleep=sleeps.append, **kw), gw, sleeps  # type: ignore[arg-type]


def test_transaction_in_progress_is_retried_with_backoff() -> None:
    cli, gw, sleeps = _cli({"gfs-a": [("", BUSY, 1), ("", BUSY, 1), ("vol_x\n", "", 0)], "gfs-b": []}, backoff=2.0, max_backoff=3.0)
    ans = cli.run(["volume", "list"])
    assert ans.stdout == "vol_x\n" and ans.pod == "gfs-a"
    assert sleeps == [2.0, 3.0]
    assert gw.calls[0] == ("gfs-a", ["gluster", "--mode=script", "volume", "list"])
    assert cli.notes[-1].attempts == 3 and cli.notes[-1].error is None


def test_transaction_outlasting_the_attempts_fails_retryable() -> None:
    cli, _, _ = _cli({"gfs-a": [("", BUSY, 1)] * 2, "gfs-b": []}, attempts=2)
    with pytest.raises(ApplicationError) as exc:
        cli.run(["volume", "status", "all", "--xml"])
    assert exc.value.type == "GlusterBusy" and not exc.value.non_retryable


def test_connection_failed_and_exec_errors_move_to_the_next_pod() -> None:
    cli, gw, _ = _cli({"gfs-a": [(DOWN, "", 1)], "gfs-b": [("ok\n", "", 0), ("again\n", "", 0)]})
    assert cli.run(["peer", "status"]).pod == "gfs-b"
    # the next call starts in the pod that answered
    assert cli.run(["peer", "status"]).stdout == "again\n" and [c[0] for c in gw.calls] == ["gfs-a", "gfs-b", "gfs-b"]
    cli2, _, _ = _cli({"gfs-a": [BadRequest("container not found (\"glusterfs\")")], "gfs-b": [("x\n", "", 0)]})
    assert cli2.run(["volume", "list"]).pod == "gfs-b" and "container not found" in cli2.notes[0].error


def test_no_pod_answers() -> None:
    cli, _, _ = _cli({"gfs-a": [(DOWN, "", 1)], "gfs-b": [(DOWN, "", 1)]})
    with pytest.raises(ApplicationError) as exc:
        cli.run(["volume", "list"])
    assert exc.value.type == "GlusterUnavailable" and "gfs-a" in exc.value.message and "gfs-b" in exc.value.message


def test_ok_names_the_cli_error() -> None:
    xml_fail = ('<?xml version="1.0"?>\n<cliOutput><opRet>-1</opRet><opErrno>0</opErrno>'
                '<opErrstr>Volume vol9 does not exist</opErrstr></cliOutput>\n')
    cli, _, _ = _cli({"gfs-a": [(xml_fail, "", 1)], "gfs-b": []})
    with pytest.raises(ApplicationError) as exc:
        cli.ok(["volume", "info", "vol9", "--xml"])
    assert exc.value.type == "GlusterCommandFailed" and "Volume vol9 does not exist" in exc.value.message


def test_peer_failures_are_retryable() -> None:
    cli, _, _ = _cli({"gfs-a": [("", "Locking failed on 10.0.0.12. Please check log file for details.\n", 1)], "gfs-b": []})
    with pytest.raises(ApplicationError) as exc:
        cli.ok(["volume", "status", "all", "--xml"])
    assert exc.value.type == "GlusterPeerError" and not exc.value.non_retryable


def test_a_slow_command_beats_while_it_runs() -> None:
    """An exec that takes 5.5 s (heal info on a big volume) beats from a helper thread every
    HEARTBEAT_INTERVAL_SECONDS, not only once per attempt: a heartbeat timeout shorter than the
    command still sees a live worker."""
    import time

    from temporalio.testing import ActivityEnvironment

    from activities.context import HEARTBEAT_INTERVAL_SECONDS

    class SlowExec(ScriptedExec):
        def exec_in_pod(self, namespace: str, name: str, argv: list[str], *, timeout: float, **kw: object) -> ExecOutput:
            time.sleep(2.75 * HEARTBEAT_INTERVAL_SECONDS)
            return super().exec_in_pod(namespace, name, argv, timeout=timeout, **kw)

    beats: list[object] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *d: beats.append(d[0] if d else None)
    cli = GlusterCli(SlowExec({"gfs-a": [("Brick gfs-a:/b\nNumber of entries: 0\n", "", 0)]}), "glusterfs", PODS)  # type: ignore[arg-type]
    ans = env.run(cli.run, ["volume", "heal", "vol_x", "info"])
    assert ans.exit_code == 0
    running = [b for b in beats if isinstance(b, dict) and b.get("running")]
    assert len(running) >= 2 and running[0] == {"pod": "gfs-a", "argv": ["volume", "heal", "vol_x", "info"], "running": True}, beats


def test_a_long_back_off_beats_while_it_waits() -> None:
    """A back-off longer than the heartbeat interval (``backoff_seconds`` is the caller's) beats
    while it waits for the next attempt: a 30 s heartbeat timeout must not end a 60 s back-off."""
    from temporalio.testing import ActivityEnvironment

    from activities.context import HEARTBEAT_INTERVAL_SECONDS

    beats: list[object] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *d: beats.append(d[0] if d else None)
    script = {"gfs-a": [("", BUSY, 1), ("vol_x\n", "", 0)], "gfs-b": []}
    cli = GlusterCli(ScriptedExec(script), "glusterfs", PODS, backoff=2.75 * HEARTBEAT_INTERVAL_SECONDS)  # type: ignore[arg-type]
    ans = env.run(cli.run, ["volume", "list"])
    assert ans.stdout == "vol_x\n"
    waiting = [b for b in beats if isinstance(b, dict) and "retry_in" in b]
    assert len(waiting) >= 2 and waiting[0]["retry_in"] == 2.75 * HEARTBEAT_INTERVAL_SECONDS, beats
