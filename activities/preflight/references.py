"""Who still selects a node label: pure scanners over API objects and ``master-config.yaml``.

A reference is any selector that would match differently once the label is gone from the nodes:

- a workload's pod template ``nodeSelector`` (``spec.template.spec``; a CronJob's under
  ``spec.jobTemplate.spec.template.spec``), and its required node affinity
  (``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[]
  .matchExpressions[]``, operators ``In``/``NotIn``/``Exists``/``DoesNotExist``/``Gt``/``Lt``:
  Kubernetes API ``core/v1`` NodeSelectorRequirement);
- a Namespace's ``openshift.io/node-selector`` annotation (an OpenShift Project's node selector,
  a label selector string);
- ``projectConfig.defaultNodeSelector`` of an OpenShift 3.x ``master-config.yaml``
  (openshift-ansible ``roles/openshift_control_plane/templates/master.yaml.v1.j2``), the selector
  of every project created without one.

Selector strings follow the Kubernetes label selector syntax (``apimachinery`` ``labels.Parse``):
requirements joined by commas, each ``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, ``k in (a,b)`` or
``k notin (a,b)``.

:func:`template_spec` and :data:`NS_ANNOTATION` moved here from
``activities.node_selectors.activities`` (which imports them back under its old names
``_template_spec`` and ``NS_ANNOTATION``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from activities.preflight.models import MASTER_CONFIG_FIELD, default_node_selector, split_selector
from kubeshared.labels import parse_label_selector

#: OpenShift's project node selector annotation (on the Namespace behind each Project).
NS_ANNOTATION = "openshift.io/node-selector"
#: JSON Pointer (RFC 6901) of that annotation.
NS_SELECTOR_PATH = "/metadata/annotations/openshift.io~1node-selector"
#: Workload kinds with a pod template, in scan order.
WORKLOAD_KINDS: tuple[str, ...] = (
    "DeploymentConfig", "Deployment", "DaemonSet", "StatefulSet", "ReplicationController", "ReplicaSet",
    "CronJob", "Job",
)
#: Kinds skipped when a controller owns them (the owner's template is the reference).
OWNED_KINDS = frozenset({"ReplicationController", "ReplicaSet", "Job"})


def template_spec(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod template's ``spec`` of a workload object (``{}`` when it has none): a CronJob's is
    under ``spec.jobTemplate.spec.template.spec``, every other kind's under ``spec.template.spec``."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "CronJob" or "jobTemplate" in spec:
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    return (spec.get("template") or {}).get("spec") or {}


def template_path(kind: str) -> str:
    """JSON Pointer of the pod template's spec of ``kind``."""
    return "/spec/jobTemplate/spec/template/spec" if kind == "CronJob" else "/spec/template/spec"


def has_controller_owner(obj: dict[str, Any]) -> bool:
    """Some ``ownerReferences`` entry has ``controller: true``."""
    return any(o.get("controller") for o in (obj.get("metadata") or {}).get("ownerReferences") or [])


@dataclass(frozen=True)
class Requirement:
    """One selector requirement: ``key``, ``op`` (``=``, ``!=``, ``in``, ``notin``, ``exists``,
    ``!``, or a node affinity operator ``Gt``/``Lt``), ``values``, and ``text`` as written."""

    key: str
    op: str
    values: tuple[str, ...]
    text: str


#: Label keys (``[prefix/]name``) and values (Kubernetes ``validation.IsQualifiedName`` and
#: ``IsValidLabelValue``: alphanumerics with ``-_.`` inside, at most 63 characters per part).
_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def _checked(r: Requirement) -> Requirement:
    if not _KEY.match(r.key) or not all(_VALUE.match(v) for v in r.values):
        raise ValueError(f"not a label selector requirement: {r.text!r}")
    return r


def parse_selector(text: str) -> list[Requirement]:
    """The requirements of a label selector string (module docstring for the syntax), each term
    parsed by :func:`kubeshared.labels.parse_label_selector` and kept with its text; empty terms
    are passed over. Raises ValueError for a requirement that is none of the forms, or whose key
    or value is not a valid label key or value."""
    out: list[Requirement] = []
    for raw in split_selector(text):
        part = raw.strip()
        if not part:
            continue
        ((key, op, values),) = parse_label_selector(part)  # a term without a top-level comma: one requirement
        out.append(_checked(Requirement(key, "!" if op == "!exists" else op, values, part)))
    return out


def node_selector_requirements(selector: dict[str, str]) -> list[Requirement]:
    """A pod's ``nodeSelector`` map as ``=`` requirements."""
    return [Requirement(k, "=", (str(v),), f"{k}={v}") for k, v in selector.items()]


def affinity_requirements(spec: dict[str, Any]) -> list[Requirement]:
    """Every match expression of a pod spec's required node affinity, as requirements
    (``In``→``in``, ``NotIn``→``notin``, ``Exists``→``exists``, ``DoesNotExist``→``!``)."""
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    out = []
    for term in required.get("nodeSelectorTerms") or []:
        for e in term.get("matchExpressions") or []:
            op = str(e.get("operator") or "")
            values = tuple(str(v) for v in e.get("values") or [])
            text = f"{e.get('key')} {op}" + (f" ({', '.join(values)})" if values else "")
            out.append(Requirement(str(e.get("key")), ops.get(op, op), values, text))
    return out


def is_covered(covered: list[str], key: str, value: str | None) -> bool:
    """``covered`` (``KEY`` or ``KEY=VALUE`` entries) covers ``key``'s ``value`` (None: a
    reference to the key alone, covered only by a ``KEY`` entry)."""
    return key in covered or (value is not None and f"{key}={value}" in covered)


@dataclass(frozen=True)
class LabelReference:
    """A selector that uses the label: ``where`` (``DeploymentConfig default/router``,
    ``Namespace team-a``, ``MasterConfig master01``), ``path`` (JSON Pointer or file#field),
    ``text`` (the requirement as written), ``value`` (the label value it names; None for a
    key-only requirement), ``mapped`` (the procedure's mapping covers that value), ``covered``
    (the procedure rewrites this reference: mapped, and where the procedure writes)."""

    where: str
    path: str
    text: str
    value: str | None
    covered: bool
    mapped: bool = False

    def line(self) -> str:
        """``MasterConfig master01 (…#projectConfig.defaultNodeSelector: region=primary): no mapping covers it``."""
        if self.covered:
            how = "rewritten by the procedure"
        elif self.mapped:
            how = "the mapping covers its value, but the procedure does not rewrite it here"
        else:
            how = "no mapping covers it"
        return f"{self.where} ({self.path}: {self.text}): {how}"


def references(requirements: list[Requirement], key: str, value: str | None) -> list[tuple[str | None, str]]:
    """``(value, text)`` of each requirement that uses label ``key`` (with ``value``: that value,
    or the key alone). A set requirement gives one entry per value it names."""
    out: list[tuple[str | None, str]] = []
    for r in requirements:
        if r.key != key:
            continue
        if not r.values or r.op in ("Gt", "Lt"):
            out.append((None, r.text))
            continue
        for v in r.values:
            if value is None or v == value:
                out.append((v, r.text))
    return out


def _refs(where: str, path: str, reqs: list[Requirement], key: str, value: str | None, covered: list[str],
          can_cover: bool = True) -> list[LabelReference]:
    out = []
    for v, text in references(reqs, key, value):
        mapped = is_covered(covered, key, v)
        out.append(LabelReference(where, path, text, v, can_cover and mapped, mapped))
    return out


def scan_workload(kind: str, obj: dict[str, Any], key: str, value: str | None, covered: list[str]) -> list[LabelReference]:
    """The references of one workload of ``kind`` to label ``key`` (``value``): its template's
    ``nodeSelector`` and required node affinity."""
    meta = obj.get("metadata") or {}
    where = f"{kind} {meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else f"{kind} {meta.get('name')}"
    spec = template_spec({**obj, "kind": kind})
    base = template_path(kind)
    return (_refs(where, f"{base}/nodeSelector", node_selector_requirements(dict(spec.get("nodeSelector") or {})), key,
                  value, covered)
            + _refs(where, f"{base}/affinity/nodeAffinity", affinity_requirements(spec), key, value, covered))


def scan_namespace(obj: dict[str, Any], key: str, value: str | None, covered: list[str]) -> list[LabelReference]:
    """The references of one Namespace's ``openshift.io/node-selector`` annotation. An annotation
    that does not parse is itself reported (as a reference of unknown value, never covered)."""
    meta = obj.get("metadata") or {}
    text = ((meta.get("annotations") or {}).get(NS_ANNOTATION) or "").strip()
    if not text:
        return []
    where = f"Namespace {meta.get('name')}"
    try:
        reqs = parse_selector(text)
    except ValueError:
        return [LabelReference(where, NS_SELECTOR_PATH, text, None, False, False)] if key in text else []
    return _refs(where, NS_SELECTOR_PATH, reqs, key, value, covered)


def scan_master_config(master: str, path: str, text: str, key: str, value: str | None, covered: list[str], *,
                       rewritten: bool) -> list[LabelReference]:
    """The references of one master's ``defaultNodeSelector`` (``text``: the file's content);
    covered only when the procedure rewrites the field (``rewritten``). Raises
    :class:`MasterConfigError` for a file that is not YAML, ValueError for a selector that does
    not parse."""
    selector = default_node_selector(text)
    return _refs(f"MasterConfig {master}", f"{path}#{MASTER_CONFIG_FIELD}", parse_selector(selector), key, value,
                 covered, can_cover=rewritten)


def uncovered_values(refs: list[LabelReference]) -> list[str]:
    """The label values named by references no mapping covers, sorted (key-only ones left out)."""
    return sorted({r.value for r in refs if not r.mapped and r.value is not None})
