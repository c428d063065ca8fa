"""``ApiError``: an API failure rendered as a Kubernetes ``Status`` (apimachinery pkg/api/errors)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clustersim.resources import ResourceType


class ApiError(Exception):
    """An API failure rendered as a Kubernetes ``Status`` (apimachinery pkg/api/errors).

    ``status`` is the HTTP code, ``reason`` the canonical StatusReason (NotFound, AlreadyExists,
    Conflict, Invalid, TooManyRequests, MethodNotAllowed, UnsupportedMediaType, Expired,
    InternalError, BadRequest, ServiceUnavailable), ``message`` the apiserver wording,
    ``details`` the Status details dict, ``headers`` extra HTTP headers (e.g. Retry-After).
    """

    def __init__(self, status: int, reason: str, message: str, details: dict | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def to_status(self) -> dict:
        """The ``Status`` JSON body, keys in the order kube-apiserver writes them."""
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                "message": self.message, "reason": self.reason, "code": self.status}
        if self.details is not None:
            body["details"] = self.details
        return body

    @staticmethod
    def _details(rt: ResourceType, name: str | None) -> dict:
        details: dict[str, Any] = {}
        if name:
            details["name"] = name
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.plural
        return details

    @classmethod
    def not_found(cls, rt: ResourceType, name: str) -> ApiError:
        """404: ``pods "x" not found`` / ``daemonsets.apps "x" not found``."""
        return cls(404, "NotFound", f'{rt.qualified} "{name}" not found', cls._details(rt, name))

    @classmethod
    def conflict(cls, rt: ResourceType, name: str, detail: str | None = None) -> ApiError:
        """409 Conflict for a stale resourceVersion or a failed precondition."""
        detail = detail or "the object has been modified; please apply your changes to the latest version and try again"
        return cls(409, "Conflict", f'Operation cannot be fulfilled on {rt.qualified} "{name}": {detail}',
                   cls._details(rt, name))

    @classmethod
    def already_exists(cls, rt: ResourceType, name: str) -> ApiError:
        """409 AlreadyExists on create of an existing name."""
        return cls(409, "AlreadyExists", f'{rt.qualified} "{name}" already exists', cls._details(rt, name))

    @classmethod
    def invalid(cls, rt: ResourceType, name: str, field_path: str, detail: str) -> ApiError:
        """422 Invalid: ``Pod "x" is invalid: metadata.name: Required value``."""
        qkind = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
        details: dict[str, Any] = {"name": name}
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.kind
        details["causes"] = [{"reason": "FieldValueInvalid", "message": detail, "field": field_path}]
        return cls(422, "Invalid", f'{qkind} "{name}" is invalid: {field_path}: {detail}', details)

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        """400 BadRequest."""
        return cls(400, "BadRequest", message)

    @classmethod
    def internal(cls, message: str) -> ApiError:
        """500 InternalError: ``Internal error occurred: <message>``."""
        return cls(500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]})

    @classmethod
    def expired(cls, message: str) -> ApiError:
        """410 Expired (too old resource version)."""
        return cls(410, "Expired", message)
