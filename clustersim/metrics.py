"""``GET /metrics``: the simulated cluster's state as Prometheus metrics, so real alert rules evaluate.

The body is the Prometheus text exposition format, version 0.0.4 (https://prometheus.io/docs/
instrumenting/exposition_formats/#text-based-format), rendered by the official Python client
(``prometheus-client``, :func:`prometheus_client.exposition.generate_latest`) from a custom
collector that reads the store when it is scraped: its escaping of label values, ``# HELP`` /
``# TYPE`` lines and float formatting are the reference implementation's, so nothing here
re-implements the format. Values follow the simulator's state at scrape time (a node that goes
NotReady changes its ``kube_node_status_condition`` series at the next scrape).

Names and labels are those of the exporters a cluster runs for what clustersim models:

- kube-state-metrics (https://github.com/kubernetes/kube-state-metrics, ``docs/metrics/``):
  ``kube_node_info``, ``kube_node_spec_unschedulable``, ``kube_node_spec_taint``,
  ``kube_node_status_condition{node,condition,status}`` (one series per status true / false /
  unknown, 1 for the node's), ``kube_pod_info``, ``kube_pod_owner``, ``kube_pod_status_phase``
  (one series per phase), ``kube_pod_status_ready{namespace,pod,uid,condition}``,
  ``kube_pod_container_status_restarts_total``, ``kube_pod_container_status_waiting_reason``,
  ``kube_poddisruptionbudget_status_{current_healthy,desired_healthy,expected_pods,
  pod_disruptions_allowed,observed_generation}``, ``kube_deployment_{spec_replicas,spec_paused,
  metadata_generation}``, ``kube_deployment_status_{replicas,replicas_available,
  replicas_unavailable,replicas_updated,replicas_ready,observed_generation}``,
  ``kube_daemonset_status_{current_number_scheduled,desired_number_scheduled,number_available,
  number_misscheduled,number_ready,number_unavailable,updated_number_scheduled,
  observed_generation}``, ``kube_daemonset_metadata_generation``;
- openshift-state-metrics (https://github.com/openshift/openshift-state-metrics,
  ``docs/deploymentconfig-metrics.md``; kube-state-metrics has no DeploymentConfig):
  ``openshift_deploymentconfig_{spec_replicas,spec_paused,metadata_generation}``,
  ``openshift_deploymentconfig_status_{replicas,replicas_available,replicas_unavailable,
  replicas_updated,observed_generation}``;
- the node exporter's target health: ``up{job="node-exporter",instance=NODE}``, 1 while the
  node's host runs (the hosts component's host state when the scenario has hosts, else the
  node's Ready condition: clustersim's NotReady nodes are rebooting or stuck in a reboot);
- gluster-prometheus (https://github.com/gluster/gluster-prometheus, ``gluster-exporter/
  metric_brick.go``, ``metric_volume_counts.go``, ``metric_volume.go``), for scenarios with a
  ``gluster:`` section: ``gluster_brick_up{volume,hostname,brick_path,peer_id,pid}`` (1 online,
  0 down), ``gluster_volume_up{volume}``, ``gluster_volume_heal_count{volume,brick_path,host}``
  and ``gluster_volume_split_brain_heal_count{volume,brick_path,host}``. The exporter's
  ``cluster_id`` label (a glusterd2 cluster ID) is left out, as on a glusterd (GD1) cluster.

The endpoint stands for several scrape targets at once, like a federation endpoint: series of
kube-state-metrics carry no ``job``/``instance`` (the scrape adds them: name the scrape job
``kube-state-metrics``, as kube-prometheus does, and the kubernetes-mixin's selectors match),
while ``up`` of the node exporter carries its own ``job`` and ``instance``. Scrape it with
``honor_labels: true`` (Prometheus ``scrape_config``) so those are kept.

Like the ``/_sim/`` admin routes, ``/metrics`` is outside ``/api``: never faulted, never recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from clustersim.agents import logic

if TYPE_CHECKING:
    from clustersim.sim import ClusterSim

#: The exposition format's content type (text format 0.0.4, what ``generate_latest`` renders).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
STATUSES = ("true", "false", "unknown")
NODE_EXPORTER_JOB = "node-exporter"

_PDB = "poddisruptionbudgets.policy"
_DC = "deploymentconfigs.apps.openshift.io"


def _num(value: Any) -> float:
    try:
        return float(value or 0)
    except (TypeError, ValueError):
        return 0.0


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in logic.status(obj).get("conditions") or [] if c.get("type") == kind), None)


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


class ClusterCollector:
    """A ``prometheus_client`` collector over a running :class:`~clustersim.sim.ClusterSim`:
    :meth:`collect` yields the metric families of the module doc from the store (and the hosts
    and gluster components, when present) as they are now."""

    def __init__(self, sim: ClusterSim) -> None:
        self.sim = sim

    def collect(self) -> Iterator[Metric]:
        """Every family, in the order of the module doc."""
        yield from self._nodes()
        yield from self._pods()
        yield from self._pdbs()
        yield from self._deployments()
        yield from self._daemonsets()
        yield from self._deploymentconfigs()
        yield from self._node_exporter()
        yield from self._gluster()

    # ------------------------------------------------------------------ kube-state-metrics: nodes
    def _nodes(self) -> Iterator[Metric]:
        info = _gauge("kube_node_info", "Information about a cluster node.",
                      ["node", "kernel_version", "os_image", "container_runtime_version", "kubelet_version",
                       "kubeproxy_version", "pod_cidr", "provider_id", "system_uuid", "internal_ip"])
        unsched = _gauge("kube_node_spec_unschedulable", "Whether a node can schedule new pods.", ["node"])
        taint = _gauge("kube_node_spec_taint", "The taint of a cluster node.", ["node", "key", "value", "effect"])
        cond = _gauge("kube_node_status_condition", "The condition of a cluster node.", ["node", "condition", "status"])
        for node in self.sim.store.list_refs("nodes"):
            name = logic.meta(node).get("name", "")
            ni = logic.status(node).get("nodeInfo") or {}
            ip = next((a.get("address", "") for a in logic.status(node).get("addresses") or [] if a.get("type") == "InternalIP"), "")
            spec = logic.spec(node)
            info.add_metric([name, ni.get("kernelVersion", ""), ni.get("osImage", ""), ni.get("containerRuntimeVersion", ""),
                             ni.get("kubeletVersion", ""), ni.get("kubeProxyVersion", ""), spec.get("podCIDR", ""),
                             spec.get("providerID", ""), ni.get("systemUUID", ""), ip], 1)
            unsched.add_metric([name], 1 if spec.get("unschedulable") else 0)
            for t in spec.get("taints") or []:
                taint.add_metric([name, t.get("key", ""), t.get("value", ""), t.get("effect", "")], 1)
            for c in logic.status(node).get("conditions") or []:
                have = str(c.get("status", "Unknown")).lower()
                for s in STATUSES:
                    cond.add_metric([name, c.get("type", ""), s], 1 if have == s else 0)
        yield from (info, unsched, taint, cond)

    # ------------------------------------------------------------------ kube-state-metrics: pods
    def _pods(self) -> Iterator[Metric]:
        base = ["namespace", "pod", "uid"]
        info = _gauge("kube_pod_info", "Information about pod.",
                      [*base, "host_ip", "pod_ip", "node", "created_by_kind", "created_by_name", "priority_class",
                       "host_network"])
        owner = _gauge("kube_pod_owner", "Information about the Pod's owner.",
                       [*base, "owner_kind", "owner_name", "owner_is_controller"])
        phase = _gauge("kube_pod_status_phase", "The pods current phase.", [*base, "phase"])
        ready = _gauge("kube_pod_status_ready", "Describes whether the pod is ready to serve requests.", [*base, "condition"])
        restarts = CounterMetricFamily("kube_pod_container_status_restarts_total",
                                       "The number of container restarts per container.", labels=[*base, "container"])
        waiting = _gauge("kube_pod_container_status_waiting_reason",
                         "Describes the reason the container is currently in waiting state.", [*base, "container", "reason"])
        for pod in self.sim.store.list_refs("pods"):
            meta, spec, st = logic.meta(pod), logic.spec(pod), logic.status(pod)
            ids = [meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", "")]
            refs = meta.get("ownerReferences") or []
            ctrl = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
            info.add_metric([*ids, st.get("hostIP", ""), st.get("podIP", ""), spec.get("nodeName", ""),
                             (ctrl or {}).get("kind", "<none>"), (ctrl or {}).get("name", "<none>"),
                             spec.get("priorityClassName", ""), str(bool(spec.get("hostNetwork"))).lower()], 1)
            if not refs:
                owner.add_metric([*ids, "<none>", "<none>", "<none>"], 1)
            for r in refs:
                owner.add_metric([*ids, r.get("kind", ""), r.get("name", ""), str(bool(r.get("controller"))).lower()], 1)
            current = st.get("phase", "")
            for p in PHASES:
                phase.add_metric([*ids, p], 1 if current == p else 0)
            rc = _condition(pod, "Ready")
            if rc is not None:
                have = str(rc.get("status", "Unknown")).lower()
                for s in STATUSES:
                    ready.add_metric([*ids, s], 1 if have == s else 0)
            for cs in st.get("containerStatuses") or []:
                restarts.add_metric([*ids, cs.get("name", "")], _num(cs.get("restartCount")))
                why = ((cs.get("state") or {}).get("waiting") or {}).get("reason")
                if why:
                    waiting.add_metric([*ids, cs.get("name", ""), why], 1)
        yield from (info, owner, phase, ready, restarts, waiting)

    # ------------------------------------------------------------------ kube-state-metrics: PDBs
    def _pdbs(self) -> Iterator[Metric]:
        fields = {"current_healthy": "currentHealthy", "desired_healthy": "desiredHealthy", "expected_pods": "expectedPods",
                  "pod_disruptions_allowed": "disruptionsAllowed", "observed_generation": "observedGeneration"}
        yield from self._counters(_PDB, "kube_poddisruptionbudget_status_", "poddisruptionbudget", fields, {})

    # ------------------------------------------------------------------ kube-state-metrics: workloads
    def _deployments(self) -> Iterator[Metric]:
        status = {"replicas": "replicas", "replicas_available": "availableReplicas",
                  "replicas_unavailable": "unavailableReplicas", "replicas_updated": "updatedReplicas",
                  "replicas_ready": "readyReplicas", "observed_generation": "observedGeneration"}
        yield from self._counters("deployments.apps", "kube_deployment_status_", "deployment", status,
                                  {"kube_deployment_spec_replicas": ("Number of desired pods for a deployment.", _spec_replicas),
                                   "kube_deployment_spec_paused": ("Whether the deployment is paused.", _paused),
                                   "kube_deployment_metadata_generation": ("Sequence number of the desired state.",
                                                                           _generation)})

    def _daemonsets(self) -> Iterator[Metric]:
        status = {"current_number_scheduled": "currentNumberScheduled", "desired_number_scheduled": "desiredNumberScheduled",
                  "number_available": "numberAvailable", "number_misscheduled": "numberMisscheduled",
                  "number_ready": "numberReady", "number_unavailable": "numberUnavailable",
                  "updated_number_scheduled": "updatedNumberScheduled", "observed_generation": "observedGeneration"}
        yield from self._counters("daemonsets.apps", "kube_daemonset_status_", "daemonset", status,
                                  {"kube_daemonset_metadata_generation": ("Sequence number of the desired state.",
                                                                          _generation)})

    def _deploymentconfigs(self) -> Iterator[Metric]:
        status = {"replicas": "replicas", "replicas_available": "availableReplicas",
                  "replicas_unavailable": "unavailableReplicas", "replicas_updated": "updatedReplicas",
                  "observed_generation": "observedGeneration"}
        yield from self._counters(_DC, "openshift_deploymentconfig_status_", "deploymentconfig", status,
                                  {"openshift_deploymentconfig_spec_replicas": ("Number of desired pods.", _spec_replicas),
                                   "openshift_deploymentconfig_spec_paused": ("Whether the config is paused.", _paused),
                                   "openshift_deploymentconfig_metadata_generation": ("Sequence number of the desired state.",
                                                                                      _generation)})

    def _counters(self, resource: str, prefix: str, kind: str, status: dict[str, str],
                  extra: dict[str, tuple[str, Callable[[dict[str, Any]], float]]]) -> Iterator[Metric]:
        """One gauge per ``status`` field (``prefix`` + name, from ``.status[field]``) and per
        ``extra`` name (help text, function of the object), labelled ``namespace`` and ``kind``."""
        fams = {n: _gauge(prefix + n, f"The {kind}'s .status.{f}.", ["namespace", kind]) for n, f in status.items()}
        more = {n: _gauge(n, doc, ["namespace", kind]) for n, (doc, _) in extra.items()}
        for obj in self.sim.store.list_refs(resource):
            ids = [logic.meta(obj).get("namespace", ""), logic.meta(obj).get("name", "")]
            for n, f in status.items():
                fams[n].add_metric(ids, _num(logic.status(obj).get(f)))
            for n, (_, fn) in extra.items():
                more[n].add_metric(ids, float(fn(obj)))
        yield from more.values()
        yield from fams.values()

    # ------------------------------------------------------------------ node exporter targets
    def _node_exporter(self) -> Iterator[Metric]:
        up = _gauge("up", "1 if the node exporter target answered its last scrape, else 0.", ["job", "instance"])
        hosts = getattr(self.sim.components.get("hosts"), "hosts", None) or {}
        for node in self.sim.store.list_refs("nodes"):
            name = logic.meta(node).get("name", "")
            host = hosts.get(name)
            if host is not None:
                alive = bool(getattr(host, "up", True))
            else:
                rc = _condition(node, "Ready")
                alive = rc is not None and rc.get("status") == "True"
            up.add_metric([NODE_EXPORTER_JOB, name], 1 if alive else 0)
        yield up

    # ------------------------------------------------------------------ gluster-prometheus
    def _gluster(self) -> Iterator[Metric]:
        gluster = self.sim.components.get("gluster")
        if gluster is None or not hasattr(gluster, "snapshot"):
            return
        snap = gluster.snapshot()
        brick_up = _gauge("gluster_brick_up", "Brick up (1-up, 0-down)",
                          ["volume", "hostname", "brick_path", "peer_id", "pid"])
        vol_up = _gauge("gluster_volume_up", "Volume is started or not (1-started, 0-not started)", ["volume"])
        heal = _gauge("gluster_volume_heal_count", "self heal count for volume", ["volume", "brick_path", "host"])
        split = _gauge("gluster_volume_split_brain_heal_count", "self heal count for volume in split brain",
                       ["volume", "brick_path", "host"])
        peers = {p["node"]: p.get("uuid", "") for p in snap.get("peers") or []}
        for vol in snap.get("volumes") or []:
            name = vol["name"]
            vol_up.add_metric([name], 1 if vol.get("started") else 0)
            split_of = {b: rs.get("split_brain", 0) for rs in vol.get("replica_sets") or [] for b in rs.get("bricks") or []}
            for b in vol.get("bricks") or []:
                brick_up.add_metric([name, b["host"], b["path"], peers.get(b.get("node", ""), ""), str(b.get("pid", ""))],
                                    1 if b.get("online") else 0)
                heal.add_metric([name, b["path"], b["host"]], _num(b.get("pending_heal")))
                split.add_metric([name, b["path"], b["host"]], _num(split_of.get(b["name"], 0)))
        yield from (brick_up, vol_up, heal, split)


def _spec_replicas(obj: dict[str, Any]) -> float:
    replicas = logic.spec(obj).get("replicas")
    return 1.0 if replicas is None else _num(replicas)  # apps/v1 defaults spec.replicas to 1


def _paused(obj: dict[str, Any]) -> float:
    return 1.0 if logic.spec(obj).get("paused") else 0.0


def _generation(obj: dict[str, Any]) -> float:
    return _num(logic.meta(obj).get("generation", 1))


def render(sim: ClusterSim) -> bytes:
    """The exposition body of ``sim`` now (text format 0.0.4, UTF-8)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(sim))  # type: ignore[arg-type]
    return generate_latest(registry)
