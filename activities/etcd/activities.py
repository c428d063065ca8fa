"""etcd activities: snapshots, member stop/start, ``member add``/``update``, health and verification.

Async activities (commands run through :mod:`activities.host.executors`, which heartbeat while
they run), registered under the names in :data:`ACTIVITY_NAMES`. Each one checks before it acts, so
a retried attempt (a worker killed mid-call) never double-applies: ``member add`` first looks
for the peer URL in ``member list``, a stop of a stopped member and a start of a running one
are no-ops, a data dir already moved aside is not moved again, data is never deleted.

etcdctl runs on a member's host against client URLs (``--endpoints``), with that host's TLS
files when given. Local binaries are found by :func:`activities.host.executors.find_etcd_binary`
(etcd 3.5: ``etcdutl`` for offline snapshot status/restore).

Errors: ``ApplicationError`` types ``InvalidRestoreInput``, ``DataDirMoveRefused``,
``MemberRunning``, ``StashConflict`` are non-retryable (a person must look); ``EtcdCommandFailed``,
``NotHealthyYet``, ``UnhealthyCluster``, ``NodeUnreachable`` are retryable.

Sources: etcd ``etcdctl/ctlv3/command/member_command.go`` (the printed ``ETCD_INITIAL_CLUSTER``),
the etcd v3.5 disaster-recovery guide, and field report R3 (OKD 3.9 → 3.10 quorum restore).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.context import fail, heartbeating, log
from activities.etcd.members import (
    OVERRIDE_MARKER,
    SYSTEMD_DROPIN,
    initial_cluster_for,
    membership_problems,
    parse_member_add,
    start_process,
    static_pod_with_overrides,
    stop_process,
    systemd_dropin,
)
from activities.etcd.models import (
    ClusterStatus,
    ClusterStatusInput,
    EtcdMember,
    EtcdctlTimeouts,
    MemberActionResult,
    MemberAddInput,
    MemberAddResult,
    MemberInput,
    MemberUpdateInput,
    MoveAsideInput,
    MoveAsideResult,
    PreflightRestoreInput,
    PreflightRestoreResult,
    ProcessControl,
    SnapshotFiles,
    SnapshotInfo,
    SnapshotRestoreInput,
    SnapshotSaveInput,
    StartMemberInput,
    StaticPodControl,
    SystemdControl,
    VerifyInput,
    VerifyResult,
    WaitHealthyInput,
)
from activities.etcd.client import EtcdClient
from activities.host.executors import NodeCommandError, find_etcd_binary
from activities.host.factory import ExecutorFactory


# --- the activities ----------------------------------------------------------------------------------------


class EtcdActivities(EtcdClient):
    """etcd activities. ``executors`` picks the backend for each host (its
    credentials come from the worker's environment, never from input); no kubeconfig is
    needed unless a member uses the debug-pod backend."""

    def activities(self) -> list[Callable[..., Any]]:
        """Every activity of this class, bound, for a Worker's ``activities=``."""
        return [
            self.etcd_cluster_status,
            self.etcd_preflight_restore,
            self.etcd_stop_member,
            self.etcd_start_member,
            self.etcd_wait_member_healthy,
            self.etcd_member_update,
            self.etcd_member_add,
            self.etcd_move_data_aside,
            self.etcd_snapshot_save,
            self.etcd_snapshot_files,
            self.etcd_snapshot_restore,
            self.etcd_verify_cluster,
        ]

    # --- reads --------------------------------------------------------------------------------------------

    @activity.defn(name="etcd_cluster_status", no_thread_cancel_exception=True)
    async def etcd_cluster_status(self, input: ClusterStatusInput) -> ClusterStatus:
        """member list, endpoint health and endpoint status as seen from ``via``."""
        endpoints = input.endpoints or [m.client_url for m in input.members]
        return await self.cluster_status(input.via, endpoints, input.timeouts)

    @activity.defn(name="etcd_preflight_restore", no_thread_cancel_exception=True)
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

    @activity.defn(name="etcd_stop_member", no_thread_cancel_exception=True)
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
                raise fail("StashConflict", f"member {m.name}: both {control.manifest} and {target} exist; resolve by hand")
        await self._must(m, ["mv", control.manifest, target], what="move manifest out")
        if not await self._endpoint_down(m, timeout):
            raise fail("EtcdCommandFailed", f"member {m.name}: still answering {timeout:.0f}s after its manifest moved out", retryable=True)
        return MemberActionResult(member=m.name, changed=True, detail=f"manifest moved to {target}")

    @activity.defn(name="etcd_start_member", no_thread_cancel_exception=True)
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
            raise fail("InvalidRestoreInput", f"member {m.name}: {exc}") from None
        # Write next to the manifests folder, then rename into it: the kubelet never sees half a file.
        tmp = f"{control.stash_dir}/.{Path(control.manifest).name}.lockkeeper-tmp"
        await self._must(m, ["tee", tmp], what="write manifest copy", stdin=text)
        await self._must(m, ["mv", tmp, control.manifest], what="install manifest copy")
        return MemberActionResult(member=m.name, changed=True, detail=f"manifest with {sorted(flags)} installed")

    @activity.defn(name="etcd_wait_member_healthy", no_thread_cancel_exception=True)
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
                    raise fail("NotHealthyYet", f"member {m.name} not healthy/joined after {input.timeout_seconds:.0f}s: {why}", retryable=True)
                await asyncio.sleep(input.poll_seconds)

    # --- membership -----------------------------------------------------------------------------------------

    @activity.defn(name="etcd_member_update", no_thread_cancel_exception=True)
    async def etcd_member_update(self, input: MemberUpdateInput) -> MemberActionResult:
        """``member update ID --peer-urls=PEER`` when the member advertises another peer URL
        (R3: after force-new-cluster it may say ``http://localhost:2380``)."""
        via, m = input.via, input.member
        st = await self.cluster_status(via, [via.client_url], input.timeouts)
        info = st.member_named(m.name)
        if info is None:
            raise fail("EtcdCommandFailed", f"member {m.name} not in member list ({st.members_error or 'absent'})", retryable=True)
        if info.peer_urls == [m.peer_url]:
            return MemberActionResult(member=m.name, changed=False, detail=f"peer URL already {m.peer_url}")
        await self._must(
            via, self.etcdctl_argv(via, [via.client_url], ["member", "update", info.id, f"--peer-urls={m.peer_url}"], input.timeouts),
            what="member update",
        )
        return MemberActionResult(member=m.name, changed=True, detail=f"peer URL {info.peer_urls} -> {m.peer_url}")

    @activity.defn(name="etcd_member_add", no_thread_cancel_exception=True)
    async def etcd_member_add(self, input: MemberAddInput) -> MemberAddResult:
        """``member add`` exactly once (see :class:`MemberAddInput`)."""
        via, m = input.via, input.member
        end = time.monotonic() + input.unhealthy_retry_seconds
        async with heartbeating({"member-add": m.name}):
            while True:
                st = await self.cluster_status(via, [via.client_url], input.timeouts)
                if st.members is None:
                    raise fail("UnhealthyCluster", f"member list from {via.name} failed: {st.members_error}", retryable=True)
                existing = st.member_with_peer(m.peer_url)
                if existing is not None:
                    if existing.name and existing.name != m.name:
                        raise fail(
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
                        raise fail("EtcdCommandFailed", str(exc), retryable=True) from None
                    log().info(f"etcd member add {m.name} ({member_id}) via {via.name}")
                    return MemberAddResult(member=m.name, id=member_id, initial_cluster=initial)
                text = res.stderr + res.stdout
                # etcd refuses while the newest member has not connected yet (strict reconfig
                # check): "etcdserver: unhealthy cluster". A timeout may also hide a success,
                # so every retry starts again from the member list.
                if time.monotonic() > end:
                    kind = "UnhealthyCluster" if "unhealthy cluster" in text else "EtcdCommandFailed"
                    raise fail(kind, f"member add {m.name} via {via.name}: {res.summary()}", retryable=True)
                await asyncio.sleep(1.0)

    # --- data directories and snapshots -----------------------------------------------------------------

    @activity.defn(name="etcd_move_data_aside", no_thread_cancel_exception=True)
    async def etcd_move_data_aside(self, input: MoveAsideInput) -> MoveAsideResult:
        """``mv DATA DATA.<suffix>`` (see :class:`MoveAsideInput`)."""
        m = input.member
        target = f"{m.data_dir}.{input.suffix}"
        if not (await self._run(m, ["test", "-e", m.data_dir])).ok:
            moved = (await self._run(m, ["test", "-e", target])).ok
            return MoveAsideResult(member=m.name, moved_to=target if moved else None,
                                   detail="already moved" if moved else "no data dir")
        if (await self._run(m, ["test", "-e", target])).ok:
            raise fail("DataDirMoveRefused", f"member {m.name}: {target} already exists; not overwriting it")
        await self._must(m, ["mv", "-T", m.data_dir, target], what="move data dir aside")
        return MoveAsideResult(member=m.name, moved_to=target, detail=f"{m.data_dir} moved to {target}")

    @activity.defn(name="etcd_snapshot_save", no_thread_cancel_exception=True)
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

    @activity.defn(name="etcd_snapshot_files", no_thread_cancel_exception=True)
    async def etcd_snapshot_files(self, input: SnapshotSaveInput) -> SnapshotFiles:
        """Read-only: which of ``input.path`` and ``input.path.part`` exist on the member's host
        (what a snapshot whose activity failed may still have written: the command ran on)."""
        m = input.member
        res = await self._must(m, ["sh", "-c", 'for f in "$@"; do if [ -e "$f" ]; then echo "$f"; fi; done', "sh",
                                   input.path, f"{input.path}.part"], what="list snapshot files")
        return SnapshotFiles(member=m.name, files=[ln for ln in res.stdout.splitlines() if ln.strip()])

    @activity.defn(name="etcd_snapshot_restore", no_thread_cancel_exception=True)
    async def etcd_snapshot_restore(self, input: SnapshotRestoreInput) -> MemberActionResult:
        """Restore the snapshot into the member's (absent) data dir as a one-member cluster;
        written to ``DATA.lockkeeper-restoring`` first and renamed, so a retry sees either
        nothing or a complete data dir."""
        m = input.member
        tmp = f"{m.data_dir}.lockkeeper-restoring"
        if (await self._run(m, ["test", "-e", f"{m.data_dir}/member"])).ok:
            return MemberActionResult(member=m.name, changed=False, detail=f"{m.data_dir} already restored")
        if (await self._run(m, ["test", "-e", m.data_dir])).ok:
            raise fail("DataDirMoveRefused", f"member {m.name}: {m.data_dir} exists without member data; move it aside first")
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

    @activity.defn(name="etcd_verify_cluster", no_thread_cancel_exception=True)
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
    "etcd_cluster_status",
    "etcd_preflight_restore",
    "etcd_stop_member",
    "etcd_start_member",
    "etcd_wait_member_healthy",
    "etcd_member_update",
    "etcd_member_add",
    "etcd_move_data_aside",
    "etcd_snapshot_save",
    "etcd_snapshot_files",
    "etcd_snapshot_restore",
    "etcd_verify_cluster",
]


def make_etcd_activities(executors: ExecutorFactory | None = None) -> list[Callable[..., Any]]:
    """The etcd activities for a Worker (no kubeconfig needed)."""
    return EtcdActivities(executors).activities()
