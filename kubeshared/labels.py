"""``metav1.LabelSelector`` objects (``matchLabels`` + ``matchExpressions``) matched against labels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


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
