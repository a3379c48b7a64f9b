"""The error hierarchy against real answers of the server, and the pure parts of the
error mapping and retry policy."""

from __future__ import annotations

import email.utils
import time

import pytest

from mnemos_client import (
    BackendUnavailable,
    Conflict,
    InternalError,
    InvalidArgument,
    Mnemos,
    MnemosConnectionError,
    MnemosError,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    Unauthenticated,
)
from mnemos_client.errors import error_from_response, parse_retry_after


def test_not_found_names_the_field(client: Mnemos, agent: str) -> None:
    with pytest.raises(NotFound) as caught:
        client.get("no-such-memory")
    error = caught.value
    assert isinstance(error, MnemosError)
    assert (error.status, error.code, error.field) == (404, "not_found", "id")
    assert "no-such-memory" in error.message
    assert error.request_id
    assert error.body["error"]["code"] == "not_found"

    with pytest.raises(NotFound) as caught:
        client.memories.history("no-such-memory")
    assert caught.value.field == "id"
    with pytest.raises(NotFound) as caught:
        client.sessions.get("no-such-session")
    assert caught.value.field == "session_id"


def test_invalid_argument_names_the_field(client: Mnemos) -> None:
    with pytest.raises(InvalidArgument) as caught:
        client.tools.remember("importance is out of range", importance=1.5)
    error = caught.value
    assert (error.status, error.code, error.field) == (400, "invalid_argument", "importance")
    assert "importance" in error.message
    assert "importance" in str(error)

    with pytest.raises(InvalidArgument) as caught:
        client.tools.remember_batch(["fine", {"content": "bad", "importance": 2}])
    assert caught.value.field == "memories[1].importance"

    with pytest.raises(InvalidArgument) as caught:
        client.tools.remember("bad agent id", agent_id="not a valid agent!")
    assert caught.value.field == "agent_id"

    with pytest.raises(InvalidArgument) as caught:
        client.get_all(memory_type="no-such-type")
    assert caught.value.field == "type"


def test_agent_is_required_without_a_default(admin_client: Mnemos) -> None:
    with pytest.raises(InvalidArgument) as caught:
        admin_client.tools.recall("anything")
    assert caught.value.field == "agent_id"
    with pytest.raises(InvalidArgument) as caught:
        admin_client.get("some-id")
    assert caught.value.field == "agent_id"


def test_payload_too_large(client: Mnemos) -> None:
    with pytest.raises(PayloadTooLarge) as caught:
        client.tools.remember("x" * (64 * 1024 + 1))
    assert (caught.value.status, caught.value.field) == (413, "content")


def test_unauthenticated_with_a_bad_key(server: dict, agent: str, needs_key: None) -> None:
    wellformed = "mnm_" + "0" * 12 + "_" + "0" * 64
    for key in (wellformed, "not-a-mnemos-key"):
        with Mnemos(server["url"], key, agent_id=agent) as bad:
            with pytest.raises(Unauthenticated) as caught:
                bad.tools.recall("anything")
            assert (caught.value.status, caught.value.code) == (401, "unauthenticated")
            assert caught.value.message
    with Mnemos(server["url"], "", agent_id=agent) as anonymous:
        with pytest.raises(Unauthenticated):
            anonymous.get_all()


def test_connection_error() -> None:
    # A port nothing listens on (the discard port on loopback).
    with Mnemos("http://127.0.0.1:9", "k", agent_id="a", timeout=2) as nowhere:
        with pytest.raises(MnemosConnectionError) as caught:
            nowhere.health()
    assert caught.value.status is None


# ------------------------------------------------------------------ pure mapping


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "invalid_argument", InvalidArgument),
        (401, "unauthenticated", Unauthenticated),
        (403, "permission_denied", PermissionDenied),
        (404, "not_found", NotFound),
        (409, "conflict", Conflict),
        (413, "payload_too_large", PayloadTooLarge),
        (429, "rate_limited", RateLimited),
        (503, "backend_unavailable", BackendUnavailable),
        (500, "internal", InternalError),
        (415, "invalid_argument", InvalidArgument),
    ],
)
def test_error_classes_by_code(status: int, code: str, cls: type) -> None:
    body = {"error": {"code": code, "message": "m", "field": "f"}}
    error = error_from_response(status, body, {"Retry-After": "3", "X-Request-Id": "r-1"})
    assert type(error) is cls
    assert (error.status, error.code, error.message, error.field) == (status, code, "m", "f")
    assert error.retry_after == 3.0
    assert error.request_id == "r-1"


def test_error_without_contract_body() -> None:
    assert type(error_from_response(502, "<html>bad gateway</html>")) is BackendUnavailable
    assert type(error_from_response(599, None)) is InternalError
    plain = error_from_response(418, "teapot")
    assert type(plain) is MnemosError and plain.message == "teapot"


def test_retry_after_parsing() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    wait = parse_retry_after(date, now=now)
    assert wait is not None and 25 <= wait <= 31


def test_retry_policy() -> None:
    client = Mnemos("http://127.0.0.1:9", "k", max_retries=2, retry_backoff=0.25, max_retry_wait=10)
    limited = error_from_response(429, {"error": {"code": "rate_limited", "message": "m"}}, {"Retry-After": "4"})
    assert client._retry_delay(limited, 0) == 4.0
    assert client._retry_delay(limited, 1) == 4.0
    assert client._retry_delay(limited, 2) is None, "at most max_retries"
    down = error_from_response(503, {"error": {"code": "backend_unavailable", "message": "m"}})
    assert client._retry_delay(down, 0) == 0.25
    assert client._retry_delay(down, 1) == 0.5
    too_long = error_from_response(429, {"error": {"code": "rate_limited", "message": "m"}}, {"Retry-After": "60"})
    assert client._retry_delay(too_long, 0) is None
    not_found = error_from_response(404, {"error": {"code": "not_found", "message": "m"}})
    assert client._retry_delay(not_found, 0) is None
    client.close()
    with Mnemos("http://127.0.0.1:9", max_retries=0) as never:
        assert never._retry_delay(limited, 0) is None
