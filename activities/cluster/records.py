"""Records activities: snapshot fields of an object, change it, restore exactly those fields.

DESIGN "Record": before changing an object the procedure stores the original values, so a revert
restores exactly what was changed, and only that. Three activities:

- ``snapshot_fields``: read the values at JSON Pointers (RFC 6901) into a :class:`FieldRecord`.
- ``patch_object``: an RFC 6902 JSON patch, sent with ``test`` operations for every recorded field
  and for ``/metadata/resourceVersion``, so the API server applies it only while the object
  still holds what the record says (a failed ``test`` is refused as a whole with 422 Invalid and
  nothing changes: Kubernetes API conventions, "Patch operations").
- ``restore_fields``: write the recorded values back (``remove`` for fields that were absent),
  again guarded by ``test`` operations on the values the procedure wrote; a field somebody
  changed since is refused (non-retryable ``RecordChanged``) and nothing is written. After the
  write the object is read back and every recorded field compared with its original value: the
  result names each difference (a restore is verified only without any).

Both writes are idempotent: an object already in the wanted state gets no request. A 422 caused
by a concurrent unrelated write (the resourceVersion test) is re-read and retried.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
from jsonpointer import JsonPointerException, resolve_pointer
from temporalio import activity

from activities.cluster.base import CONFLICT_RETRIES, ConflictExhausted, GatewayActivities
from activities.cluster.models import (
    FieldRecord,
    FieldValue,
    ObjectRef,
    PatchObjectInput,
    PatchObjectResult,
    RestoreFieldsInput,
    RestoreFieldsResult,
    SnapshotFieldsInput,
)
from activities.context import fail, log
from activities.kube.errors import Invalid, NotFound

_ABSENT = object()


def field_at(obj: dict[str, Any], path: str) -> FieldValue:
    """The value of ``obj`` at JSON Pointer ``path`` (``present`` False when absent). Raises
    non-retryable ``InvalidInput`` for a pointer that is not one (no leading ``/``)."""
    if not path.startswith("/"):
        raise fail("InvalidInput", f"{path!r} is not a JSON Pointer (RFC 6901 pointers start with /)")
    try:
        value = resolve_pointer(obj, path, _ABSENT)
    except JsonPointerException:
        value = _ABSENT
    if value is _ABSENT:
        return FieldValue(path=path, present=False)
    return FieldValue(path=path, present=True, value=copy.deepcopy(value))


def _same(current: FieldValue, present: bool, value: Any) -> bool:
    return current.present == present and (not present or current.value == value)


def record_conflicts(obj: dict[str, Any], record: FieldRecord) -> list[str]:
    """Recorded fields whose value in ``obj`` differs from the record (``path: was -> now``)."""
    out = []
    for field in record.fields:
        now = field_at(obj, field.path)
        if not _same(now, field.present, field.value):
            was = repr(field.value) if field.present else "absent"
            out.append(f"{field.path}: recorded {was}, now {repr(now.value) if now.present else 'absent'}")
    return out


class RecordActivities(GatewayActivities):
    """Record activities, bound to one cluster (see :class:`GatewayActivities`)."""

    ACTIVITIES = ("snapshot_fields", "patch_object", "restore_fields")

    def _get(self, ref: ObjectRef) -> dict[str, Any]:
        try:
            return self.gateway.get(ref.kind, ref.name, ref.namespace)
        except KeyError as exc:
            raise fail("InvalidInput", str(exc)) from None
        except NotFound:
            raise fail("ObjectNotFound", f"{ref.describe()} not found") from None

    def _json_patch(self, ref: ObjectRef, ops: list[dict[str, Any]]) -> dict[str, Any]:
        return self.gateway.patch(ref.kind, ref.name, ops, ref.namespace, patch_type="json")

    @activity.defn(name="snapshot_fields", no_thread_cancel_exception=True)
    def snapshot_fields(self, input: SnapshotFieldsInput) -> FieldRecord:
        """Read ``input.paths`` of the object. Raises non-retryable ``ObjectNotFound``."""
        obj = self._get(input.ref)
        return FieldRecord(
            ref=input.ref,
            resource_version=(obj.get("metadata") or {}).get("resourceVersion"),
            fields=[field_at(obj, p) for p in dict.fromkeys(input.paths)],
        )

    @activity.defn(name="patch_object", no_thread_cancel_exception=True)
    def patch_object(self, input: PatchObjectInput) -> PatchObjectResult:
        """Apply ``input.ops`` while the recorded fields still hold their recorded values.

        No request when the ops change nothing (a retry after success; a ``remove`` of a field
        that is absent changes nothing). Raises non-retryable
        ``RecordChanged`` (a recorded field differs), ``InvalidPatch`` (the ops do not apply to
        the object), ``ObjectNotFound``."""
        for _ in range(CONFLICT_RETRIES):
            obj = self._get(input.ref)
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            # A field to remove that is already absent is done (a retry after success, or never
            # there): RFC 6902 would refuse the whole patch for that ``remove``.
            ops = [op for op in input.ops if op.get("op") != "remove" or field_at(obj, op["path"]).present]
            try:
                wanted = jsonpatch.apply_patch(obj, ops)
            except (jsonpatch.JsonPatchException, JsonPointerException) as exc:
                raise fail("InvalidPatch", f"{input.ref.describe()}: {exc}") from None
            if wanted == obj:
                return PatchObjectResult(changed=False, resource_version=rv)
            tests: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}]
            if input.record is not None:
                conflicts = record_conflicts(obj, input.record)
                if conflicts:
                    raise fail("RecordChanged", f"{input.ref.describe()} changed since it was recorded: {'; '.join(conflicts)}")
                tests += [{"op": "test", "path": f.path, "value": f.value} for f in input.record.fields if f.present]
            try:
                patched = self._json_patch(input.ref, tests + ops)
            except Invalid:
                continue  # a write between our GET and PATCH: re-read and decide again
            except NotFound:
                raise fail("ObjectNotFound", f"{input.ref.describe()} not found") from None
            log().info(f"{input.ref.describe()}: patched {[op.get('path') for op in ops]}")
            return PatchObjectResult(changed=True, resource_version=(patched.get("metadata") or {}).get("resourceVersion"))
        raise ConflictExhausted(f"{input.ref.describe()} kept changing while patching")

    @activity.defn(name="restore_fields", no_thread_cancel_exception=True)
    def restore_fields(self, input: RestoreFieldsInput) -> RestoreFieldsResult:
        """Write the record's values back where the object still holds ``input.expected``.

        Raises non-retryable ``RecordChanged`` naming every field changed by somebody else (then
        nothing is written), ``ObjectNotFound``."""
        ref = input.record.ref
        for _ in range(CONFLICT_RETRIES):
            obj = self._get(ref)
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            ops: list[dict[str, Any]] = []
            tests: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}]
            restored, unchanged, changed = [], [], []
            for field in input.record.fields:
                now = field_at(obj, field.path)
                if _same(now, field.present, field.value):
                    unchanged.append(field.path)
                    continue
                if field.path in input.expected:
                    expected = input.expected[field.path]
                    if not (now.present and now.value == expected):
                        changed.append(f"{field.path}: expected {expected!r}, found {repr(now.value) if now.present else 'absent'}")
                        continue
                    tests.append({"op": "test", "path": field.path, "value": expected})
                if field.present:
                    ops.append({"op": "add", "path": field.path, "value": field.value})
                else:
                    ops.append({"op": "remove", "path": field.path})
                restored.append(field.path)
            if changed:
                raise fail("RecordChanged", f"{ref.describe()} changed since the procedure wrote it: {'; '.join(changed)}")
            if not ops:
                return RestoreFieldsResult(unchanged=unchanged, differences=self._read_back(input.record))
            try:
                jsonpatch.apply_patch(obj, ops)
            except (jsonpatch.JsonPatchException, JsonPointerException) as exc:
                raise fail("InvalidPatch", f"{ref.describe()}: cannot restore: {exc}") from None
            try:
                self._json_patch(ref, tests + ops)
            except Invalid:
                continue
            except NotFound:
                raise fail("ObjectNotFound", f"{ref.describe()} not found") from None
            log().info(f"{ref.describe()}: restored {restored}")
            return RestoreFieldsResult(restored=restored, unchanged=unchanged, differences=self._read_back(input.record))
        raise ConflictExhausted(f"{ref.describe()} kept changing while restoring")

    def _read_back(self, record: FieldRecord) -> list[str]:
        """Read the object again (a fresh GET, after the write) and name every recorded field
        that does not hold its original value (:func:`record_conflicts`)."""
        return record_conflicts(self._get(record.ref), record)
