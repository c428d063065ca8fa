"""etcd member plumbing: output parsers, start overrides and local process control.

Pure parsers of ``etcdctl`` output (``member list``/``endpoint health``/``endpoint status`` in
JSON, ``member add``'s printed ``ETCD_INITIAL_CLUSTER``: etcd
``etcdctl/ctlv3/command/member_command.go``), the one-off start overrides as flags, ``ETCD_*``
variables, a systemd drop-in or a static-pod manifest copy, and the local ``process`` control
(start detached with a pid file, stop by process group). Tested without etcd where pure.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from activities.context import fail
from activities.etcd.models import ClusterStatus, EtcdMember, MemberActionResult, MemberInfo, ProcessControl, StartOverrides
from activities.host.executors import find_etcd_binary

#: Marker annotation on a static-pod manifest lockkeeper wrote with one-off overrides.
OVERRIDE_MARKER = "lockkeeper.io/restore-overrides"
#: systemd drop-in lockkeeper writes for a start with overrides.
SYSTEMD_DROPIN = "90-lockkeeper-restore.conf"
#: etcd flags that take no value (``--flag`` alone means true).
_BOOL_FLAGS = frozenset({"force-new-cluster"})


# --- pure helpers (tested without etcd) -------------------------------------------------------------


def override_flags(argv: list[str], flags: Mapping[str, str]) -> list[str]:
    """``argv`` with every ``--NAME``/``--NAME=V``/``--NAME V`` of ``flags`` removed and
    ``--NAME=VALUE`` appended, so a one-off start (``--force-new-cluster``, a new initial
    cluster) never runs with two conflicting values."""
    out: list[str] = []
    skip_next = False
    for i, arg in enumerate(argv):
        if skip_next:
            skip_next = False
            continue
        name = arg[2:].split("=", 1)[0] if arg.startswith("--") else (arg[1:].split("=", 1)[0] if arg.startswith("-") else None)
        if i > 0 and name in flags:
            if "=" not in arg and name not in _BOOL_FLAGS and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                skip_next = True
            continue
        out.append(arg)
    out += [f"--{k}={v}" for k, v in flags.items()]
    return out


def etcd_env(flags: Mapping[str, str]) -> dict[str, str]:
    """Flags as etcd's environment variables (``initial-cluster`` → ``ETCD_INITIAL_CLUSTER``)."""
    return {"ETCD_" + k.upper().replace("-", "_"): v for k, v in flags.items()}


def systemd_dropin(flags: Mapping[str, str]) -> str:
    """A systemd drop-in setting ``flags`` as ``ETCD_*`` variables for one start."""
    lines = ["# written by lockkeeper for one restore start; removed by the next plain start", "[Service]"]
    lines += [f'Environment="{k}={v}"' for k, v in etcd_env(flags).items()]
    return "\n".join(lines) + "\n"


def static_pod_with_overrides(manifest_text: str, container: str, flags: Mapping[str, str]) -> str:
    """The static-pod manifest with ``flags`` as ``ETCD_*`` env entries of ``container`` (any
    existing entry of the same name replaced) and the :data:`OVERRIDE_MARKER` annotation.
    Raises ValueError when the manifest has no such container."""
    doc = yaml.safe_load(manifest_text)
    containers = (doc.get("spec") or {}).get("containers") or []
    target = next((c for c in containers if c.get("name") == container), None)
    if target is None:
        raise ValueError(f"static-pod manifest has no container {container!r}")
    env_vars = etcd_env(flags)
    env = [e for e in target.get("env") or [] if e.get("name") not in env_vars]
    env += [{"name": k, "value": v} for k, v in env_vars.items()]
    target["env"] = env
    meta = doc.setdefault("metadata", {})
    meta.setdefault("annotations", {})[OVERRIDE_MARKER] = ",".join(sorted(flags))
    return yaml.safe_dump(doc, sort_keys=False)


def _member(m: dict[str, Any], id_key: str) -> MemberInfo:
    """One member object of etcd's JSON (etcdctl ``member list -w json`` or the peer endpoint's
    ``/members``) as :class:`MemberInfo`; its decimal uint64 ID under ``id_key`` turned to hex."""
    return MemberInfo(
        id=format(int(m[id_key]), "x"),
        name=m.get("name", ""),
        peer_urls=[u.rstrip("/") for u in m.get("peerURLs") or []],
        client_urls=[u.rstrip("/") for u in m.get("clientURLs") or []],
        is_learner=bool(m.get("isLearner", False)),
    )


def parse_member_list(stdout: str) -> list[MemberInfo]:
    """``etcdctl member list -w json`` → members (IDs printed by etcdctl as decimal uint64,
    returned in hex as the simple format and ``member update`` use)."""
    return [_member(m, "ID") for m in json.loads(stdout).get("members") or []]


def parse_peer_members(text: str) -> list[MemberInfo]:
    """The peer endpoint ``/members`` JSON (a list; ``id`` decimal; no ``name`` while unstarted)."""
    return [_member(m, "id") for m in json.loads(text)]


def parse_member_add(stdout: str) -> tuple[str, str]:
    """``member add`` simple output → (hex member ID, ETCD_INITIAL_CLUSTER value).
    Raises ValueError when the output has neither."""
    m_id = re.search(r"Member\s+([0-9a-f]+)\s+added", stdout)
    m_ic = re.search(r'ETCD_INITIAL_CLUSTER="([^"]*)"', stdout)
    if not m_id or not m_ic:
        raise ValueError(f"unexpected member add output: {stdout[:300]!r}")
    return m_id.group(1), m_ic.group(1)


def initial_cluster_for(members: list[MemberInfo], new_id: str, new_name: str) -> str:
    """``ETCD_INITIAL_CLUSTER`` as etcdctl computes it after ``member add``: every member's
    ``name=peerURL``, the new member under ``new_name``."""
    parts = []
    for m in members:
        for url in m.peer_urls:
            parts.append(f"{new_name if m.id == new_id else m.name}={url}")
    return ",".join(parts)


def parse_endpoint_health(stdout: str) -> dict[str, tuple[bool, str | None]]:
    """``endpoint health -w json`` → endpoint → (healthy, error)."""
    out: dict[str, tuple[bool, str | None]] = {}
    if not stdout.strip():
        return out
    for item in json.loads(stdout):
        out[item["endpoint"].rstrip("/")] = (bool(item.get("health")), item.get("error") or None)
    return out


def parse_endpoint_status(stdout: str) -> dict[str, dict[str, Any]]:
    """``endpoint status -w json`` → endpoint → its Status object (``raftIndex``, ``leader``...)."""
    out: dict[str, dict[str, Any]] = {}
    if not stdout.strip():
        return out
    for item in json.loads(stdout):
        out[item["Endpoint"].rstrip("/")] = item.get("Status") or {}
    return out


def membership_problems(status: ClusterStatus, members: list[EtcdMember]) -> list[str]:
    """Differences between ``member list`` and the input: missing, unexpected, not started,
    wrong peer URL (empty list = exactly as the input says)."""
    if status.members is None:
        return [f"member list unavailable: {status.members_error}"]
    problems = []
    want = {m.name: m for m in members}
    for got in status.members:
        if not got.started:
            problems.append(f"member {got.id} ({', '.join(got.peer_urls)}) added but not started")
        elif got.name not in want:
            problems.append(f"unexpected member {got.name} ({got.id})")
        elif got.peer_urls != [want[got.name].peer_url]:
            problems.append(f"member {got.name} advertises {got.peer_urls}, expected {want[got.name].peer_url}")
    names = {m.name for m in status.members}
    problems += [f"member {n} missing from member list" for n in want if n not in names]
    return problems


# --- local process control ------------------------------------------------------------------------------


def _pid_file(member: EtcdMember, control: ProcessControl) -> Path:
    return Path(control.state_dir) / f"{member.name}.pid"


#: etcd processes this worker started, by pid: kept so they are reaped (no zombies, no
#: "still running" warnings); members started by an earlier worker are found by pid file.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def _pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (reaping it first when it is our exited child, and treating a
    zombie as gone)."""
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is None:
            return True
        del _CHILDREN[pid]
        return False
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def running_process(member: EtcdMember, control: ProcessControl) -> tuple[int, dict[str, Any]] | None:
    """(pid, pid-file record) of the member's process when it runs, else None. The pid must
    still be an etcd for this data dir (``/proc/PID/cmdline``), so a reused pid is not ours."""
    path = _pid_file(member, control)
    try:
        record = json.loads(path.read_text())
        pid = int(record["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not _pid_alive(pid):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return (pid, record)
    if not any(member.data_dir.encode() in part for part in cmdline):
        return None
    return (pid, record)


def start_process(member: EtcdMember, control: ProcessControl, overrides: StartOverrides) -> MemberActionResult:
    """Start the member's etcd detached (own session, stdin closed, output appended to
    ``<state_dir>/<name>.log``) and write its pid file; no-op when it runs with the same
    overrides; non-retryable MemberRunning when it runs with other ones."""
    flags = overrides.flags()
    current = running_process(member, control)
    if current is not None:
        pid, record = current
        if record.get("overrides", {}) == flags:
            return MemberActionResult(member=member.name, changed=False, detail=f"already running (pid {pid})")
        raise fail(
            "MemberRunning",
            f"member {member.name} runs (pid {pid}) with overrides {record.get('overrides')}, asked for {flags}; stop it first",
        )
    argv = list(control.argv)
    if "/" not in argv[0]:
        argv[0] = find_etcd_binary(argv[0])
    argv = override_flags(argv, flags)
    state = Path(control.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    with open(state / f"{member.name}.log", "ab") as log:
        log.write(f"--- lockkeeper start {time.strftime('%Y-%m-%dT%H:%M:%S')} {flags}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True
        )
    _CHILDREN[proc.pid] = proc
    tmp = _pid_file(member, control).with_suffix(".pid.tmp")
    tmp.write_text(json.dumps({"pid": proc.pid, "argv": argv, "overrides": flags}))
    tmp.replace(_pid_file(member, control))
    return MemberActionResult(member=member.name, changed=True, detail=f"started pid {proc.pid}")


def stop_process(member: EtcdMember, control: ProcessControl, timeout: float = 15.0) -> MemberActionResult:
    """SIGTERM the member's process group, SIGKILL after ``timeout`` seconds; no-op when it does
    not run. The pid file stays (it records the last start)."""
    current = running_process(member, control)
    if current is None:
        return MemberActionResult(member=member.name, changed=False, detail="not running")
    pid, _ = current
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if not _pid_alive(pid):
                return MemberActionResult(member=member.name, changed=True, detail=f"stopped pid {pid} ({sig.name})")
            time.sleep(0.05)
    raise fail("EtcdCommandFailed", f"member {member.name}: pid {pid} survived SIGKILL", retryable=True)
