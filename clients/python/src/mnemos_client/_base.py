"""What the sync and async clients share: configuration, request encoding, the error
mapping and the retry policy. No I/O here."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Type, TypeVar, Union
from urllib.parse import quote

import httpx

from ._version import __version__
from .errors import (
    BackendUnavailable,
    MnemosError,
    RateLimited,
    error_from_response,
)
from .types import Model

DEFAULT_BASE_URL = "http://127.0.0.1:8077"
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_RETRY_BACKOFF = 0.5
DEFAULT_MAX_RETRY_WAIT = 30.0

M = TypeVar("M", bound=Model)


class NotGiven:
    """Marks an argument that was not passed (where ``None`` means something, such
    as ``title=None`` clearing a memory's title)."""

    _instance: Optional["NotGiven"] = None

    def __new__(cls) -> "NotGiven":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN = NotGiven()


def to_json(value: Any) -> Any:
    """``value`` ready for the JSON body: ``datetime``s as RFC 3339 strings (a naive
    one is taken as UTC), containers converted item by item."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, Model):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value


def body(**fields: Any) -> Dict[str, Any]:
    """A JSON body of the fields that were given: ``None`` and ``NOT_GIVEN`` are
    left out (use :func:`body_with_nulls` where ``None`` must be sent)."""
    return {k: to_json(v) for k, v in fields.items() if v is not None and v is not NOT_GIVEN}


def qs(**fields: Any) -> Dict[str, str]:
    """Query parameters of the fields that were given (booleans as true/false)."""
    out: Dict[str, str] = {}
    for key, value in fields.items():
        if value is None or value is NOT_GIVEN:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, datetime):
            out[key] = to_json(value)
        else:
            out[key] = str(value)
    return out


def seg(value: str) -> str:
    """One path segment, percent-encoded (``/`` included)."""
    if not isinstance(value, str) or value == "":
        raise ValueError(f"a path parameter must be a non-empty string, got {value!r}")
    return quote(value, safe="")


class BaseClient:
    """Configuration and the pure parts of a request's life (shared by
    :class:`~mnemos_client.Mnemos` and :class:`~mnemos_client.AsyncMnemos`)."""

    base_url: str
    api_key: Optional[str]
    agent_id: Optional[str]
    max_retries: int
    retry_backoff: float
    max_retry_wait: float

    def _configure(
        self,
        base_url: Optional[str],
        api_key: Optional[str],
        agent_id: Optional[str],
        max_retries: int,
        retry_backoff: float,
        max_retry_wait: float,
        headers: Optional[Mapping[str, str]],
    ) -> None:
        url = base_url or os.environ.get("MNEMOS_URL") or DEFAULT_BASE_URL
        self.base_url = url.rstrip("/")
        self.api_key = api_key if api_key is not None else (os.environ.get("MNEMOS_API_KEY") or None)
        self.agent_id = agent_id
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.max_retry_wait = max_retry_wait
        self._extra_headers = dict(headers or {})

    def _default_headers(self) -> Dict[str, str]:
        headers = {
            "Accept": "application/json",
            "User-Agent": f"mnemos-client-python/{__version__}",
        }
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        headers.update(self._extra_headers)
        return headers

    def _agent(self, agent_id: Optional[str]) -> Optional[str]:
        """The agent a call names: its own ``agent_id``, else the client's default
        (``None``: left out, for a key bound to one agent, which supplies it)."""
        return agent_id if agent_id is not None else self.agent_id

    def _retry_delay(self, error: MnemosError, attempt: int) -> Optional[float]:
        """Seconds to wait before retrying after ``error`` on try ``attempt`` (0-based),
        or ``None`` not to retry: only 429 and 503 are retried, at most
        ``max_retries`` times, honouring ``Retry-After`` (else exponential backoff),
        and never when the wait would pass ``max_retry_wait``."""
        if attempt >= self.max_retries:
            return None
        if not isinstance(error, (RateLimited, BackendUnavailable)) or error.status not in (429, 503):
            return None
        if error.retry_after is not None:
            delay = error.retry_after
        else:
            delay = self.retry_backoff * (2**attempt)
        if delay > self.max_retry_wait:
            return None
        return delay

    @staticmethod
    def _error(response: httpx.Response) -> MnemosError:
        try:
            decoded: Any = response.json()
        except ValueError:
            decoded = response.text
        return error_from_response(response.status_code, decoded, response.headers)

    @staticmethod
    def _decode(response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError as exc:
            raise MnemosError(
                f"the server answered {response.status_code} with a body that is not JSON: "
                f"{response.text[:200]!r}",
                status=response.status_code,
                code="invalid_response",
                request_id=response.headers.get("x-request-id"),
                body=response.text,
            ) from exc

    @classmethod
    def _model(cls, response: httpx.Response, model: Type[M]) -> M:
        data = cls._decode(response)
        if not isinstance(data, Mapping):
            raise MnemosError(
                f"expected a JSON object for {model.__name__}, got {type(data).__name__}",
                status=response.status_code,
                code="invalid_response",
                body=data,
            )
        return model.from_dict(data)


def messages_of(messages: Union[str, Mapping[str, Any], Any]) -> List[Dict[str, Any]]:
    """mem0's ``messages`` argument as a list of ``{"role", "content"}``: a string is one
    user message, a mapping one message, anything else an iterable of messages."""
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, Mapping):
        return [dict(messages)]
    out: List[Dict[str, Any]] = []
    for index, message in enumerate(messages):
        if isinstance(message, str):
            out.append({"role": "user", "content": message})
        elif isinstance(message, Mapping):
            out.append(dict(message))
        else:
            raise TypeError(
                f"messages[{index}] must be a {{'role', 'content'}} dict or a string, "
                f"got {type(message).__name__}"
            )
    return out
