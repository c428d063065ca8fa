"""The steps of one master (procedures-spec §4.1 steps 2-4), used by ControlPlaneUpgradeWorkflow.

- :meth:`MasterSteps.action`: static pod manifests are recorded (``sha256sum`` + ``cat``) before
  the first write and written with ``tee`` (same content twice is harmless, so the write may
  repeat; one already holding the new content is not written); the external command and each
  ``master-restart`` run at most once through the kit's host steps (unknown outcome: gate
  ``host/<step>``). Every command is listed in the master's row.
- :meth:`MasterSteps.api_back`: this master's ``/healthz/ready`` until ``ok``; at the deadline
  gate ``api/<master>/<n>`` with the ``master-logs api api --tail=N`` tail; approve waits again,
  ``decide ID GATE restart`` runs ``master-restart api`` again (never a comment's first word), reject aborts.
- :meth:`MasterSteps.pods_ready`: mirror pods ``master-api-<m>``/``master-controllers-<m>`` Ready
  (on the expected image), gated the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.control_plane.models import (
        PROBE_MASTER_API,
        READ_MASTER_PODS,
        MasterPods,
        MasterPodsInput,
        ProbeMasterApiInput,
        ProbeMasterApiResult,
    )
    from activities.host.models import CommandResult, ExecBackend, HostAccess
    from workflows.control_plane.models import (
        RESTART_AGAIN,
        ControlPlaneStatus,
        ControlPlaneUpgradeInput,
        ManifestRecord,
        MasterRow,
        MasterSpec,
    )
    from workflows.kit import calls as acts
    from workflows.kit.control import Control
    from workflows.kit.gates import Gates
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.kit.host import HostStep, HostStepFailed, HostSteps

MASTER_RESTART = "/usr/local/bin/master-restart"
#: Reads and the manifest write are safe to repeat: three attempts while the host is unreachable.
_THREE_ATTEMPTS = RetryPolicy(maximum_attempts=3)
MASTER_LOGS = "/usr/local/bin/master-logs"


class StepAborted(Exception):
    """A person chose abort (or a step failed for good): the procedure stops, the next master
    never starts."""


class MasterSteps:
    """The steps of one master, sharing the procedure's gates, control, host steps and status."""

    def __init__(self, input: ControlPlaneUpgradeInput, gates: Gates, control: Control, host: HostSteps,
                 status: ControlPlaneStatus, touch: Callable[[], None]) -> None:
        self.inp = input
        self.gates = gates
        self.control = control
        self.host = host
        self.status = status
        self.touch = touch
        self.timeouts = acts.Timeouts(input.calls.short_call_seconds, input.calls.heartbeat_seconds)
        self._gate_n: dict[str, int] = {}

    def set(self, row: MasterRow, step: str, detail: str | None = None) -> None:
        """The row's step and detail now (``since`` moves with the step)."""
        if row.step != step:
            row.since = workflow.now()
        row.step, row.detail = step, detail
        self.touch()

    async def _cmd(self, access: HostAccess, argv: list[str], *, stdin: str | None = None) -> CommandResult:
        """An idempotent host command (reads, the manifest write) through the kit's host steps:
        retried (three attempts) like any activity; its exit code is the caller's to judge."""
        return await self.host.command(argv, access, timeout_seconds=self.inp.host_command_timeout_seconds, stdin=stdin,
                                       retry=_THREE_ATTEMPTS)

    # --- step 2: the action -------------------------------------------------------------------------

    async def action(self, m: MasterSpec, row: MasterRow) -> None:
        """Manifests (recorded, written) or the external command, then the restarts."""
        a = self.inp.action
        if a.kind == "static-pods":
            for man in a.manifests:
                await self._manifest(m, row, man.path, man.content)
        else:
            argv = [x.replace("{master}", m.name) for x in a.argv]
            self.set(row, "action", " ".join(argv))
            row.host_changed = True
            await self._once(row, HostStep(name=f"{m.name}/action", argv=argv, timeout_seconds=a.timeout_seconds),
                             HostAccess(backend=ExecBackend.LOCAL))
        for comp in a.restart:
            await self.restart(m, row, comp)

    async def _manifest(self, m: MasterSpec, row: MasterRow, path: str, content: str) -> None:
        self.set(row, "record", path)
        want = hashlib.sha256(content.encode()).hexdigest()
        rec = next((r for r in row.records if r.path == path), None)
        cur = await self._cmd(m.access, ["sha256sum", path])
        current = cur.stdout.split()[0] if cur.ok and cur.stdout.strip() else None
        if rec is None:
            before = await self._cmd(m.access, ["cat", path]) if current else None
            rec = ManifestRecord(path=path, sha256_before=current, content_before=before.stdout if before and before.ok else None,
                                 sha256_after=want)
            row.records.append(rec)
            self.touch()
        if current == want:
            row.commands.append(f"{path} already holds the new manifest (sha256 {want[:12]})")
            return
        self.set(row, "write-manifest", path)
        row.host_changed = True
        parent = path.rsplit("/", 1)[0] or "/"
        mk = await self._cmd(m.access, ["mkdir", "-p", parent])
        if not mk.ok:
            raise StepAborted(f"mkdir -p {parent} on {m.name} failed: {mk.summary()}")
        res = await self._cmd(m.access, ["tee", path], stdin=content)
        row.commands.append(f"tee {path} -> exit {res.exit_code}")
        if not res.ok:
            raise StepAborted(f"writing {path} on {m.name} failed: {res.summary()}")

    async def _once(self, row: MasterRow, step: HostStep, access: HostAccess) -> None:
        try:
            res = await self.host.run(step, access)
        except HostStepFailed as err:
            row.commands.append(f"{' '.join(step.argv)} -> {err.status.state}: {err.status.detail}")
            raise StepAborted(f"{step.name}: {err.status.detail}") from None
        row.commands.append(f"{' '.join(step.argv)} -> exit {res.exit_code if res else 'already done'}")
        self.touch()

    async def restart(self, m: MasterSpec, row: MasterRow, component: str, *, again: bool = False) -> None:
        """``master-restart <component>`` once; ``again`` (a person chose it) is a new host step."""
        argv = [MASTER_RESTART, component]
        self.set(row, f"restart-{component}", " ".join(argv))
        row.host_changed = True
        name = f"{m.name}/restart-{component}" + (f"#{row.restarts}" if again else "")
        await self._once(row, HostStep(name=name, argv=argv, timeout_seconds=self.inp.host_command_timeout_seconds), m.access)
        row.restarts += 1

    # --- step 3: this master's API ------------------------------------------------------------------

    async def probe(self, m: MasterSpec) -> ProbeMasterApiResult:
        """One probe of ``m``'s own ``/healthz/ready``."""
        return await acts.call(PROBE_MASTER_API, ProbeMasterApiInput(url=m.api_url, ca_file=self.inp.api_ca_file,
                                                                     insecure=self.inp.api_insecure),
                               ProbeMasterApiResult, timeouts=self.timeouts)

    async def _logs_tail(self, m: MasterSpec) -> str:
        res = await self._cmd(m.access, [MASTER_LOGS, "api", "api", f"--tail={self.inp.logs_tail}"])
        return (res.stdout or res.stderr).strip()[-4000:] or f"(no output, exit {res.exit_code})"

    async def _gate(self, m: MasterSpec, row: MasterRow, kind: str, what: str) -> str:
        """Gate ``<kind>/<master>/<n>`` with the choices ``wait`` (what approve takes: wait again,
        after a fix) and ``restart`` (``lockkeeper decide ID GATE restart``: run ``master-restart
        api`` again); returns the choice, or raises StepAborted on a reject or the timeout."""
        n = self._gate_n[f"{kind}/{m.name}"] = self._gate_n.get(f"{kind}/{m.name}", 0) + 1
        gate_id = f"{kind}/{m.name}/{n}"
        text = (f"{what}. Approve (or decide {gate_id} wait) to wait again after a fix; decide {gate_id} "
                f"{RESTART_AGAIN} to run master-restart api again; reject to abort. The next master does not start.")
        row.state = "waiting-gate"
        self.touch()
        answer = await self.gates.step(gate_id, text, self.inp.gates, choices=("wait", RESTART_AGAIN), again=True)
        row.state = "running"
        self.touch()
        if not answer.passed:
            raise StepAborted(f"{answer.why_not()}: {what}")
        return answer.choice or "wait"

    async def api_back(self, m: MasterSpec, row: MasterRow) -> None:
        """Wait for ``ok`` on this master's own endpoint; gate at each deadline (module doc)."""
        while True:
            deadline = workflow.now() + timedelta(seconds=self.inp.api_ready_timeout_seconds)
            self.set(row, "api-ready", f"{m.api_url}/healthz/ready returns ok")

            async def check() -> Check:
                p = await self.probe(m)
                return Check(p.ready, "ok" if p.ready else (p.error or f"HTTP {p.status}: {p.body.strip()}"))

            hs = await wait_until(check, name=f"api/{m.name}", deadline=deadline, stop=lambda: self.control.abort,
                                  backoff=Backoff(initial=self.inp.api_poll_seconds, maximum=self.inp.api_poll_seconds * 2, factor=1.5),
                                  board=self.status.health, on_poll=lambda _: self.touch())
            if hs.state == "ok":
                row.logs_tail = None
                return
            if self.control.abort:
                raise StepAborted(self.control.abort_reason or "aborted")
            self.set(row, "api-ready", "reading master-logs api api")
            row.logs_tail = await self._logs_tail(m)
            what = (f"master {m.name} API not ready after {self.inp.api_ready_timeout_seconds:.0f}s ({hs.last}); "
                    f"master-logs api api --tail={self.inp.logs_tail}:\n{row.logs_tail}")
            if await self._gate(m, row, "api", what) == "restart":
                await self.restart(m, row, "api", again=True)

    # --- step 3b: mirror pods -----------------------------------------------------------------------

    async def pods_ready(self, m: MasterSpec, row: MasterRow) -> None:
        """master-api/-controllers mirror pods Ready (and on ``expected_image``), gated at the deadline."""
        comps = [c for c in self.inp.action.restart if c in ("api", "controllers")] or ["api", "controllers"]
        image = self.inp.expected_image
        while True:
            deadline = workflow.now() + timedelta(seconds=self.inp.pods_ready_timeout_seconds)
            self.set(row, "mirror-pods", f"{', '.join(f'master-{c}-{m.name}' for c in comps)} Ready" + (f" on {image}" if image else ""))

            async def check() -> Check:
                pods: MasterPods = await acts.call(READ_MASTER_PODS, MasterPodsInput(master=m.name, components=comps), MasterPods,
                                                   timeouts=self.timeouts)
                bad = [f"{p.name}: " + ("missing" if not p.exists else "not Ready" if not p.ready else f"image {p.image}")
                       for p in pods.pods if not (p.exists and p.ready and (image is None or p.image == image))]
                return Check(not bad, "; ".join(bad) or "Ready")

            hs = await wait_until(check, name=f"pods/{m.name}", deadline=deadline, stop=lambda: self.control.abort,
                                  backoff=Backoff(initial=self.inp.api_poll_seconds, maximum=self.inp.api_poll_seconds * 4),
                                  board=self.status.health, on_poll=lambda _: self.touch())
            if hs.state == "ok":
                return
            if self.control.abort:
                raise StepAborted(self.control.abort_reason or "aborted")
            if await self._gate(m, row, "pods", f"mirror pods of {m.name} not ready: {hs.last}") == "restart":
                await self.restart(m, row, "api", again=True)
