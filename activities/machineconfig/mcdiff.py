"""The rendered-config diff the machine-config-daemon computes before an update, as data for the
workflow's disruption decision (:mod:`workflows.machineconfig.disruption`).

Follows openshift/machine-config-operator ``release-4.21`` (read, not copied):
``pkg/daemon/update.go`` ``newMachineConfigDiff`` (osImageURL, kernelArguments, fips, kernelType,
extensions, the Ignition ``passwd``/``storage.files``/``systemd.units`` sections) and
``pkg/controller/common/helpers.go`` ``CalculateConfigFileDiffs`` / ``GetChangedConfigUnitsByType``
(files by path and units by name: added, removed, or different in any field). The daemon parses
the Ignition config first; the JSON compared here is the MachineConfig's ``spec.config`` as the
API returns it. File contents are Ignition data URLs (RFC 2397).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote_to_bytes

from activities.machineconfig.models import ConfigChange

#: MCO ``pkg/daemon/constants`` ``ContainerRegistryConfPath``.
REGISTRIES_CONF = "/etc/containers/registries.conf"


def _spec(mc: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict((mc or {}).get("spec") or {})


def _ignition(mc: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(_spec(mc).get("config") or {})


def _by_key(items: Sequence[Any], key: str) -> dict[str, Any]:
    return {str(i.get(key, "")): i for i in items if isinstance(i, dict)}


def _changed(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return sorted({k for k in old if k not in new} | {k for k, v in new.items() if old.get(k) != v})


def decode_data_url(source: str) -> str | None:
    """The text of an Ignition ``contents.source`` data URL (``data:,percent%20encoded`` or
    ``data:[<mediatype>];base64,...``), None for another URL scheme or bytes that are not UTF-8."""
    if not source.startswith("data:"):
        return None
    header, _, data = source[5:].partition(",")
    try:
        raw = base64.b64decode(data) if header.endswith(";base64") else unquote_to_bytes(data)
        return raw.decode()
    except (ValueError, UnicodeDecodeError):
        return None


def file_text(mc: Mapping[str, Any] | None, path: str) -> str | None:
    """The decoded text of ``path`` in ``mc``'s Ignition files, None when absent or not a data URL."""
    for f in (_ignition(mc).get("storage") or {}).get("files") or []:
        if isinstance(f, dict) and f.get("path") == path:
            src = (f.get("contents") or {}).get("source")
            return None if src is None else decode_data_url(str(src))
    return None


def config_change(old_mc: Mapping[str, Any] | None, new_mc: Mapping[str, Any], from_config: str,
                  nodes: Sequence[str] = ()) -> ConfigChange:
    """The :class:`ConfigChange` from ``old_mc`` (rendered config ``from_config``; None when it
    does not exist: ``missing``) to ``new_mc``, for the pool's ``nodes`` at ``from_config``."""
    to_config = str(((new_mc.get("metadata") or {}).get("name")) or "")
    if old_mc is None:
        return ConfigChange(from_config=from_config, to_config=to_config, nodes=list(nodes), missing=True)
    old_ign, new_ign = _ignition(old_mc), _ignition(new_mc)
    old_spec, new_spec = _spec(old_mc), _spec(new_mc)
    old_files = _by_key((old_ign.get("storage") or {}).get("files") or [], "path")
    new_files = _by_key((new_ign.get("storage") or {}).get("files") or [], "path")
    old_units = _by_key((old_ign.get("systemd") or {}).get("units") or [], "name")
    new_units = _by_key((new_ign.get("systemd") or {}).get("units") or [], "name")
    paths = _changed(old_files, new_files)
    reg_old = reg_new = None
    if REGISTRIES_CONF in paths:
        reg_old, reg_new = file_text(old_mc, REGISTRIES_CONF), file_text(new_mc, REGISTRIES_CONF)
    return ConfigChange(
        from_config=from_config,
        to_config=to_config,
        nodes=list(nodes),
        file_paths=paths,
        unit_names=_changed(old_units, new_units),
        passwd=(old_ign.get("passwd") or {}) != (new_ign.get("passwd") or {}),
        os_update=(old_spec.get("osImageURL") or "") != (new_spec.get("osImageURL") or ""),
        kargs=list(old_spec.get("kernelArguments") or []) != list(new_spec.get("kernelArguments") or []),
        fips=bool(old_spec.get("fips")) != bool(new_spec.get("fips")),
        kernel_type=(old_spec.get("kernelType") or "default") != (new_spec.get("kernelType") or "default"),
        extensions=list(old_spec.get("extensions") or []) != list(new_spec.get("extensions") or []),
        registries_conf_old=reg_old,
        registries_conf_new=reg_new,
    )
