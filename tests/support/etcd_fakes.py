"""An in-memory etcd cluster for workflow tests: fake etcd activities registered under the real
activity names (workflows call activities by name), so the backup and restore workflows run on
the time-skipping server without etcd binaries.

The fake keeps per member: running or not, in the member list or not, and its data dir. A
``--force-new-cluster`` start leaves only that member in the list; ``member add`` puts a member
back; ``etcd_verify_cluster`` is ok when every member is running and listed. ``backup_fails``
names members whose snapshot always fails. Every call is recorded in ``calls``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.etcd.models import (
    ClusterStatus,
    ClusterStatusInput,
    EndpointState,
    EtcdMember,
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
    SnapshotFiles,
    SnapshotInfo,
    SnapshotRestoreInput,
    SnapshotSaveInput,
    StartMemberInput,
    SystemdControl,
    VerifyInput,
    VerifyResult,
    WaitHealthyInput,
)
from activities.host.models import ExecBackend, HostAccess


def etcd_members(count: int = 3) -> list[EtcdMember]:
    """``count`` members etcd-0.. on hosts 10.0.0.1.. reached over SSH, run by systemd."""
    return [
        EtcdMember(
            name=f"etcd-{i}", peer_url=f"https://10.0.0.{i + 1}:2380", client_url=f"https://10.0.0.{i + 1}:2379",
            host=HostAccess(backend=ExecBackend.SSH, host=f"10.0.0.{i + 1}", user="core"),
            data_dir="/var/lib/etcd", control=SystemdControl(),
        )
        for i in range(count)
    ]


@dataclass
class _Member:
    running: bool = True
    listed: bool = True
    id: str = ""
    moved: int = 0


class FakeEtcd:
    """The members of ``members`` (all running and listed at first); knobs: ``backup_fails``
    (member names whose ``etcd_snapshot_save`` raises), ``preflight_problems``."""

    def __init__(self, members: list[EtcdMember]) -> None:
        self.members = {m.name: m for m in members}
        self.state = {m.name: _Member(id=f"{i + 1:016x}") for i, m in enumerate(members)}
        self.backup_fails: set[str] = set()
        self.preflight_problems: list[str] = []
        self.calls: list[tuple[str, Any]] = []
        self._next_id = 100

    def called(self, name: str) -> list[Any]:
        return [arg for n, arg in self.calls if n == name]

    def status(self) -> ClusterStatus:
        listed = [(n, s) for n, s in self.state.items() if s.listed]
        return ClusterStatus(
            members=[MemberInfo(id=s.id, name=n if s.running else "", peer_urls=[self.members[n].peer_url],
                                client_urls=[self.members[n].client_url] if s.running else []) for n, s in listed],
            members_source="fake",
            endpoints=[EndpointState(endpoint=self.members[n].client_url, healthy=s.running and s.listed,
                                     member_id=s.id, raft_index=42) for n, s in self.state.items()],
        )

    def activities(self) -> list[Callable]:
        fake = self

        def rec(name: str, arg: Any) -> None:
            fake.calls.append((name, arg))

        def done(name: str, detail: str, changed: bool = True) -> MemberActionResult:
            return MemberActionResult(member=name, changed=changed, detail=detail)

        @activity.defn(name="etcd_snapshot_save")
        async def snapshot_save(inp: SnapshotSaveInput) -> SnapshotInfo:
            rec("etcd_snapshot_save", inp)
            if inp.member.name in fake.backup_fails:
                raise ApplicationError(f"etcdctl snapshot save on {inp.member.name}: context deadline exceeded", type="CommandFailed")
            return SnapshotInfo(member=inp.member.name, host=inp.member.host.host, path=inp.path, revision=7, total_keys=12)

        @activity.defn(name="etcd_snapshot_files")
        async def snapshot_files(inp: SnapshotSaveInput) -> SnapshotFiles:
            rec("etcd_snapshot_files", inp)
            return SnapshotFiles(member=inp.member.name, files=[])

        @activity.defn(name="etcd_preflight_restore")
        async def preflight(inp: PreflightRestoreInput) -> PreflightRestoreResult:
            rec("etcd_preflight_restore", inp)
            return PreflightRestoreResult(problems=list(fake.preflight_problems), status=fake.status())

        @activity.defn(name="etcd_stop_member")
        async def stop_member(inp: MemberInput) -> MemberActionResult:
            rec("etcd_stop_member", inp)
            s = fake.state[inp.member.name]
            was, s.running = s.running, False
            return done(inp.member.name, "stopped" if was else "already stopped", changed=was)

        @activity.defn(name="etcd_start_member")
        async def start_member(inp: StartMemberInput) -> MemberActionResult:
            rec("etcd_start_member", inp)
            s = fake.state[inp.member.name]
            s.running = True
            if inp.overrides.force_new_cluster:
                for other, st in fake.state.items():
                    st.listed = other == inp.member.name
            return done(inp.member.name, "started")

        @activity.defn(name="etcd_wait_member_healthy")
        async def wait_healthy(inp: WaitHealthyInput) -> ClusterStatus:
            rec("etcd_wait_member_healthy", inp)
            s = fake.state[inp.member.name]
            if not (s.running and s.listed):
                raise ApplicationError(f"member {inp.member.name} not healthy", type="MemberNotHealthy")
            return fake.status()

        @activity.defn(name="etcd_member_update")
        async def member_update(inp: MemberUpdateInput) -> MemberActionResult:
            rec("etcd_member_update", inp)
            return done(inp.member.name, f"peer URL set to {inp.member.peer_url}")

        @activity.defn(name="etcd_cluster_status")
        async def cluster_status(inp: ClusterStatusInput) -> ClusterStatus:
            rec("etcd_cluster_status", inp)
            return fake.status()

        @activity.defn(name="etcd_member_add")
        async def member_add(inp: MemberAddInput) -> MemberAddResult:
            rec("etcd_member_add", inp)
            s = fake.state[inp.member.name]
            present = s.listed
            if not present:
                fake._next_id += 1
                s.listed, s.id = True, f"{fake._next_id:016x}"
            cluster = ",".join(f"{n}={fake.members[n].peer_url}" for n, st in fake.state.items() if st.listed)
            return MemberAddResult(member=inp.member.name, id=s.id, initial_cluster=cluster, already_present=present)

        @activity.defn(name="etcd_move_data_aside")
        async def move_aside(inp: MoveAsideInput) -> MoveAsideResult:
            rec("etcd_move_data_aside", inp)
            fake.state[inp.member.name].moved += 1
            to = f"{inp.member.data_dir}.{inp.suffix}"
            return MoveAsideResult(member=inp.member.name, moved_to=to, detail=f"moved to {to}")

        @activity.defn(name="etcd_snapshot_restore")
        async def snapshot_restore(inp: SnapshotRestoreInput) -> MemberActionResult:
            rec("etcd_snapshot_restore", inp)
            for other, st in fake.state.items():
                st.listed = other == inp.member.name
            return done(inp.member.name, f"restored {inp.snapshot}")

        @activity.defn(name="etcd_verify_cluster")
        async def verify(inp: VerifyInput) -> VerifyResult:
            rec("etcd_verify_cluster", inp)
            problems = [f"member {n} not running and listed" for n, s in fake.state.items() if not (s.running and s.listed)]
            return VerifyResult(ok=not problems, problems=problems, status=fake.status(), raft_index=None if problems else 42)

        return [snapshot_save, snapshot_files, preflight, stop_member, start_member, wait_healthy, member_update, cluster_status,
                member_add, move_aside, snapshot_restore, verify]
