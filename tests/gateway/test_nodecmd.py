"""Node command backends: local subprocess, SSH against asyncssh's own server on loopback (host
and client keys generated here), and the debug-pod request building (clustersim has no exec
endpoint, so the pod manifest and exec argv are checked as data)."""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest
import pytest_asyncio

from activities.etcd.members import override_flags, static_pod_with_overrides, systemd_dropin
from activities.host.models import ExecBackend, HostAccess
from activities.host.debug_pod import DebugPodExecutor, debug_exec_argv, debug_pod_manifest, debug_pod_name
from activities.host.executors import LocalExecutor, NodeCommandError, SSHExecutor, remote_bound_seconds
from activities.host.factory import ExecutorFactory, ssh_sudo
from lockkeeper.devserver import free_port

TRICKY = ["printf", "%s|", "two words", "$(touch /tmp/lockkeeper-pwned)", "a;b", "'q'"]


async def test_local_runs_argv_without_shell_and_caps_output() -> None:
    ex = LocalExecutor()
    res = await ex.run(TRICKY, timeout=10)
    assert res.ok and res.stdout == "two words|$(touch /tmp/lockkeeper-pwned)|a;b|'q'|"
    big = await ex.run([sys.executable, "-c", "print('x' * 5000)"], timeout=10, max_output=1000)
    assert big.ok and len(big.stdout) == 1000 and big.stdout_truncated
    err = await ex.run([sys.executable, "-c", "import sys; sys.stderr.write('bad'); sys.exit(3)"], timeout=10)
    assert err.exit_code == 3 and err.stderr == "bad" and not err.ok
    fed = await ex.run(["cat"], timeout=10, stdin="manifest: yes\n")
    assert fed.stdout == "manifest: yes\n"
    missing = await ex.run(["/no/such/binary"], timeout=5)
    assert missing.exit_code == 127


async def test_local_timeout_kills_the_command(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    res = await LocalExecutor().run(["sh", "-c", f'echo $$ > {shlex.quote(str(pidfile))}; exec sleep 30'], timeout=0.5)
    assert res.timed_out and res.exit_code is None
    with pytest.raises(ProcessLookupError):  # killed and reaped at the timeout, not left to run its 30 s
        os.kill(int(pidfile.read_text()), 0)


async def test_a_cancelled_command_is_killed_and_reaped_before_the_cancel_goes_on(tmp_path: Path) -> None:
    """A cancelled activity's command (a worker shutting down, a heartbeat timeout) is killed with
    its process group and waited for: no process, not even a zombie, outlives the cancel, so no
    event loop that closes later is left to reap it."""
    import os

    pid_file = tmp_path / "pid"
    task = asyncio.ensure_future(LocalExecutor().run(["sh", "-c", f"echo $$ > {pid_file}; exec sleep 30"], timeout=60))
    for _ in range(500):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.01)
    pid = int(pid_file.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone and reaped: a zombie would still answer


# --- ssh -------------------------------------------------------------------------------------------


class _Server(asyncssh.SSHServer):
    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return False


async def _handle(process: asyncssh.SSHServerProcess) -> None:
    """Run the command as the login shell would: split by shell rules, no interpolation needed
    here because the client quoted every argument."""
    argv = shlex.split(process.command or "")
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        data = await asyncio.wait_for(process.stdin.read(), 2)
    except TimeoutError:
        data = ""
    out, err = await proc.communicate(data.encode() if isinstance(data, str) else data)
    process.stdout.write(out.decode())
    process.stderr.write(err.decode())
    process.exit(proc.returncode or 0)


@pytest_asyncio.fixture(loop_scope="session")
async def ssh_server(tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    (tmp_path / "id_ed25519").write_bytes(client_key.export_private_key())
    (tmp_path / "authorized_keys").write_bytes(client_key.export_public_key())
    port = free_port()
    (tmp_path / "known_hosts").write_text(
        f"[127.0.0.1]:{port} {host_key.export_public_key().decode().strip()}\n"
    )
    other = asyncssh.generate_private_key("ssh-ed25519")
    (tmp_path / "wrong_known_hosts").write_text(f"[127.0.0.1]:{port} {other.export_public_key().decode().strip()}\n")
    server = await asyncssh.create_server(
        _Server, "127.0.0.1", port, server_host_keys=[host_key],
        authorized_client_keys=str(tmp_path / "authorized_keys"), process_factory=_handle,
    )
    try:
        yield {"port": port, "dir": tmp_path}
    finally:
        server.close()
        await server.wait_closed()


async def test_ssh_runs_quoted_argv_with_verified_host_key(ssh_server: dict[str, Any]) -> None:
    d = ssh_server["dir"]
    factory = ExecutorFactory(
        {"LOCKKEEPER_SSH_KEY": str(d / "id_ed25519"), "LOCKKEEPER_SSH_KNOWN_HOSTS": str(d / "known_hosts"),
         "LOCKKEEPER_SSH_USER": "core", "LOCKKEEPER_SSH_SUDO": "false"}  # this server runs commands as us
    )
    ex = factory.for_access(HostAccess(backend=ExecBackend.SSH, host="127.0.0.1", port=ssh_server["port"]))
    assert isinstance(ex, SSHExecutor) and ex.user == "core"
    res = await ex.run(TRICKY, timeout=10)
    assert res.ok, res
    assert res.stdout == "two words|$(touch /tmp/lockkeeper-pwned)|a;b|'q'|"
    assert not Path("/tmp/lockkeeper-pwned").exists()
    fail = await ex.run(["sh", "-c", "echo oops >&2; exit 4"], timeout=10)
    assert fail.exit_code == 4 and fail.stderr == "oops\n"
    envd = await ex.run(["sh", "-c", 'echo "$ETCD_NAME"'], timeout=10, env={"ETCD_NAME": "m2"}, stdin="")
    assert envd.stdout == "m2\n"
    slow = await ex.run(["sleep", "5"], timeout=0.5)
    assert slow.timed_out and slow.exit_code is None


async def test_ssh_refuses_unknown_host_key_and_missing_known_hosts(ssh_server: dict[str, Any]) -> None:
    d = ssh_server["dir"]
    wrong = SSHExecutor("127.0.0.1", port=ssh_server["port"], user="core", known_hosts=d / "wrong_known_hosts",
                        client_keys=[str(d / "id_ed25519")])
    with pytest.raises(NodeCommandError, match="127.0.0.1"):
        await wrong.run(["true"], timeout=5)
    missing = SSHExecutor("127.0.0.1", port=ssh_server["port"], user="core", known_hosts=d / "nope",
                          client_keys=[str(d / "id_ed25519")])
    with pytest.raises(NodeCommandError, match="host keys must be verified"):
        await missing.run(["true"], timeout=5)


async def test_an_ssh_command_given_up_is_killed_by_its_hosts_own_timeout(ssh_server: dict[str, Any],
                                                                         tmp_path: Path) -> None:
    """This server, like RHEL 7's sshd (OpenSSH 7.4), ignores the client's kill request and keeps a
    command whose client left. The real coreutils ``timeout -s KILL`` the executor runs the command
    under ends it on the host at its timeout plus the grace, with every process it started."""
    d = ssh_server["dir"]
    ex = SSHExecutor("127.0.0.1", port=ssh_server["port"], user="core", known_hosts=d / "known_hosts",
                     client_keys=[str(d / "id_ed25519")], remote_grace=0.5)
    assert ex.remote_command(["sh", "-c", "a b"], {"K": "v w"}, timeout=60) == "timeout -s KILL 60.5 env 'K=v w' sh -c 'a b'"
    assert remote_bound_seconds(0.25, 0.5) == 0.8 and remote_bound_seconds(60) == 65.0
    for timeout, grace in ((0, 5.0), (1, -1.0)):
        with pytest.raises(ValueError, match="remote bound"):
            remote_bound_seconds(timeout, grace)
    marker = tmp_path / "landed"
    r = await ex.run(["sh", "-c", f"sleep 2 && touch {marker}"], timeout=0.3)
    assert r.timed_out and r.exit_code is None
    await asyncio.sleep(2.5)  # past the command's own end
    assert not marker.exists()


def test_ssh_commands_go_through_sudo_for_any_user_but_root() -> None:
    """RHCOS's ``core`` needs root for every host command (systemctl, crictl, /etc): sudo -n is
    on for any user but root unless LOCKKEEPER_SSH_SUDO says otherwise; a bad value fails the
    factory (the worker's start), not a command."""
    env = {"LOCKKEEPER_SSH_KNOWN_HOSTS": "/dev/null"}
    ssh = HostAccess(backend=ExecBackend.SSH, host="10.0.0.1")

    def built(extra: dict[str, str], user: str | None = None) -> SSHExecutor:
        ex = ExecutorFactory({**env, **extra}).for_access(ssh.model_copy(update={"user": user}))
        assert isinstance(ex, SSHExecutor)
        return ex

    assert built({}).sudo and built({}).user == "core"
    assert not built({}, user="root").sudo
    assert not built({"LOCKKEEPER_SSH_SUDO": "false"}).sudo
    assert built({"LOCKKEEPER_SSH_SUDO": "yes"}, user="root").sudo
    assert built({"LOCKKEEPER_SSH_SUDO": " "}).sudo  # empty: unset
    assert built({}).remote_command(["systemctl", "reboot"], timeout=30) == "sudo -n timeout -s KILL 35 systemctl reboot"
    assert built({}, user="root").remote_command(["true"], timeout=1) == "timeout -s KILL 6 true"
    with pytest.raises(ValueError, match="LOCKKEEPER_SSH_SUDO='maybe': expected true or false"):
        ExecutorFactory({**env, "LOCKKEEPER_SSH_SUDO": "maybe"})
    assert [ssh_sudo(v, "core") for v in ("1", "on", "0", "OFF", None)] == [True, True, False, False, True]


# --- debug pod -------------------------------------------------------------------------------------


def test_debug_pod_manifest_is_what_oc_debug_node_creates() -> None:
    name = debug_pod_name("master-0.example.com", token="abc123")
    assert name == "master-0-example-com-lockkeeper-debug-abc123" and len(name) <= 63
    assert len(debug_pod_name("n" * 80, token="abc123")) <= 63
    pod = debug_pod_manifest("master-0", namespace="openshift-etcd", image="img:1", name=name, lifetime_seconds=120)
    spec = pod["spec"]
    assert spec["nodeName"] == "master-0" and spec["hostPID"] and spec["hostNetwork"] and spec["hostIPC"]
    assert spec["tolerations"] == [{"operator": "Exists"}] and spec["restartPolicy"] == "Never"
    assert spec["activeDeadlineSeconds"] >= 120
    (c,) = spec["containers"]
    assert c["securityContext"] == {"privileged": True, "runAsUser": 0}
    assert c["volumeMounts"] == [{"name": "host", "mountPath": "/host"}]
    assert spec["volumes"] == [{"name": "host", "hostPath": {"path": "/", "type": "Directory"}}]
    assert pod["metadata"]["namespace"] == "openshift-etcd"


def test_debug_exec_argv_chroots_without_a_shell() -> None:
    assert debug_exec_argv(["etcdctl", "member", "list"]) == ["chroot", "/host", "etcdctl", "member", "list"]
    assert debug_exec_argv(["a b", "$(x)"], {"K": "v w"}) == ["chroot", "/host", "env", "K=v w", "a b", "$(x)"]
    factory = ExecutorFactory({}, gateway_factory=lambda: pytest.fail("no API call while choosing a backend"))
    ex = factory.for_access(HostAccess(backend=ExecBackend.DEBUG_POD, node="worker-1", namespace="ns"))
    assert isinstance(ex, DebugPodExecutor) and ex.node == "worker-1" and ex.namespace == "ns"
    with pytest.raises(ValueError, match="needs `node`"):
        HostAccess(backend=ExecBackend.DEBUG_POD)


# --- how one-off etcd starts are expressed -----------------------------------------------------------


def test_override_flags_replaces_every_spelling() -> None:
    argv = ["etcd", "--name=m1", "--initial-cluster", "a=1", "--force-new-cluster", "--initial-cluster-state=new", "-data-dir", "/d"]
    out = override_flags(argv, {"initial-cluster": "m1=u", "initial-cluster-state": "existing", "force-new-cluster": "true"})
    assert out == ["etcd", "--name=m1", "-data-dir", "/d", "--initial-cluster=m1=u", "--initial-cluster-state=existing",
                   "--force-new-cluster=true"]
    assert override_flags(["etcd", "--force-new-cluster=true", "--x=1"], {}) == ["etcd", "--force-new-cluster=true", "--x=1"]


def test_systemd_dropin_and_static_pod_overrides() -> None:
    text = systemd_dropin({"force-new-cluster": "true"})
    assert "[Service]" in text and 'Environment="ETCD_FORCE_NEW_CLUSTER=true"' in text
    manifest = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: etcd}\nspec:\n  containers:\n"
        "  - name: etcd\n    env: [{name: ETCD_INITIAL_CLUSTER_STATE, value: new}, {name: KEEP, value: x}]\n"
        "  - name: metrics\n"
    )
    import yaml

    doc = yaml.safe_load(static_pod_with_overrides(manifest, "etcd", {"initial-cluster-state": "existing"}))
    env = {e["name"]: e["value"] for e in doc["spec"]["containers"][0]["env"]}
    assert env == {"KEEP": "x", "ETCD_INITIAL_CLUSTER_STATE": "existing"}
    assert doc["metadata"]["annotations"]["lockkeeper.io/restore-overrides"] == "initial-cluster-state"
    with pytest.raises(ValueError, match="no container"):
        static_pod_with_overrides(manifest, "nope", {"force-new-cluster": "true"})
