"""Node disruption policies: which actions a MachineConfig update needs on a node (pure functions).

This is the simulator's ground truth for "what does the machine-config-daemon do for this diff".
It follows openshift/machine-config-operator ``release-4.21`` (commit db84d8368ef7), read, not
copied:

- ``pkg/apihelpers/apihelpers.go``: ``defaultClusterPolicies`` (:data:`DEFAULT_CLUSTER_POLICIES`)
  and ``MergeClusterPolicies`` (:func:`merge_cluster_policies`), which the operator
  (``pkg/operator/sync.go`` ``syncMachineConfiguration``) writes to
  ``MachineConfiguration/cluster`` ``status.nodeDisruptionPolicyStatus.clusterPolicies``;
- ``pkg/daemon/update.go``: ``newMachineConfigDiff`` (:func:`config_diff`),
  ``calculatePostConfigChangeNodeDisruptionAction`` (:func:`disruption_actions`) and
  ``calculatePostConfigChangeNodeDisruptionActionFromMCDiffs`` (:func:`actions_for_changes`);
- ``pkg/controller/common/helpers.go``: ``CalculateConfigFileDiffs``, ``GetChangedConfigUnitsByType``,
  ``FindClosestFilePolicyPathMatch`` and ``IsSubdirectory`` (:func:`closest_file_policy`);
- ``pkg/daemon/drain.go``: ``isDrainRequiredForNodeDisruptionActions`` (:func:`drain_required`)
  and ``isSafeContainerRegistryConfChanges`` (:func:`registries_conf_change_is_safe`).

Shapes are the API's JSON (openshift/api ``operator/v1/types_machineconfiguration.go``): an action
is ``{"type": "Reload", "reload": {"serviceName": "crio.service"}}``, ``{"type": "Restart",
"restart": {"serviceName": ...}}`` or ``{"type": T}`` for ``None``, ``Drain``, ``DaemonReload``,
``Reboot`` and the status-only ``Special`` (the daemon's own rule for
``/etc/containers/registries.conf``: reload crio, drain unless the change is safe). Cluster
policies are ``{"files": [{"path", "actions"}], "units": [{"name", "actions"}], "sshkey":
{"actions"}}``; a MachineConfig is the ``machineconfiguration.openshift.io/v1`` object (its
``spec.config`` is Ignition 3).

Rules: a changed file takes the actions of the longest policy path that equals it or is a parent
directory of it (``/etc/containers/registries.d`` covers ``/etc/containers/registries.d/a.yaml``,
not ``/etc/containers/registries.dx``); a changed file or unit without a policy means Reboot; a
changed ``passwd`` section adds the sshkey actions; any Reboot makes the result ``[Reboot]``;
``None`` is dropped when other actions remain, and several ``None`` become one; an OS image,
kernel arguments, FIPS, kernel type or extensions change is Reboot whatever the policies; no
change to files, units or passwd is ``[None]``.
"""

from __future__ import annotations

import base64
import copy
import posixpath
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes

Action = dict[str, Any]

NONE, DRAIN, REBOOT, RELOAD, RESTART, DAEMON_RELOAD, SPECIAL = (
    "None", "Drain", "Reboot", "Reload", "Restart", "DaemonReload", "Special")
ACTION_TYPES = (NONE, DRAIN, REBOOT, RELOAD, RESTART, DAEMON_RELOAD, SPECIAL)
#: The service the default policies reload (``defaultClusterPolicies`` spells it ``crio.service``).
CRIO_SERVICE = "crio.service"
#: The service a ``Special`` action reloads (MCO ``pkg/daemon/constants`` ``CRIOServiceName``: "crio").
CRIO_SPECIAL_SERVICE = "crio"
REGISTRIES_CONF = "/etc/containers/registries.conf"


def _reload(service: str) -> Action:
    return {"type": RELOAD, "reload": {"serviceName": service}}


def _restart(service: str) -> Action:
    return {"type": RESTART, "restart": {"serviceName": service}}


#: MCO release-4.21 ``pkg/apihelpers/apihelpers.go`` ``defaultClusterPolicies`` (paths from
#: ``pkg/daemon/constants``): the kubelet pull secret needs nothing, the container signature and
#: registry files reload crio, ``registries.conf`` is Special, the user CA bundle restarts
#: ``coreos-update-ca-trust.service`` then crio; no default unit policies; an sshkey change needs nothing.
DEFAULT_CLUSTER_POLICIES: dict[str, Any] = {
    "files": [
        {"path": "/var/lib/kubelet/config.json", "actions": [{"type": NONE}]},
        {"path": "/etc/machine-config-daemon/no-reboot/containers-gpg.pub", "actions": [_reload(CRIO_SERVICE)]},
        {"path": "/etc/containers/policy.json", "actions": [_reload(CRIO_SERVICE)]},
        {"path": REGISTRIES_CONF, "actions": [{"type": SPECIAL}]},
        {"path": "/etc/containers/registries.d", "actions": [_reload(CRIO_SERVICE)]},
        {"path": "/etc/crio/policies", "actions": [_reload(CRIO_SERVICE)]},
        {"path": "/etc/nmstate/openshift", "actions": [{"type": NONE}]},
        {"path": "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
         "actions": [_restart("coreos-update-ca-trust.service"), _restart(CRIO_SERVICE)]},
    ],
    "sshkey": {"actions": [{"type": NONE}]},
}


def _status_action(spec_action: Mapping[str, Any]) -> Action:
    """``convertSpecActiontoStatusAction``: a spec action as the status lists it (an unknown
    type becomes Reboot, as the operator does)."""
    t = spec_action.get("type")
    if t == RELOAD:
        return _reload(str((spec_action.get("reload") or {}).get("serviceName", "")))
    if t == RESTART:
        return _restart(str((spec_action.get("restart") or {}).get("serviceName", "")))
    if t in (DAEMON_RELOAD, DRAIN, NONE, REBOOT):
        return {"type": t}
    return {"type": REBOOT}


def merge_cluster_policies(spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """``MergeClusterPolicies``: the defaults merged with ``spec`` (MachineConfiguration
    ``spec.nodeDisruptionPolicy``: ``files``/``units``/``sshkey``, any may be missing) into
    ``status.nodeDisruptionPolicyStatus.clusterPolicies``. A user file (unit) policy with a
    default's path (name) replaces it in place, others are appended in spec order; a user sshkey
    policy with actions replaces the default. ``units`` is omitted when empty (``omitempty``)."""
    spec = spec or {}
    defaults = DEFAULT_CLUSTER_POLICIES
    files = copy.deepcopy(defaults["files"])
    for f in spec.get("files") or []:
        entry = {"path": f.get("path", ""), "actions": [_status_action(a) for a in f.get("actions") or []]}
        idx = next((i for i, d in enumerate(defaults["files"]) if d["path"] == entry["path"]), None)
        if idx is None:
            files.append(entry)
        else:
            files[idx] = entry
    default_units: list[dict[str, Any]] = copy.deepcopy(defaults.get("units") or [])
    units = list(default_units)
    for u in spec.get("units") or []:
        entry = {"name": u.get("name", ""), "actions": [_status_action(a) for a in u.get("actions") or []]}
        idx = next((i for i, d in enumerate(default_units) if d["name"] == entry["name"]), None)
        if idx is None:
            units.append(entry)
        else:
            units[idx] = entry
    ssh_actions = (spec.get("sshkey") or {}).get("actions") or []
    sshkey = ({"actions": [_status_action(a) for a in ssh_actions]} if ssh_actions
              else copy.deepcopy(defaults["sshkey"]))
    out: dict[str, Any] = {"files": files}
    if units:
        out["units"] = units
    out["sshkey"] = sshkey
    return out


# ------------------------------------------------------------------------------------ the diff


@dataclass(frozen=True)
class ConfigDiff:
    """``machineConfigDiff`` of two MachineConfigs plus the changed paths and unit names.

    ``files``/``units``/``passwd``: the Ignition ``storage.files`` / ``systemd.units`` /
    ``passwd`` sections differ; ``file_paths``: paths added, removed or changed (sorted);
    ``unit_names``: units added, removed or changed (sorted); ``os_update``, ``kargs``, ``fips``,
    ``kernel_type``, ``extensions``: the MachineConfig fields that always need a reboot."""

    os_update: bool = False
    kargs: bool = False
    fips: bool = False
    passwd: bool = False
    files: bool = False
    units: bool = False
    kernel_type: bool = False
    extensions: bool = False
    file_paths: tuple[str, ...] = ()
    unit_names: tuple[str, ...] = ()

    @property
    def needs_reboot_anyway(self) -> bool:
        """An OS, kernel argument, FIPS, kernel type or extensions change (policies do not apply)."""
        return self.os_update or self.kargs or self.fips or self.kernel_type or self.extensions


def _ignition(mc: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(((mc or {}).get("spec") or {}).get("config") or {})


def _spec(mc: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict((mc or {}).get("spec") or {})


def _kernel_type(value: Any) -> str:
    """``CanonicalizeKernelType``: empty means ``default``."""
    return str(value or "default")


def config_diff(old_mc: Mapping[str, Any] | None, new_mc: Mapping[str, Any]) -> ConfigDiff:
    """The diff the daemon computes between the current and the desired rendered MachineConfig
    (``newMachineConfigDiff`` with ``CalculateConfigFileDiffs`` and ``GetChangedConfigUnitsByType``;
    an entry is changed when its JSON differs). ``old_mc`` None stands for an empty config."""
    old_ign, new_ign = _ignition(old_mc), _ignition(new_mc)
    old_spec, new_spec = _spec(old_mc), _spec(new_mc)
    old_files = list((old_ign.get("storage") or {}).get("files") or [])
    new_files = list((new_ign.get("storage") or {}).get("files") or [])
    old_units = list((old_ign.get("systemd") or {}).get("units") or [])
    new_units = list((new_ign.get("systemd") or {}).get("units") or [])
    old_by_path = {f.get("path", ""): f for f in old_files}
    new_by_path = {f.get("path", ""): f for f in new_files}
    paths = {p for p in old_by_path if p not in new_by_path}
    paths |= {p for p, f in new_by_path.items() if old_by_path.get(p) != f}
    old_by_unit = {u.get("name", ""): u for u in old_units}
    new_by_unit = {u.get("name", ""): u for u in new_units}
    names = {n for n in old_by_unit if n not in new_by_unit}
    names |= {n for n, u in new_by_unit.items() if old_by_unit.get(n) != u}
    old_kargs, new_kargs = old_spec.get("kernelArguments") or [], new_spec.get("kernelArguments") or []
    old_ext, new_ext = old_spec.get("extensions") or [], new_spec.get("extensions") or []
    return ConfigDiff(
        os_update=(old_spec.get("osImageURL") or "") != (new_spec.get("osImageURL") or ""),
        kargs=old_kargs != new_kargs,
        fips=bool(old_spec.get("fips")) != bool(new_spec.get("fips")),
        passwd=(old_ign.get("passwd") or {}) != (new_ign.get("passwd") or {}),
        files=old_files != new_files,
        units=old_units != new_units,
        kernel_type=_kernel_type(old_spec.get("kernelType")) != _kernel_type(new_spec.get("kernelType")),
        extensions=old_ext != new_ext,
        file_paths=tuple(sorted(paths)),
        unit_names=tuple(sorted(names)),
    )


# ------------------------------------------------------------------------------------ actions


def _is_subdirectory(directory: str, path: str) -> bool:
    """``IsSubdirectory``: ``path`` lies below ``directory`` (both cleaned; a sibling with the same
    prefix, ``/etc/foo.d`` for ``/etc/foo``, is not below it)."""
    d = posixpath.normpath(directory).rstrip("/") + "/"
    return posixpath.normpath(path).startswith(d)


def closest_file_policy(path: str, file_policies: Sequence[Mapping[str, Any]]) -> list[Action] | None:
    """``FindClosestFilePolicyPathMatch``: the actions of the longest policy path that equals
    ``path`` or is a directory above it, or None when no policy covers it."""
    best: list[Action] | None = None
    best_len = 0
    for policy in file_policies:
        p = str(policy.get("path", ""))
        if (path == p or _is_subdirectory(p, path)) and len(p) > best_len:
            best, best_len = [dict(a) for a in policy.get("actions") or []], len(p)
    return best


def has_action(actions: Sequence[Mapping[str, Any]], *types: str) -> bool:
    """``CheckNodeDisruptionActionsForTargetActions``: some action has one of ``types``."""
    return any(a.get("type") in types for a in actions)


def actions_for_changes(ssh_changed: bool, file_paths: Sequence[str], unit_names: Sequence[str],
                        cluster_policies: Mapping[str, Any]) -> list[Action]:
    """``calculatePostConfigChangeNodeDisruptionActionFromMCDiffs``: the actions for these changed
    files, units and passwd section under ``cluster_policies`` (the status shape). See the module
    docstring for the rules; the result keeps the order files, units, sshkey."""
    actions: list[Action] = []
    for path in file_paths:
        found = closest_file_policy(path, cluster_policies.get("files") or [])
        if found is None:
            return [{"type": REBOOT}]
        actions.extend(found)
    for name in unit_names:
        policy = next((u for u in cluster_policies.get("units") or [] if u.get("name") == name), None)
        if policy is None:
            return [{"type": REBOOT}]
        actions.extend(dict(a) for a in policy.get("actions") or [])
    if ssh_changed:
        actions.extend(dict(a) for a in (cluster_policies.get("sshkey") or {}).get("actions") or [])
    if has_action(actions, REBOOT):
        return [{"type": REBOOT}]
    if has_action(actions, NONE):
        if has_action(actions, DRAIN, RELOAD, RESTART, DAEMON_RELOAD, SPECIAL):
            return [a for a in actions if a.get("type") != NONE]
        return [{"type": NONE}]
    return actions


def disruption_actions(old_mc: Mapping[str, Any] | None, new_mc: Mapping[str, Any],
                       cluster_policies: Mapping[str, Any]) -> list[Action]:
    """``calculatePostConfigChangeNodeDisruptionAction`` (without the force file): the actions the
    daemon takes to move a node from rendered config ``old_mc`` to ``new_mc``."""
    diff = config_diff(old_mc, new_mc)
    if diff.needs_reboot_anyway:
        return [{"type": REBOOT}]
    if not diff.files and not diff.units and not diff.passwd:
        return [{"type": NONE}]
    return actions_for_changes(diff.passwd, diff.file_paths, diff.unit_names, cluster_policies)


# ------------------------------------------------------------------------------------ the drain


def decode_data_url(source: str) -> bytes:
    """The bytes of an Ignition ``contents.source`` data URL (``data:,text%20here`` or
    ``data:[<mediatype>];base64,...``, RFC 2397). Raises ValueError for another scheme."""
    if not source.startswith("data:"):
        raise ValueError(f"not a data URL: {source[:40]!r}")
    header, _, data = source[5:].partition(",")
    if header.endswith(";base64"):
        return base64.b64decode(data)
    return unquote_to_bytes(data)


def file_contents(mc: Mapping[str, Any] | None, path: str) -> bytes | None:
    """The decoded contents of ``path`` in ``mc``'s Ignition files (``GetIgnitionFileDataByPath``),
    None when the file is absent or has no source."""
    for f in ((_ignition(mc).get("storage") or {}).get("files") or []):
        if f.get("path") == path:
            src = (f.get("contents") or {}).get("source")
            return None if src is None else decode_data_url(str(src))
    return None


_DIGEST_ONLY = "digest-only"


def _registry(reg: Mapping[str, Any]) -> dict[str, Any]:
    """A ``[[registry]]`` table in sysregistriesv2 field terms (absent fields at their zero value)."""
    return {
        "prefix": str(reg.get("prefix", "")), "location": str(reg.get("location", "")),
        "insecure": bool(reg.get("insecure", False)), "blocked": bool(reg.get("blocked", False)),
        "mirror-by-digest-only": bool(reg.get("mirror-by-digest-only", False)),
        "mirror": [{"location": str(m.get("location", "")), "insecure": bool(m.get("insecure", False)),
                    "pull-from-mirror": str(m.get("pull-from-mirror", ""))} for m in reg.get("mirror") or []],
    }


def _mirror(location: str, mirrors: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return next((m for m in mirrors if m["location"] == location), None)


def registries_conf_change_is_safe(old: bytes | str | None, new: bytes | str | None) -> bool:
    """``isSafeContainerRegistryConfChanges``: whether a ``registries.conf`` change (TOML, V2 format)
    may skip the drain: no unqualified-search registry removed or reordered, no registry removed,
    no registry's prefix/location/blocked/insecure changed, no mirror removed, no mirror's
    ``pull-from-mirror`` changed to anything but ``digest-only``, every added mirror (and every
    mirror of an added registry) ``digest-only``. Raises ValueError (tomllib.TOMLDecodeError) for
    text that is not TOML."""
    def parse(text: bytes | str | None) -> dict[str, Any]:
        if text is None:
            return {}
        return tomllib.loads(text.decode() if isinstance(text, bytes) else text)

    o, n = parse(old), parse(new)
    o_search = list(o.get("unqualified-search-registries") or [])
    n_search = list(n.get("unqualified-search-registries") or [])
    if len(o_search) > len(n_search) or n_search[:len(o_search)] != o_search:
        return False

    def scoped(conf: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        out = {}
        for raw in conf.get("registry") or []:
            reg = _registry(raw)
            out[reg["prefix"] or reg["location"]] = reg
        return out

    old_regs, new_regs = scoped(o), scoped(n)
    if any(scope not in new_regs for scope in old_regs):
        return False
    for scope, new_reg in new_regs.items():
        old_reg = old_regs.get(scope)
        if old_reg is None:
            mirrors = new_reg["mirror"]
            all_digest = (all(m["pull-from-mirror"] == _DIGEST_ONLY for m in mirrors) if mirrors
                          else new_reg["mirror-by-digest-only"])
            if not all_digest:
                return False
            continue
        if old_reg == new_reg:
            continue
        if any(old_reg[k] != new_reg[k] for k in ("prefix", "location", "blocked", "insecure")):
            return False
        if any(_mirror(m["location"], new_reg["mirror"]) is None for m in old_reg["mirror"]):
            return False
        for m in new_reg["mirror"]:
            before = _mirror(m["location"], old_reg["mirror"])
            if before is not None and m["pull-from-mirror"] != before["pull-from-mirror"] \
                    and m["pull-from-mirror"] != _DIGEST_ONLY:
                return False
            if before is None and m["pull-from-mirror"] != _DIGEST_ONLY and not new_reg["mirror-by-digest-only"]:
                return False
    return True


def drain_required(actions: Sequence[Mapping[str, Any]], old_mc: Mapping[str, Any] | None,
                   new_mc: Mapping[str, Any]) -> bool:
    """``isDrainRequiredForNodeDisruptionActions``: Reboot or Drain drain; Special drains unless
    :func:`registries_conf_change_is_safe` holds for the two configs' ``registries.conf``; other
    actions drain nothing. Raises ValueError for a ``registries.conf`` that is not TOML."""
    if has_action(actions, REBOOT, DRAIN):
        return True
    if has_action(actions, SPECIAL):
        return not registries_conf_change_is_safe(file_contents(old_mc, REGISTRIES_CONF),
                                                  file_contents(new_mc, REGISTRIES_CONF))
    return False


def describe_actions(actions: Sequence[Mapping[str, Any]]) -> str:
    """A short text for events and logs: ``Reload crio.service, Restart kubelet.service``."""
    parts = []
    for a in actions:
        svc = (a.get("reload") or a.get("restart") or {}).get("serviceName")
        parts.append(f"{a.get('type')} {svc}" if svc else str(a.get("type")))
    return ", ".join(parts)
