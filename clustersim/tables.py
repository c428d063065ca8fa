"""Server-side printing: ``meta.k8s.io`` Tables for ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``.

kubectl get asks for a Table and prints its columns (``NAME``, ``STATUS`` ... upper-cased; columns
with priority 1 only with ``-o wide``) and, with ``-A``, a NAMESPACE column from each row's object
metadata. Core kinds use clustersim.printers; the OpenShift CRDs use their
``additionalPrinterColumns`` (MCO ``install/0000_80_machine-config_01_machineconfigpool.crd.yaml``
and ``..._machineconfig.crd.yaml``); every other kind gets NAME and AGE, as a CRD without printer
columns does. Rows carry ``PartialObjectMetadata`` by default, the whole object with
``includeObject=Object`` and nothing with ``includeObject=None`` (apiserver ``rest/table.go``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from clustersim.printers import PRINTERS, Column, age
from clustersim.resources import ResourceType

_NAME_DESCRIPTION = ("Name must be unique within a namespace. Is required when creating resources, although some "
                     "resources may allow a client to request the generation of an appropriate name automatically.")

# (column name, type, JSON path as a list of keys; a ("cond", TYPE) step selects a condition's status).
_CrdColumn = tuple[str, str, list[Any]]
_MCP = "machineconfigpools.machineconfiguration.openshift.io"
_MC = "machineconfigs.machineconfiguration.openshift.io"
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
    defs = [_definition("Name", "string", 0, "name")] + [_definition(n, t) for n, t, _ in crd]
    rows = []
    for o in objs:
        cells: list[Any] = [(o.get("metadata") or {}).get("name")]
        for _, t, path in crd:
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
