"""Field selectors, as kube-apiserver parses them (label selectors: :mod:`kubeshared.labels`,
which lockkeeper shares).

Field selector grammar (k8s.io/apimachinery/pkg/fields/selector.go): ``path=v``, ``path==v``,
``path!=v`` joined by commas; duplicate terms are allowed (kr8s sends them). Values may escape
``\\,`` ``\\=`` ``\\\\``.

Parsed selectors are tuples (hashable, cached): a field selector is a tuple of ``(path, op, value)`` with op in {"=", "!="}. Malformed input raises ``ValueError``
(the server turns it into 400 BadRequest).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kubeshared.labels import label_selector_matches

FieldSelector = tuple[tuple[str, str, str], ...]

#: A metav1.LabelSelector object against labels: the one implementation lockkeeper shares.
matches_label_selector_object = label_selector_matches

# Fields whose unset value the apiserver reports as "false" (pkg/registry/core/node/strategy.go).
_BOOLEAN_FIELDS = {"spec.unschedulable"}


def _unescape_split(text: str, sep: str) -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            cur.append(text[i + 1])
            i += 2
            continue
        if ch == sep:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur))
    return out


@lru_cache(maxsize=1024)
def parse_field_selector(text: str | None) -> FieldSelector:
    """Parse a field selector string; "" or None selects everything. Raises ValueError."""
    if not text or not text.strip():
        return ()
    terms: list[tuple[str, str, str]] = []
    for raw in _unescape_split(text, ","):
        term = raw.strip()
        if not term:
            continue
        if "!=" in term:
            path, _, value = term.partition("!=")
            op = "!="
        elif "==" in term:
            path, _, value = term.partition("==")
            op = "="
        elif "=" in term:
            path, _, value = term.partition("=")
            op = "="
        else:
            raise ValueError(f"invalid field selector term {term!r}: expected path=value")
        terms.append((path.strip(), op, value))
    return tuple(terms)


def field_value(obj: dict, path: str) -> str:
    """The string value of a dotted field path, as the apiserver's field-set functions render it."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            cur = None
            break
        cur = cur.get(part)
        if cur is None:
            break
    if cur is None:
        return "false" if path in _BOOLEAN_FIELDS else ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def matches_fields(selector: FieldSelector, obj: dict) -> bool:
    """True when ``obj`` satisfies every term of a parsed field selector."""
    for path, op, value in selector:
        actual = field_value(obj, path)
        if (actual == value) != (op == "="):
            return False
    return True
