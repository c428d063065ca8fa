"""Pure planning of a node upgrade (R3d nodes, procedures-spec §1.2 and §4.2): decide, never do.

- **Label selection** (:func:`select_nodes`): the nodes matching ``label_selector`` (or an explicit
  list), minus the masters, excluded both by label (``exclude_selector``, default
  ``node-role.kubernetes.io/master=true``) and by name (``masters``: on 3.9 masters may not carry
  the label yet, openshift/openshift-docs PR #11628). No match fails with openshift-ansible's own
  words (o-a 3.10 ``playbooks/common/openshift-cluster/upgrades/initialize_nodes_to_upgrade.yml``).
- **Serial arithmetic** (:func:`serial_size`, :func:`serial_batches`): Ansible's
  ``lib/ansible/utils/helpers.py::pct_to_int`` (``int(pct/100 * total)``, at least 1) and
  ``lib/ansible/executor/playbook_executor.py::_get_serialized_batches`` (full batches, then the
  remainder). 2 nodes at 50% → [1][1]; 3 at 50% → [1][1][1]; 7 at 20% → seven batches of 1.
- **Order** (:func:`plan_upgrade`): the selected nodes in ``node_order``
  (:func:`workflows.kit.plan.order_nodes`: zone-oldest by default, oldest-first, newest-first or
  an explicit list); Nodes read without zone and creationTimestamp (results recorded before they
  were read) sort by name under every named order, as the plan did before.
- **Canary** (:func:`plan_upgrade`): batch 0, explicit nodes or the first ``k`` still to do,
  followed by an approval gate; the rest is batched with ``serial`` over the nodes still to do.
  Nodes already at the target kubelet version are skipped (``skip_done``), so a re-run after the
  canary does not repeat it.
- **Failures** (:func:`batch_failed_too_much`): the play stops after a batch when
  ``failed / batch_size * 100 > max_fail_percentage`` (o-a ``upgrade_nodes.yml``; Ansible #32255).

Deterministic and side-effect free: workflows call these directly; tests/node_upgrade/test_upgrade_plan.py
table-tests them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from activities.node_upgrade.models import NodeFacts
from kubeshared.labels import LabelSelector, matches_labels, parse_label_selector
from workflows.kit import plan as kit_plan
from workflows.kit.inputs import resolve_max_unavailable
from workflows.node_upgrade.models import BatchPolicy, NodeSelection, UpgradePlan

#: openshift-ansible's message when the label matches nothing (initialize_nodes_to_upgrade.yml).
NO_MATCH = "openshift_upgrade_nodes_label was specified but no nodes matched"

_KEY = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$")


class PlanError(ValueError):
    """The input cannot be planned: a bad selector or serial, no node matches, an unknown canary."""


def parse_selector(selector: str) -> LabelSelector:
    """Parse a label selector string as ``kubectl -l`` accepts it: ``k=v``, ``k==v``, ``k!=v``,
    ``k``, ``!k``, ``k in (a,b)``, ``k notin (a,b)``, comma-separated (all must hold), with
    :func:`kubeshared.labels.parse_label_selector` (empty terms passed over).

    Returns the requirements in order as ``(key, op, values)``. Raises :class:`PlanError` on an
    empty or malformed selector, or a key that is not a label key.
    """
    try:
        reqs = parse_label_selector(selector, skip_empty=True)
    except ValueError as e:
        raise PlanError(f"invalid label selector {selector!r}: {e}") from None
    if not reqs:
        raise PlanError("empty label selector")
    for key, _, _ in reqs:
        if not _KEY.match(key):
            raise PlanError(f"invalid label selector {selector!r}: bad key {key!r}")
    return reqs


def selector_matches(selector: str | LabelSelector, labels: dict[str, str]) -> bool:
    """True when every requirement of ``selector`` (string or parsed) holds for ``labels``."""
    return matches_labels(parse_selector(selector) if isinstance(selector, str) else selector, labels)


def select_nodes(nodes: Iterable[NodeFacts], selection: NodeSelection) -> tuple[list[str], dict[str, str]]:
    """The nodes of ``selection`` in name order, and the excluded masters with the reason.

    A node is selected when it matches ``label_selector`` (if given) or is named in ``nodes``;
    it is excluded when it matches ``exclude_selector`` ("by label") or is named in ``masters``
    ("by name"). Returns ``(selected, excluded)`` where ``excluded`` maps node → reason. Raises
    :class:`PlanError` with :data:`NO_MATCH` when nothing is left, and when ``nodes`` names a
    node the cluster does not have.
    """
    facts = {n.name: n for n in nodes}
    if selection.label_selector is None and not selection.nodes:
        raise PlanError("a node selection needs a label selector or node names")
    unknown = [n for n in selection.nodes if n not in facts]
    if unknown:
        raise PlanError(f"unknown node(s): {', '.join(unknown)}")
    include = parse_selector(selection.label_selector) if selection.label_selector else None
    exclude = parse_selector(selection.exclude_selector) if selection.exclude_selector else None
    masters = set(selection.masters)
    selected: list[str] = []
    excluded: dict[str, str] = {}
    for name in sorted(facts):
        n = facts[name]
        if not (name in selection.nodes or (include is not None and selector_matches(include, n.labels))):
            continue
        if name in masters:
            excluded[name] = "master (by name)"
        elif exclude is not None and selector_matches(exclude, n.labels):
            excluded[name] = f"master (by label {selection.exclude_selector})"
        else:
            selected.append(name)
    if not selected:
        what = selection.label_selector or ",".join(selection.nodes)
        raise PlanError(f"{NO_MATCH}: {what}" + (f" (masters excluded: {', '.join(excluded)})" if excluded else ""))
    return selected, excluded


def serial_size(serial: int | str, total: int) -> int:
    """Batch size for Ansible ``serial`` over ``total`` hosts: ``"N%"`` → ``int(N/100 * total)``,
    at least 1 (``pct_to_int(value, num_items, min_value=1)``); an integer (or digit string) is
    used as is. The kit's one parser (:func:`workflows.kit.inputs.resolve_max_unavailable`);
    raises :class:`PlanError` naming ``serial`` on a value it refuses (below 1, a bool, malformed)."""
    try:
        return resolve_max_unavailable(serial, total)
    except ValueError as e:
        raise PlanError(f"invalid serial: {e}") from None


def serial_batches(nodes: Sequence[str], serial: int | str) -> list[list[str]]:
    """Split ``nodes`` the way Ansible serialises a play: batches of :func:`serial_size` computed
    once over ``len(nodes)``, the last batch holding the remainder. Empty in, empty out."""
    if not nodes:
        return []
    size = serial_size(serial, len(nodes))
    return [list(nodes[i : i + size]) for i in range(0, len(nodes), size)]


def batch_failed_too_much(failed: int, batch_size: int, max_fail_percentage: float) -> bool:
    """openshift-ansible's stop rule: ``failed / batch_size * 100 > max_fail_percentage``.
    With the default 0 any failure stops the upgrade. An empty batch never stops it."""
    if batch_size <= 0:
        return False
    return failed / batch_size * 100.0 > max_fail_percentage


def is_done(node: NodeFacts, target_version: str) -> bool:
    """Done = the kubelet reports ``target_version`` (``status.nodeInfo.kubeletVersion``) and the
    node is Ready (a kubelet at the target that is not Ready is not finished)."""
    return node.kubelet_version == target_version and node.ready


def plan_upgrade(
    nodes: Iterable[NodeFacts], selection: NodeSelection, policy: BatchPolicy, target_version: str,
    node_order: str | Sequence[str] = kit_plan.ZONE_OLDEST,
) -> UpgradePlan:
    """The whole node-upgrade plan: selection, done nodes skipped, canary batch, serial batches.

    The selected nodes are put in ``node_order`` first (:func:`workflows.kit.plan.order_nodes`), so
    the canary count and the serial batches take them in that order; an explicit order may name
    only selected nodes.

    Canary: ``policy.canary`` as a list names the canary nodes (each must be selected; those
    already done are dropped, so a re-run after the canary has no canary batch and no canary
    gate); as an int ``k`` it takes the first ``k`` nodes still to do. The serial batch size is
    computed over the nodes still to do after the canary (``batch_size``); ``size_over_selected``
    is what the same serial gives over every selected node (the plan shows both). Raises
    :class:`PlanError` (selection, serial, unknown canary).
    """
    facts = {n.name: n for n in nodes}
    selected, excluded = select_nodes(facts.values(), selection)
    try:
        kit_plan.check_node_order(node_order, selected, where="the selected nodes")
        selected = [n.name for n in kit_plan.order_nodes([facts[s] for s in selected], node_order)]
    except kit_plan.PlanError as err:
        raise PlanError(str(err)) from None
    done = [n for n in selected if policy.skip_done and is_done(facts[n], target_version)]
    todo = [n for n in selected if n not in done]
    if isinstance(policy.canary, list):
        unknown = [c for c in policy.canary if c not in selected]
        if unknown:
            raise PlanError(f"canary node(s) not in the selection: {', '.join(unknown)}")
        canary = [c for c in policy.canary if c in todo]
    else:
        if policy.canary < 0:
            raise PlanError(f"invalid canary count {policy.canary}")
        canary = todo[: policy.canary]
    rest = [n for n in todo if n not in canary]
    batches = serial_batches(rest, policy.serial)
    size = serial_size(policy.serial, len(rest)) if rest else 0
    return UpgradePlan(
        target_version=target_version,
        selector=selection.label_selector,
        selected=selected,
        excluded=excluded,
        done=done,
        canary=canary,
        canary_gate=bool(canary) and bool(rest) and policy.gate_after_canary,
        batches=batches,
        serial=str(policy.serial),
        batch_size=size,
        size_over_selected=serial_size(policy.serial, len(selected)),
        max_fail_percentage=policy.max_fail_percentage,
        node_order=kit_plan.order_name(node_order),
    )


def plan_lines(plan: UpgradePlan) -> list[str]:
    """The plan as lines for ``--dry-run`` and ``status`` (batches as ``[a][b,c]``)."""
    out = [f"target kubelet {plan.target_version}; selector {plan.selector or '(explicit nodes)'}"]
    out.append(f"selected {len(plan.selected)}: {', '.join(plan.selected)}")
    out.append(f"order: {plan.node_order} ({kit_plan.ORDER_MEANING.get(plan.node_order, 'unknown')})")
    for name, why in plan.excluded.items():
        out.append(f"excluded {name}: {why}")
    if plan.done:
        out.append(f"already at target (skipped): {', '.join(plan.done)}")
    if plan.canary:
        out.append(f"canary: [{', '.join(plan.canary)}]" + (" then approval gate" if plan.canary_gate else ""))
    out.append(
        f"serial {plan.serial}: batch size {plan.batch_size} over {sum(len(b) for b in plan.batches)} still to do "
        f"({plan.size_over_selected} over all {len(plan.selected)} selected)"
    )
    out.append("batches: " + ("".join(f"[{', '.join(b)}]" for b in plan.batches) or "(none)"))
    out.append(f"max_fail_percentage {plan.max_fail_percentage:g}")
    out.append("warning: 3.10 regenerates /etc/origin/node/node-config.yaml from the node group ConfigMap; manual edits are lost")
    return out
