"""The rejoin steps of one node's migration (procedures-spec §6.3 steps 17-20): the Node
registered again (new uid, Ready, the target runtime, the recorded labels), the GlusterFS pod
Ready on it, its bricks online and heal clean on every volume (falling entries are progress, a
stall opens a gate, split-brain stops the node).

A mixin of :class:`workflows.runtime_migration.node.RuntimeMigrationNodeWorkflow`: it uses the
workflow's ``inp``, ``node``, ``st``, ``record``, ``health``,
``node_run``, ``gluster``, ``_node_object``/``_push`` and its row and gate steps (``_at``, ``_done``,
``_gate``, ``_require``, ``_wait_ok``).
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import NodeInfo, SetNodeLabelsInput
    from activities.runtime_migration.models import NodeObject
    from workflows.kit import calls as acts
    from workflows.kit.health import Check
    from workflows.kit.models import failure_message
    from workflows.runtime_migration import plan


class StepStopped(Exception):
    """The node's migration stops here: ``step`` and why (a rejected gate, a failed check, an
    abort). The node is left as it is and reported (e.g. deleted and not yet registered)."""

    def __init__(self, step: str, reason: str, *, aborted: bool = False) -> None:
        super().__init__(f"{step}: {reason}")
        self.step = step
        self.reason = reason
        self.aborted = aborted


SET_NODE_LABELS = "set_node_labels"


class RejoinSteps:
    """Steps 17-20 (see the module doc)."""

    inp: Any
    node: str
    st: Any
    _at: Any
    _done: Any
    _gate: Any
    _require: Any
    _wait_ok: Any
    record: Any
    health: Any
    node_run: Any
    _node_object: Any
    _push: Any
    gluster: Any

    async def _registered(self) -> NodeObject:
        """Step 17: the Node again, new uid, Ready, docker:// runtime; labels checked (a missing
        GlusterFS label opens a gate: the GlusterFS pod would never schedule)."""
        run = self.inp.run
        seen: dict[str, NodeObject] = {}

        async def check() -> Check:
            obj = await self._node_object()
            seen["obj"] = obj
            if not obj.exists:
                return Check(False, "Node not registered yet")
            if obj.uid == self.record.uid:
                return Check(False, f"Node still has the old uid {obj.uid}")
            self.st.node_deleted, self.st.new_uid = False, obj.uid
            if not obj.ready:
                return Check(False, f"Node {obj.uid} not Ready")
            if not obj.runtime.startswith(f"{run.target_runtime}://"):
                return Check(False, f"runtime {obj.runtime or 'unknown'}, expected {run.target_runtime}://")
            return Check(True, f"uid {obj.uid}, Ready, {obj.runtime}")

        await self._wait_ok("wait-registered", "the Node registered again (new uid, Ready, docker://)", check, run.timing.register_timeout, self.health)
        expected = plan.expected_labels(self.record.labels, run.expected_labels)
        key, value = run.gluster.label_pair()
        expected.setdefault(key, value)
        while True:
            obj = await self._node_object()
            problems = plan.label_problems(obj.labels, expected)
            missing = {k: v for k, v in expected.items() if obj.labels.get(k) != v}
            self.st.findings = problems
            if not missing:
                return obj
            gluster_missing = key in missing
            why = (f"without {key}={value} the GlusterFS pod never schedules on {self.node}" if gluster_missing
                   else "workloads that select them (e.g. Prometheus) cannot come back to this node")
            text = (f"{'; '.join(problems)} (recorded before the migration): {why}. Approve sets "
                    f"{', '.join(f'{k}={v}' for k, v in sorted(missing.items()))} on the Node; reject "
                    + ("stops" if gluster_missing else "goes on without them"))
            if await self._gate("human", "labels", text):
                await acts.call(SET_NODE_LABELS, SetNodeLabelsInput(node=self.node, labels=dict(missing)), NodeInfo,
                                timeouts=self.node_run.timeouts)
                continue
            if gluster_missing:
                raise StepStopped("wait-registered", f"label {key}={value} missing and not restored")
            return obj

    async def _gluster_back(self) -> None:
        """Steps 18-20: the GlusterFS pod Ready on the node, its bricks online, heal clean on
        every volume (falling entries are progress; a stall opens a gate; split-brain stops)."""
        t = self.inp.run.timing

        async def pod() -> Check:
            try:  # the GlusterFS package's read lists the pods of every cluster (run in another node's pod)
                got = [p for p in (await self.gluster.read(None, heal=False, exclude_node=self.node)).pods if p.node == self.node]
            except ActivityError as err:
                return Check(False, f"GlusterFS could not be read: {failure_message(err)}")
            ok = [p for p in got if p.healthy]
            return Check(bool(ok), ok[0].name + " Ready" if ok else ", ".join(f"{p.name} {p.phase}" for p in got) or "no GlusterFS pod yet")

        await self._wait_ok("gluster-pod", "the GlusterFS pod Running and Ready on the node", pod, t.gluster_pod_timeout, self.health)
        self._done("gluster-pod")

        async def bricks() -> Check:
            try:
                a = await self.gluster.read(None, heal=False)
            except ActivityError as err:
                return Check(False, f"GlusterFS could not be read: {failure_message(err)}")
            mine = [b for v in a.volumes for b in v.bricks if b.node == self.node]
            down = [f"{b.volume}: {b.name}" for b in mine if not b.online]
            problems = down + [f"peer {p} disconnected" for p in a.disconnected_peers]
            if not mine:
                problems.append(f"no brick maps to {self.node}")
            return Check(not problems, "; ".join(problems) or f"{len(mine)} bricks online")

        await self._wait_ok("bricks-online", "every brick of the node online, all peers connected", bricks, t.bricks_timeout, self.health)
        self._done("bricks-online")
        await self._heal()
        self._done("heal-clean")

    async def _heal(self) -> None:
        """Step 20 on the GlusterFS package's health gate: every brick online and heal info clean
        on every volume; entries that stop falling for ``heal_stall`` (or the ``heal_timeout``)
        open its gate ``gluster-health/<node>/heal-clean/<n>`` (approve waits again, reject stops);
        a split-brain stops the node (a person resolves it)."""
        self._at("heal-clean", "heal info clean on every volume (entries falling)")
        res = await self.gluster.gate(f"{self.node}/heal-clean", policy=self.inp.run.gates)
        if res.outcome == "stopped":
            raise StepStopped("heal-clean", "aborted", aborted=True)
        if res.outcome == "split-brain":
            raise StepStopped("heal-clean", f"split-brain: {res.detail} (resolve by hand)", aborted=True)
        if res.outcome != "healthy":
            raise StepStopped("heal-clean", f"GlusterFS {res.outcome}: {res.detail}")
