"""etcd activities: snapshots, member stop/start, ``member add``/``update``, health and verification.

Async activities (commands run through :mod:`activities.nodecmd`, which heartbeats while they
run), registered under the names in :data:`ACTIVITY_NAMES`. Each one checks before it acts, so
a retried attempt (a worker killed mid-call) never double-applies: ``member add`` first looks
for the peer URL in ``member list``, a stop of a stopped member and a start of a running one
are no-ops, a data dir already moved aside is not moved again, data is never deleted.

etcdctl runs on a member's host against client URLs (``--endpoints``), with that host's TLS
files when given. Local binaries are found by :func:`activities.nodecmd.find_etcd_binary`
(etcd 3.5: ``etcdutl`` for offline snapshot status/restore).

Errors: ``ApplicationError`` types ``InvalidRestoreInput``, ``DataDirMoveRefused``,
``MemberRunning``, ``StashConflict`` are non-retryable (a person must look); ``EtcdCommandFailed``,
``NotHealthyYet``, ``UnhealthyCluster``, ``NodeUnreachable`` are retryable.

Sources: etcd ``etcdctl/ctlv3/command/member_command.go`` (the printed ``ETCD_INITIAL_CLUSTER``),
the etcd v3.5 disaster-recovery guide, and field report R3 (OKD 3.9 → 3.10 quorum restore).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.etcd_models import (
    ClusterStatus,
    ClusterStatusInput,
    CommandResult,
    EndpointState,
    EtcdctlTimeouts,
    EtcdMember,
    ExecBackend,
    MemberActionResult,
    MemberAddInput,
    MemberAddResult,
    MemberInfo,
    MemberInput,
    MemberUpdateInput,
    MoveAsideInput,
    MoveAsideResult,
    PreflightRestoreInput,
    PreflightRestoreResult,
    ProcessControl,
    RunCommandInput,
    SnapshotInfo,
    SnapshotRestoreInput,
    SnapshotSaveInput,
    StartMemberInput,
    StartOverrides,
    StaticPodControl,
    SystemdControl,
    VerifyInput,
    VerifyResult,
    WaitHealthyInput,
)
from activities.nodecmd import ExecutorFactory, NodeCommandError, NodeExecutor, find_etcd_binary, heartbeating

#: Marker annotation on a static-pod manifest lockkeeper wrote with one-off overrides.
OVERRIDE_MARKER = "lockkeeper.io/restore-overrides"
#: systemd drop-in lockkeeper writes for a start with overrides.
SYSTEMD_DROPIN = "90-lockkeeper-restore.conf"
#: etcd flags that take no value (``--flag`` alone means true).
_BOOL_FLAGS = frozenset({"force-new-cluster"})


def _fail(type_: str, message: str, *, retryable: bool = False) -> ApplicationError:
    return ApplicationError(message, type=type_, non_retryable=not retryable)


def _log() -> Any:
    return activity.logger if activity.in_activity() else None


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


def parse_member_list(stdout: str) -> list[MemberInfo]:
    """``etcdctl member list -w json`` → members (IDs printed by etcdctl as decimal uint64,
    returned in hex as the simple format and ``member update`` use)."""
    doc = json.loads(stdout)
    return [
        MemberInfo(
            id=format(int(m["ID"]), "x"),
            name=m.get("name", ""),
            peer_urls=[u.rstrip("/") for u in m.get("peerURLs") or []],
            client_urls=[u.rstrip("/") for u in m.get("clientURLs") or []],
            is_learner=bool(m.get("isLearner", False)),
        )
        for m in doc.get("members") or []
    ]


def parse_peer_members(text: str) -> list[MemberInfo]:
    """The peer endpoint ``/members`` JSON (a list; ``id`` decimal; no ``name`` while unstarted)."""
    return [
        MemberInfo(
            id=format(int(m["id"]), "x"),
            name=m.get("name", ""),
            peer_urls=[u.rstrip("/") for u in m.get("peerURLs") or []],
            client_urls=[u.rstrip("/") for u in m.get("clientURLs") or []],
            is_learner=bool(m.get("isLearner", False)),
        )
        for m in json.loads(text)
    ]


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
        raise _fail(
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
    raise _fail("EtcdCommandFailed", f"member {member.name}: pid {pid} survived SIGKILL", retryable=True)


# --- the activities ----------------------------------------------------------------------------------------


class EtcdActivities:
    """Node-command and etcd activities. ``executors`` picks the backend for each host (its
    credentials come from the worker's environment, never from input); no kubeconfig is
    needed unless a member uses the debug-pod backend."""

    def __init__(self, executors: ExecutorFactory | None = None) -> None:
        self.executors = executors or ExecutorFactory()

    def activities(self) -> list[Callable[..., Any]]:
        """Every activity of this class, bound, for a Worker's ``activities=``."""
        return [
            self.run_node_command,
            self.etcd_cluster_status,
            self.etcd_preflight_restore,
            self.etcd_stop_member,
            self.etcd_start_member,
            self.etcd_wait_member_healthy,
            self.etcd_member_update,
            self.etcd_member_add,
            self.etcd_move_data_aside,
            self.etcd_snapshot_save,
            self.etcd_snapshot_restore,
            self.etcd_verify_cluster,
        ]

    # --- plumbing -------------------------------------------------------------------------------------

    def _executor(self, member: EtcdMember) -> NodeExecutor:
        return self.executors.for_access(member.host)

    async def _run(
        self, member: EtcdMember, argv: list[str], *, timeout: float = 30.0, stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        try:
            return await self._executor(member).run(argv, timeout=timeout, stdin=stdin, env=env)
        except NodeCommandError as exc:
            raise _fail("NodeUnreachable", f"member {member.name} ({member.host.describe()}): {exc}", retryable=True) from None

    async def _must(self, member: EtcdMember, argv: list[str], *, what: str, **kw: Any) -> CommandResult:
        res = await self._run(member, argv, **kw)
        if not res.ok:
            raise _fail("EtcdCommandFailed", f"{what} on {member.name}: {res.summary()}", retryable=True)
        return res

    def _tool(self, member: EtcdMember, name: str) -> str:
        given = member.etcdctl if name == "etcdctl" else member.etcdutl
        if given:
            return given
        if member.host.backend == ExecBackend.LOCAL:
            try:
                return find_etcd_binary(name)
            except NodeCommandError as exc:
                raise _fail("InvalidRestoreInput", str(exc)) from None
        return name

    def etcdctl_argv(self, via: EtcdMember, endpoints: list[str], args: list[str], timeouts: EtcdctlTimeouts) -> list[str]:
        """etcdctl on ``via``'s host: endpoints, timeouts, TLS files of that host, then ``args``."""
        argv = [
            self._tool(via, "etcdctl"),
            f"--endpoints={','.join(endpoints)}",
            f"--dial-timeout={timeouts.dial_seconds:g}s",
            f"--command-timeout={timeouts.command_seconds:g}s",
        ]
        if via.tls is not None:
            argv += [f"--{k}={v}" for k, v in (("cacert", via.tls.cacert), ("cert", via.tls.cert), ("key", via.tls.key)) if v]
        return argv + args

    async def _etcdctl(
        self, via: EtcdMember, endpoints: list[str], args: list[str], timeouts: EtcdctlTimeouts
    ) -> CommandResult:
        budget = timeouts.dial_seconds + timeouts.command_seconds + 5.0
        return await self._run(via, self.etcdctl_argv(via, endpoints, args, timeouts), timeout=budget)

    async def cluster_status(
        self, via: EtcdMember, endpoints: list[str], timeouts: EtcdctlTimeouts
    ) -> ClusterStatus:
        """member list (from any endpoint) + health and status of every endpoint, concurrently."""
        listing, health, status = await asyncio.gather(
            self._etcdctl(via, endpoints, ["member", "list", "-w", "json"], timeouts),
            self._etcdctl(via, endpoints, ["endpoint", "health", "-w", "json"], timeouts),
            self._etcdctl(via, endpoints, ["endpoint", "status", "-w", "json"], timeouts),
        )
        result = ClusterStatus()
        if listing.ok:
            try:
                result.members = parse_member_list(listing.stdout)
                result.members_source = "member list"
            except (ValueError, KeyError) as exc:
                result.members_error = f"unreadable member list: {exc}"
        else:
            result.members_error = listing.summary()
            # member list is linearizable in etcd 3.5: without quorum (e.g. right after a
            # member add, until the new member connects) it times out. The peer endpoint
            # /members answers from the member's own copy of the membership, so "is it already
            # added?" can still be told, and a member is never added twice.
            peer = await self._peer_members(via)
            if peer is not None:
                result.members = peer
                result.members_source = "peer /members (no quorum)"
        try:
            healths = parse_endpoint_health(health.stdout)
        except (ValueError, KeyError):
            healths = {}
        try:
            statuses = parse_endpoint_status(status.stdout)
        except (ValueError, KeyError):
            statuses = {}
        for ep in endpoints:
            ok, err = healths.get(ep, (False, health.summary() if not health.ok else "no answer"))
            st = statuses.get(ep) or {}
            header = st.get("header") or {}
            result.endpoints.append(
                EndpointState(
                    endpoint=ep,
                    healthy=ok,
                    member_id=format(int(header["member_id"]), "x") if "member_id" in header else None,
                    leader=format(int(st["leader"]), "x") if "leader" in st else None,
                    raft_index=st.get("raftIndex"),
                    raft_applied_index=st.get("raftAppliedIndex"),
                    raft_term=st.get("raftTerm"),
                    revision=header.get("revision"),
                    error=None if ok else err,
                )
            )
        return result

    async def _peer_members(self, via: EtcdMember) -> list[MemberInfo] | None:
        """``GET <peer_url>/members`` of ``via`` (etcd's peer handler), or None."""
        url = f"{via.peer_url}/members"
        if via.host.backend == ExecBackend.LOCAL and url.startswith("http://"):
            import urllib.request

            def fetch() -> str | None:
                try:
                    with urllib.request.urlopen(url, timeout=3) as resp:  # noqa: S310 - http(s) URL from validated input
                        return resp.read().decode()
                except OSError:
                    return None

            text = await asyncio.to_thread(fetch)
        else:
            argv = ["curl", "-sS", "--fail", "--max-time", "3"]
            if via.tls is not None:
                argv += [f"--{k}={v}" for k, v in (("cacert", via.tls.cacert), ("cert", via.tls.cert), ("key", via.tls.key)) if v]
            res = await self._run(via, [*argv, url], timeout=10)
            text = res.stdout if res.ok else None
        if text is None:
            return None
        try:
            return parse_peer_members(text)
        except (ValueError, KeyError, TypeError):
            return None

    # --- generic command --------------------------------------------------------------------------------

    @activity.defn(name="run_node_command")
    async def run_node_command(self, input: RunCommandInput) -> CommandResult:
        """Run one argv on one node (see :mod:`activities.nodecmd`). A failing command is a
        result, not an error; an unreachable node is a retryable NodeUnreachable."""
        try:
            return await self.executors.for_access(input.access).run(
                input.argv, timeout=input.timeout_seconds, stdin=input.stdin, env=input.env,
                max_output=input.max_output_bytes,
            )
        except NodeCommandError as exc:
            raise _fail("NodeUnreachable", str(exc), retryable=True) from None

    # --- reads --------------------------------------------------------------------------------------------

    @activity.defn(name="etcd_cluster_status")
    async def etcd_cluster_status(self, input: ClusterStatusInput) -> ClusterStatus:
        """member list, endpoint health and endpoint status as seen from ``via``."""
        endpoints = input.endpoints or [m.client_url for m in input.members]
        return await self.cluster_status(input.via, endpoints, input.timeouts)

    @activity.defn(name="etcd_preflight_restore")
    async def etcd_preflight_restore(self, input: PreflightRestoreInput) -> PreflightRestoreResult:
        """Read-only checks on every host before a restore stops anything: etcdctl runs on each
        host, the survivor's data dir holds a member (force-new-cluster), the snapshot is a
        valid snapshot on the survivor's host (snapshot-restore), every member can be stopped
        and started the declared way. Returns the problems (empty = go)."""
        problems: list[str] = []
        survivor = next(m for m in input.members if m.name == input.survivor)

        async def check(member: EtcdMember) -> None:
            try:
                res = await self._run(member, [self._tool(member, "etcdctl"), "version"], timeout=20)
            except ApplicationError as exc:
                problems.append(str(exc))
                return
            if not res.ok:
                problems.append(f"member {member.name}: etcdctl does not run: {res.summary()}")
            control = member.control
            if isinstance(control, ProcessControl):
                binary = control.argv[0]
                if "/" not in binary:
                    try:
                        find_etcd_binary(binary)
                    except NodeCommandError as exc:
                        problems.append(f"member {member.name}: {exc}")
            elif isinstance(control, SystemdControl):
                r = await self._run(member, ["systemctl", "cat", control.unit], timeout=20)
                if not r.ok:
                    problems.append(f"member {member.name}: unit {control.unit}: {r.summary()}")
            elif isinstance(control, StaticPodControl):
                stash = f"{control.stash_dir}/{Path(control.manifest).name}"
                r = await self._run(member, ["sh", "-c", 'test -e "$1" || test -e "$2"', "sh", control.manifest, stash], timeout=20)
                if not r.ok:
                    problems.append(f"member {member.name}: static-pod manifest {control.manifest} (or {stash}) not found")

        await asyncio.gather(*(check(m) for m in input.members))
        result = PreflightRestoreResult()
        if input.strategy == "force-new-cluster":
            r = await self._run(survivor, ["test", "-d", f"{survivor.data_dir}/member"], timeout=20)
            if not r.ok:
                problems.append(
                    f"survivor {survivor.name}: data dir {survivor.data_dir} holds no member data; "
                    "pick another survivor or use snapshot-restore"
                )
        else:
            assert input.snapshot is not None
            try:
                result.snapshot = await self._snapshot_status(survivor, input.snapshot)
            except ApplicationError as exc:
                problems.append(f"snapshot {input.snapshot} on {survivor.name}: {exc.message}")
        result.problems = sorted(problems)
        result.status = await self.cluster_status(
            survivor, [m.client_url for m in input.members], EtcdctlTimeouts(dial_seconds=1, command_seconds=3)
        )
        return result

    # --- stop / start ---------------------------------------------------------------------------------------

    async def _endpoint_down(self, member: EtcdMember, timeout: float) -> bool:
        """Wait until the member's client URL stops answering ``endpoint health``."""
        t = EtcdctlTimeouts(dial_seconds=1, command_seconds=2)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            res = await self._etcdctl(member, [member.client_url], ["endpoint", "health"], t)
            if not res.ok and "connection refused" in (res.stderr + res.stdout):
                return True
            if not res.ok and ("deadline exceeded" in res.stderr or "unhealthy" in res.stderr) and not await self._port_open(member):
                return True
            await asyncio.sleep(0.5)
        return False

    async def _port_open(self, member: EtcdMember) -> bool:
        from urllib.parse import urlsplit

        parts = urlsplit(member.client_url)
        if member.host.backend != ExecBackend.LOCAL:
            return True  # cannot tell from here; the health answer decides
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, parts.port), 1.0)
        except (OSError, TimeoutError):
            return False
        writer.close()
        return True

    @activity.defn(name="etcd_stop_member")
    async def etcd_stop_member(self, input: MemberInput) -> MemberActionResult:
        """Stop the member the declared way; no-op (``changed`` False) when it is stopped."""
        m, control = input.member, input.member.control
        async with heartbeating({"stop": m.name}):
            if isinstance(control, ProcessControl):
                return await asyncio.to_thread(stop_process, m, control, min(input.timeout_seconds, 30.0))
            if isinstance(control, SystemdControl):
                active = (await self._run(m, ["systemctl", "is-active", "--quiet", control.unit])).ok
                await self._must(m, ["systemctl", "stop", control.unit], what="systemctl stop", timeout=input.timeout_seconds)
                return MemberActionResult(member=m.name, changed=active, detail=f"unit {control.unit} stopped")
            return await self._stop_static_pod(m, control, input.timeout_seconds)

    async def _stop_static_pod(self, m: EtcdMember, control: StaticPodControl, timeout: float) -> MemberActionResult:
        present = (await self._run(m, ["test", "-e", control.manifest])).ok
        if not present:
            return MemberActionResult(member=m.name, changed=False, detail=f"manifest {control.manifest} already out")
        text = (await self._must(m, ["cat", control.manifest], what="read manifest")).stdout
        base = Path(control.manifest).name
        await self._must(m, ["mkdir", "-p", control.stash_dir], what="mkdir stash")
        if OVERRIDE_MARKER in text:
            # Our one-off copy: the original is still in the stash. Keep the copy, never delete.
            target = f"{control.stash_dir}/{base}.overrides-{int(time.time())}"
        else:
            target = f"{control.stash_dir}/{base}"
            if (await self._run(m, ["test", "-e", target])).ok:
                raise _fail("StashConflict", f"member {m.name}: both {control.manifest} and {target} exist; resolve by hand")
        await self._must(m, ["mv", control.manifest, target], what="move manifest out")
        if not await self._endpoint_down(m, timeout):
            raise _fail("EtcdCommandFailed", f"member {m.name}: still answering {timeout:.0f}s after its manifest moved out", retryable=True)
        return MemberActionResult(member=m.name, changed=True, detail=f"manifest moved to {target}")

    @activity.defn(name="etcd_start_member")
    async def etcd_start_member(self, input: StartMemberInput) -> MemberActionResult:
        """Start the member with ``overrides`` (see :class:`StartOverrides`); no-op when it runs."""
        m, control, flags = input.member, input.member.control, input.overrides.flags()
        async with heartbeating({"start": m.name}):
            if isinstance(control, ProcessControl):
                return await asyncio.to_thread(start_process, m, control, input.overrides)
            if isinstance(control, SystemdControl):
                dropin_dir = f"/etc/systemd/system/{control.unit}.d"
                if flags:
                    await self._must(m, ["mkdir", "-p", dropin_dir], what="mkdir drop-in")
                    await self._must(m, ["tee", f"{dropin_dir}/{SYSTEMD_DROPIN}"], what="write drop-in", stdin=systemd_dropin(flags))
                else:
                    await self._must(m, ["rm", "-f", f"{dropin_dir}/{SYSTEMD_DROPIN}"], what="remove drop-in")
                await self._must(m, ["systemctl", "daemon-reload"], what="daemon-reload")
                await self._must(m, ["systemctl", "start", control.unit], what="systemctl start", timeout=input.timeout_seconds)
                return MemberActionResult(member=m.name, changed=True, detail=f"unit {control.unit} started {flags or ''}".strip())
            return await self._start_static_pod(m, control, flags)

    async def _start_static_pod(self, m: EtcdMember, control: StaticPodControl, flags: dict[str, str]) -> MemberActionResult:
        if (await self._run(m, ["test", "-e", control.manifest])).ok:
            return MemberActionResult(member=m.name, changed=False, detail="manifest already in place")
        stashed = f"{control.stash_dir}/{Path(control.manifest).name}"
        if not flags:
            await self._must(m, ["mv", stashed, control.manifest], what="move manifest back")
            return MemberActionResult(member=m.name, changed=True, detail=f"manifest {control.manifest} moved back")
        original = (await self._must(m, ["cat", stashed], what="read stashed manifest")).stdout
        try:
            text = static_pod_with_overrides(original, control.container, flags)
        except ValueError as exc:
            raise _fail("InvalidRestoreInput", f"member {m.name}: {exc}") from None
        # Write next to the manifests folder, then rename into it: the kubelet never sees half a file.
        tmp = f"{control.stash_dir}/.{Path(control.manifest).name}.lockkeeper-tmp"
        await self._must(m, ["tee", tmp], what="write manifest copy", stdin=text)
        await self._must(m, ["mv", tmp, control.manifest], what="install manifest copy")
        return MemberActionResult(member=m.name, changed=True, detail=f"manifest with {sorted(flags)} installed")

    @activity.defn(name="etcd_wait_member_healthy")
    async def etcd_wait_member_healthy(self, input: WaitHealthyInput) -> ClusterStatus:
        """Poll (heartbeating) until the member is healthy (and joined, see
        :class:`WaitHealthyInput`); retryable NotHealthyYet after the timeout."""
        m = input.member
        end = time.monotonic() + input.timeout_seconds
        last: ClusterStatus | None = None
        async with heartbeating({"wait": m.name}):
            while True:
                last = await self.cluster_status(input.via, [m.client_url], input.timeouts)
                joined = True
                if input.joined:
                    info = last.member_named(m.name)
                    joined = info is not None and m.peer_url in info.peer_urls
                if last.healthy(m.client_url) and joined:
                    return last
                if time.monotonic() > end:
                    why = next((e.error for e in last.endpoints if e.error), None) or last.members_error or "not in member list"
                    raise _fail("NotHealthyYet", f"member {m.name} not healthy/joined after {input.timeout_seconds:.0f}s: {why}", retryable=True)
                await asyncio.sleep(input.poll_seconds)

    # --- membership -----------------------------------------------------------------------------------------

    @activity.defn(name="etcd_member_update")
    async def etcd_member_update(self, input: MemberUpdateInput) -> MemberActionResult:
        """``member update ID --peer-urls=PEER`` when the member advertises another peer URL
        (R3: after force-new-cluster it may say ``http://localhost:2380``)."""
        via, m = input.via, input.member
        st = await self.cluster_status(via, [via.client_url], input.timeouts)
        info = st.member_named(m.name)
        if info is None:
            raise _fail("EtcdCommandFailed", f"member {m.name} not in member list ({st.members_error or 'absent'})", retryable=True)
        if info.peer_urls == [m.peer_url]:
            return MemberActionResult(member=m.name, changed=False, detail=f"peer URL already {m.peer_url}")
        await self._must(
            via, self.etcdctl_argv(via, [via.client_url], ["member", "update", info.id, f"--peer-urls={m.peer_url}"], input.timeouts),
            what="member update",
        )
        return MemberActionResult(member=m.name, changed=True, detail=f"peer URL {info.peer_urls} -> {m.peer_url}")

    @activity.defn(name="etcd_member_add")
    async def etcd_member_add(self, input: MemberAddInput) -> MemberAddResult:
        """``member add`` exactly once (see :class:`MemberAddInput`)."""
        via, m = input.via, input.member
        end = time.monotonic() + input.unhealthy_retry_seconds
        async with heartbeating({"member-add": m.name}):
            while True:
                st = await self.cluster_status(via, [via.client_url], input.timeouts)
                if st.members is None:
                    raise _fail("UnhealthyCluster", f"member list from {via.name} failed: {st.members_error}", retryable=True)
                existing = st.member_with_peer(m.peer_url)
                if existing is not None:
                    if existing.name and existing.name != m.name:
                        raise _fail(
                            "InvalidRestoreInput", f"peer URL {m.peer_url} belongs to member {existing.name}, not {m.name}"
                        )
                    return MemberAddResult(
                        member=m.name, id=existing.id, already_present=True,
                        initial_cluster=initial_cluster_for(st.members, existing.id, m.name),
                    )
                res = await self._run(
                    via, self.etcdctl_argv(via, [via.client_url], ["member", "add", m.name, f"--peer-urls={m.peer_url}"], input.timeouts),
                    timeout=input.timeouts.dial_seconds + input.timeouts.command_seconds + 5,
                )
                if res.ok:
                    try:
                        member_id, initial = parse_member_add(res.stdout)
                    except ValueError as exc:
                        raise _fail("EtcdCommandFailed", str(exc), retryable=True) from None
                    log = _log()
                    if log:
                        log.info(f"etcd member add {m.name} ({member_id}) via {via.name}")
                    return MemberAddResult(member=m.name, id=member_id, initial_cluster=initial)
                text = res.stderr + res.stdout
                # etcd refuses while the newest member has not connected yet (strict reconfig
                # check): "etcdserver: unhealthy cluster". A timeout may also hide a success,
                # so every retry starts again from the member list.
                if time.monotonic() > end:
                    kind = "UnhealthyCluster" if "unhealthy cluster" in text else "EtcdCommandFailed"
                    raise _fail(kind, f"member add {m.name} via {via.name}: {res.summary()}", retryable=True)
                await asyncio.sleep(1.0)

    # --- data directories and snapshots -----------------------------------------------------------------

    @activity.defn(name="etcd_move_data_aside")
    async def etcd_move_data_aside(self, input: MoveAsideInput) -> MoveAsideResult:
        """``mv DATA DATA.<suffix>`` (see :class:`MoveAsideInput`)."""
        m = input.member
        target = f"{m.data_dir}.{input.suffix}"
        if not (await self._run(m, ["test", "-e", m.data_dir])).ok:
            moved = (await self._run(m, ["test", "-e", target])).ok
            return MoveAsideResult(member=m.name, moved_to=target if moved else None,
                                   detail="already moved" if moved else "no data dir")
        if (await self._run(m, ["test", "-e", target])).ok:
            raise _fail("DataDirMoveRefused", f"member {m.name}: {target} already exists; not overwriting it")
        await self._must(m, ["mv", "-T", m.data_dir, target], what="move data dir aside")
        return MoveAsideResult(member=m.name, moved_to=target, detail=f"{m.data_dir} moved to {target}")

    async def _snapshot_status(self, member: EtcdMember, path: str) -> SnapshotInfo:
        res = await self._must(member, [self._tool(member, "etcdutl"), "snapshot", "status", path, "-w", "json"], what="snapshot status")
        try:
            doc = json.loads(res.stdout)
        except ValueError:
            raise _fail("EtcdCommandFailed", f"snapshot status of {path}: not JSON: {res.stdout[:200]!r}", retryable=True) from None
        return SnapshotInfo(
            member=member.name, host=member.host.describe() if member.host.backend != ExecBackend.LOCAL else member.host.host,
            path=path, hash=doc.get("hash"), revision=doc.get("revision"), total_keys=doc.get("totalKey"),
            total_size=doc.get("totalSize"),
        )

    @activity.defn(name="etcd_snapshot_save")
    async def etcd_snapshot_save(self, input: SnapshotSaveInput) -> SnapshotInfo:
        """``etcdctl snapshot save`` then ``etcdutl snapshot status`` (etcdctl writes
        ``PATH.part`` and renames it, so PATH is never a partial snapshot)."""
        m = input.member
        await self._must(m, ["mkdir", "-p", str(Path(input.path).parent)], what="mkdir backup dir")
        async with heartbeating({"snapshot": m.name}):
            await self._must(
                m, self.etcdctl_argv(m, [m.client_url], ["snapshot", "save", input.path], input.timeouts),
                what="snapshot save", timeout=input.timeout_seconds,
            )
            return await self._snapshot_status(m, input.path)

    @activity.defn(name="etcd_snapshot_restore")
    async def etcd_snapshot_restore(self, input: SnapshotRestoreInput) -> MemberActionResult:
        """Restore the snapshot into the member's (absent) data dir as a one-member cluster;
        written to ``DATA.lockkeeper-restoring`` first and renamed, so a retry sees either
        nothing or a complete data dir."""
        m = input.member
        tmp = f"{m.data_dir}.lockkeeper-restoring"
        if (await self._run(m, ["test", "-e", f"{m.data_dir}/member"])).ok:
            return MemberActionResult(member=m.name, changed=False, detail=f"{m.data_dir} already restored")
        if (await self._run(m, ["test", "-e", m.data_dir])).ok:
            raise _fail("DataDirMoveRefused", f"member {m.name}: {m.data_dir} exists without member data; move it aside first")
        if (await self._run(m, ["test", "-e", tmp])).ok:
            await self._must(m, ["mv", "-T", tmp, f"{tmp}.{input.attempt_suffix}-{int(time.time())}"], what="move half restore aside")
        async with heartbeating({"restore": m.name}):
            await self._must(
                m,
                [
                    self._tool(m, "etcdutl"), "snapshot", "restore", input.snapshot,
                    f"--name={m.name}", f"--initial-cluster={m.name}={m.peer_url}",
                    f"--initial-advertise-peer-urls={m.peer_url}", f"--data-dir={tmp}",
                ],
                what="snapshot restore", timeout=input.timeout_seconds,
            )
        await self._must(m, ["mv", "-T", tmp, m.data_dir], what="install restored data dir")
        return MemberActionResult(member=m.name, changed=True, detail=f"{input.snapshot} restored into {m.data_dir}")

    # --- verification -----------------------------------------------------------------------------------------

    @activity.defn(name="etcd_verify_cluster")
    async def etcd_verify_cluster(self, input: VerifyInput) -> VerifyResult:
        """Poll until healthy, exact member list, same raft index everywhere (or timeout)."""
        endpoints = [m.client_url for m in input.members]
        end = time.monotonic() + input.timeout_seconds
        async with heartbeating({"verify": len(endpoints)}):
            while True:
                st = await self.cluster_status(input.via, endpoints, input.timeouts)
                problems = [f"endpoint {e.endpoint} unhealthy: {e.error}" for e in st.endpoints if not e.healthy]
                problems += membership_problems(st, input.members)
                indexes = {e.raft_index for e in st.endpoints}
                if None in indexes or len(indexes) != 1:
                    problems.append("raft index differs: " + ", ".join(f"{e.endpoint}={e.raft_index}" for e in st.endpoints))
                if not problems or time.monotonic() > end:
                    index = next(iter(indexes)) if len(indexes) == 1 else None
                    return VerifyResult(ok=not problems, problems=problems, status=st, raft_index=index)
                await asyncio.sleep(input.poll_seconds)


#: Activity names, as the etcd workflows call them.
ACTIVITY_NAMES = [
    "run_node_command",
    "etcd_cluster_status",
    "etcd_preflight_restore",
    "etcd_stop_member",
    "etcd_start_member",
    "etcd_wait_member_healthy",
    "etcd_member_update",
    "etcd_member_add",
    "etcd_move_data_aside",
    "etcd_snapshot_save",
    "etcd_snapshot_restore",
    "etcd_verify_cluster",
]


def make_etcd_activities(executors: ExecutorFactory | None = None) -> list[Callable[..., Any]]:
    """The node-command and etcd activities for a Worker (no kubeconfig needed)."""
    return EtcdActivities(executors).activities()
