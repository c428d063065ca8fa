"""RBAC evaluation for the deployment tests: does a ClusterRole allow a recorded request, and
which of its grants were used.

Semantics follow the Kubernetes RBAC authorizer (``plugin/pkg/auth/authorizer/rbac/rbac.go``,
``RuleAllows``): a rule allows a request when its ``apiGroups``, ``resources`` (``pods/eviction``
for a subresource) and ``verbs`` each contain the request's value or ``*``, and, when the rule
has ``resourceNames``, the request names one of them (never true for list, watch or create
without a name).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, order=True)
class Access:
    """One authorization question: ``verb`` on ``group``/``resource`` (``pods/eviction`` for a
    subresource) named ``name`` ("" for collections)."""

    group: str
    resource: str
    verb: str
    name: str = ""

    @classmethod
    def from_request(cls, entry: Any) -> Access:
        """From a clustersim :class:`clustersim.faults.RequestEntry`."""
        resource = f"{entry.resource}/{entry.subresource}" if entry.subresource else entry.resource
        return cls(entry.group, resource, entry.verb, entry.name)


@dataclass(frozen=True, order=True)
class Grant:
    """One (group, resource, verb) a rule grants, with its resourceNames restriction."""

    group: str
    resource: str
    verb: str
    names: tuple[str, ...] = ()


def _has(values: list[str] | None, value: str) -> bool:
    return bool(values) and ("*" in values or value in values)


def rule_allows(rule: dict[str, Any], access: Access) -> bool:
    """True when one PolicyRule allows ``access``."""
    if not (_has(rule.get("apiGroups"), access.group) and _has(rule.get("resources"), access.resource)
            and _has(rule.get("verbs"), access.verb)):
        return False
    names = rule.get("resourceNames") or []
    return not names or access.name in names


def role_allows(role: dict[str, Any], access: Access) -> bool:
    """True when any rule of the ClusterRole ``role`` allows ``access``."""
    return any(rule_allows(rule, access) for rule in role.get("rules") or [])


def grants(role: dict[str, Any]) -> set[Grant]:
    """Every (group, resource, verb) the role grants, expanded rule by rule. Wildcards are kept
    as ``*`` (a least-privilege role has none; the test asserts that)."""
    out: set[Grant] = set()
    for rule in role.get("rules") or []:
        if rule.get("nonResourceURLs"):
            raise ValueError("nonResourceURLs belong in a ClusterRole only when the worker calls them")
        names = tuple(rule.get("resourceNames") or ())
        for group in rule.get("apiGroups") or []:
            for resource in rule.get("resources") or []:
                for verb in rule.get("verbs") or []:
                    out.add(Grant(group, resource, verb, names))
    return out


def unused_grants(role: dict[str, Any], accesses: set[Access]) -> set[Grant]:
    """Grants that no access in ``accesses`` needed."""
    return {
        g for g in grants(role)
        if not any(a.group == g.group and a.resource == g.resource and a.verb == g.verb
                   and (not g.names or a.name in g.names) for a in accesses)
    }
