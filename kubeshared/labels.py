"""Label selectors, as kube-apiserver parses and matches them: the string form and the
``metav1.LabelSelector`` object (``matchLabels`` + ``matchExpressions``).

String grammar (k8s.io/apimachinery/pkg/labels/selector.go): comma-separated requirements
``key``, ``!key``, ``key=v``, ``key==v``, ``key!=v``, ``key in (a,b)``, ``key notin (a,b)``.
A parsed selector is a tuple (hashable, cached) of ``(key, op, values)`` with op in
{"exists", "!exists", "=", "!=", "in", "notin"}; malformed input raises ``ValueError`` (the
simulated server turns it into 400 BadRequest, the node upgrade's plan into a PlanError).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

LabelSelector = tuple[tuple[str, str, tuple[str, ...]], ...]

#: ``key in (a,b)`` / ``key notin (a,b)``; the lexer ends a word at ``(``, so ``key in(a)`` too.
_SET = re.compile(r"^(\S+)\s+(in|notin)\s*\((.*)\)$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced parenthesis in selector {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise ValueError(f"unbalanced parenthesis in selector {text!r}")
    parts.append("".join(cur))
    return parts


@lru_cache(maxsize=1024)
def parse_label_selector(text: str | None, *, skip_empty: bool = False) -> LabelSelector:
    """Parse a label selector string; "" or None selects everything (an empty tuple). An empty
    requirement (``a=b,,c``) raises ValueError as the apiserver does, or is passed over with
    ``skip_empty``. Raises ValueError for a malformed requirement or an empty key."""
    if not text or not text.strip():
        return ()
    reqs: list[tuple[str, str, tuple[str, ...]]] = []
    for raw in _split_top_level(text):
        term = raw.strip()
        if not term:
            if skip_empty:
                continue
            raise ValueError(f"empty requirement in label selector {text!r}")
        if m := _SET.match(term):
            reqs.append((m.group(1), m.group(2), tuple(v.strip() for v in m.group(3).split(",") if v.strip())))
            continue
        words = term.split()
        if len(words) >= 2 and words[1].partition("(")[0] in ("in", "notin"):
            raise ValueError(f"set-based requirement needs (values): {term!r}")
        if "!=" in term:
            key, _, value = term.partition("!=")
            reqs.append((key.strip(), "!=", (value.strip(),)))
        elif "==" in term:
            key, _, value = term.partition("==")
            reqs.append((key.strip(), "=", (value.strip(),)))
        elif "=" in term:
            key, _, value = term.partition("=")
            reqs.append((key.strip(), "=", (value.strip(),)))
        elif term.startswith("!"):
            reqs.append((term[1:].strip(), "!exists", ()))
        else:
            if " " in term:
                raise ValueError(f"unable to parse requirement {term!r}")
            reqs.append((term, "exists", ()))
    for key, _, _ in reqs:
        if not key:
            raise ValueError(f"empty key in label selector {text!r}")
    return tuple(reqs)


def matches_labels(selector: LabelSelector, labels: Mapping[str, str] | None) -> bool:
    """True when ``labels`` (may be None) satisfy every requirement of a parsed label selector
    (apimachinery ``labels.Requirement.Matches``: ``!=`` and ``notin`` also hold when the key is
    absent)."""
    labels = labels or {}
    for key, op, values in selector:
        present = key in labels
        if op == "exists":
            if not present:
                return False
        elif op == "!exists":
            if present:
                return False
        elif op == "=":
            if not present or labels[key] != values[0]:
                return False
        elif op == "!=":
            if present and labels[key] == values[0]:
                return False
        elif op == "in":
            if not present or labels[key] not in values:
                return False
        elif op == "notin":
            if present and labels[key] in values:
                return False
    return True


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """True when a ``metav1.LabelSelector`` object selects ``labels`` (None: no labels).

    A nil selector (None) matches nothing (policy/v1 PDB semantics); ``{}`` matches everything.
    Operators: In, NotIn, Exists, DoesNotExist (metav1.LabelSelectorAsSelector); an unknown
    operator constrains nothing.
    """
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True
