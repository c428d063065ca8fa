"""Node disruption policies: what the machine-config-daemon will do for a rendered-config change
(pure, deterministic; lockkeeper's own implementation of the MCO's rules).

Source: openshift/machine-config-operator ``release-4.21`` (read, not copied):

- ``pkg/daemon/update.go`` ``calculatePostConfigChangeNodeDisruptionAction``: an OS image, kernel
  arguments, FIPS, kernel type or extensions change is Reboot whatever the policies; no change to
  files, units or the ``passwd`` section is None; otherwise
  ``calculatePostConfigChangeNodeDisruptionActionFromMCDiffs``: each changed file takes the
  actions of the closest file policy (``FindClosestFilePolicyPathMatch``: the longest policy
  path equal to the file or a directory above it, ``IsSubdirectory``), a file without one means
  Reboot; each changed unit takes its unit policy's actions (by name), a unit without one means
  Reboot; a ``passwd`` change adds the ``sshkey`` actions; any Reboot makes the result
  ``[Reboot]``; ``None`` is dropped when other actions remain, several ``None`` become one;
- ``pkg/daemon/drain.go`` ``isDrainRequiredForNodeDisruptionActions``: Reboot or Drain drain;
  Special (``/etc/containers/registries.conf``) drains unless ``isSafeContainerRegistryConfChanges``
  holds; nothing else drains. ``performPostConfigChangeNodeDisruptionAction`` reboots only for
  Reboot and otherwise reloads/restarts units; the daemon then asks for the uncordon
  (``desiredDrain=uncordon-X``) without having asked for a drain.

Input shapes: ``cluster_policies`` is ``MachineConfiguration/cluster``
``status.nodeDisruptionPolicyStatus.clusterPolicies`` (openshift/api
``operator/v1/types_machineconfiguration.go``: actions ``{"type": "Reload", "reload":
{"serviceName": ...}}``); the diff is :class:`activities.machineconfig.models.ConfigChange`.
"""

from __future__ import annotations

import posixpath
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

from activities.machineconfig.models import ConfigChange, DisruptionFacts
from workflows.machineconfig.models import DisruptionAction, NodeDisruption

NONE, DRAIN, REBOOT, RELOAD, RESTART, DAEMON_RELOAD, SPECIAL = (
    "None", "Drain", "Reboot", "Reload", "Restart", "DaemonReload", "Special")
#: What a Special action reloads (MCO ``pkg/daemon/constants`` ``CRIOServiceName``).
CRIO = "crio"


def _action(raw: Mapping[str, Any]) -> DisruptionAction:
    t = str(raw.get("type") or REBOOT)
    svc = (raw.get("reload") or raw.get("restart") or {}).get("serviceName")
    if t == SPECIAL:
        svc = CRIO
    return DisruptionAction(type=t, service=str(svc) if svc else None)


def is_subdirectory(directory: str, path: str) -> bool:
    """``path`` lies below ``directory`` (both cleaned; ``/etc/foo.d`` is not below ``/etc/foo``)."""
    return posixpath.normpath(path).startswith(posixpath.normpath(directory).rstrip("/") + "/")


def closest_file_policy(path: str, files: Sequence[Mapping[str, Any]]) -> tuple[str, list[DisruptionAction]] | None:
    """The longest policy path equal to ``path`` or a directory above it, with its actions; None
    when no policy covers ``path``."""
    best: tuple[str, list[DisruptionAction]] | None = None
    for policy in files:
        p = str(policy.get("path") or "")
        if p and (path == p or is_subdirectory(p, path)) and (best is None or len(p) > len(best[0])):
            best = (p, [_action(a) for a in policy.get("actions") or []])
    return best


def _has(actions: Sequence[DisruptionAction], *types: str) -> bool:
    return any(a.type in types for a in actions)


def actions_for_changes(ssh_changed: bool, file_paths: Sequence[str], unit_names: Sequence[str],
                        cluster_policies: Mapping[str, Any]) -> tuple[list[DisruptionAction], str]:
    """The daemon's actions for these changed files, units and ``passwd`` section (module
    docstring), and a one-line reason."""
    actions: list[DisruptionAction] = []
    for path in file_paths:
        found = closest_file_policy(path, cluster_policies.get("files") or [])
        if found is None:
            return [DisruptionAction(type=REBOOT)], f"no policy for file {path}"
        actions.extend(found[1])
    for name in unit_names:
        unit = next((u for u in cluster_policies.get("units") or [] if u.get("name") == name), None)
        if unit is None:
            return [DisruptionAction(type=REBOOT)], f"no policy for unit {name}"
        actions.extend(_action(a) for a in unit.get("actions") or [])
    if ssh_changed:
        actions.extend(_action(a) for a in (cluster_policies.get("sshkey") or {}).get("actions") or [])
    what = ", ".join([*file_paths, *unit_names, *(["sshkey"] if ssh_changed else [])])
    if _has(actions, REBOOT):
        return [DisruptionAction(type=REBOOT)], f"a policy says Reboot ({what})"
    if _has(actions, NONE):
        if _has(actions, DRAIN, RELOAD, RESTART, DAEMON_RELOAD, SPECIAL):
            return [a for a in actions if a.type != NONE], f"policies for {what}"
        return [DisruptionAction(type=NONE)], f"policies for {what}"
    return actions, f"policies for {what}"


def _registries(text: str | None) -> dict[str, Any]:
    return tomllib.loads(text) if text else {}


def _registry(reg: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "prefix": str(reg.get("prefix", "")), "location": str(reg.get("location", "")),
        "insecure": bool(reg.get("insecure", False)), "blocked": bool(reg.get("blocked", False)),
        "mirror-by-digest-only": bool(reg.get("mirror-by-digest-only", False)),
        "mirror": [{"location": str(m.get("location", "")), "insecure": bool(m.get("insecure", False)),
                    "pull-from-mirror": str(m.get("pull-from-mirror", ""))} for m in reg.get("mirror") or []],
    }


def registries_conf_change_is_safe(old: str | None, new: str | None) -> bool:
    """``isSafeContainerRegistryConfChanges`` (``pkg/daemon/drain.go``): a ``registries.conf``
    change needs no drain when no unqualified-search registry was removed or reordered, no
    registry removed or changed in prefix/location/blocked/insecure, no mirror removed, and every
    added mirror (or changed ``pull-from-mirror``) is ``digest-only``. Raises
    ``tomllib.TOMLDecodeError`` (a ValueError) for text that is not TOML."""
    o, n = _registries(old), _registries(new)
    o_search = list(o.get("unqualified-search-registries") or [])
    n_search = list(n.get("unqualified-search-registries") or [])
    if n_search[:len(o_search)] != o_search:
        return False
    scoped_old = {(r := _registry(x))["prefix"] or r["location"]: r for x in o.get("registry") or []}
    scoped_new = {(r := _registry(x))["prefix"] or r["location"]: r for x in n.get("registry") or []}
    if any(scope not in scoped_new for scope in scoped_old):
        return False
    for scope, new_reg in scoped_new.items():
        old_reg = scoped_old.get(scope)
        if old_reg is None:
            mirrors = new_reg["mirror"]
            if not (all(m["pull-from-mirror"] == "digest-only" for m in mirrors) if mirrors
                    else new_reg["mirror-by-digest-only"]):
                return False
            continue
        if old_reg == new_reg:
            continue
        if any(old_reg[k] != new_reg[k] for k in ("prefix", "location", "blocked", "insecure")):
            return False
        new_by_loc = {m["location"]: m for m in new_reg["mirror"]}
        old_by_loc = {m["location"]: m for m in old_reg["mirror"]}
        if any(loc not in new_by_loc for loc in old_by_loc):
            return False
        for loc, m in new_by_loc.items():
            before = old_by_loc.get(loc)
            if before is not None and m["pull-from-mirror"] not in (before["pull-from-mirror"], "digest-only"):
                return False
            if before is None and m["pull-from-mirror"] != "digest-only" and not new_reg["mirror-by-digest-only"]:
                return False
    return True


def plan_disruption(change: ConfigChange, cluster_policies: Mapping[str, Any]) -> NodeDisruption:
    """What the daemon does to a node moving along ``change`` under ``cluster_policies``."""
    base = {"from_config": change.from_config, "nodes": list(change.nodes)}
    reboot = [DisruptionAction(type=REBOOT)]
    if change.missing:
        return NodeDisruption(**base, actions=reboot, why=f"current config {change.from_config} not found")
    always = [k for k in ("os_update", "kargs", "fips", "kernel_type", "extensions") if getattr(change, k)]
    if always:
        return NodeDisruption(**base, actions=reboot, why=f"{', '.join(always)} changed (always a reboot)")
    if not change.file_paths and not change.unit_names and not change.passwd:
        return NodeDisruption(**base, actions=[DisruptionAction(type=NONE)], drain=False, reboot=False,
                              why="no file, unit or SSH key change")
    actions, why = actions_for_changes(change.passwd, change.file_paths, change.unit_names, cluster_policies)
    if _has(actions, REBOOT, DRAIN):
        drain = True
    elif _has(actions, SPECIAL):
        try:
            drain = not registries_conf_change_is_safe(change.registries_conf_old, change.registries_conf_new)
        except ValueError:
            drain = True  # the daemon fails the update on a registries.conf it cannot parse
        why += "; registries.conf change " + ("needs a drain" if drain else "is safe (no drain)")
    else:
        drain = False
    return NodeDisruption(**base, actions=actions, drain=drain, reboot=_has(actions, REBOOT), why=why)


def plan_pool_disruption(facts: DisruptionFacts | None) -> list[NodeDisruption]:
    """One :class:`NodeDisruption` per current config of the pool's nodes (empty without facts)."""
    if facts is None:
        return []
    out = [plan_disruption(c, facts.cluster_policies) for c in facts.changes]
    if not facts.policies_current:
        for d in out:
            d.why += "; MachineConfiguration/cluster status is not current (the daemon waits up to 2 min for it)"
    return out
