"""Phase F of the VXLAN port change (procedures-spec §7.3 F and its hazard), as a mixin.

1. master-config.yaml edited on EVERY master before any restart (FileRecord first; atomic write
   guarded by the recorded hash; verified by reading it back as YAML).
2. A gate, then ClusterNetwork ``default`` deleted (the object recorded first; the delete is
   conditional on the recorded uid, so a retried delete never removes the re-created object).
3. Per master, serially, the controllers leader last: ``master-restart api``, that master's own
   ``/healthz/ready``, ``master-restart controllers``, its controllers pod Ready again.
4. ClusterNetwork back with the new port; otherwise (a gate) delete it again and restart the
   current leader's controllers, until it is right.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING

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
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.kit.host import HostStep
    from workflows.vxlan_port import plan
    from workflows.vxlan_port.models import ApiInterval, MasterAccess
    from workflows.vxlan_port.steps import StepFailed

if TYPE_CHECKING:
    from workflows.vxlan_port.workflow import VxlanPortChangeWorkflow as _Base
else:
    _Base = object

POLL = Backoff(initial=1.0, maximum=5.0, factor=1.5)


class MasterSteps(_Base):
    """Mixin: phase F (see the module doc)."""

    def master(self, name: str) -> MasterAccess:
        return next(m for m in self.inp.masters if m.name == name)

    # --- 1. config on every master --------------------------------------------------------------

    async def config_step(self, m: MasterAccess) -> bool | str:
        i, row = self.inp, self.st.masters[m.name]
        rec = self.file_records.get(m.name)
        if rec is None:
            # One 30 s command (the activity's own bound) after its backend's start-up; it beats while it runs.
            rec = await acts.call("read_host_file", ReadFileInput(host=m.name, access=m.access, path=i.master_config_path), FileRecord,
                                 seconds=30 + m.access.startup_seconds(), heartbeat=True)
            self.file_records[m.name] = rec
            await self.mirror({f"master-config.{m.name}.yaml": rec.content_before})
            row.config = "recorded"
            self.touch()
        try:
            content = plan.set_vxlan_port(rec.content_before, plan.config_port(i.new_port))
        except ValueError as exc:
            return f"{i.master_config_path}: {exc}"
        res: WriteFileResult = await acts.call("write_master_config", WriteMasterConfigInput(
            host=m.name, access=m.access, path=i.master_config_path, sha256_before=rec.sha256_before, content=content,
            port=plan.config_port(i.new_port)), WriteFileResult, seconds=60 + 4 * m.access.startup_seconds(), heartbeat=True)
        rec.sha256_after = res.sha256_after
        row.config = "edited" if res.written else "already edited"
        self.touch()
        return True

    # --- 3. restarts ----------------------------------------------------------------------------------

    async def leader(self) -> str | None:
        st: ControllersState = await acts.call("check_master_controllers", ControllersInput(master=self.inp.masters[0].name), ControllersState)
        return st.leader

    async def wait_api(self, m: MasterAccess) -> None:
        async def check() -> Check:
            r: CheckResult = await acts.call("check_master_api", MasterApiInput(api_url=m.api_url, ca_file=m.ca_file, insecure=m.insecure),
                                             CheckResult, seconds=10)
            return Check(r.ok, f"{m.name} /healthz/ready: {r.detail}")

        hs = await wait_until(check, name=f"api {m.name}", backoff=POLL, board=self.st.health,
                              deadline=workflow.now() + timedelta(seconds=self.inp.api_ready_timeout_s), on_poll=lambda h: self.touch())
        if hs.state != "ok":
            raise StepFailed(f"API of {m.name} not ready after {self.inp.api_ready_timeout_s:.0f}s: {hs.last}")

    async def wait_controllers(self, name: str, min_restarts: int) -> None:
        async def check() -> Check:
            r: ControllersState = await acts.call("check_master_controllers", ControllersInput(master=name, min_restarts=min_restarts), ControllersState)
            return Check(r.ready, f"controllers {name}: {r.detail}")

        hs = await wait_until(check, name=f"controllers {name}", backoff=POLL, board=self.st.health,
                              deadline=workflow.now() + timedelta(seconds=self.inp.api_ready_timeout_s), on_poll=lambda h: self.touch())
        if hs.state != "ok":
            raise StepFailed(f"controllers of {name} not Ready after {self.inp.api_ready_timeout_s:.0f}s: {hs.last}")

    async def restart_controllers(self, name: str) -> None:
        row = self.st.masters[name]
        before: ControllersState = await acts.call("check_master_controllers", ControllersInput(master=name), ControllersState)
        row.controllers = "restarting"
        self.touch()
        n = self.controller_restarts[name] = self.controller_restarts.get(name, 0) + 1
        await self.host_steps.run(HostStep(name=f"restart-controllers/{name}/{n}", argv=[self.inp.master_restart_cmd, "controllers"]),
                                  self.master(name).access)
        await self.wait_controllers(name, before.restarts + 1)
        row.controllers = "restarted"
        self.touch()

    async def restart_master(self, name: str) -> None:
        m, row = self.master(name), self.st.masters[name]
        if row.api != "ready":
            self.st.step = f"restart API on {name}"
            row.api, row.api_down_at = "restarting", workflow.now()
            self.touch()
            await self.host_steps.run(HostStep(name=f"restart-api/{name}", argv=[self.inp.master_restart_cmd, "api"]), m.access)
            await self.wait_api(m)
            row.api, row.api_ready_at = "ready", workflow.now()
            self.api_intervals.append(ApiInterval(master=name, start=row.api_down_at, end=row.api_ready_at,
                                                  seconds=(row.api_ready_at - row.api_down_at).total_seconds()))
            self.touch()
        if row.controllers != "restarted":
            self.st.step = f"restart controllers on {name}"
            await self.restart_controllers(name)

    # --- 2 and 4. the ClusterNetwork ------------------------------------------------------------------

    async def delete_cluster_network(self) -> None:
        cn: ClusterNetworkState = await acts.call("get_cluster_network", None, ClusterNetworkState)
        if not cn.exists:
            self.st.cluster_network = "absent"
            self.touch()
            return
        if self.cn_record is None:
            self.cn_record = cn.object
            await self.mirror({"clusternetwork.json": json.dumps(cn.object, indent=1, sort_keys=True)})
            self.st.records["clusternetwork"].state = "recorded"
            self.st.records["clusternetwork"].detail = f"vxlanPort {cn.vxlan_port}, uid {cn.uid}"
        res: DeleteClusterNetworkResult = await acts.call("delete_cluster_network", DeleteClusterNetworkInput(uid=cn.uid or ""),
                                                          DeleteClusterNetworkResult)
        self.cn_deletes += 1
        self.st.cluster_network = f"{res.outcome} (was vxlanPort {cn.vxlan_port})"
        self.st.records["clusternetwork"].state = "changed"
        self.touch()

    async def cluster_network_port(self) -> ClusterNetworkState:
        last: list[ClusterNetworkState] = []

        async def check() -> Check:
            cn: ClusterNetworkState = await acts.call("get_cluster_network", None, ClusterNetworkState)
            last[:] = [cn]
            return Check(cn.exists, f"vxlanPort {cn.vxlan_port}" if cn.exists else "absent")

        await wait_until(check, name="clusternetwork", backoff=POLL, board=self.st.health,
                         deadline=workflow.now() + timedelta(seconds=self.inp.cluster_network_timeout_s), on_poll=lambda h: self.touch())
        return last[0]

    # --- the phase ----------------------------------------------------------------------------------------

    async def phase_f(self) -> None:
        i = self.inp
        self.st.step = "master-config.yaml on every master"
        self.touch()
        res = await Barrier("master-config", i.masters, self.config_step, key=lambda m: m.name, ok=lambda r: r,
                            board=self.st.barriers, on_change=self.touch).run()
        if not res.ok:
            raise StepFailed(res.message + "; " + "; ".join(f"{n}: {w}" for n, w in res.failed.items()))
        if self.cn_deletes == 0:
            await self.gate("clusternetwork-delete", f"delete ClusterNetwork default (vxlanPort {i.old_port}) so the controllers "
                                                     f"re-create it with {i.new_port}; SDN pods must not restart until it is back")
            self.st.step = "delete ClusterNetwork default"
            await self.delete_cluster_network()
        if not self.order:
            self.order = plan.restart_order([m.name for m in i.masters], await self.leader(), i.restart_order)
            for n in self.order:
                self.st.masters[n].leader = n == self.order[-1]
        for name in self.order:
            await self.control.safe_point()
            await self.restart_master(name)
        while True:
            self.st.step = "ClusterNetwork back with the new port"
            self.touch()
            cn = await self.cluster_network_port()
            if cn.exists and cn.vxlan_port == i.new_port:
                self.st.cluster_network = f"vxlanPort {cn.vxlan_port} (uid {cn.uid})"
                self.touch()
                return
            what = (f"ClusterNetwork default is back with vxlanPort {cn.vxlan_port}" if cn.exists else "ClusterNetwork default did not come back")
            leader = await self.leader()
            await self.gate(f"clusternetwork-retry-{self.cn_deletes}", f"{what}: delete it again and restart the controllers of the leader {leader}")
            if cn.exists:
                await self.delete_cluster_network()
            if leader is not None:
                await self.restart_controllers(leader)
