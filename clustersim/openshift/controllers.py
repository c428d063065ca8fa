"""The OpenShift 3.11 controllers clustersim runs: DeploymentConfigs, ReplicationControllers and
image triggers.

``OpenShiftControllers`` reacts to store events (no polling) and changes state only through the
Store, like the core agents. Pods it creates are Pending without a node: the core scheduler binds
them (nodeSelector, taints, anti-affinity; FailedScheduling events with its message code) and the
kubelet agent starts them.

- ReplicationController (k8s replication manager): keeps ``spec.replicas`` pods from the
  template (named ``<rc>-<5 chars>``), deleting unscheduled/unready ones first; status counters.
- DeploymentConfig (origin 3.11, see ``clustersim.openshift.dc``): on create or a template change
  with a ConfigChange trigger, ``status.latestVersion+1`` and RC ``<dc>-<v>``; the Rolling deployer
  scales it up and the old one down; after ``rollingParams.timeoutSeconds`` (simulated) without
  completion the rollout fails: phase Failed, new RC to 0, the last Complete RC back to
  ``spec.replicas``, ``Progressing=False/ProgressDeadlineExceeded``.
- Image triggers: an object (DaemonSet, Deployment, DeploymentConfig) carrying
  ``image.openshift.io/triggers`` gets the container named by each trigger's ``fieldPath`` set back
  to the image its ImageStreamTag resolves to (``image_streams``: ``"ns/name:tag" -> image``)
  ``trigger_seconds`` after it differs, for as long as the annotation is there.

``active`` False (no master's controllers running) pauses every controller; setting it True again
resyncs everything.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import TYPE_CHECKING, Any

from clustersim.agents.logic import is_terminating, pod_ready
from clustersim.agents.objects import make_pod, new_uid, random_suffix, rfc3339
from clustersim.loops import Background
from clustersim.openshift import dc as dclogic
from clustersim.openshift.kinds import (
    ANN_DEPLOYMENT_PHASE,
    ANN_IMAGE_TRIGGERS,
    ANN_STATUS_REASON,
    DC,
    PHASE_COMPLETE,
    PHASE_FAILED,
    PHASE_NEW,
    PHASE_RUNNING,
    RC,
)

if TYPE_CHECKING:
    from clustersim.clock import Clock
    from clustersim.store import Event, Store

log = logging.getLogger(__name__)

TRIGGER_KINDS = ("daemonsets.apps", "deployments.apps", DC)
_FIELD_PATH = re.compile(r'^spec\.template\.spec\.(containers|initContainers)\[\?\(@\.name=="([^"]+)"\)\]\.image$')


def parse_triggers(annotation: str | None) -> list[dict[str, Any]]:
    """The ``image.openshift.io/triggers`` JSON list ([] for a missing or malformed value)."""
    if not annotation:
        return []
    try:
        value = json.loads(annotation)
    except ValueError:
        return []
    return [t for t in value if isinstance(t, dict)] if isinstance(value, list) else []


def trigger_target(trigger: dict[str, Any]) -> tuple[str, str] | None:
    """(``containers``/``initContainers``, container name) addressed by a trigger's fieldPath."""
    m = _FIELD_PATH.match(str(trigger.get("fieldPath", "")))
    return (m.group(1), m.group(2)) if m else None


class OpenShiftControllers:
    """DC, RC and image-trigger controllers over ``store`` (see the module docstring).

    ``image_streams``: ImageStreamTag ``"namespace/name:tag"`` -> image reference.
    ``trigger_seconds``: simulated delay before a trigger puts an image back.
    Use ``await start()`` / ``await stop()``."""

    def __init__(self, store: Store, clock: Clock, *, image_streams: dict[str, str] | None = None,
                 trigger_seconds: float = 2.0) -> None:
        self.store = store
        self.clock = clock
        self.image_streams = dict(image_streams or {})
        self.trigger_seconds = trigger_seconds
        self._active = True
        self._dirty = asyncio.Event()
        self._dirty_rc: set[tuple[str, str]] = set()
        self._dirty_dc: set[tuple[str, str]] = set()
        self._bg = Background("openshift controllers")
        self._rollout_t0: dict[str, float] = {}

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Subscribe to the store, resync every RC/DC/trigger and start the reconcile loop."""
        if self._bg.sub is not None:
            return
        sub = self.store.subscribe([DC, RC, "pods", *TRIGGER_KINDS])
        self._resync_all()
        self._bg.follow(sub, self._route, "openshift-dispatch")
        self._bg.spawn(self._loop(), "openshift-controllers")

    async def stop(self) -> None:
        """Cancel tasks and timers, close the subscription (idempotent)."""
        await self._bg.stop()

    @property
    def active(self) -> bool:
        """False while no master's controllers run: nothing reconciles."""
        return self._active

    @active.setter
    def active(self, value: bool) -> None:
        was, self._active = self._active, value
        if value and not was:
            self._resync_all()

    def _resync_all(self) -> None:
        self._dirty_rc.update(self.store.iter_keys(RC))
        self._dirty_dc.update(self.store.iter_keys(DC))
        for res in TRIGGER_KINDS:
            for ns, name in self.store.iter_keys(res):
                self._check_triggers(res, ns, name)
        self._dirty.set()

    # ------------------------------------------------------------------ events
    def _route(self, ev: Event) -> None:
        meta = ev.object.get("metadata") or {}
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        if ev.resource == "pods":
            for ref in meta.get("ownerReferences") or []:
                if ref.get("kind") == "ReplicationController":
                    self._dirty_rc.add((ns, ref["name"]))
                    self._dirty.set()
            return
        if ev.resource == RC:
            self._dirty_rc.add((ns, name))
            for ref in meta.get("ownerReferences") or []:
                if ref.get("kind") == "DeploymentConfig":
                    self._dirty_dc.add((ns, ref["name"]))
        if ev.resource == DC:
            self._dirty_dc.add((ns, name))
        if ev.resource in TRIGGER_KINDS and ev.type != "DELETED":
            self._check_triggers(ev.resource, ns, name)
        self._dirty.set()

    async def _loop(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            await asyncio.sleep(0)  # let a burst of events accumulate
            if not self._active:
                continue
            for step in (self._sync_dcs, self._sync_rcs):
                try:
                    step()
                except Exception:
                    log.exception("openshift controllers: %s failed", step.__name__)

    def _after(self, key: tuple[str, str, str], sim_seconds: float, fn: Any) -> None:
        self._bg.timers.after(key, self.clock.real(sim_seconds), fn)

    def _now(self) -> str:
        return rfc3339(self.clock.now())

    # ------------------------------------------------------------------ ReplicationControllers
    def _owned_pods(self, owner: dict[str, Any]) -> list[dict[str, Any]]:
        uid = owner["metadata"]["uid"]
        return [p for p in self.store.list_refs("pods", owner["metadata"].get("namespace"))
                if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])]

    def _sync_rcs(self) -> None:
        dirty, self._dirty_rc = self._dirty_rc, set()
        for ns, name in sorted(dirty):
            rc = self.store.try_get(RC, name, ns)
            if rc is None:
                continue
            live = [p for p in self._owned_pods(rc) if not is_terminating(p)]
            want = int(rc["spec"].get("replicas", 1))
            tmpl = rc["spec"].get("template") or {}
            for _ in range(want - len(live)):
                pod = make_pod(f"{name}-{random_suffix(new_uid())}", ns, tmpl, owner=rc, generate_name=f"{name}-")
                ann = (tmpl.get("metadata") or {}).get("annotations")
                if ann:
                    pod["metadata"]["annotations"] = dict(ann)
                self.store.create("pods", pod)
            if len(live) > want:
                # The replication manager deletes unscheduled, then not-ready pods first.
                victims = sorted(live, key=lambda p: (bool(p["spec"].get("nodeName")), pod_ready(p)))
                for p in victims[: len(live) - want]:
                    self.store.delete("pods", p["metadata"]["name"], ns)
            st = dclogic.rc_status(rc, self._owned_pods(rc))
            self.store.mutate(RC, name, ns, lambda o, st=st: o.__setitem__("status", st), subresource="status")

    # ------------------------------------------------------------------ DeploymentConfigs
    def _rcs_of(self, dc: dict[str, Any]) -> list[dict[str, Any]]:
        uid = dc["metadata"]["uid"]
        return [rc for rc in self.store.list_refs(RC, dc["metadata"].get("namespace"))
                if any(r.get("uid") == uid for r in rc["metadata"].get("ownerReferences") or [])]

    def _set_rc(self, ns: str, name: str, replicas: int | None = None, phase: str | None = None,
                reason: str | None = None) -> None:
        def fn(o: dict[str, Any]) -> None:
            if replicas is not None:
                o["spec"]["replicas"] = replicas
            ann = o["metadata"].setdefault("annotations", {})
            if phase is not None:
                ann[ANN_DEPLOYMENT_PHASE] = phase
            if reason is not None:
                ann[ANN_STATUS_REASON] = reason

        self.store.mutate(RC, name, ns, fn)

    def _sync_dcs(self) -> None:
        dirty, self._dirty_dc = self._dirty_dc, set()
        for ns, name in sorted(dirty):
            dc = self.store.try_get(DC, name, ns)
            if dc is None or (dc.get("spec") or {}).get("paused"):
                continue
            self._sync_dc(dc)

    def _sync_dc(self, dc: dict[str, Any]) -> None:
        ns, name = dc["metadata"]["namespace"], dc["metadata"]["name"]
        now = self._now()
        rcs = self._rcs_of(dc)
        version = int((dc.get("status") or {}).get("latestVersion", 0))
        latest = next((rc for rc in rcs if dclogic.rc_version(rc) == version), None)
        if dclogic.has_config_change_trigger(dc) and (version == 0 or (
                latest is not None and dclogic.template_changed(dc, latest))):
            version += 1

            def bump(o: dict[str, Any], v: int = version) -> None:
                st = o.setdefault("status", {})
                st["latestVersion"] = v
                st["details"] = {"message": "config change", "causes": [{"type": "ConfigChange"}]}

            self.store.mutate(DC, name, ns, bump, subresource="status")
            dc = self.store.get(DC, name, ns)
            latest = None
        if latest is None and version > 0:
            rc = dclogic.build_rc(dc, version, now)
            rc = self.store.create(RC, rc)
            self._event(dc, "DeploymentCreated", f"Created new replication controller \"{rc['metadata']['name']}\" "
                        f"for version {version}")
            rcs = self._rcs_of(dc)
            latest = next((r for r in rcs if dclogic.rc_version(r) == version), None)
        if latest is None:
            return
        desired = int(dc["spec"].get("replicas", 1))
        older = [rc for rc in rcs if dclogic.rc_version(rc) < version]
        phase = dclogic.rc_phase(latest)
        lname = latest["metadata"]["name"]
        if phase in (PHASE_NEW, PHASE_RUNNING):
            if phase == PHASE_NEW:
                self._set_rc(ns, lname, phase=PHASE_RUNNING)
            timeout = dclogic.rolling_timeout_seconds(dc)
            # The deployer's clock starts when the controller first sees the rollout (monotonic,
            # in simulated seconds: creationTimestamps have only second precision).
            t0 = self._rollout_t0.setdefault(latest["metadata"]["uid"], self.clock.monotonic())
            started = (self.clock.monotonic() - t0) / self.clock.time_scale
            if dclogic.rollout_done(desired, latest, older):
                self._set_rc(ns, lname, phase=PHASE_COMPLETE)
            elif started >= timeout:
                self._set_rc(ns, lname, replicas=0, phase=PHASE_FAILED, reason="deployment timed out")
                back = dclogic.last_complete(older)
                for rc in older:
                    target = desired if back is not None and rc["metadata"]["uid"] == back["metadata"]["uid"] else 0
                    if rc["spec"].get("replicas") != target:
                        self._set_rc(ns, rc["metadata"]["name"], replicas=target)
                self._event(dc, "DeploymentFailed", f'replication controller "{lname}" has failed progressing',
                            "Warning")
            else:
                for rc_n, target in dclogic.rolling_targets(desired, latest, older).items():
                    cur = next(r for r in rcs if r["metadata"]["name"] == rc_n)
                    if cur["spec"].get("replicas") != target:
                        self._set_rc(ns, rc_n, replicas=target)
                # Re-check at the deadline even if no pod changes by then.
                self._after(("dc-timeout", ns, name), max(0.0, timeout - started) + 0.01,
                            lambda: self._mark_dc(ns, name))
        else:
            # Not rolling: the active RC (latest Complete) follows spec.replicas, others stay at 0.
            active = latest if phase == PHASE_COMPLETE else dclogic.last_complete(older)
            for rc in rcs:
                target = desired if active is not None and rc["metadata"]["uid"] == active["metadata"]["uid"] else 0
                if rc["spec"].get("replicas") != target:
                    self._set_rc(ns, rc["metadata"]["name"], replicas=target)
        rcs = self._rcs_of(dc)
        st = dclogic.dc_status(self.store.get_ref(DC, name, ns), rcs, now)
        self.store.mutate(DC, name, ns, lambda o: o.__setitem__("status", st), subresource="status")

    def _mark_dc(self, ns: str, name: str) -> None:
        self._dirty_dc.add((ns, name))
        self._dirty.set()

    def _event(self, obj: dict[str, Any], reason: str, message: str, etype: str = "Normal") -> None:
        m = obj["metadata"]
        now = self._now()
        self.store.create("events", {
            "metadata": {"name": f"{m['name']}.{new_uid()[:8]}{random_suffix(message, 8)}", "namespace": m["namespace"]},
            "involvedObject": {"apiVersion": obj.get("apiVersion", "apps.openshift.io/v1"),
                               "kind": obj.get("kind", "DeploymentConfig"), "name": m["name"],
                               "namespace": m["namespace"], "uid": m["uid"],
                               "resourceVersion": m.get("resourceVersion", "")},
            "reason": reason, "message": message, "type": etype,
            "source": {"component": "deploymentconfig-controller"},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        })

    # ------------------------------------------------------------------ image triggers
    def _check_triggers(self, res: str, ns: str, name: str) -> None:
        """Schedule a revert if an image named by a trigger differs from its resolved image."""
        obj = self.store.try_get(res, name, ns)
        if obj is None or not self._stale_images(obj):
            return
        key = ("trigger", f"{res}/{ns}", name)
        if not self._bg.timers.pending(key):
            self._after(key, self.trigger_seconds, lambda: self._apply_triggers(res, ns, name))

    def _stale_images(self, obj: dict[str, Any]) -> list[tuple[str, str, str]]:
        """(list key, container, image) for every trigger whose container runs another image."""
        ns = obj["metadata"].get("namespace", "")
        ann = (obj["metadata"].get("annotations") or {}).get(ANN_IMAGE_TRIGGERS)
        out = []
        spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        for trig in parse_triggers(ann):
            if trig.get("paused") in (True, "true"):
                continue
            src = trig.get("from") or {}
            if src.get("kind") != "ImageStreamTag":
                continue
            image = self.image_streams.get(f"{src.get('namespace') or ns}/{src.get('name')}")
            target = trigger_target(trig)
            if image is None or target is None:
                continue
            for c in spec.get(target[0]) or []:
                if c.get("name") == target[1] and c.get("image") != image:
                    out.append((target[0], target[1], image))
        return out

    def _apply_triggers(self, res: str, ns: str, name: str) -> None:
        if not self._active:
            return
        obj = self.store.try_get(res, name, ns)
        if obj is None:
            return
        stale = self._stale_images(obj)
        if not stale:
            return

        def fn(o: dict[str, Any]) -> None:
            spec = o["spec"]["template"]["spec"]
            for lst, cname, image in stale:
                for c in spec.get(lst) or []:
                    if c.get("name") == cname:
                        c["image"] = image

        self.store.mutate(res, name, ns, fn)

