"""Records: store the original values before a change; revert restores exactly those.

DESIGN.md "Record": a procedure that changes an object (a DaemonSet's image and trigger
annotation, a Service's selector, a node's labels) first stores the original values of exactly
the fields it will write, then writes them; a revert puts back exactly those originals, and only
while the object still holds what the procedure wrote. Somebody else's change since is never
overwritten: the revert is refused (state ``refused``, the activity's message naming the fields)
and nothing is written.

Activities (by name; models in ``activities.cluster.models``, JSON Pointers of RFC 6901, JSON
Patch of RFC 6902 with ``test`` operations as the guard):

- ``snapshot_fields(SnapshotFieldsInput) -> FieldRecord``: read the fields (absent ones too);
- ``patch_object(PatchObjectInput) -> PatchObjectResult``: the change, guarded by ``test`` ops on
  the recorded values (non-retryable ``RecordChanged`` when the object moved in between);
- ``restore_fields(RestoreFieldsInput) -> RestoreFieldsResult``: the revert, guarded by ``test``
  ops on the values we wrote (non-retryable ``RecordChanged``).

The record lives in workflow state (so in history): a retried or resumed step that changes the
same record again keeps the FIRST originals, never the values it wrote itself.

A procedure whose records must outlive Temporal (procedures-spec §1.6: a Node it deletes, a host
file it rewrites) also mirrors them to its record ConfigMap ``lockkeeper-record-<workflow id>``
(:func:`record_configmap_name`) with :func:`save_record_configmap`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import (
        FieldRecord,
        ObjectRef,
        PatchObjectInput,
        PatchObjectResult,
        RestoreFieldsInput,
        RestoreFieldsResult,
        SaveRecordInput,
        SnapshotFieldsInput,
    )
    from workflows.kit import calls as acts
    from workflows.kit.models import ChangedItem, RecordEntry, RecordStatus, failure_message

SNAPSHOT_FIELDS = "snapshot_fields"
PATCH_OBJECT = "patch_object"
RESTORE_FIELDS = "restore_fields"

#: Label of a record ConfigMap: the procedure that wrote it.
PROCEDURE_LABEL = "lockkeeper.io/procedure"

#: Marker value for :meth:`Records.change`: remove the field.
REMOVE = object()


class RecordRefused(Exception):
    """A revert (or a change) was refused because the object changed since; ``message`` names
    the fields (the activity's words)."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"record {name}: {message}")
        self.name = name
        self.message = message


class Records:
    """The records of one procedure run, by name. ``board``: the status's ``records`` dict
    (kept up to date); ``on_change``: the procedure's ``touch``."""

    def __init__(
        self,
        *,
        board: dict[str, RecordStatus] | None = None,
        on_change: Callable[[], None] = lambda: None,
        timeouts: acts.Timeouts = acts.DEFAULT_TIMEOUTS,
    ) -> None:
        self.board = board if board is not None else {}
        self.on_change = on_change
        self.timeouts = timeouts
        self.records: dict[str, FieldRecord] = {}
        self.written: dict[str, dict[str, Any]] = {}

    def _status(self, name: str, ref: ObjectRef, paths: list[str]) -> RecordStatus:
        st = self.board.get(name)
        if st is None:
            st = self.board[name] = RecordStatus(name=name, object=ref.describe(), paths=paths)
        return st

    async def change(self, name: str, ref: ObjectRef, values: dict[str, Any]) -> FieldRecord:
        """Record the originals of ``values``' paths (once per ``name``), then write ``values``
        (path → new value, or :data:`REMOVE`). Returns the record. Raises
        :class:`RecordRefused` when the object changed between the snapshot and the write."""
        paths = list(values)
        st = self._status(name, ref, paths)
        record = self.records.get(name)
        if record is None:
            record = await acts.call(SNAPSHOT_FIELDS, SnapshotFieldsInput(ref=ref, paths=paths), FieldRecord, timeouts=self.timeouts)
            self.records[name] = record
            st.state, st.detail = "recorded", f"originals stored at resourceVersion {record.resource_version}"
            self.on_change()
        ops = [
            {"op": "remove", "path": p} if v is REMOVE else {"op": "add", "path": p, "value": v}
            for p, v in values.items()
        ]
        await self._guarded(name, st, PATCH_OBJECT, PatchObjectInput(ref=ref, ops=ops, record=record), PatchObjectResult)
        self.written[name] = {p: v for p, v in values.items() if v is not REMOVE}
        st.state, st.detail = "changed", f"wrote {', '.join(paths)}"
        self.on_change()
        return record

    async def _guarded(self, name: str, st: RecordStatus, activity: str, arg: Any, result_type: type[Any]) -> Any:
        """Call ``activity``, which refuses with ``RecordChanged`` when somebody changed the
        record's object since: then state ``refused`` and :class:`RecordRefused`."""
        try:
            return await acts.call(activity, arg, result_type, timeouts=self.timeouts)
        except ActivityError as err:
            if isinstance(err.cause, ApplicationError) and err.cause.type == "RecordChanged":
                st.state, st.detail = "refused", failure_message(err)
                self.on_change()
                raise RecordRefused(name, st.detail) from err
            raise

    def changed(self) -> list[str]:
        """Names of the records whose change was written and not reverted, in the order they
        were first changed."""
        return [n for n, st in self.board.items() if n in self.records and st.state in ("changed", "refused", "differs")]

    def entries(self) -> list[RecordEntry]:
        """The records still holding changes, for a reverse run after the procedure ended."""
        return [RecordEntry(name=n, record=self.records[n], written=self.written.get(n, {})) for n in self.changed()]

    def left_changed(self, undo: str | None = None) -> list[ChangedItem]:
        """What the records say stays changed: one item per record not reverted (``undo`` the
        command that reverts it, e.g. ``lockkeeper revert ID --full``)."""
        out = []
        for n in self.changed():
            st = self.board[n]
            what = f"{', '.join(st.paths)} changed (record {n})"
            if st.state != "changed":
                what += f"; revert {st.state}: {st.detail}"
            out.append(ChangedItem(target=st.object, what=what, undo=undo))
        return out

    async def revert_all(self, names: list[str] | None = None) -> tuple[list[str], list[str]]:
        """Revert every changed record (or ``names``), last changed first, each read back.
        Returns ``(restored, problems)``: one line per record restored and verified, one per
        record refused or differing after the read-back (never raises for those)."""
        restored: list[str] = []
        problems: list[str] = []
        for name in reversed(names if names is not None else self.changed()):
            try:
                await self.revert(name)
            except RecordRefused as err:
                problems.append(str(err))
                continue
            st = self.board[name]
            (restored if st.state == "reverted" else problems).append(f"{st.object}: {st.detail}")
        return restored, problems

    async def revert(self, name: str) -> RestoreFieldsResult:
        """Put back exactly the recorded originals of ``name``, only where the object still
        holds what :meth:`change` wrote, then read it back: state ``reverted`` only when every
        recorded field holds its original value, ``differs`` (naming each difference)
        otherwise. Raises :class:`RecordRefused` (state ``refused``, nothing written) when
        somebody changed a field since, KeyError for an unknown name."""
        record = self.records[name]
        st = self._status(name, record.ref, [f.path for f in record.fields])
        result = await self._guarded(name, st, RESTORE_FIELDS, RestoreFieldsInput(record=record, expected=self.written.get(name, {})),
                                     RestoreFieldsResult)
        if result.differences:
            st.state = "differs"
            st.detail = f"read back after the restore: {'; '.join(result.differences)}"
        else:
            st.state = "reverted"
            st.detail = (f"restored {', '.join(result.restored) or 'nothing'}, read back at the originals"
                         + (f"; already original: {', '.join(result.unchanged)}" if result.unchanged else ""))
        self.on_change()
        return result

    def restore_entries(self, entries: list[RecordEntry]) -> None:
        """Take over ``entries`` (from an ended run's result) so :meth:`revert_all` reverts them."""
        for e in entries:
            self.records[e.name] = e.record
            self.written[e.name] = dict(e.written)
            st = self._status(e.name, e.record.ref, [f.path for f in e.record.fields])
            st.state, st.detail = "changed", "taken over from the ended run"


def record_configmap_name(workflow_id: str) -> str:
    """``lockkeeper-record-<workflow id>`` as a DNS-1123 name (lower case, other characters as
    ``-``, at most 253)."""
    body = re.sub(r"[^a-z0-9.-]+", "-", workflow_id.lower()).strip("-.")
    return f"lockkeeper-record-{body}"[:253].rstrip("-.")


async def save_record_configmap(
    activity: str,
    result_type: type,
    *,
    namespace: str,
    workflow_id: str,
    procedure: str,
    data: dict[str, str],
    timeouts: acts.Timeouts = acts.DEFAULT_TIMEOUTS,
) -> str:
    """Merge ``data`` (key → string, JSON where structured) into the record ConfigMap of run
    ``workflow_id`` in ``namespace`` (created, labelled ``lockkeeper.io/procedure=<procedure>``,
    when absent) through the procedure's record activity ``activity`` (the shared write
    :func:`activities.cluster.recordmap.save_record_configmap` under the procedure's own name,
    returning ``result_type``). Returns ``namespace/name``. Raises ActivityError when the write
    failed (e.g. Forbidden, a missing namespace)."""
    name = record_configmap_name(workflow_id)
    await acts.call(activity, SaveRecordInput(namespace=namespace, name=name, data=data, labels={PROCEDURE_LABEL: procedure}),
                    result_type, timeouts=timeouts)
    return f"{namespace}/{name}"
