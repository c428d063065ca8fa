"""etcd's tools on members' hosts: the plumbing under the etcd activities.

:class:`EtcdClient` builds ``etcdctl``/``etcdutl`` command lines for a member's host (endpoints,
dial and command timeouts, TLS files of that host), runs them through
:mod:`activities.host.executors`, and turns the JSON answers into :class:`ClusterStatus`
(parsers in :mod:`activities.etcd.members`). Source: etcd v3.5 ``etcdctl`` and ``etcdutl`` usage.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

from activities.context import fail
from activities.etcd.members import parse_endpoint_health, parse_endpoint_status, parse_member_list, parse_peer_members
from activities.etcd.models import (
    ClusterStatus,
    EndpointState,
    EtcdMember,
    EtcdctlTimeouts,
    MemberInfo,
    SnapshotInfo,
)
from activities.host.executors import NodeCommandError, NodeExecutor, find_etcd_binary
from activities.host.factory import ExecutorFactory
from activities.host.models import CommandResult, ExecBackend


class EtcdClient:
    """Runs etcd's command-line tools on members' hosts through the host executors and reads
    the cluster (``member list``, ``endpoint health``/``status``, the peer ``/members``).
    Base of :class:`activities.etcd.activities.EtcdActivities`; no activity is defined here.

    ``executors`` picks the backend for each host. Errors: ``NodeUnreachable`` (retryable)
    when a host cannot be reached, ``EtcdCommandFailed`` (retryable) when a required command
    fails, ``InvalidRestoreInput`` when a local binary is missing.
    """

    def __init__(self, executors: ExecutorFactory | None = None) -> None:
        self.executors = executors or ExecutorFactory()

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
            raise fail("NodeUnreachable", f"member {member.name} ({member.host.describe()}): {exc}", retryable=True) from None

    async def _must(self, member: EtcdMember, argv: list[str], *, what: str, **kw: Any) -> CommandResult:
        res = await self._run(member, argv, **kw)
        if not res.ok:
            raise fail("EtcdCommandFailed", f"{what} on {member.name}: {res.summary()}", retryable=True)
        return res

    def _tool(self, member: EtcdMember, name: str) -> str:
        given = member.etcdctl if name == "etcdctl" else member.etcdutl
        if given:
            return given
        if member.host.backend == ExecBackend.LOCAL:
            try:
                return find_etcd_binary(name)
            except NodeCommandError as exc:
                raise fail("InvalidRestoreInput", str(exc)) from None
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


    async def _snapshot_status(self, member: EtcdMember, path: str) -> SnapshotInfo:
        res = await self._must(member, [self._tool(member, "etcdutl"), "snapshot", "status", path, "-w", "json"], what="snapshot status")
        try:
            doc = json.loads(res.stdout)
        except ValueError:
            raise fail("EtcdCommandFailed", f"snapshot status of {path}: not JSON: {res.stdout[:200]!r}", retryable=True) from None
        return SnapshotInfo(
            member=member.name, host=member.host.describe() if member.host.backend != ExecBackend.LOCAL else member.host.host,
            path=path, hash=doc.get("hash"), revision=doc.get("revision"), total_keys=doc.get("totalKey"),
            total_size=doc.get("totalSize"),
        )
