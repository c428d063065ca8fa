"""Pure planning of the nodeSelector migration (R3e, procedures-spec §5.3 steps 1-2, 5, 6).

- :func:`parse_mapping`: ``region=infra`` → ``node-role.kubernetes.io/infra=true`` pairs;
- :func:`new_selector`: the old selector with the mapped pairs replaced and ``drop_keys`` removed;
- :func:`plan_migration`: which objects reference an old key, their new selector, and the
  capacity check that blocks an object (the schedulable nodes matching the new selector must
  include every node running the workload today; with required pod anti-affinity there must be
  at least ``replicas`` of them; a DaemonSet must cover the same nodes before and after);
- :func:`master_config_items` (the value read by
  :func:`activities.preflight.models.default_node_selector`): ``projectConfig.defaultNodeSelector``
  of each master's ``master-config.yaml`` (o-a ``roles/openshift_control_plane/templates/
  master.yaml.v1.j2``); one on an old key is a blocked item (lockkeeper does not edit it: that
  needs an API restart on every master), naming the value it should get;
- :func:`still_referencing`: the re-scan barrier (nothing may still select a label to remove);
- :func:`pod_regressions`: the "all pods run" check against the baseline (a pod Running at the
  start that is now not running, and any Pending pod whose scheduling failed on a node selector,
  ``0/N nodes are available: N node(s) didn't match node selector.``).

Deterministic and side-effect free; table-tested in tests/node_selectors/test_upgrade_node_selectors.py.
"""

from __future__ import annotations

from activities.cluster.models import ObjectRef
from activities.preflight.models import MASTER_CONFIG_FIELD
from activities.node_selectors.models import NamespaceSelector, PodState, SelectorNode, Workload
from workflows.node_selectors.models import MigrationItem, MigrationPlan

#: The scheduler's wording for a selector no node satisfies: k8s 1.10/1.11 predicates
#: ("didn't match node selector") and later releases ("didn't match Pod's node affinity/selector").
SELECTOR_MISMATCH = ("didn't match node selector", "didn't match Pod's node affinity/selector")


class MappingError(ValueError):
    """A malformed ``--map OLD=NEW`` entry."""


def _pair(text: str) -> tuple[str, str]:
    k, sep, v = text.partition("=")
    if not sep or not k.strip():
        raise MappingError(f"expected KEY=VALUE, got {text!r}")
    return k.strip(), v.strip()


def parse_mapping(entries: list[str]) -> dict[str, dict[str, str]]:
    """``--map OLD=NEW`` entries: ``region=infra=node-role.kubernetes.io/infra=true`` (label keys
    and values never contain ``=``, so four parts are unambiguous), or
    ``OLDKEY=OLDVALUE:NEWKEY=NEWVALUE[,NEWKEY=NEWVALUE]`` for several new labels. Returns
    ``{"region=infra": {"node-role.kubernetes.io/infra": "true"}}``. Raises :class:`MappingError`."""
    out: dict[str, dict[str, str]] = {}
    for e in entries:
        if ":" in e:
            old, _, new = e.partition(":")
            k, v = _pair(old)
            pairs = dict(_pair(p) for p in new.split(",") if p.strip())
        else:
            parts = e.split("=")
            if len(parts) != 4 or not all(p.strip() for p in (parts[0], parts[2])):
                raise MappingError(f"expected OLDKEY=OLDVALUE=NEWKEY=NEWVALUE, got {e!r}")
            k, v = parts[0].strip(), parts[1].strip()
            pairs = {parts[2].strip(): parts[3].strip()}
        if not pairs:
            raise MappingError(f"no new label in {e!r}")
        out[f"{k}={v}"] = pairs
    return out


def new_selector(old: dict[str, str], mapping: dict[str, dict[str, str]], drop_keys: list[str]) -> dict[str, str]:
    """``old`` with every mapped ``k=v`` pair replaced by its new pairs and ``drop_keys`` removed
    (key order: kept keys first, then the new ones)."""
    out: dict[str, str] = {}
    added: dict[str, str] = {}
    for k, v in old.items():
        if f"{k}={v}" in mapping:
            added.update(mapping[f"{k}={v}"])
        elif k not in drop_keys:
            out[k] = v
    return {**out, **added}


def old_keys(mapping: dict[str, dict[str, str]], drop_keys: list[str]) -> set[str]:
    """The label keys the migration moves away from."""
    return {m.split("=", 1)[0] for m in mapping} | set(drop_keys)


def references(selector: dict[str, str], keys: set[str]) -> bool:
    """True when ``selector`` uses any of ``keys``."""
    return any(k in keys for k in selector)


def matching(nodes: list[SelectorNode], selector: dict[str, str], *, schedulable_only: bool = True) -> list[str]:
    """Names of the nodes whose labels satisfy ``selector`` (and are schedulable)."""
    return sorted(n.name for n in nodes if all(n.labels.get(k) == v for k, v in selector.items())
                  and (n.schedulable or not schedulable_only))


def capacity_problems(w: Workload, new: dict[str, str], nodes: list[SelectorNode]) -> list[str]:
    """Why moving ``w`` to ``new`` would leave pods unschedulable (empty = fine)."""
    target = set(matching(nodes, new))
    out: list[str] = []
    if not target:
        out.append(f"no schedulable node carries {', '.join(f'{k}={v}' for k, v in new.items())} yet")
    missing = sorted(set(w.running_nodes) - target)
    if missing and target:
        out.append(f"runs today on {', '.join(missing)}, which the new selector does not match")
    if w.required_anti_affinity and len(target) < w.replicas:
        out.append(f"required pod anti-affinity needs {w.replicas} nodes, the new selector matches {len(target)}")
    if w.ref.kind == "DaemonSet":
        before = set(matching(nodes, w.node_selector, schedulable_only=False))
        after = set(matching(nodes, new, schedulable_only=False))
        if before != after:
            out.append(f"DaemonSet would cover {sorted(after)} instead of {sorted(before)}")
    return out


def _ns_selector(text: str) -> dict[str, str]:
    return dict(_pair(p) for p in text.split(",") if p.strip() and "=" in p)


def plan_migration(workloads: list[Workload], namespaces: list[NamespaceSelector], nodes: list[SelectorNode],
                   mapping: dict[str, dict[str, str]], drop_keys: list[str], remove_labels: list[str]) -> MigrationPlan:
    """The plan: one item per object that references an old key (workloads, then namespaces'
    ``openshift.io/node-selector``), each ``ok`` or ``blocked`` with its reasons, plus the nodes
    whose labels will be removed."""
    keys = old_keys(mapping, drop_keys) | set(remove_labels)
    items: list[MigrationItem] = []
    for w in workloads:
        if not references(w.node_selector, keys):
            continue
        new = new_selector(w.node_selector, mapping, drop_keys)
        problems = capacity_problems(w, new, nodes)
        leftover = [k for k in new if k in set(remove_labels)]
        if leftover:
            problems.append(f"the new selector still uses {', '.join(leftover)}, which is to be removed: add a mapping")
        items.append(MigrationItem(ref=w.ref, path=w.path, old=w.node_selector, new=new, blocked=problems))
    for ns in namespaces:
        sel = _ns_selector(ns.node_selector)
        if not references(sel, keys):
            continue
        new = new_selector(sel, mapping, drop_keys)
        problems = [] if matching(nodes, new) else [f"no schedulable node carries {new} yet"]
        items.append(MigrationItem(ref=ns.ref, path=ns.path, old={"annotation": ns.node_selector},
                                   new={"annotation": ",".join(f"{k}={v}" for k, v in new.items())}, blocked=problems))
    carried = {n.name: [k for k in remove_labels if k in n.labels] for n in nodes}
    label_nodes = sorted(n for n, keys in carried.items() if keys)
    return MigrationPlan(items=items, remove_labels=list(remove_labels), label_nodes=label_nodes,
                         node_labels={n: carried[n] for n in label_nodes})


MASTER_CONFIG_KIND = "MasterConfig"


def master_config_items(selectors: dict[str, str], path: str, mapping: dict[str, dict[str, str]], drop_keys: list[str],
                        remove_labels: list[str], nodes: list[SelectorNode]) -> list[MigrationItem]:
    """One blocked item per master whose ``defaultNodeSelector`` (``selectors``: master →
    value, ``k=v,k2=v2``) uses an old key: the new value is computed like any selector's, and
    the reason says what to do by hand (lockkeeper does not restart the control plane here)."""
    keys = old_keys(mapping, drop_keys) | set(remove_labels)
    items = []
    for master, value in sorted(selectors.items()):
        sel = _ns_selector(value)
        if not references(sel, keys):
            continue
        new = new_selector(sel, mapping, drop_keys)
        text = ",".join(f"{k}={v}" for k, v in new.items())
        uncovered = [f"{k}={v}" for k, v in sel.items() if k in remove_labels and f"{k}={v}" not in mapping and k not in drop_keys]
        if uncovered:  # R3: the default selector keeps a label the run removes from every node
            why = (f"{path} on {master}: {MASTER_CONFIG_FIELD} is {value!r}; no --map covers {', '.join(uncovered)} and "
                   f"--remove-label removes it from every node, so new projects could not schedule: map it "
                   f"(--map {uncovered[0]}=NEWKEY=NEWVALUE), set the new value on every master and `master-restart api` "
                   f"master by master, or keep the label (lockkeeper does not edit it: that restarts the control plane)")
        else:
            why = (f"{path} on {master}: {MASTER_CONFIG_FIELD} is {value!r}; set it to {text!r} on every master, then "
                   f"`master-restart api` master by master (lockkeeper does not edit it: that restarts the control plane)")
        if new and not matching(nodes, new):
            why += f"; no schedulable node carries {text} yet"
        items.append(MigrationItem(ref=ObjectRef(kind=MASTER_CONFIG_KIND, name=master), path=f"{path}#{MASTER_CONFIG_FIELD}",
                                   old={"defaultNodeSelector": value}, new={"defaultNodeSelector": text}, blocked=[why]))
    return items


def still_referencing(workloads: list[Workload], namespaces: list[NamespaceSelector], remove_labels: list[str],
                      master_selectors: dict[str, str] | None = None) -> list[str]:
    """The re-scan barrier: objects that still select a label about to be removed (workloads,
    namespaces, and each master's ``defaultNodeSelector``)."""
    keys = set(remove_labels)
    out = [w.ref.describe() for w in workloads if references(w.node_selector, keys)]
    out += [ns.ref.describe() for ns in namespaces if references(_ns_selector(ns.node_selector), keys)]
    return out + [f"{MASTER_CONFIG_KIND} {m} ({MASTER_CONFIG_FIELD}={v})" for m, v in sorted((master_selectors or {}).items())
                  if references(_ns_selector(v), keys)]


def pod_regressions(baseline: list[PodState], now: list[PodState]) -> list[str]:
    """Pods Running in ``baseline`` that are now neither Running nor gone-and-replaced (a pod of
    a rolled-out workload is replaced under a new name: only its absence is fine), plus any
    Pending pod whose scheduling failed on a node selector."""
    current = {p.key: p for p in now}
    out: list[str] = []
    for p in baseline:
        c = current.get(p.key)
        if p.phase == "Running" and c is not None and c.phase not in ("Running", "Succeeded"):
            out.append(f"{p.key} was Running, now {c.phase}" + (f": {c.message}" if c.message else ""))
    for c in now:
        if c.phase == "Pending" and c.message and any(s in c.message for s in SELECTOR_MISMATCH):
            out.append(f"{c.key} Pending: {c.message}")
    return sorted(set(out))
