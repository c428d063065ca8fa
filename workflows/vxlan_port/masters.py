"""Phase F of the VXLAN port change (procedures-spec §7.3 F and its hazard): :class:`Masters`.

1. master-config.yaml edited on EVERY master before any restart (a FileRecord first, mirrored
   to the record ConfigMap; atomic write guarded by the recorded hash; verified by reading it
   back as YAML): :meth:`Masters.edit_configs`.
2. ClusterNetwork ``default`` deleted (the object recorded first; the delete is conditional on
   the recorded uid, so a retried delete never removes the re-created object):
   :meth:`Masters.delete_cluster_network`.
3. One master's restart (the workflow runs them one at a time on the kit's node window):
   ``master-restart api``, that master's own ``/healthz/ready``, ``master-restart controllers``,
   its controllers pod Ready again: :meth:`Masters.restart`.
4. ClusterNetwork back (:meth:`Masters.cluster_network_back`); the workflow gates a retry when it
   came back with the old port.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.vxlan_port.models import (
        CheckResult,
        ClusterNetworkState,
        ControllersInput,
        ControllersState,
        DeleteClusterNetworkInput,
        DeleteClusterNetworkResult,
        FileRecord,
        MasterApiInput,
        ReadFileInput,
        WriteFileResult,
        WriteMasterConfigInput,
    )
    from workflows.kit import calls as acts
    from workflows.kit.barrier import Barrier
    from workflows.kit.batches import LocalStop
    from workflows.kit.control import Control
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.kit.host import HostStep, HostSteps
    from workflows.kit.models import NodeStatus
    from workflows.vxlan_port import plan
    from workflows.vxlan_port.models import ApiInterval, MasterAccess, VxlanPortChangeInput, VxlanStatus
    from workflows.vxlan_port.sdn import StepFailed

POLL = Backoff(initial=1.0, maximum=5.0, factor=1.5)


class Masters:
    """Phase F's state and steps (see the module doc): ``file_records`` per master, the
    ClusterNetwork as recorded before its first delete, the API-unavailable intervals."""

    def __init__(self, inp: VxlanPortChangeInput, st: VxlanStatus, control: Control, touch: Callable[[], None],
                 host: HostSteps, mirror: Callable[[dict[str, str]], Awaitable[None]], timeouts: acts.Timeouts) -> None:
        self.inp, self.st, self.control, self.touch, self.host, self.mirror = inp, st, control, touch, host, mirror
        self.timeouts = timeouts
        self.file_records: dict[str, FileRecord] = {}
        self.cn_record: dict | None = None
        self.cn_deletes = 0
        self.api_intervals: list[ApiInterval] = []
        self.controller_restarts: dict[str, int] = {}

    def access(self, name: str) -> MasterAccess:
        return next(m for m in self.inp.masters if m.name == name)

    def edited(self) -> list[str]:
        """Masters whose master-config this run wrote."""
        return [n for n, r in self.file_records.items() if r.sha256_after and r.sha256_after != r.sha256_before]

    async def call(self, name: str, arg: object, result_type: type) -> object:
        return await acts.call(name, arg, result_type, timeouts=self.timeouts)

    # --- 1. the config on every master ------------------------------------------------------------

    async def edit_configs(self) -> None:
        """Barrier ``master-config``; raises StepFailed naming the masters that failed."""
        i = self.inp
        path = i.master.config_path

        async def step(m: MasterAccess) -> bool | str:
            rec = self.file_records.get(m.name)
            if rec is None:
                # One 30 s command (the activity's own bound) after its backend's start-up; it beats while it runs.
                rec = await acts.call("read_host_file", ReadFileInput(host=m.name, access=m.access, path=path), FileRecord,
                                      seconds=30 + m.access.startup_seconds(), heartbeat=True, timeouts=self.timeouts)
                self.file_records[m.name] = rec
                await self.mirror({f"master-config.{m.name}.yaml": rec.content_before})
            try:
                content = plan.set_vxlan_port(rec.content_before, plan.config_port(i.new_port))
            except ValueError as exc:
                return f"{path}: {exc}"
            res: WriteFileResult = await acts.call("write_master_config", WriteMasterConfigInput(
                host=m.name, access=m.access, path=path, sha256_before=rec.sha256_before, content=content,
                port=plan.config_port(i.new_port)), WriteFileResult, seconds=60 + 4 * m.access.startup_seconds(), heartbeat=True,
                timeouts=self.timeouts)
            rec.sha256_after = res.sha256_after
            return True

        res = await Barrier("master-config", i.masters, step, key=lambda m: m.name, ok=lambda r: r, board=self.st.barriers,
                            on_change=self.touch).run()
        if not res.ok:
            raise StepFailed(res.message + "; " + "; ".join(f"{n}: {w}" for n, w in res.failed.items()))

    # --- 2 and 4. the ClusterNetwork --------------------------------------------------------------

    async def cluster_network(self) -> ClusterNetworkState:
        cn: ClusterNetworkState = await self.call("get_cluster_network", None, ClusterNetworkState)  # type: ignore[assignment]
        self.st.cluster_network = f"vxlanPort {cn.vxlan_port} (uid {cn.uid})" if cn.exists else "absent"
        self.touch()
        return cn

    async def delete_cluster_network(self) -> None:
        """Record ClusterNetwork ``default`` (once, mirrored), then delete it while its uid is the one read."""
        cn = await self.cluster_network()
        if not cn.exists:
            return
        if self.cn_record is None:
            self.cn_record = cn.object
            await self.mirror({"clusternetwork.json": json.dumps(cn.object, indent=1, sort_keys=True)})
        res: DeleteClusterNetworkResult = await self.call(  # type: ignore[assignment]
            "delete_cluster_network", DeleteClusterNetworkInput(uid=cn.uid or ""), DeleteClusterNetworkResult)
        self.cn_deletes += 1
        self.st.cluster_network = f"{res.outcome} (was vxlanPort {cn.vxlan_port})"
        self.touch()

    async def cluster_network_back(self) -> ClusterNetworkState:
        """Wait (health ``clusternetwork``) until ClusterNetwork ``default`` exists again; the last read."""
        last: list[ClusterNetworkState] = []

        async def check() -> Check:
            last[:] = [await self.cluster_network()]
            return Check(last[0].exists, self.st.cluster_network)

        await wait_until(check, name="clusternetwork", backoff=POLL, board=self.st.health, stop=self.control.stopping,
                         deadline=workflow.now() + timedelta(seconds=self.inp.master.cluster_network_timeout_seconds),
                         on_poll=lambda h: self.touch())
        return last[0]

    # --- 3. one master's restart ------------------------------------------------------------------

    async def leader(self) -> str | None:
        st: ControllersState = await self.call(  # type: ignore[assignment]
            "check_master_controllers", ControllersInput(master=self.inp.masters[0].name), ControllersState)
        return st.leader

    async def wait(self, name: str, what: str, probe: Callable[[], Awaitable[Check]], stop: LocalStop | None) -> None:
        """Health wait ``<what> <name>``; a skip or abort ends it at once (``stop``, inside the
        node window: raises Stopped; else the control's safe point raises Aborted/RevertRequested)."""
        timeout = self.inp.master.api_ready_timeout_seconds
        halted = (lambda: stop.kind is not None) if stop is not None else self.control.stopping
        hs = await wait_until(probe, name=f"{what} {name}", backoff=POLL, board=self.st.health, stop=halted,
                              deadline=workflow.now() + timedelta(seconds=timeout), on_poll=lambda h: self.touch())
        if hs.state == "stopped":
            if stop is not None:
                stop.check()
            await self.control.safe_point()
        if hs.state != "ok":
            raise StepFailed(f"{what} of {name} not ready after {timeout:.0f}s: {hs.last}")

    async def restart_controllers(self, name: str, stop: LocalStop | None = None) -> None:
        before: ControllersState = await self.call("check_master_controllers", ControllersInput(master=name), ControllersState)  # type: ignore[assignment]
        n = self.controller_restarts[name] = self.controller_restarts.get(name, 0) + 1
        await self.host.run(HostStep(name=f"restart-controllers/{name}/{n}", argv=[self.inp.master.restart_cmd, "controllers"]),
                            self.access(name).access)

        async def probe() -> Check:
            r: ControllersState = await self.call(  # type: ignore[assignment]
                "check_master_controllers", ControllersInput(master=name, min_restarts=before.restarts + 1), ControllersState)
            return Check(r.ready, f"controllers {name}: {r.detail}")

        await self.wait(name, "controllers", probe, stop)

    async def restart(self, name: str, node: NodeStatus, stop: LocalStop) -> None:
        """Restart ``name``'s API (its own ``/healthz/ready`` back), then its controllers (its pod
        Ready with one more restart); ``node`` is its row on the kit's board. Raises StepFailed or
        HostStepFailed; ``stop`` (skip/abort) is checked between the steps."""
        m = self.access(name)
        node.step = "restart api"
        self.touch()
        down = workflow.now()
        await self.host.run(HostStep(name=f"restart-api/{name}", argv=[self.inp.master.restart_cmd, "api"]), m.access)

        async def probe() -> Check:
            r: CheckResult = await self.call(  # type: ignore[assignment]
                "check_master_api", MasterApiInput(api_url=m.api_url, ca_file=m.ca_file, insecure=m.insecure), CheckResult)
            return Check(r.ok, f"{name} /healthz/ready: {r.detail}")

        await self.wait(name, "API", probe, stop)
        up = workflow.now()
        self.api_intervals.append(ApiInterval(master=name, start=down, end=up, seconds=(up - down).total_seconds()))
        stop.check()
        node.step = "restart controllers"
        self.touch()
        await self.restart_controllers(name, stop)
