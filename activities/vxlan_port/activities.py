"""R5 activities: :class:`VxlanActivities` (procedures-spec §7.3, phases A, C, E, F, G).

Kubernetes calls go through the gateway (synchronous, on the worker's thread pool); host files
through the host executors (async); the fan-out runs its execs on a pool of its own sized to the
targets (the default pool's few threads would serialise the switch). Errors: ``InvalidInput`` (bad input, not
retryable), ``RecordChanged`` (a ``test`` op or a file hash says somebody else changed the
object: not retryable, the workflow opens a gate), ``NodeUnreachable`` (retryable).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ClassVar

import yaml
from temporalio import activity

from activities.cluster.base import GatewayActivities
from activities.cluster.recordmap import save_record_configmap
from activities.context import beating, fail, heartbeat, heartbeating, pause
from activities.host.executors import NodeCommandError
from activities.host.factory import ExecutorFactory
from activities.kube.errors import NotFound
from activities.kube.objects import annotations, condition
from activities.vxlan_port.fanout import exec_pool, fan_out
from activities.vxlan_port.models import (
    CheckResult,
    ClusterNetworkState,
    ControllersInput,
    ControllersState,
    DaemonSetRecord,
    DeleteClusterNetworkInput,
    DeleteClusterNetworkResult,
    FanoutInput,
    FanoutResult,
    FileRecord,
    MasterApiInput,
    NodeSwitch,
    PreflightInput,
    PreflightResult,
    ReadFileInput,
    ReplacePodInput,
    ReplacePodResult,
    ResolveTargetsInput,
    SaveRecordInput,
    SdnPod,
    SdnRef,
    SwitchTarget,
    WriteFileResult,
    WriteMasterConfigInput,
)
from activities.vxlan_port.models import TRIGGERS_ANNOTATION as TRIGGERS

if TYPE_CHECKING:
    from activities.kube.gateway import KubeGateway

#: origin 3.11 leader election of the controllers (ConfigMap, annotation; client-go resourcelock).
LEADER_CM = ("kube-system", "openshift-master-controllers")
LEADER_ANN = "control-plane.alpha.kubernetes.io/leader"
CLUSTER_NETWORK = ("ClusterNetwork", "default")
#: Fields `oc get --export` drops (plus status): what a re-create or a restore must not carry.
EXPORT_DROPS = ("uid", "resourceVersion", "managedFields", "creationTimestamp", "generation", "selfLink")


def sanitize(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as ``oc get --export`` shows it: no status, uid, resourceVersion,
    managedFields, creationTimestamp, generation or selfLink."""
    out = json.loads(json.dumps(obj))
    out.pop("status", None)
    meta = out.get("metadata") or {}
    for key in EXPORT_DROPS:
        meta.pop(key, None)
    return out


def sdn_container_index(ds: dict[str, Any], container: str) -> int:
    """Index of ``container`` in the DaemonSet's pod template; InvalidInput when absent."""
    for i, c in enumerate(ds["spec"]["template"]["spec"].get("containers") or []):
        if c.get("name") == container:
            return i
    raise fail("InvalidInput", f"daemonset {ds['metadata']['name']} has no container {container!r}")


def pod_image(pod: dict[str, Any], container: str) -> str:
    """The image ``container`` runs (status first: what the kubelet started), else the spec's."""
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        if c.get("name") == container and c.get("image"):
            return str(c["image"])
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") == container:
            return str(c.get("image", ""))
    return ""


def pod_ready(pod: dict[str, Any]) -> bool:
    """Running, not terminating, condition Ready True."""
    return (not pod["metadata"].get("deletionTimestamp") and (pod.get("status") or {}).get("phase") == "Running"
            and condition(pod, "Ready") == "True")


def restarts(pod: dict[str, Any]) -> int:
    """Sum of the pod's containers' restartCount."""
    return sum(int(c.get("restartCount", 0)) for c in (pod.get("status") or {}).get("containerStatuses") or [])


def leader_of(cm: dict[str, Any]) -> str | None:
    """``holderIdentity`` of the leader-election record (origin prefixes a host name, sometimes
    with ``_<uuid>``: the part before ``_``)."""
    raw = annotations(cm).get(LEADER_ANN)
    if not raw:
        return None
    try:
        holder = str(json.loads(raw).get("holderIdentity") or "")
    except ValueError:
        return None
    return holder.split("_", 1)[0] or None


def cluster_network_state(cn: dict[str, Any] | None) -> ClusterNetworkState:
    """:class:`ClusterNetworkState` of a ClusterNetwork object (None: missing). origin defaults
    ``vxlanPort`` to 4789 (openshift/api ``network/v1/types.go``)."""
    if cn is None:
        return ClusterNetworkState(exists=False)
    return ClusterNetworkState(exists=True, vxlan_port=int(cn.get("vxlanPort") or 4789), uid=cn["metadata"].get("uid"), object=cn)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class VxlanActivities(GatewayActivities):
    """The R5 activities over one gateway and the host executors (``executors``)."""

    ACTIVITIES: ClassVar[tuple[str, ...]] = (
        "preflight_vxlan_port", "resolve_sdn_targets", "switch_vxlan_port", "replace_sdn_pod", "get_cluster_network", "delete_cluster_network", "check_master_api",
        "check_master_controllers", "read_host_file", "write_master_config", "save_vxlan_record",
    )

    def __init__(self, gateway_factory: Callable[[], KubeGateway], executors: ExecutorFactory | None = None) -> None:
        super().__init__(gateway_factory)
        self.executors = executors or ExecutorFactory(gateway_factory=gateway_factory)

    # --- reads --------------------------------------------------------------------------------

    def _sdn_pods(self, sdn: SdnRef) -> dict[str, SdnPod]:
        pods: dict[str, SdnPod] = {}
        for p in self.gateway.list("Pod", sdn.namespace, label_selector=sdn.label_selector):
            node = (p.get("spec") or {}).get("nodeName")
            if not node or p["metadata"].get("deletionTimestamp"):
                continue
            pods[node] = SdnPod(node=node, name=p["metadata"]["name"], ready=pod_ready(p),
                                image=pod_image(p, sdn.container), restarts=restarts(p))
        return pods

    def _cluster_network(self) -> dict[str, Any] | None:
        try:
            return self.gateway.get(*CLUSTER_NETWORK)
        except NotFound:
            return None

    def _leader(self) -> str | None:
        try:
            return leader_of(self.gateway.get("ConfigMap", LEADER_CM[1], LEADER_CM[0]))
        except NotFound:
            return None

    @activity.defn(name="preflight_vxlan_port", no_thread_cancel_exception=True)
    def preflight_vxlan_port(self, input: PreflightInput) -> PreflightResult:
        """Phase A's reads (see :class:`PreflightResult`); the workflow judges them (names the
        operator gave that are not Nodes are the kit's ``names-exist`` check). Raises
        InvalidInput when the DaemonSet is missing or has no sdn container; API errors as
        retryable Api* types."""
        with self.planning_errors(policy_decides=True), beating("preflight"):  # the caller's retry policy decides
            gw, sdn = self.gateway, input.sdn
            listed = gw.list("Node")
            nodes = {n["metadata"]["name"]: condition(n, "Ready") == "True" for n in listed}
            gluster = sorted(n["metadata"]["name"] for n in listed if "glusterfs" in (n["metadata"].get("labels") or {}))
            try:
                ds = gw.get("DaemonSet", sdn.daemonset, sdn.namespace)
            except NotFound:
                raise fail("InvalidInput", f"daemonset {sdn.namespace}/{sdn.daemonset} not found") from None
            idx = sdn_container_index(ds, sdn.container)
            record = DaemonSetRecord(
                namespace=sdn.namespace, name=sdn.daemonset, uid=ds["metadata"].get("uid", ""),
                resource_version=ds["metadata"].get("resourceVersion", ""), container_index=idx,
                image=ds["spec"]["template"]["spec"]["containers"][idx]["image"], triggers=annotations(ds).get(TRIGGERS),
                update_strategy=((ds["spec"].get("updateStrategy") or {}).get("type") or "RollingUpdate"),
                sanitized_object=sanitize(ds),
            )
            baseline = {
                p["metadata"]["uid"]: restarts(p) for p in gw.list("Pod")
                if p["metadata"].get("namespace") != sdn.namespace and not (p.get("spec") or {}).get("hostNetwork")
                and not p["metadata"].get("deletionTimestamp")
            }
            return PreflightResult(nodes=nodes, glusterfs_nodes=gluster, sdn_pods=self._sdn_pods(sdn),
                                   daemonset=record, cluster_network=cluster_network_state(self._cluster_network()),
                                   leader=self._leader(), workload_restarts=baseline)

    @activity.defn(name="get_cluster_network", no_thread_cancel_exception=True)
    def get_cluster_network(self, _: None = None) -> ClusterNetworkState:
        """ClusterNetwork ``default`` now."""
        return cluster_network_state(self._cluster_network())

    @activity.defn(name="check_master_controllers", no_thread_cancel_exception=True)
    def check_master_controllers(self, input: ControllersInput) -> ControllersState:
        """``kube-system/master-controllers-<master>`` Ready (and restarted at least
        ``min_restarts`` times), plus the current leader."""
        try:
            pod = self.gateway.get("Pod", f"master-controllers-{input.master}", "kube-system")
        except NotFound:
            return ControllersState(ready=False, leader=self._leader(), detail="controllers pod not found")
        n = restarts(pod)
        ready = pod_ready(pod) and n >= input.min_restarts
        return ControllersState(ready=ready, restarts=n, leader=self._leader(),
                                detail=f"ready={pod_ready(pod)} restarts={n} (want >= {input.min_restarts})")

    @activity.defn(name="save_vxlan_record", no_thread_cancel_exception=True)
    def save_vxlan_record(self, input: SaveRecordInput) -> str:
        """The shared record ConfigMap write (:func:`activities.cluster.recordmap.save_record_configmap`)
        under this procedure's activity name. Returns its resourceVersion."""
        return save_record_configmap(self.gateway, input).resource_version

    # --- DaemonSet and pods -----------------------------------------------------------------------

    @activity.defn(name="replace_sdn_pod", no_thread_cancel_exception=True)
    def replace_sdn_pod(self, input: ReplacePodInput) -> ReplacePodResult:
        """OnDelete replacement of one node's SDN pod (check first: a Ready pod on ``image``
        there is left alone), then wait until the new one is Ready on ``image``. Heartbeats;
        a timeout is a retryable ``PodNotReady``."""
        sdn, started, deleted = input.sdn, time.monotonic(), None
        selector = f"spec.nodeName={input.node}"
        while True:
            pods = [p for p in self.gateway.list("Pod", sdn.namespace, label_selector=sdn.label_selector, field_selector=selector)
                    if not p["metadata"].get("deletionTimestamp")]
            ready = [p for p in pods if self._spec_image(p, sdn.container) == input.image and pod_ready(p)
                     and pod_image(p, sdn.container) == input.image]
            if ready:
                return ReplacePodResult(node=input.node, pod=ready[0]["metadata"]["name"], deleted=deleted,
                                        seconds=round(time.monotonic() - started, 3))
            old = [p for p in pods if self._spec_image(p, sdn.container) != input.image]
            for p in old:
                try:
                    self.gateway.delete("Pod", p["metadata"]["name"], sdn.namespace)
                    deleted = p["metadata"]["name"]
                except NotFound:
                    pass
            if time.monotonic() - started > input.timeout_seconds:
                raise fail("PodNotReady", f"no Ready sdn pod on {input.node} with {input.image} after {input.timeout_seconds:.0f}s "
                                          f"(pods: {', '.join(p['metadata']['name'] for p in pods) or 'none'})", retryable=True)
            heartbeat({"node": input.node, "deleted": deleted})
            pause(input.poll_seconds)

    @staticmethod
    def _spec_image(pod: dict[str, Any], container: str) -> str:
        return next((str(c.get("image", "")) for c in (pod.get("spec") or {}).get("containers") or []
                     if c.get("name") == container), "")

    # --- ClusterNetwork -----------------------------------------------------------------------

    @activity.defn(name="delete_cluster_network", no_thread_cancel_exception=True)
    def delete_cluster_network(self, input: DeleteClusterNetworkInput) -> DeleteClusterNetworkResult:
        """``oc delete clusternetwork default``, only while its uid is the recorded one: a
        retried delete never removes the object the controllers re-created."""
        cn = self._cluster_network()
        if cn is None:
            return DeleteClusterNetworkResult(outcome="already-gone")
        if cn["metadata"].get("uid") != input.uid:
            return DeleteClusterNetworkResult(outcome="replaced", detail=f"uid now {cn['metadata'].get('uid')}, port {cn.get('vxlanPort')}")
        try:
            self.gateway.delete(*CLUSTER_NETWORK)
        except NotFound:
            return DeleteClusterNetworkResult(outcome="already-gone")
        return DeleteClusterNetworkResult(outcome="deleted")

    # --- masters ------------------------------------------------------------------------------

    @activity.defn(name="check_master_api", no_thread_cancel_exception=True)
    async def check_master_api(self, input: MasterApiInput) -> CheckResult:
        """GET ``<api_url>/healthz/ready``: ok iff 200 with body ``ok`` (kube-apiserver's
        healthz handler). A refused connection is an answer (not ready), not an error."""
        import ssl

        import aiohttp

        ctx: ssl.SSLContext | bool | None = None
        if input.api_url.startswith("https"):
            ctx = False if input.insecure else ssl.create_default_context(cafile=input.ca_file)
        url = input.api_url.rstrip("/") + "/healthz/ready"
        try:
            timeout = aiohttp.ClientTimeout(total=input.timeout_seconds)
            async with aiohttp.ClientSession(timeout=timeout) as s, s.get(url, ssl=ctx) as r:
                body = (await r.text()).strip()
                return CheckResult(ok=r.status == 200 and body == "ok", detail=f"{r.status} {body[:80]}")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return CheckResult(ok=False, detail=f"{type(exc).__name__}: {exc}"[:200])

    # --- host files ---------------------------------------------------------------------------

    async def _run(self, access: Any, argv: list[str], stdin: str | None = None, timeout: float = 30.0) -> Any:
        try:
            return await self.executors.for_access(access).run(argv, timeout=timeout, stdin=stdin)
        except NodeCommandError as exc:
            raise fail("NodeUnreachable", str(exc), retryable=True) from None

    @activity.defn(name="read_host_file", no_thread_cancel_exception=True)
    async def read_host_file(self, input: ReadFileInput) -> FileRecord:
        """``cat PATH`` on the host: the FileRecord before any change."""
        res = await self._run(input.access, ["cat", input.path])
        if not res.ok:
            raise fail("InvalidInput", f"{input.host}: cat {input.path}: {res.summary()}")
        return FileRecord(host=input.host, path=input.path, sha256_before=sha256(res.stdout), content_before=res.stdout)

    @activity.defn(name="write_master_config", no_thread_cancel_exception=True)
    async def write_master_config(self, input: WriteMasterConfigInput) -> WriteFileResult:
        """Atomic write (``install -m 0600 /dev/stdin PATH.lockkeeper`` then ``mv -f``), guarded by
        the file's hash, then verified: read back, same hash, YAML with
        ``networkConfig.vxlanPort == port`` (None: key absent)."""
        want = sha256(input.content)
        async with heartbeating({"host": input.host}):
            cur = await self._run(input.access, ["cat", input.path])
            if not cur.ok:
                raise fail("NodeUnreachable", f"{input.host}: cat {input.path}: {cur.summary()}", retryable=True)
            now = sha256(cur.stdout)
            written = False
            if now != want:
                if now != input.sha256_before:
                    raise fail("RecordChanged", f"{input.host}:{input.path} changed since it was recorded (sha256 {now[:12]})")
                tmp = f"{input.path}.lockkeeper"
                for argv, stdin in ((["install", "-m", "0600", "/dev/stdin", tmp], input.content), (["mv", "-f", tmp, input.path], None)):
                    res = await self._run(input.access, argv, stdin=stdin)
                    if not res.ok:
                        raise fail("WriteFailed", f"{input.host}: {' '.join(argv)}: {res.summary()}", retryable=True)
                written = True
            back = await self._run(input.access, ["cat", input.path])
        if not back.ok or sha256(back.stdout) != want:
            raise fail("WriteFailed", f"{input.host}:{input.path} does not read back as written", retryable=True)
        try:
            doc = yaml.safe_load(back.stdout) or {}
        except yaml.YAMLError as exc:
            raise fail("RecordChanged", f"{input.host}:{input.path} is not valid YAML after the edit: {exc}") from None
        port = ((doc.get("networkConfig") or {}) if isinstance(doc, dict) else {}).get("vxlanPort")
        if port != input.port:
            raise fail("RecordChanged", f"{input.host}:{input.path} networkConfig.vxlanPort reads {port!r}, want {input.port!r}")
        return WriteFileResult(written=written, sha256_after=want)

    # --- the fan-out --------------------------------------------------------------------------

    @activity.defn(name="resolve_sdn_targets", no_thread_cancel_exception=True)
    async def resolve_sdn_targets(self, input: ResolveTargetsInput) -> list[SwitchTarget]:
        """One target per node, before the gate, so the fan-out only execs (§7.3 E "Prepare"):
        pod-exec → the node's Ready SDN pod; ssh → the sdn container id from
        ``docker ps --filter label=io.kubernetes.container.name=sdn --filter
        label=io.kubernetes.pod.namespace=NS --filter name=k8s_sdn_ -q`` (safer than the seed's
        ``grep k8s_sdn_sdn``). TargetsMissing (retried) names the nodes without exactly one."""
        sdn = input.sdn
        if input.via == "pod-exec":
            async with heartbeating({"sdn pods": sdn.namespace}):  # a slow LIST must not look like a dead worker
                pods = await asyncio.to_thread(self._sdn_pods, sdn)
            missing = [n for n in input.nodes if n not in pods or not pods[n].ready]
            if missing:
                raise fail("TargetsMissing", f"no Ready sdn pod on: {', '.join(missing)}", retryable=True)
            return [SwitchTarget(node=n, via="pod-exec", namespace=sdn.namespace, pod=pods[n].name, container=sdn.container)
                    for n in input.nodes]
        # Filters of different keys are ANDed by docker; the name filter (the kubelet's container name,
        # k8s_<container>_<pod>_<namespace>_...) also narrows runtimes that ignore labels.
        argv = ["docker", "ps", "--filter", f"label=io.kubernetes.container.name={sdn.container}",
                "--filter", f"label=io.kubernetes.pod.namespace={sdn.namespace}", "--filter", f"name=k8s_{sdn.container}_", "-q"]
        missing_access = [n for n in input.nodes if n not in input.access]
        if missing_access:
            raise fail("InvalidInput", f"ssh switch needs host access for: {', '.join(missing_access)}")
        results = await asyncio.gather(*(self._run(input.access[n], argv) for n in input.nodes))
        targets, bad = [], []
        for n, res in zip(input.nodes, results, strict=True):
            ids = res.stdout.split() if res.ok else []
            if len(ids) != 1:
                bad.append(f"{n} ({res.summary() if not res.ok else f'{len(ids)} sdn containers'})")
                continue
            targets.append(SwitchTarget(node=n, via="ssh", namespace=sdn.namespace, container=sdn.container,
                                        container_id=ids[0], access=input.access[n]))
        if bad:
            raise fail("TargetsMissing", f"no single sdn container on: {', '.join(bad)}", retryable=True)
        return targets

    def _exec_gateway(self) -> KubeGateway:
        """A gateway of its own for one exec, on the shared gateway's configuration.

        Why: ``kubernetes.stream`` swaps ``call_api`` on the ApiClient instance during the call;
        with execs in several threads on one shared client a thread can restore another's
        websocket hook, and every later request of that client fails as a websocket handshake."""
        from activities.kube.gateway import KubeGateway

        shared = self.gateway
        api = shared._api_client  # noqa: SLF001 - only its configuration is reused
        return KubeGateway(type(api)(api.configuration), description=shared.description)

    def _pod_exec(self, target: SwitchTarget, argv: list[str], timeout: float) -> tuple[int | None, str, str]:
        gw = self._exec_gateway()
        try:
            out = gw.exec_in_pod(target.namespace, target.pod or "", argv, container=target.container, timeout=timeout)
        finally:
            gw.close()
        return out.exit_code, out.stdout.decode(errors="replace"), out.stderr.decode(errors="replace")

    async def run_on_target(self, target: SwitchTarget, argv: list[str], timeout: float,
                            pool: ThreadPoolExecutor | None = None) -> tuple[int | None, str, str]:
        """One command on one fan-out target (pod exec in ``pool``, or ``docker exec`` over SSH)."""
        if target.via == "pod-exec":
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(pool, self._pod_exec, target, argv, timeout)
        assert target.access is not None and target.container_id
        try:
            res = await self.executors.for_access(target.access).run(["docker", "exec", target.container_id, *argv], timeout=timeout)
        except NodeCommandError as exc:
            return None, "", str(exc)
        return res.exit_code, res.stdout, res.stderr

    @activity.defn(name="switch_vxlan_port", no_thread_cancel_exception=True)
    async def switch_vxlan_port(self, input: FanoutInput) -> FanoutResult:
        """The fast fan-out (:func:`activities.vxlan_port.fanout.fan_out`). Heartbeats every
        node's outcome as it finishes; a retried attempt resumes from those details."""
        attempt, previous, lost_since = 1, {}, None
        if activity.in_activity():
            info = activity.info()
            attempt = info.attempt
            lost_since = info.scheduled_time.timestamp() if attempt > 1 else None
            if info.heartbeat_details:
                try:
                    raw = info.heartbeat_details[0]
                    previous = {k: NodeSwitch.model_validate(v) for k, v in (raw or {}).items()}
                except (ValueError, TypeError, AttributeError):
                    previous = {}
        workers = min(256, max(1, len(input.targets) if input.concurrency is None else input.concurrency))
        state: dict[str, Any] = {k: v.model_dump(mode="json") for k, v in previous.items()}

        def progress(done: dict[str, NodeSwitch]) -> None:
            state.update({k: v.model_dump(mode="json") for k, v in done.items()})
            heartbeat(state)

        async with exec_pool(workers) as pool:
            async def run(target: SwitchTarget, argv: list[str], timeout: float) -> tuple[int | None, str, str]:
                return await self.run_on_target(target, argv, timeout, pool)

            async with heartbeating(state):
                return await fan_out(input, run, attempt=attempt, previous=previous, progress=progress, lost_since=lost_since)


def make_vxlan_activities(gateway_factory: Callable[[], KubeGateway]) -> list[Callable[..., Any]]:
    """The R5 activities for a Worker, bound to ``gateway_factory`` (hosts: the worker's SSH settings)."""
    return VxlanActivities(gateway_factory).activities()
