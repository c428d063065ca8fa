"""HTTP helpers of the simulated API server: Go ParseBool, JSON and Status responses, parsed requests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from clustersim.apierrors import ApiError
from clustersim.resources import ResourceType

_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


def parse_bool(value: str | None, default: bool = False) -> bool:
    """Go ``strconv.ParseBool``: 1,t,T,TRUE,true,True / 0,f,F,FALSE,false,False; else 400."""
    if value is None or value == "":
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ApiError.bad_request(f'strconv.ParseBool: parsing "{value}": invalid syntax')


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes."""
    return json.dumps(obj, separators=(",", ":")).encode()


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON response (``Content-Type: application/json``)."""
    return web.Response(body=dumps(obj), status=status, content_type="application/json", headers=headers)


def status_response(err: ApiError) -> web.Response:
    """The Status body of an ApiError with the matching HTTP status (apiserver's spacing)."""
    return web.Response(body=json.dumps(err.to_status()).encode(), status=err.status,
                        content_type="application/json", headers=err.headers or None)


@dataclass
class ReqInfo:
    """A parsed resource request."""

    verb: str
    rt: ResourceType | None
    group: str
    version: str
    plural: str
    namespace: str
    name: str
    subresource: str
