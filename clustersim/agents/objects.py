"""Builders for schema-valid Kubernetes/OpenShift objects used by scenarios and agents.

Every builder returns a plain dict in the API's JSON shape, complete enough for the
pydantic-based ``kubernetes`` 37 client (full ``status.nodeInfo``, container names,
condition type/status, ownerReference apiVersion/kind/name/uid, DaemonSet counters).
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from typing import Any
from urllib.parse import quote

from clustersim.agents.logic import (
    ANN_CURRENT_CONFIG,
    ANN_DESIRED_CONFIG,
    ANN_DESIRED_DRAIN,
    ANN_LAST_APPLIED_DRAIN,
    ANN_REASON,
    ANN_STATE,
    STATE_DONE,
)


def rfc3339(ts: datetime) -> str:
    """Kubernetes metav1.Time text: UTC, second precision, trailing Z."""
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


def short_hash(*parts: str, length: int = 10) -> str:
    """Stable lowercase hex digest, used for pod-template-hash and controller-revision-hash."""
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s utilrand alphabet (no vowels / ambiguous digits)


def random_suffix(seed: str, n: int = 5) -> str:
    """Deterministic pod-name suffix in apimachinery's alphabet, derived from ``seed``."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_NAME_ALPHABET[b % len(_NAME_ALPHABET)] for b in digest[:n])


def new_uid(seed: str | None = None) -> str:
    """A UID: random, or derived from ``seed`` so scenarios are reproducible."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, seed) if seed else uuid.uuid4())


def node_condition(ctype: str, status: str, reason: str, message: str, now: str) -> dict[str, Any]:
    """A NodeCondition with heartbeat and transition times."""
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


def make_node(
    name: str,
    *,
    roles: list[str],
    config: str,
    created: str,
    zone: str | None = None,
    unschedulable: bool = False,
    taints: list[dict[str, Any]] | None = None,
    extra_labels: dict[str, str] | None = None,
    index: int = 0,
) -> dict[str, Any]:
    """A Ready Node at rendered config ``config`` with the daemon idle (state Done,
    desiredDrain == lastAppliedDrain == uncordon-<config>)."""
    lbls = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.openshift.io/os_id": "rhcos",
    }
    for role in roles:
        lbls[f"node-role.kubernetes.io/{role}"] = ""
    if zone:
        lbls["topology.kubernetes.io/zone"] = zone
    lbls.update(extra_labels or {})
    spec: dict[str, Any] = {}
    if unschedulable:
        spec["unschedulable"] = True
    all_taints = list(taints or [])
    if unschedulable and not any(t.get("key") == "node.kubernetes.io/unschedulable" for t in all_taints):
        all_taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": created})
    if all_taints:
        spec["taints"] = all_taints
    uid = new_uid(f"node/{name}")
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid,
            "creationTimestamp": created,
            "labels": lbls,
            "annotations": {
                ANN_CURRENT_CONFIG: config,
                ANN_DESIRED_CONFIG: config,
                ANN_STATE: STATE_DONE,
                ANN_REASON: "",
                ANN_DESIRED_DRAIN: f"uncordon-{config}",
                ANN_LAST_APPLIED_DRAIN: f"uncordon-{config}",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": spec,
        "status": {
            "capacity": {"cpu": "8", "memory": "32778468Ki", "pods": "250", "ephemeral-storage": "125293548Ki"},
            "allocatable": {"cpu": "7500m", "memory": "31627492Ki", "pods": "250", "ephemeral-storage": "114396791822"},
            "conditions": [
                node_condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available", created),
                node_condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", created),
                node_condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available", created),
                node_condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", created),
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{index // 250}.{index % 250 + 2}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": new_uid(f"boot/{name}/0"),
                "containerRuntimeVersion": "cri-o://1.27.1-6.rhaos4.14.gitf4c0c6e.el9",
                "kernelVersion": "5.14.0-284.41.1.el9_2.x86_64",
                "kubeProxyVersion": "v1.27.8+4fab27b",
                "kubeletVersion": "v1.27.8+4fab27b",
                "machineID": uid.replace("-", ""),
                "operatingSystem": "linux",
                "osImage": "Red Hat Enterprise Linux CoreOS 414.92.202312132152-0 (Plow)",
                "systemUUID": new_uid(f"system/{name}"),
            },
        },
    }


def make_container(name: str, image: str) -> dict[str, Any]:
    """A container spec with the fields kubectl and the clients read."""
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": {"cpu": "10m", "memory": "50Mi"}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


def pod_template(
    labels: dict[str, str],
    image: str,
    *,
    container: str = "main",
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    host_network: bool = False,
    priority_class: str | None = None,
) -> dict[str, Any]:
    """A PodTemplateSpec."""
    spec: dict[str, Any] = {
        "containers": [make_container(container, image)],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler",
        "securityContext": {},
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if host_network:
        spec["hostNetwork"] = True
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


def owner_ref(owner: dict[str, Any]) -> dict[str, Any]:
    """ownerReference to ``owner`` with controller: true."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def make_pod(
    name: str,
    namespace: str,
    template: dict[str, Any],
    *,
    owner: dict[str, Any] | None,
    extra_labels: dict[str, str] | None = None,
    node_name: str | None = None,
    created: str | None = None,
    generate_name: str | None = None,
) -> dict[str, Any]:
    """A Pending pod from ``template`` (status filled in by the scheduler and kubelet agents)."""
    lbls = dict(template.get("metadata", {}).get("labels") or {})
    lbls.update(extra_labels or {})
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": lbls, "uid": new_uid()}
    if generate_name:
        meta["generateName"] = generate_name
    if owner is not None:
        meta["ownerReferences"] = [owner_ref(owner)]
    if created:
        meta["creationTimestamp"] = created
    spec = {**template["spec"]}
    spec["containers"] = [dict(c) for c in spec["containers"]]
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def ignition_file(path: str, contents: str = "", mode: int = 420) -> dict[str, Any]:
    """An Ignition 3 ``storage.files`` entry writing ``contents`` (text, as a ``data:,`` URL with
    percent-encoding, RFC 2397) to ``path`` with ``mode`` (decimal, 420 = 0644)."""
    return {"path": path, "mode": mode, "overwrite": True, "contents": {"source": "data:," + quote(contents, safe="")}}


def make_machineconfig(
    name: str,
    *,
    role: str,
    created: str,
    files: list[str] | list[dict[str, Any]] | list[str | dict[str, Any]],
    owner_pool: str | None = None,
    sources: list[str] | None = None,
    carries_ovn: bool = False,
    units: list[dict[str, Any]] | None = None,
    ssh_keys: list[str] | None = None,
    kernel_arguments: list[str] | None = None,
    os_image_url: str = "",
    versions: tuple[str, str] = ("4.14.0", "4.14.6"),
) -> dict[str, Any]:
    """A MachineConfig (Ignition 3.2) writing ``files`` (a path, written empty, or an Ignition file
    entry, see :func:`ignition_file`), with the systemd ``units`` (Ignition unit entries: ``name``,
    ``enabled``, ``contents``), the ``core`` user's ``ssh_keys``, ``kernel_arguments`` and
    ``os_image_url``; rendered configs (``sources`` given) list their sources in
    ``metadata.annotations`` like MCO's generated-by-controller-version and release-image-version
    annotations (``versions``)."""
    ann: dict[str, str] = {}
    if sources is not None:
        ann["machineconfiguration.openshift.io/generated-by-controller-version"] = versions[0]
        ann["machineconfiguration.openshift.io/release-image-version"] = versions[1]
    if carries_ovn:
        ann["clustersim.lockkeeper.io/carries-ovn"] = "true"
    meta: dict[str, Any] = {
        "name": name,
        "uid": new_uid(f"mc/{name}"),
        "creationTimestamp": created,
        "labels": {"machineconfiguration.openshift.io/role": role},
        "annotations": ann,
    }
    if owner_pool:
        meta["ownerReferences"] = [
            {
                "apiVersion": "machineconfiguration.openshift.io/v1",
                "kind": "MachineConfigPool",
                "name": owner_pool,
                "uid": new_uid(f"mcp/{owner_pool}"),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    config: dict[str, Any] = {
        "ignition": {"version": "3.2.0"},
        "storage": {"files": [ignition_file(f) if isinstance(f, str) else dict(f) for f in files]},
    }
    if units:
        config["systemd"] = {"units": [dict(u) for u in units]}
    if ssh_keys:
        config["passwd"] = {"users": [{"name": "core", "sshAuthorizedKeys": list(ssh_keys)}]}
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": meta,
        "spec": {
            "config": config,
            "extensions": [],
            "fips": False,
            "kernelArguments": list(kernel_arguments or []),
            "kernelType": "default",
            "osImageURL": os_image_url,
        },
    }


def merge_machineconfigs(mcs: list[dict[str, Any]]) -> dict[str, Any]:
    """What a rendered config built from ``mcs`` (in order) carries, as the render controller merges
    them (MCO ``pkg/controller/common/helpers.go`` ``MergeMachineConfigs``, read, not copied): files
    by path and units by name (a later one replaces an earlier one in its place), the ``core``
    user's SSH keys and the kernel arguments appended, the last non-empty osImageURL. Returns the
    keyword arguments ``files``, ``units``, ``ssh_keys``, ``kernel_arguments``, ``os_image_url`` of
    :func:`make_machineconfig`."""
    files: dict[str, dict[str, Any]] = {}
    units: dict[str, dict[str, Any]] = {}
    keys: list[str] = []
    kargs: list[str] = []
    os_image = ""
    for mc in mcs:
        spec = mc.get("spec") or {}
        cfg = spec.get("config") or {}
        for f in (cfg.get("storage") or {}).get("files") or []:
            files[f.get("path", "")] = dict(f)
        for u in (cfg.get("systemd") or {}).get("units") or []:
            units[u.get("name", "")] = dict(u)
        for user in (cfg.get("passwd") or {}).get("users") or []:
            if user.get("name") == "core":
                keys.extend(k for k in user.get("sshAuthorizedKeys") or [] if k not in keys)
        kargs.extend(spec.get("kernelArguments") or [])
        os_image = spec.get("osImageURL") or os_image
    return {"files": list(files.values()), "units": list(units.values()), "ssh_keys": keys,
            "kernel_arguments": kargs, "os_image_url": os_image}


def make_pool(
    name: str,
    *,
    node_selector: dict[str, str],
    target: str,
    current: str,
    sources: list[str],
    created: str,
    max_unavailable: int | str = 1,
) -> dict[str, Any]:
    """A MachineConfigPool whose spec.configuration is ``target`` (the rendered config the
    pool should reach) and status.configuration ``current`` (what nodes are at)."""
    src = [{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig", "name": s} for s in sources]
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {
            "name": name,
            "uid": new_uid(f"mcp/{name}"),
            "creationTimestamp": created,
            "labels": {f"pools.operator.machineconfiguration.openshift.io/{name}": ""},
        },
        "spec": {
            "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": name}},
            "nodeSelector": {"matchLabels": dict(node_selector)},
            "maxUnavailable": max_unavailable,
            "paused": False,
            "configuration": {"name": target, "source": src},
        },
        "status": {"configuration": {"name": current, "source": src}, "conditions": []},
    }
