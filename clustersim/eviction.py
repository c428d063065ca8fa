"""The pods/eviction subresource as a ``Store`` mixin (k8s pkg/registry/core/pod/storage/eviction.go)."""

from __future__ import annotations

from typing import Any

from clustersim.apierrors import ApiError
from clustersim.selectors import matches_label_selector_object


class EvictionMixin:
    """Adds ``evict`` to ``Store`` (uses its get_ref/list_refs/delete/mutate and clock)."""

    clock: Any

    def evict(self, name: str, namespace: str, delete_options: dict | None = None, *,
              dry_run: bool = False) -> dict:
        """The pods/eviction subresource (k8s pkg/registry/core/pod/storage/eviction.go).

        Returns the 201 Success Status. Raises ApiError: 404 missing pod, 429 PDB violation
        (exact apiserver body, no Retry-After), 429 + Retry-After 10 while a PDB's
        observedGeneration lags, 500 for more than one matching PDB.
        """
        opts = delete_options or {}
        dry_run = dry_run or "All" in (opts.get("dryRun") or [])
        pod = self.get_ref("pods", name, namespace)
        grace = opts.get("gracePeriodSeconds")
        pre = opts.get("preconditions")
        phase = (pod.get("status") or {}).get("phase")
        ignore_pdb = bool(pod["metadata"].get("deletionTimestamp")) or phase in ("Succeeded", "Failed", "Pending")
        if not ignore_pdb:
            labels = pod["metadata"].get("labels")
            pdbs = [p for p in self.list_refs("poddisruptionbudgets.policy", namespace)
                    if matches_label_selector_object((p.get("spec") or {}).get("selector"), labels)]
            if len(pdbs) > 1:
                raise ApiError.internal(
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")
            if pdbs:
                pdb = pdbs[0]
                pname = pdb["metadata"]["name"]
                st = pdb.get("status") or {}
                if st.get("observedGeneration", 0) < pdb["metadata"].get("generation", 1):
                    raise ApiError(429, "TooManyRequests",
                                   "Cannot evict pod as it would violate the pod's disruption budget.",
                                   {"causes": [{"reason": "DisruptionBudget", "message":
                                                f"The disruption budget {pname} is still being processed by the server."}],
                                    "retryAfterSeconds": 10},
                                   headers={"Retry-After": "10"})
                # eviction.go: an unready pod does not count towards healthy, so evicting it
                # takes no disruption: always with unhealthyPodEvictionPolicy AlwaysAllow, and
                # under the default IfHealthyBudget only while the budget is met.
                policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
                if not _pod_ready(pod) and (
                    policy == "AlwaysAllow"
                    or (st.get("currentHealthy", 0) >= st.get("desiredHealthy", 0) > 0)
                ):
                    self.delete("pods", name, namespace, grace_period_seconds=grace, preconditions=pre,
                                dry_run=dry_run)
                    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
                if st.get("disruptionsAllowed", 0) <= 0:
                    raise ApiError(429, "TooManyRequests",
                                   "Cannot evict pod as it would violate the pod's disruption budget.",
                                   {"causes": [{"reason": "DisruptionBudget", "message":
                                                f"The disruption budget {pname} needs {st.get('desiredHealthy', 0)}"
                                                f" healthy pods and has {st.get('currentHealthy', 0)} currently"}]})
                if not dry_run:
                    now = self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")

                    def take(p: dict) -> None:
                        s = p.setdefault("status", {})
                        s["disruptionsAllowed"] = s.get("disruptionsAllowed", 0) - 1
                        s.setdefault("disruptedPods", {})[name] = now

                    self.mutate("poddisruptionbudgets.policy", pname, namespace, take, subresource="status")
        self.delete("pods", name, namespace, grace_period_seconds=grace, preconditions=pre, dry_run=dry_run)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _pod_ready(pod: dict) -> bool:
    """The pod's Ready condition is True (podutil.IsPodReady)."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])
