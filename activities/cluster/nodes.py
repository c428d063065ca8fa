"""Generic node activities: read, annotate, label, cordon/uncordon, delete, wait for Ready,
record an Event.

Synchronous (the gateway blocks), idempotent (read first, or take the node as a watch just
showed it, and write only what differs), with the
conditional patches the durability rules ask for: a cordon writes ``spec.unschedulable`` and the
``lockkeeper.io/cordoned-by`` record in ONE patch conditional on the resourceVersion read, so
"we cordoned it" is never lost between two writes (kured's "undo only what you changed", made
crash-safe). Errors: non-retryable ``NodeNotFound``, ``NodeNotCordoned``; API errors propagate
(:mod:`activities.kube.errors`) and are retried per the caller's policy.
"""

from __future__ import annotations

import time
from typing import Any

from temporalio import activity

from activities.cluster.base import CONFLICT_RETRIES, ConflictExhausted, GatewayActivities
from activities.cluster.models import (
    ANN_CORDONED_BY,
    CordonInput,
    CordonResult,
    DeleteNodeInput,
    DeleteNodeResult,
    NodeInfo,
    ReadNodeInput,
    RecordEventInput,
    SetNodeAnnotationsInput,
    SetNodeLabelsInput,
    UncordonInput,
    UncordonResult,
    WaitNodeReadyInput,
    WaitNodeReadyResult,
)
from activities.cluster.nodeinfo import node_info, node_summary
from activities.cluster.nodewatch import beating_to_hand_off, hand_off
from activities.cluster.watch import watch_window
from activities.context import HEARTBEAT_INTERVAL_SECONDS, check_cancelled, fail, heartbeat, log
from activities.kube import objects
from activities.kube.errors import Conflict, NotFound


class NodeActivities(GatewayActivities):
    """Node reads and writes, bound to one cluster (see :class:`GatewayActivities`)."""

    ACTIVITIES = (
        "read_node",
        "set_node_annotations",
        "set_node_labels",
        "cordon_node",
        "uncordon_node",
        "delete_node",
        "wait_node_ready",
        "record_node_event",
    )

    @activity.defn(name="read_node", no_thread_cancel_exception=True)
    def read_node(self, input: ReadNodeInput) -> NodeInfo:
        """The Node as :class:`NodeInfo`, with its ``boot_id``. Raises non-retryable ``NodeNotFound``; an API error as
        its retryable ``Api*`` failure type (:meth:`planning_errors` with ``policy_decides``: a
        procedure reading the node before it writes fails fast under the planning retry policy,
        one in the middle of its work keeps retrying)."""
        with self.planning_errors(policy_decides=True):
            obj = self._node(input.node)
            return node_info(obj).model_copy(update={"boot_id": objects.boot_id(obj) or None})

    # --- node writes ---------------------------------------------------------------------------

    @activity.defn(name="set_node_annotations", no_thread_cancel_exception=True)
    def set_node_annotations(self, input: SetNodeAnnotationsInput) -> NodeInfo:
        """Set/remove annotations with one merge patch holding only the keys that differ (no
        write at all when none does; with ``read_first`` False, one patch of every key and no
        read). Returns the Node after the change. Raises non-retryable ``NodeNotFound``."""
        if not input.read_first:
            return patch_annotations(self, input.node, input.annotations)
        return set_annotations(self, input.node, input.annotations)

    @activity.defn(name="cordon_node", no_thread_cancel_exception=True)
    def cordon_node(self, input: CordonInput) -> CordonResult:
        """Cordon for ``owner``: ``spec.unschedulable=true`` and ``lockkeeper.io/cordoned-by=owner``
        in ONE patch conditional on the resourceVersion read (409 -> re-read, retry).

        Already unschedulable: no write; ``cordoned_by_us`` is True only when the annotation
        already names ``owner`` (a retry after our own cordon), False when somebody else
        cordoned it (then lockkeeper never uncordons it).
        """
        return cordon_for(self, input.node, input.owner)

    @activity.defn(name="uncordon_node", no_thread_cancel_exception=True)
    def uncordon_node(self, input: UncordonInput) -> UncordonResult:
        """Uncordon only if ``lockkeeper.io/cordoned-by == owner``, removing the annotation in
        the same conditional patch.

        ``uncordoned`` is True when the node ends schedulable (also when it already was; a stale
        annotation of ours is then removed). A node cordoned by somebody else stays cordoned:
        ``uncordoned`` False and ``left_cordoned_reason`` says by whom.
        """
        return uncordon_owned(self, input.node, input.owner)

    @activity.defn(name="set_node_labels", no_thread_cancel_exception=True)
    def set_node_labels(self, input: SetNodeLabelsInput) -> NodeInfo:
        """Set/remove labels with one merge patch holding only the keys that differ (no write
        when none does). Returns the Node after the change. Raises non-retryable ``NodeNotFound``."""
        obj = self._node(input.node)
        current = objects.labels(obj)
        diff = {k: v for k, v in input.labels.items() if (k in current if v is None else current.get(k) != v)}
        if not diff:
            return node_info(obj)
        patched = _patch(self, input.node, {"metadata": {"labels": diff}})
        log().info(f"node {input.node}: labels set {diff}")
        return node_info(patched)

    @activity.defn(name="delete_node", no_thread_cancel_exception=True)
    def delete_node(self, input: DeleteNodeInput) -> DeleteNodeResult:
        """DELETE the Node object. A node already gone, or with ``uid`` one that has another
        uid, is success (``deleted`` False): a repeated call sends nothing. With
        ``require_cordoned`` a schedulable node is refused (non-retryable ``NodeNotCordoned``)."""
        try:
            obj = self.gateway.get_node(input.node)
        except NotFound:
            return DeleteNodeResult(deleted=False, detail=f"node {input.node} is absent")
        uid = obj.get("metadata", {}).get("uid", "")
        if input.uid is not None and uid != input.uid:
            return DeleteNodeResult(deleted=False, detail=f"node {input.node} has uid {uid}, not the recorded {input.uid}")
        if input.require_cordoned and not (obj.get("spec") or {}).get("unschedulable"):
            raise fail("NodeNotCordoned", f"node {input.node} is schedulable; cordon and drain it before deleting it")
        try:
            self.gateway.delete("Node", input.node)
        except NotFound:
            return DeleteNodeResult(deleted=False, detail=f"node {input.node} vanished before the delete")
        log().warning(f"node {input.node} (uid {uid}): Node object deleted")
        return DeleteNodeResult(deleted=True, detail=f"node {input.node} uid {uid} deleted")

    @activity.defn(name="wait_node_ready", no_thread_cancel_exception=True)
    def wait_node_ready(self, input: WaitNodeReadyInput) -> WaitNodeReadyResult:
        """Watch the Node until its Ready condition is ``input.ready`` or ``timeout_seconds``
        pass (LIST, then WATCH from its resourceVersion in windows of
        :data:`HEARTBEAT_INTERVAL_SECONDS`, heartbeating; an expired resourceVersion or a broken
        stream re-lists). Raises non-retryable ``NodeNotFound`` when the node is absent or deleted.

        Holds no activity slot for the wait when the worker wired a completer: after the LIST the
        wait goes to the cluster's shared node watcher (:func:`activities.cluster.nodewatch.hand_off`),
        which completes the activity."""
        deadline = time.monotonic() + input.timeout_seconds
        with beating_to_hand_off():  # a slow LIST must not outlast the heartbeat timeout before the hand-off
            obj, rv = list_node(self, input.node)
            last = [obj]  # the node as last seen by the watch
            if node_info(obj).ready != input.ready:  # a wait of minutes (a reboot): hand it off, no slot held (issue 40)

                def step(o: dict[str, Any], info: NodeInfo) -> WaitNodeReadyResult | None:
                    last[0] = o
                    return WaitNodeReadyResult(node=info, matched=True) if info.ready == input.ready else None

                hand_off(self.gateway, node=input.node, rv=rv, timeout_seconds=input.timeout_seconds, step=step,
                         timed_out=lambda: WaitNodeReadyResult(node=node_info(last[0]), matched=False, timed_out=True),
                         details=lambda: node_summary(node_info(last[0])), what=f"wait_node_ready {input.node}")

        def seen(type_: str, event_obj: dict[str, Any]) -> bool:
            if type_ == "DELETED":
                raise fail("NodeNotFound", f"node {input.node} was deleted")
            if type_ in ("ADDED", "MODIFIED"):
                last[0] = event_obj
                return node_info(event_obj).ready == input.ready
            return False

        def relist() -> str | None:
            last[0], new_rv = list_node(self, input.node)
            return new_rv

        while True:
            info = node_info(last[0])
            if info.ready == input.ready:
                return WaitNodeReadyResult(node=info, matched=True)
            now = time.monotonic()
            if now >= deadline:
                return WaitNodeReadyResult(node=info, matched=False, timed_out=True)
            heartbeat(node_summary(info))
            check_cancelled()
            window = max(1, min(int(HEARTBEAT_INTERVAL_SECONDS), int(deadline - now + 0.999)))
            rv = watch_window(
                lambda rv, s: self.gateway.watch_node(input.node, resource_version=rv, timeout_seconds=s), rv, window, seen,
                relist, f"node {input.node}",
            )

    # --- events ----------------------------------------------------------------------------------

    @activity.defn(name="record_node_event", no_thread_cancel_exception=True)
    def record_node_event(self, input: RecordEventInput) -> None:
        """Create a core/v1 Event (namespace ``default``, involvedObject kind Node with the
        node's uid, source component ``lockkeeper``) that names the procedure: the message ends
        with ``(procedure ID)`` and ``reportingInstance`` is that ID (:func:`procedure_of` the
        calling workflow). Raises non-retryable ``NodeNotFound``."""
        obj = self._node(input.node)
        procedure = procedure_of(activity.info().workflow_id)
        self.gateway.create_node_event(
            node=input.node,
            node_uid=objects.meta(obj).get("uid"),
            reason=input.reason,
            message=f"{input.message} (procedure {procedure})",
            type=input.type,
            instance=procedure,
        )


def procedure_of(workflow_id: str) -> str:
    """The procedure's workflow ID from a workflow ID: a node run's child ID is
    ``{procedure}/node/{node}/{attempt}``; any other ID is the procedure's own."""
    return workflow_id.split("/node/", 1)[0]


def list_node(acts: GatewayActivities, name: str) -> tuple[dict[str, Any], str | None]:
    """The Node ``name`` and the list's resourceVersion (to watch from): one LIST with
    ``fieldSelector=metadata.name=NAME``. Raises non-retryable ``NodeNotFound``."""
    items, rv = acts.gateway.list_nodes_with_rv(field_selector=f"metadata.name={name}")
    if not items:
        raise fail("NodeNotFound", f"node {name} not found")
    return items[0], rv


def set_annotations(
    acts: GatewayActivities, node: str, wanted: dict[str, str | None], known: dict[str, Any] | None = None
) -> NodeInfo:
    """Body of ``set_node_annotations`` (shared with activities that answer the daemon): one
    merge patch with only the keys that differ from the Node as read, none when nothing does.
    Returns the Node after the change. Raises non-retryable ``NodeNotFound``.

    ``known``: the Node as the caller just observed it (a watch event, the answer to its own
    write). The diff is taken from it and patched with no GET and no resourceVersion
    precondition: a merge patch of the keys that differ sets exactly them, whatever else changed
    since, as the read-then-patch does. Conditional, it met a 409, a GET and a second PATCH on
    the reaction's path whenever the node had moved on (a status update of the kubelet, the
    daemon's next annotation; issue 40)."""
    if known is not None and objects.meta(known).get("resourceVersion"):
        diff = _annotation_diff(objects.annotations(known), wanted)
        if not diff:
            return node_info(known)
        patched = _patch(acts, node, {"metadata": {"annotations": diff}})
        log().info(f"node {node}: annotations set {diff}")
        return node_info(patched)
    obj = acts._node(node)
    diff = _annotation_diff(objects.annotations(obj), wanted)
    if not diff:
        return node_info(obj)
    patched = _patch(acts, node, {"metadata": {"annotations": diff}})
    log().info(f"node {node}: annotations set {diff}")
    return node_info(patched)


def patch_annotations(acts: GatewayActivities, node: str, wanted: dict[str, str | None]) -> NodeInfo:
    """One merge patch of every key of ``wanted`` (None removes it), without reading the Node
    first: a patch that changes nothing is no write for the API server (no new resourceVersion,
    no watch event). Returns the Node as the patch left it. Raises non-retryable ``NodeNotFound``."""
    return node_info(write_annotations(acts, node, wanted))


def write_annotations(acts: GatewayActivities, node: str, wanted: dict[str, str | None]) -> dict[str, Any]:
    """:func:`patch_annotations`, returning the Node object the API server answered (a caller
    that watches next starts from its resourceVersion)."""
    patched = _patch(acts, node, {"metadata": {"annotations": dict(wanted)}})
    log().info(f"node {node}: annotations written {wanted}")
    return patched


def _annotation_diff(current: dict[str, str], wanted: dict[str, str | None]) -> dict[str, str | None]:
    """The merge-patch annotations that make ``current`` hold ``wanted`` (None removes a key)."""
    diff: dict[str, str | None] = {}
    for key, value in wanted.items():
        if value is None:
            if key in current:
                diff[key] = None
        elif current.get(key) != value:
            diff[key] = value
    return diff


def cordon_for(acts: GatewayActivities, node: str, owner: str, known: dict[str, Any] | None = None) -> CordonResult:
    """Body of ``cordon_node`` (shared with ``drain_when_asked``): ``spec.unschedulable=true``
    and ``lockkeeper.io/cordoned-by=owner`` in ONE patch conditional on the resourceVersion read
    (409: read again, up to ``CONFLICT_RETRIES``). ``known``: the Node as the caller just
    observed it, used instead of the first read (the patch stays conditional on its
    resourceVersion). Raises non-retryable ``NodeNotFound``; ``ConflictExhausted`` when the
    node kept changing."""
    for _ in range(CONFLICT_RETRIES):
        obj, known = known if known is not None else acts._node(node), None
        info = node_info(obj)
        if info.unschedulable:
            return CordonResult(cordoned_by_us=info.cordoned_by == owner, was_unschedulable=True)
        patch = {
            "metadata": {"annotations": {ANN_CORDONED_BY: owner}, "resourceVersion": info.resource_version},
            "spec": {"unschedulable": True},
        }
        try:
            _patch(acts, node, patch)
        except Conflict:
            continue
        log().info(f"node {node}: cordoned for {owner}")
        return CordonResult(cordoned_by_us=True, was_unschedulable=False)
    raise ConflictExhausted(f"node {node} kept changing while cordoning")


def uncordon_owned(acts: GatewayActivities, node: str, owner: str) -> UncordonResult:
    """Body of ``uncordon_node``: see :func:`uncordon_seen`."""
    return uncordon_seen(acts, node, owner)[0]


def uncordon_seen(
    acts: GatewayActivities, node: str, owner: str, known: dict[str, Any] | None = None
) -> tuple[UncordonResult, dict[str, Any]]:
    """Uncordon only if ``lockkeeper.io/cordoned-by == owner``, removing the annotation in the
    same patch, conditional on the resourceVersion read (409: read again, up to
    ``CONFLICT_RETRIES``). ``known``: the Node as the caller just observed it, used instead of
    the first read (the patch stays conditional on its resourceVersion). Returns the result and
    the Node as it was left (the last patch's answer, or the node as read when nothing was written).
    Raises non-retryable ``NodeNotFound``; ``ConflictExhausted`` when the node kept changing."""
    for _ in range(CONFLICT_RETRIES):
        obj, known = known if known is not None else acts._node(node), None
        info = node_info(obj)
        if not info.unschedulable:
            if info.cordoned_by == owner:  # a stale record of ours: remove it
                obj = _patch(acts, node, {"metadata": {"annotations": {ANN_CORDONED_BY: None}}})
            return UncordonResult(uncordoned=True), obj
        if info.cordoned_by != owner:
            who = info.cordoned_by or "somebody else (no lockkeeper.io/cordoned-by annotation)"
            return UncordonResult(uncordoned=False, left_cordoned_reason=f"node {node} was cordoned by {who}"), obj
        patch = {
            "metadata": {"annotations": {ANN_CORDONED_BY: None}, "resourceVersion": info.resource_version},
            "spec": {"unschedulable": None},
        }
        try:
            patched = _patch(acts, node, patch)
        except Conflict:
            continue
        log().info(f"node {node}: uncordoned (cordoned by {owner})")
        return UncordonResult(uncordoned=True), patched
    raise ConflictExhausted(f"node {node} kept changing while uncordoning")


def _patch(acts: GatewayActivities, node: str, patch: dict[str, Any]) -> dict[str, Any]:
    """Merge-patch the Node; returns it as patched. 404 is the non-retryable ``NodeNotFound``;
    a 409 (a patch conditional on a resourceVersion that moved on) propagates as ``Conflict``."""
    try:
        return acts.gateway.patch_node(node, patch)
    except NotFound:
        raise fail("NodeNotFound", f"node {node} not found") from None
