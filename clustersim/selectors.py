"""Label and field selectors, as kube-apiserver parses them.

Label selector grammar (k8s.io/apimachinery/pkg/labels/selector.go): comma-separated requirements
``key``, ``!key``, ``key=v``, ``key==v``, ``key!=v``, ``key in (a,b)``, ``key notin (a,b)``.
Field selector grammar (k8s.io/apimachinery/pkg/fields/selector.go): ``path=v``, ``path==v``,
``path!=v`` joined by commas; duplicate terms are allowed (kr8s sends them). Values may escape
``\\,`` ``\\=`` ``\\\\``.

Parsed selectors are tuples (hashable, cached): a label selector is a tuple of
``(key, op, values)`` with op in {"exists", "!exists", "=", "!=", "in", "notin"}; a field selector
is a tuple of ``(path, op, value)`` with op in {"=", "!="}. Malformed input raises ``ValueError``
(the server turns it into 400 BadRequest).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kubeshared.labels import label_selector_matches

LabelSelector = tuple[tuple[str, str, tuple[str, ...]], ...]
FieldSelector = tuple[tuple[str, str, str], ...]

#: A metav1.LabelSelector object against labels: the one implementation lockkeeper shares.
matches_label_selector_object = label_selector_matches

# Fields whose unset value the apiserver reports as "false" (pkg/registry/core/node/strategy.go).
_BOOLEAN_FIELDS = {"spec.unschedulable"}


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
def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a label selector string; "" or None selects everything. Raises ValueError."""
    if not text or not text.strip():
        return ()
    reqs: list[tuple[str, str, tuple[str, ...]]] = []
    for raw in _split_top_level(text):
        term = raw.strip()
        if not term:
            raise ValueError(f"empty requirement in label selector {text!r}")
        words = term.split()
        if len(words) >= 2 and words[1] in ("in", "notin"):
            key, op = words[0], words[1]
            rest = term[term.index(op, len(key)) + len(op):].strip()
            if not (rest.startswith("(") and rest.endswith(")")):
                raise ValueError(f"set-based requirement needs (values): {term!r}")
            values = tuple(v.strip() for v in rest[1:-1].split(",") if v.strip())
            reqs.append((key, op, values))
            continue
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


def matches_labels(selector: LabelSelector, labels: dict[str, str] | None) -> bool:
    """True when ``labels`` (may be None) satisfy every requirement of a parsed label selector."""
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
