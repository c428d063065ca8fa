"""The control-plane activities: ``probe_master_api`` (one GET of one master's own
``/healthz/ready``, with aiohttp) and ``read_master_pods`` (the master's mirror pods through the
Kubernetes gateway). Neither retries by itself: the workflow polls with backoff and a deadline."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import aiohttp
from temporalio import activity

from activities.cluster.base import GatewayActivities
from activities.control_plane.models import (
    PROBE_MASTER_API,
    READ_MASTER_PODS,
    MasterPods,
    MasterPodsInput,
    MirrorPod,
    ProbeMasterApiInput,
    ProbeMasterApiResult,
)
from activities.kube import objects
from activities.kube.errors import NotFound

if TYPE_CHECKING:
    from activities.kube.gateway import KubeGateway


def _ssl(input: ProbeMasterApiInput) -> ssl.SSLContext | bool:
    if not input.url.startswith("https"):
        return False
    if input.insecure:
        return False
    ctx = ssl.create_default_context(cafile=input.ca_file) if input.ca_file else ssl.create_default_context()
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2  # curl --tlsv1.2, as openshift-ansible probes
    return ctx


@activity.defn(name=PROBE_MASTER_API, no_thread_cancel_exception=True)
async def probe_master_api(input: ProbeMasterApiInput) -> ProbeMasterApiResult:
    """One GET of ``url + path``: ready when 200 with body ``ok``. A refused or timed-out
    connection is an answer (``ready=False`` with ``error``), never an activity failure."""
    url = input.url.rstrip("/") + input.path
    timeout = aiohttp.ClientTimeout(total=input.timeout_seconds)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http, http.get(url, ssl=_ssl(input)) as resp:
            body = (await resp.text())[:200]
            return ProbeMasterApiResult(ready=resp.status == 200 and body.strip() == "ok", status=resp.status, body=body)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        return ProbeMasterApiResult(ready=False, error=f"{type(exc).__name__}: {exc}"[:300])


class ControlPlaneActivities(GatewayActivities):
    """``read_master_pods`` bound to one gateway factory (``probe_master_api`` needs none)."""

    ACTIVITIES = ("read_master_pods",)

    @activity.defn(name=READ_MASTER_PODS, no_thread_cancel_exception=True)
    def read_master_pods(self, input: MasterPodsInput) -> MasterPods:
        """``master-<component>-<master>`` for each component; a missing one has ``exists=False``."""
        out: list[MirrorPod] = []
        for comp in input.components:
            name = f"master-{comp}-{input.master}"
            try:
                pod = self.gateway.get_pod(input.namespace, name)
            except NotFound:
                out.append(MirrorPod(name=name, component=comp))
                continue
            containers = (pod.get("spec") or {}).get("containers") or [{}]
            out.append(MirrorPod(name=name, component=comp, exists=True, ready=objects.condition(pod, "Ready") == "True",
                                 phase=(pod.get("status") or {}).get("phase"), image=containers[0].get("image")))
        return MasterPods(pods=out)


def make_control_plane_activities(gateway: KubeGateway | Callable[[], KubeGateway]) -> list[Callable[..., Any]]:
    """The control-plane activities for a Worker: the probe plus ``read_master_pods`` bound to
    ``gateway`` (or a factory)."""
    factory = (lambda: gateway) if hasattr(gateway, "get_node") else gateway
    return [probe_master_api, *ControlPlaneActivities(factory).activities()]  # type: ignore[arg-type]
