"""The exception hierarchy: one class per error code of the mnemos contract.

Every error the server answers has the body
``{"error": {"code": "...", "message": "...", "field": "..."}}``; it is raised as the
subclass of :class:`MnemosError` for its ``code`` (or, for a body without one, for its
HTTP status)::

    MnemosError
    ├── InvalidArgument      400 invalid_argument (also 405 / 408 / 415 refusals)
    ├── Unauthenticated      401 unauthenticated
    ├── PermissionDenied     403 permission_denied
    ├── NotFound             404 not_found
    ├── Conflict             409 conflict
    ├── PayloadTooLarge      413 payload_too_large
    ├── RateLimited          429 rate_limited (``retry_after`` from Retry-After)
    ├── BackendUnavailable   503 backend_unavailable
    ├── InternalError        500 internal (always a server bug)
    └── MnemosConnectionError  no answer at all (``status`` is None)
        └── MnemosTimeoutError
"""

from __future__ import annotations

import email.utils
import time
from typing import Any, Dict, Mapping, Optional, Type

__all__ = [
    "MnemosError",
    "InvalidArgument",
    "Unauthenticated",
    "PermissionDenied",
    "NotFound",
    "Conflict",
    "PayloadTooLarge",
    "RateLimited",
    "BackendUnavailable",
    "InternalError",
    "MnemosConnectionError",
    "MnemosTimeoutError",
    "error_from_response",
    "parse_retry_after",
]


class MnemosError(Exception):
    """An error answered by a mnemos server (or no answer, for the connection errors).

    Attributes:
        status: the HTTP status (``None`` when no answer arrived).
        code: the contract's code (``invalid_argument``, ``not_found``, ...).
        message: what went wrong and what to change.
        field: the request field at fault (``importance``, ``memories[3].content``), if any.
        retry_after: seconds the server asked to wait (``Retry-After``), if any.
        request_id: the request id the server answered in ``X-Request-Id``, if any.
        body: the decoded error body (or the raw text when it was not JSON).
    """

    default_code = "unknown"

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        code: Optional[str] = None,
        field: Optional[str] = None,
        retry_after: Optional[float] = None,
        request_id: Optional[str] = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code or self.default_code
        self.field = field
        self.retry_after = retry_after
        self.request_id = request_id
        self.body = body

    def __str__(self) -> str:
        where = f" (field {self.field})" if self.field else ""
        status = f" {self.status}" if self.status is not None else ""
        return f"{self.code}{status}: {self.message}{where}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, "
            f"message={self.message!r}, field={self.field!r})"
        )


class InvalidArgument(MnemosError):
    """400 ``invalid_argument``: the request must change (``field`` says where). Also
    the HTTP layer's 405 (method), 408 (body too slow) and 415 (not JSON) refusals."""

    default_code = "invalid_argument"


class Unauthenticated(MnemosError):
    """401 ``unauthenticated``: a missing, malformed, unknown, revoked or expired key."""

    default_code = "unauthenticated"


class PermissionDenied(MnemosError):
    """403 ``permission_denied``: the key lacks the scope, or names another agent."""

    default_code = "permission_denied"


class NotFound(MnemosError):
    """404 ``not_found``: no such memory, session, project, namespace, key or route."""

    default_code = "not_found"


class Conflict(MnemosError):
    """409 ``conflict``."""

    default_code = "conflict"


class PayloadTooLarge(MnemosError):
    """413 ``payload_too_large``: a body or field past the server's limits."""

    default_code = "payload_too_large"


class RateLimited(MnemosError):
    """429 ``rate_limited``: a budget of the key is spent; ``retry_after`` says when
    to try again."""

    default_code = "rate_limited"


class BackendUnavailable(MnemosError):
    """503 ``backend_unavailable``: a store is down; try again later."""

    default_code = "backend_unavailable"


class InternalError(MnemosError):
    """500 ``internal``: a server bug."""

    default_code = "internal"


class MnemosConnectionError(MnemosError):
    """The server could not be reached, or the connection broke before an answer."""

    default_code = "connection_error"


class MnemosTimeoutError(MnemosConnectionError):
    """No answer within the client's timeout."""

    default_code = "timeout"


_BY_CODE: Dict[str, Type[MnemosError]] = {
    "invalid_argument": InvalidArgument,
    "unauthenticated": Unauthenticated,
    "permission_denied": PermissionDenied,
    "not_found": NotFound,
    "conflict": Conflict,
    "payload_too_large": PayloadTooLarge,
    "rate_limited": RateLimited,
    "backend_unavailable": BackendUnavailable,
    "internal": InternalError,
}

_BY_STATUS: Dict[int, Type[MnemosError]] = {
    400: InvalidArgument,
    401: Unauthenticated,
    403: PermissionDenied,
    404: NotFound,
    405: InvalidArgument,
    408: InvalidArgument,
    409: Conflict,
    413: PayloadTooLarge,
    415: InvalidArgument,
    429: RateLimited,
    500: InternalError,
    502: BackendUnavailable,
    503: BackendUnavailable,
    504: BackendUnavailable,
}


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def error_from_response(
    status: int,
    body: Any,
    headers: Optional[Mapping[str, str]] = None,
) -> MnemosError:
    """The exception for an error answer: ``body`` is the decoded JSON (or text)."""
    headers = headers or {}
    code: Optional[str] = None
    message: Optional[str] = None
    field: Optional[str] = None
    if isinstance(body, Mapping):
        detail = body.get("error")
        if isinstance(detail, Mapping):
            code = detail.get("code") if isinstance(detail.get("code"), str) else None
            message = detail.get("message") if isinstance(detail.get("message"), str) else None
            field = detail.get("field") if isinstance(detail.get("field"), str) else None
        elif isinstance(detail, str):
            message = detail
    elif isinstance(body, str) and body.strip():
        message = body.strip()[:500]
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status)
    if cls is None:
        cls = InternalError if status >= 500 else MnemosError
    retry_after = parse_retry_after(_header(headers, "retry-after"))
    return cls(
        message or f"HTTP {status}",
        status=status,
        code=code,
        field=field,
        retry_after=retry_after,
        request_id=_header(headers, "x-request-id"),
        body=body,
    )


def _header(headers: Mapping[str, str], name: str) -> Optional[str]:
    value = headers.get(name)
    if value is None:
        for key, v in headers.items():
            if key.lower() == name:
                return v
    return value
