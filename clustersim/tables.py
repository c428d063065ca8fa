"""Server-side printing: ``meta.k8s.io`` Tables for ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``.

kubectl get asks for a Table and prints its columns (``NAME``, ``STATUS`` ... upper-cased; columns
with priority 1 only with ``-o wide``) and, with ``-A``, a NAMESPACE column from each row's object
metadata. Core kinds use clustersim.printers; the OpenShift CRDs use their
``additionalPrinterColumns`` (MCO ``install/0000_80_machine-config_01_machineconfigpool.crd.yaml``
and ``..._machineconfig.crd.yaml``; openshift/api release-4.21 ``zz_generated.crd-manifests`` of
machineconfignodes, machines, machinehealthchecks and clusterversions); every other kind gets NAME
and AGE, as a CRD without printer columns does (MachineConfiguration). Priority-1 columns are
sent too; kubectl shows them only with ``-o wide``. Rows carry ``PartialObjectMetadata`` by default, the whole object with
``includeObject=Object`` and nothing with ``includeObject=None`` (apiserver ``rest/table.go``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from clustersim.printers import PRINTERS, Column, age
from clustersim.resources import ResourceType

_NAME_DESCRIPTION = ("Name must be unique within a namespace. Is required when creating resources, although some "
                     "resources may allow a client to request the generation of an appropriate name automatically.")

# (column name, type, JSON path as a list of keys[, priority]); a ("cond", TYPE) step selects a
# condition's status, a ("where", KEY, VALUE) step the first list item whose KEY is VALUE
# (JSONPath ``[?(@.KEY=="VALUE")]``).
_CrdColumn = tuple[str, str, list[Any]] | tuple[str, str, list[Any], int]
_MCP = "machineconfigpools.machineconfiguration.openshift.io"
_MC = "machineconfigs.machineconfiguration.openshift.io"


def _cond_col(name: str, ctype: str, priority: int = 0, field: str = "status") -> _CrdColumn:
    return (name, "string", ["status", "conditions", ("where", "type", ctype), field], priority)


CRD_COLUMNS: dict[str, list[_CrdColumn]] = {
    _MCP: [
        ("Config", "string", ["status", "configuration", "name"]),
        ("Updated", "string", ["status", ("cond", "Updated")]),
        ("Updating", "string", ["status", ("cond", "Updating")]),
        ("Degraded", "string", ["status", ("cond", "Degraded")]),
        ("MachineCount", "number", ["status", "machineCount"]),
        ("ReadyMachineCount", "number", ["status", "readyMachineCount"]),
        ("UpdatedMachineCount", "number", ["status", "updatedMachineCount"]),
        ("DegradedMachineCount", "number", ["status", "degradedMachineCount"]),
        ("Age", "date", ["metadata", "creationTimestamp"]),
    ],
    _MC: [
        ("GeneratedByController", "string",
         ["metadata", "annotations", "machineconfiguration.openshift.io/generated-by-controller-version"]),
        ("IgnitionVersion", "string", ["spec", "config", "ignition", "version"]),
        ("Age", "date", ["metadata", "creationTimestamp"]),
    ],
    # openshift/api release-4.21 machineconfiguration/v1 MachineConfigNode printcolumns.
    "machineconfignodes.machineconfiguration.openshift.io": [
        ("PoolName", "string", ["spec", "pool", "name"]),
        ("DesiredConfig", "string", ["spec", "configVersion", "desired"]),
        ("CurrentConfig", "string", ["status", "configVersion", "current"]),
        _cond_col("Updated", "Updated"),
        ("Age", "date", ["metadata", "creationTimestamp"]),
        _cond_col("UpdatePrepared", "UpdatePrepared", 1),
        _cond_col("UpdateExecuted", "UpdateExecuted", 1),
        _cond_col("UpdatePostActionComplete", "UpdatePostActionComplete", 1),
        _cond_col("UpdateComplete", "UpdateComplete", 1),
        _cond_col("Resumed", "Resumed", 1),
        _cond_col("UpdatedFilesAndOS", "AppliedFilesAndOS", 1),
        _cond_col("CordonedNode", "Cordoned", 1),
        _cond_col("DrainedNode", "Drained", 1),
        _cond_col("RebootedNode", "RebootedNode", 1),
        _cond_col("UncordonedNode", "Uncordoned", 1),
    ],
    "machines.machine.openshift.io": [
        ("Phase", "string", ["status", "phase"]),
        ("Type", "string", ["metadata", "labels", "machine.openshift.io/instance-type"]),
        ("Region", "string", ["metadata", "labels", "machine.openshift.io/region"]),
        ("Zone", "string", ["metadata", "labels", "machine.openshift.io/zone"]),
        ("Age", "date", ["metadata", "creationTimestamp"]),
        ("Node", "string", ["status", "nodeRef", "name"], 1),
        ("ProviderID", "string", ["spec", "providerID"], 1),
        ("State", "string", ["metadata", "annotations", "machine.openshift.io/instance-state"], 1),
    ],
    "machinehealthchecks.machine.openshift.io": [
        ("MaxUnhealthy", "string", ["spec", "maxUnhealthy"]),
        ("ExpectedMachines", "integer", ["status", "expectedMachines"]),
        ("CurrentHealthy", "integer", ["status", "currentHealthy"]),
    ],
    "clusterversions.config.openshift.io": [
        ("Version", "string", ["status", "history", ("where", "state", "Completed"), "version"]),
        _cond_col("Available", "Available"),
        _cond_col("Progressing", "Progressing"),
        ("Since", "date", ["status", "conditions", ("where", "type", "Progressing"), "lastTransitionTime"]),
        _cond_col("Status", "Progressing", 0, "message"),
    ],
}


def table_version(accept: str | None) -> str | None:
    """The ``meta.k8s.io`` version (``v1`` or ``v1beta1``) of the first Table media type the
    Accept header lists, or None when the client does not ask for a Table."""
    for part in (accept or "").split(","):
        params: dict[str, str] = {}
        for p in part.split(";")[1:]:
            k, _, v = p.partition("=")
            params[k.strip()] = v.strip()
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and params.get("v") in ("v1", "v1beta1"):
            return params["v"]
    return None


def _walk(obj: Any, path: list[Any]) -> Any:
    cur = obj
    for step in path:
        if isinstance(step, tuple) and step[0] == "where":
            items = cur if isinstance(cur, list) else []
            cur = next((i for i in items if isinstance(i, dict) and i.get(step[1]) == step[2]), None)
            continue
        if isinstance(step, tuple):
            conds = (cur or {}).get("conditions") or [] if isinstance(cur, dict) else []
            cur = next((c.get("status") for c in conds if c.get("type") == step[1]), None)
            continue
        if not isinstance(cur, dict):
            return None
        cur = cur.get(step)
    return cur


def _definition(name: str, type_: str, priority: int = 0, fmt: str = "") -> dict[str, Any]:
    return {"name": name, "type": type_, "format": fmt,
            "description": _NAME_DESCRIPTION if fmt == "name" else name, "priority": priority}


def columns_and_rows(rt: ResourceType, objs: list[dict[str, Any]],
                     now: datetime) -> tuple[list[dict[str, Any]], list[list[Any]]]:
    """(columnDefinitions, cells per object) for ``objs`` of resource ``rt``."""
    printer = PRINTERS.get(rt.key)
    if printer is not None:
        cols: list[Column] = printer[0]
        defs = [_definition(n, t, p, "name" if n == "Name" and i == 0 else "") for i, (n, t, p) in enumerate(cols)]
        return defs, [printer[1](o, now) for o in objs]
    crd = CRD_COLUMNS.get(rt.key, [("Age", "date", ["metadata", "creationTimestamp"])])
    defs = [_definition("Name", "string", 0, "name")] + [_definition(c[0], c[1], c[3] if len(c) > 3 else 0)
                                                           for c in crd]
    rows = []
    for o in objs:
        cells: list[Any] = [(o.get("metadata") or {}).get("name")]
        for c in crd:
            t, path = c[1], c[2]
            v = _walk(o, path)
            cells.append(age(v, now) if t == "date" else v)
        rows.append(cells)
    return defs, rows


def build_table(rt: ResourceType, objs: list[dict[str, Any]], now: datetime, *, version: str = "v1",
                include_object: str | None = None, resource_version: str = "") -> dict[str, Any]:
    """The ``Table`` object for ``objs`` (a list, or a single object's get as a one-row table).

    ``include_object``: ``None``/"" or ``PartialObjectMetadata`` (default), ``Object``, ``None`` (the
    literal string: no object). Raises ValueError for another value."""
    mode = include_object or "PartialObjectMetadata"
    if mode not in ("PartialObjectMetadata", "Object", "None"):
        raise ValueError(f'includeObject must be one of "Object", "PartialObjectMetadata", "None", not {mode!r}')
    defs, cells = columns_and_rows(rt, objs, now)
    rows = []
    for obj, row_cells in zip(objs, cells, strict=True):
        row: dict[str, Any] = {"cells": row_cells}
        if mode == "Object":
            row["object"] = obj
        elif mode == "PartialObjectMetadata":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{version}",
                             "metadata": obj.get("metadata") or {}}
        rows.append(row)
    return {"kind": "Table", "apiVersion": f"meta.k8s.io/{version}",
            "metadata": {"resourceVersion": resource_version}, "columnDefinitions": defs, "rows": rows}
