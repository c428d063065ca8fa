"""Mirror pods of the masters' static pods (``kube-system/master-{api,controllers,etcd}-<master>``).

OpenShift 3.10+ runs the control plane as static pods (o-a ``roles/openshift_control_plane/files/
apiserver.yaml``, ``controller.yaml``, ``etcd.yaml``); the kubelet publishes a mirror pod for each.
The masters component creates them Running at start and reflects restarts on them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clustersim.agents.objects import make_pod, new_uid, rfc3339
from clustersim.agents.podstatus import NetworkState, kubelet_status

if TYPE_CHECKING:
    from clustersim.clock import Clock
    from clustersim.store import Store


def ensure_static_pods(store: Store, clock: Clock, master: str, images: dict[str, str]) -> None:
    """Create ``master-<what>-<master>`` for each ``what -> image`` of ``images`` as Running (a
    kubelet-shaped status), unless present. Nothing when ``master`` is not a Node."""
    node = store.try_get("nodes", master)
    if node is None:
        return
    now = rfc3339(clock.now())
    for what, image in images.items():
        name = f"master-{what}-{master}"
        if store.try_get("pods", name, "kube-system") is not None:
            continue
        tmpl = {"metadata": {"labels": {"openshift.io/component": what, "openshift.io/control-plane": "true"}},
                "spec": {"hostNetwork": True, "restartPolicy": "Always", "priorityClassName": "system-node-critical",
                         "containers": [{"name": what, "image": image, "imagePullPolicy": "IfNotPresent",
                                         "terminationMessagePath": "/dev/termination-log",
                                         "terminationMessagePolicy": "File"}]}}
        pod = make_pod(name, "kube-system", tmpl, owner=None, node_name=master, created=now)
        pod["metadata"]["annotations"] = {"kubernetes.io/config.mirror": new_uid(f"mirror/{name}"),
                                          "kubernetes.io/config.source": "file"}
        pod["status"] = kubelet_status(pod, node, NetworkState(), now)
        store.create("pods", pod)


def mirror_pod(store: Store, master: str, what: str, *, ready: bool, bump: bool = False) -> None:
    """Set the mirror pod's containers (and Ready/ContainersReady) to ``ready``; ``bump`` adds one
    to restartCount. Nothing when the pod does not exist."""
    name = f"master-{what}-{master}"
    if store.try_get("pods", name, "kube-system") is None:
        return

    def fn(o: dict[str, Any]) -> None:
        st = o.setdefault("status", {})
        for c in st.get("containerStatuses") or []:
            c["ready"] = ready
            if bump:
                c["restartCount"] = int(c.get("restartCount", 0)) + 1
        for c in st.get("conditions") or []:
            if c.get("type") in ("Ready", "ContainersReady"):
                c["status"] = "True" if ready else "False"

    store.mutate("pods", name, "kube-system", fn, subresource="status")
