"""The three PATCH flavours kube-apiserver accepts.

- ``application/merge-patch+json``: RFC 7386 (null deletes, objects merge, lists replace).
- ``application/json-patch+json``: RFC 6902 via ``jsonpatch``; a failing op is 422 Invalid.
- ``application/strategic-merge-patch+json``: Kubernetes strategic merge patch
  (k8s.io/apimachinery/pkg/util/strategicpatch/patch.go). List merge keys and strategies come from
  the OpenAPI extensions ``x-kubernetes-patch-merge-key`` / ``x-kubernetes-patch-strategy`` in the
  schemas shipped with ``kubernetes-validate`` (loaded lazily, once). Supported directives:
  ``$patch: replace|delete|merge`` (maps and list items), ``$retainKeys``,
  ``$setElementOrder/<list>``, ``$deleteFromPrimitiveList/<list>``, null deletes. Kinds without a
  schema (OpenShift CRDs such as MachineConfig) get merge-patch semantics for lists, like the
  apiserver does for custom resources.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonpatch

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, "application/apply-patch+yaml", STRATEGIC_MERGE_PATCH)


class PatchError(Exception):
    """A patch that cannot be applied. ``status`` 422 (failed op / bad shape) or 400 (not JSON)."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


# ----------------------------------------------------------------------------- schemas
@lru_cache(maxsize=1)
def _definitions() -> dict[str, dict]:
    import kubernetes_validate

    base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    candidates = sorted((p for p in base.iterdir() if p.name.endswith("-local")), key=_version_key)
    with open(candidates[-1] / "_definitions.json") as f:
        return json.load(f)["$defs"]


def _version_key(p: Path) -> tuple[int, ...]:
    return tuple(int(x) for x in p.name[1:].split("-")[0].split(".") if x.isdigit())


@lru_cache(maxsize=64)
def _gvk_index() -> dict[tuple[str, str, str], str]:
    out: dict[tuple[str, str, str], str] = {}
    for name, d in _definitions().items():
        for gvk in d.get("x-kubernetes-group-version-kind") or []:
            out[(gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", ""))] = name
    return out


def schema_for(api_version: str, kind: str) -> dict | None:
    """The OpenAPI schema of a built-in kind (e.g. ("apps/v1", "DaemonSet")), or None for CRDs."""
    group, _, version = api_version.rpartition("/")
    name = _gvk_index().get((group, version, kind))
    return _definitions()[name] if name else None


def _resolve(node: dict | None) -> dict | None:
    while node is not None and "$ref" in node:
        node = _definitions().get(node["$ref"].rsplit("/", 1)[-1])
    if node is not None and "allOf" in node and "properties" not in node:
        for sub in node["allOf"]:
            r = _resolve(sub)
            if r is not None:
                return r
    return node


def _field_schema(node: dict | None, key: str) -> dict | None:
    """Schema of ``key`` inside an object schema (properties, or additionalProperties for maps)."""
    if node is None:
        return None
    props = node.get("properties")
    if props and key in props:
        return props[key]
    ap = node.get("additionalProperties")
    if isinstance(ap, dict):
        return ap
    return None


# ----------------------------------------------------------------------------- RFC 7386
def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns a new value (inputs are not modified)."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


# ----------------------------------------------------------------------------- RFC 6902
def json_patch(target: dict, patch: Any) -> dict:
    """RFC 6902 JSON patch; PatchError(422) when an operation fails or the patch is malformed."""
    if not isinstance(patch, list):
        raise PatchError("json patch must be a JSON array of operations", 400)
    try:
        return jsonpatch.JsonPatch(patch).apply(target, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, TypeError, ValueError) as e:
        raise PatchError(str(e)) from e


# ----------------------------------------------------------------------------- strategic merge
_DIRECTIVE = "$patch"
_RETAIN = "$retainKeys"
_ORDER = "$setElementOrder/"
_DELETE_PRIM = "$deleteFromPrimitiveList/"


def strategic_merge_patch(target: dict, patch: Any, api_version: str, kind: str) -> dict:
    """Apply a strategic merge patch to ``target`` (not modified); returns the new object."""
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object", 400)
    schema = schema_for(api_version, kind)
    out = _smp_map(target, patch, schema)
    if out is None:
        raise PatchError("$patch: delete is not allowed on the whole object")
    return out


def _strip(value: Any) -> Any:
    """A patch value inserted where nothing existed: drop directives recursively."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items()
                if k != _DIRECTIVE and k != _RETAIN and not k.startswith(("$setElementOrder/", _DELETE_PRIM))
                and v is not None}
    if isinstance(value, list):
        return [_strip(v) for v in value if not (isinstance(v, dict) and v.get(_DIRECTIVE) == "delete")]
    return value


def _smp_map(original: Any, patch: dict, schema: dict | None) -> dict | None:
    schema = _resolve(schema)
    directive = patch.get(_DIRECTIVE)
    if directive == "delete":
        return None
    if directive == "replace":
        return _strip(patch)
    if directive not in (None, "merge"):
        raise PatchError(f"unknown patch type: {directive!r}")
    result = dict(original) if isinstance(original, dict) else {}
    orders: dict[str, list] = {}
    for k, v in patch.items():
        if k in (_DIRECTIVE, _RETAIN):
            continue
        if k.startswith(_ORDER):
            orders[k[len(_ORDER):]] = v or []
            continue
        if k.startswith(_DELETE_PRIM):
            field = k[len(_DELETE_PRIM):]
            if isinstance(result.get(field), list) and isinstance(v, list):
                result[field] = [x for x in result[field] if x not in v]
            continue
        if v is None:
            result.pop(k, None)
            continue
        sub = _field_schema(schema, k)
        if isinstance(v, dict):
            merged = _smp_map(result.get(k), v, sub)
            if merged is None:
                result.pop(k, None)
            else:
                result[k] = merged
        elif isinstance(v, list):
            result[k] = _smp_list(result.get(k), v, sub)
        else:
            result[k] = v
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            result[field] = _apply_order(result[field], order, _resolve(_field_schema(schema, field)))
    retain = patch.get(_RETAIN)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _smp_list(original: Any, patch: list, schema: dict | None) -> list:
    schema = _resolve(schema) if schema is not None else None
    strategy = (schema or {}).get("x-kubernetes-patch-strategy", "")
    merge_key = (schema or {}).get("x-kubernetes-patch-merge-key")
    orig = list(original) if isinstance(original, list) else []
    if any(isinstance(x, dict) and x.get(_DIRECTIVE) == "replace" for x in patch):
        return [_strip(x) for x in patch if not (isinstance(x, dict) and x.get(_DIRECTIVE) == "replace")]
    if "merge" not in strategy.split(","):
        return [_strip(x) for x in patch]
    item_schema = (schema or {}).get("items")
    if merge_key is None or not all(isinstance(x, dict) for x in patch):
        # Merge of a primitive list (e.g. finalizers): union preserving order.
        result = list(orig)
        for x in patch:
            if x not in result:
                result.append(x)
        return result
    result = list(orig)
    for item in patch:
        key = item.get(merge_key)
        idx = next((i for i, o in enumerate(result) if isinstance(o, dict) and o.get(merge_key) == key), None)
        if item.get(_DIRECTIVE) == "delete":
            if idx is not None:
                result.pop(idx)
            continue
        if idx is None:
            result.append(_strip(item))
        else:
            merged = _smp_map(result[idx], item, item_schema)
            if merged is None:
                result.pop(idx)
            else:
                result[idx] = merged
    return result


def _apply_order(items: list, order: list, schema: dict | None) -> list:
    """``$setElementOrder``: listed elements first in the given order, others keep their order after."""
    merge_key = (schema or {}).get("x-kubernetes-patch-merge-key")

    def ident(x: Any) -> Any:
        if merge_key and isinstance(x, dict):
            return json.dumps(x.get(merge_key), sort_keys=True)
        return json.dumps(x, sort_keys=True)

    wanted = [ident(o) for o in order]
    pos = {w: i for i, w in enumerate(wanted)}
    listed = sorted((x for x in items if ident(x) in pos), key=lambda x: pos[ident(x)])
    rest = [x for x in items if ident(x) not in pos]
    return listed + rest


def apply_patch(content_type: str, target: dict, body: bytes, api_version: str, kind: str) -> dict:
    """Apply a PATCH body of the given content type to ``target`` (not modified).

    Raises PatchError (400 malformed JSON, 422 failed op) and ValueError for an unsupported type
    (the server answers 415).
    """
    ct = content_type.split(";")[0].strip().lower()
    if ct not in (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH):
        raise ValueError(ct)
    try:
        patch = json.loads(body or b"null")
    except ValueError as e:
        raise PatchError(f"error decoding patch: {e}", 400) from e
    if ct == JSON_PATCH:
        return json_patch(target, patch)
    if ct == MERGE_PATCH:
        if not isinstance(patch, dict):
            raise PatchError("merge patch must be a JSON object", 400)
        return merge_patch(target, patch)
    return strategic_merge_patch(target, patch, api_version, kind)
