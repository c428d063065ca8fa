"""Legacy discovery documents (/api/v1, /apis, /apis/G/V) built from the served resource table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clustersim.resources import RESOURCES, ResourceType

SERVER_VERSION = {"major": "1", "minor": "37", "gitVersion": "v1.37.0-clustersim", "gitCommit": "clustersim",
                  "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.25.0",
                  "compiler": "gc", "platform": "linux/amd64"}


def _groups(resources: Mapping[str, ResourceType]) -> dict[str, list[ResourceType]]:
    out: dict[str, list[ResourceType]] = {}
    for rt in resources.values():
        out.setdefault(rt.api_version, []).append(rt)
    return out


# Resources in the "all" category (``kubectl get all`` / ``oc get all``), as their real
# discovery entries list it (k8s registry storage ``Categories()``; origin's apps.openshift.io).
ALL_CATEGORY = frozenset({
    "pods", "replicationcontrollers", "services", "daemonsets.apps", "deployments.apps", "replicasets.apps",
    "statefulsets.apps", "cronjobs.batch", "jobs.batch", "deploymentconfigs.apps.openshift.io",
})

_SUBRESOURCE_VERBS = {"status": ["get", "patch", "update"], "scale": ["get", "patch", "update"]}


def api_resource_list(group_version: str, resources: Mapping[str, ResourceType] | None = None) -> dict | None:
    """The legacy APIResourceList for one group/version, or None if not served. ``resources``: the
    served kinds (default ``RESOURCES``; a store's ``resource_types`` adds its optional kinds)."""
    rts = _groups(RESOURCES if resources is None else resources).get(group_version)
    if group_version == "policy/v1" and rts is None:
        rts = []
    if rts is None:
        return None
    resources: list[dict] = []
    for rt in rts:
        entry_main: dict[str, Any] = {"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                                      "kind": rt.kind, "verbs": list(rt.verbs), "shortNames": list(rt.short_names)}
        if rt.key in ALL_CATEGORY:
            entry_main["categories"] = ["all"]
        resources.append(entry_main)
        for sub in rt.subresources:
            entry: dict[str, Any] = {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced}
            if sub == "eviction":
                entry.update(group="policy", version="v1", kind="Eviction", verbs=["create"])
            elif sub == "scale":
                entry.update(group="autoscaling", version="v1", kind="Scale", verbs=_SUBRESOURCE_VERBS[sub])
            elif sub == "exec":
                entry.update(kind="PodExecOptions", verbs=["create", "get"])
            else:
                entry.update(kind=rt.kind, verbs=_SUBRESOURCE_VERBS.get(sub, ["get"]))
            resources.append(entry)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def _api_group(name: str, versions: list[str]) -> dict:
    vs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": vs, "preferredVersion": vs[0]}


def api_group_list(resources: Mapping[str, ResourceType] | None = None) -> dict:
    """The APIGroupList served at /apis (``resources`` as for :func:`api_resource_list`)."""
    groups: dict[str, list[str]] = {}
    for rt in (RESOURCES if resources is None else resources).values():
        if rt.group and rt.version not in groups.setdefault(rt.group, []):
            groups[rt.group].append(rt.version)
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_api_group(g, vs) for g, vs in groups.items()]}
