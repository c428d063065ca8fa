"""The search attributes lockkeeper needs, registered through Temporal's operator service.

Every procedure is started with ``LockkeeperCluster``, ``LockkeeperProcedure``,
``LockkeeperStatus`` and ``LockkeeperPools`` (``lockkeeper list`` and the start pre-checks query
them). A server that does not know them refuses the start with ``invalid search attribute``.
The embedded dev server registers them with ``--search-attribute``; on any other server (a plain
``temporal server start-dev``, a self-hosted cluster) the worker and ``lockkeeper setup`` call
:func:`ensure_search_attributes`, which lists the namespace's custom attributes and adds only the
missing ones (OperatorService ``ListSearchAttributes`` / ``AddSearchAttributes``, as
``temporal operator search-attribute create`` does).

Where the registration is not allowed (Temporal Cloud, where the operator service refuses API
keys and mTLS clients alike, or a namespace without admin rights) :class:`SearchAttributesRefused`
carries the exact commands to run instead.
"""

from __future__ import annotations

import shlex
from typing import Any

from workflows.kit.models import SA_CLUSTER, SA_POOLS, SA_PROCEDURE, SA_STATUS

#: name → Temporal type, as the ``temporal`` CLI spells the type (``--type``).
SEARCH_ATTRIBUTES: dict[str, str] = {
    SA_CLUSTER: "Keyword",
    SA_PROCEDURE: "Keyword",
    SA_STATUS: "Keyword",
    SA_POOLS: "KeywordList",
}

_PROTO_TYPE = {"Keyword": "INDEXED_VALUE_TYPE_KEYWORD", "KeywordList": "INDEXED_VALUE_TYPE_KEYWORD_LIST"}


class SearchAttributesRefused(RuntimeError):
    """The server did not let us register ``missing`` (names). The message names them, the
    server's reason and the commands that fix it (:func:`fix_commands`)."""

    def __init__(self, namespace: str, missing: list[str], reason: str) -> None:
        self.namespace = namespace
        self.missing = missing
        self.reason = reason
        lines = "\n".join(f"  {c}" for c in fix_commands(namespace, missing))
        super().__init__(
            f"the search attributes {', '.join(missing)} are not registered in namespace {namespace!r} "
            f"and the server refused to register them ({reason}).\n"
            f"Ask an admin of the namespace to run:\n{lines}\n"
            f"On Temporal Cloud: Namespaces → {namespace} → Custom Search Attributes in the web console, "
            f"or `tcld namespace search-attributes add --namespace {namespace} --search-attribute NAME=TYPE` "
            "for each attribute above."
        )


def fix_commands(namespace: str, names: list[str] | None = None) -> list[str]:
    """The ``temporal operator search-attribute create`` command lines (one per attribute) that
    register ``names`` (default: all of :data:`SEARCH_ATTRIBUTES`) in ``namespace``."""
    names = list(SEARCH_ATTRIBUTES) if names is None else names
    return [
        "temporal operator search-attribute create "
        f"--namespace {shlex.quote(namespace)} --name {n} --type {SEARCH_ATTRIBUTES[n]}"
        for n in names
    ]


async def missing_search_attributes(client: Any, namespace: str) -> tuple[list[str], list[str]]:
    """``(missing, wrong_type)``: the names not registered in ``namespace``, and the names
    registered with another type than :data:`SEARCH_ATTRIBUTES` says. Raises ``RPCError`` when
    the server refuses the listing."""
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

    resp = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    have = dict(resp.custom_attributes)
    missing = [n for n in SEARCH_ATTRIBUTES if n not in have]
    wrong = [
        n for n, t in SEARCH_ATTRIBUTES.items() if n in have and have[n] != IndexedValueType.Value(_PROTO_TYPE[t])
    ]
    return missing, wrong


async def ensure_search_attributes(client: Any, namespace: str) -> list[str]:
    """Register every missing lockkeeper search attribute in ``namespace``; returns the names it
    added (``[]`` when all were there). Idempotent: a concurrent registration by another worker
    is fine.

    Raises :class:`SearchAttributesRefused` when the server refuses the listing or the addition
    (permission denied, unimplemented, a full attribute table) or an attribute exists with
    another type.
    """
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
    from temporalio.service import RPCError, RPCStatusCode

    try:
        missing, wrong = await missing_search_attributes(client, namespace)
    except RPCError as exc:
        raise SearchAttributesRefused(namespace, list(SEARCH_ATTRIBUTES), f"listing refused: {exc.message}") from exc
    if wrong:
        raise SearchAttributesRefused(
            namespace, wrong, "already registered with another type; a different type cannot be changed in place"
        )
    if not missing:
        return []
    req = AddSearchAttributesRequest(
        namespace=namespace,
        search_attributes={n: IndexedValueType.Value(_PROTO_TYPE[SEARCH_ATTRIBUTES[n]]) for n in missing},
    )
    try:
        await client.operator_service.add_search_attributes(req)
    except RPCError as exc:
        if exc.status != RPCStatusCode.ALREADY_EXISTS:
            raise SearchAttributesRefused(namespace, missing, f"{exc.status.name}: {exc.message}") from exc
    still, wrong = await missing_search_attributes(client, namespace)
    if still or wrong:
        raise SearchAttributesRefused(namespace, still + wrong, "still missing after the registration")
    return missing
