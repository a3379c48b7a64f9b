"""Fixtures of the client's test suite, which runs against a REAL mnemos server.

Environment:
    MNEMOS_URL                 the server, e.g. http://127.0.0.1:8077 (unset: every test is skipped)
    MNEMOS_API_KEY             an admin key of tenant-wide scope (``--agent '*' --scope admin,read,write``)
    MNEMOS_TEST_AGENT_PREFIX   prefix of the agent ids the tests make (default ``pytest``)

Every test acts as agents of its own (prefix + test name + random suffix), so reruns on
the same server never collide; each agent is erased (``DELETE /v1/agents/{agent}``)
when its test ends.
"""

from __future__ import annotations

import os
import re
import sys
import uuid
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

# Test the package in this checkout (whether or not it is installed).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from mnemos_client import Mnemos, MnemosError  # noqa: E402

URL = os.environ.get("MNEMOS_URL", "").strip()
KEY = os.environ.get("MNEMOS_API_KEY", "").strip()
PREFIX = os.environ.get("MNEMOS_TEST_AGENT_PREFIX", "").strip() or "pytest"

SKIP_REASON = (
    "MNEMOS_URL is not set: the mnemos-client tests run against a real `mnemos serve`. "
    "Start one with auth.mode = \"keys\", then set MNEMOS_URL (e.g. http://127.0.0.1:8077) "
    "and MNEMOS_API_KEY (an admin key: mnemos keys create --agent '*' --scope admin,read,write)."
)


def pytest_report_header(config: pytest.Config) -> List[str]:
    if not URL:
        return [f"mnemos-client: SKIPPED: {SKIP_REASON}"]
    return [f"mnemos-client: server {URL}, key {'set' if KEY else 'NOT set'}, agent prefix {PREFIX!r}"]


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    if URL:
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        item.add_marker(skip)


def _slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^A-Za-z0-9_.:-]+", "-", text).strip("-")[:limit]


@pytest.fixture
def new_agent(request: pytest.FixtureRequest) -> Iterator[Callable[[str], str]]:
    """Makes unique agent ids for this test (``new_agent("b")``) and erases each agent
    at the end of the test."""
    made: List[str] = []

    def make(suffix: str = "") -> str:
        name = f"{PREFIX}-{_slug(request.node.name)}"
        if suffix:
            name += f"-{_slug(suffix, 16)}"
        agent = f"{name}-{uuid.uuid4().hex[:10]}"[:128]
        made.append(agent)
        return agent

    yield make
    if not made or not KEY:
        return
    with Mnemos(URL, KEY, max_retries=1) as admin:
        for agent in made:
            try:
                admin.admin.erase_agent(agent)
            except MnemosError:
                pass


@pytest.fixture
def agent(new_agent: Callable[[str], str]) -> str:
    """A fresh agent id for this test."""
    return new_agent("")


@pytest.fixture
def client(agent: str) -> Iterator[Mnemos]:
    """A sync client with the suite's key, acting as this test's agent by default."""
    with Mnemos(URL, KEY or None, agent_id=agent) as c:
        yield c


@pytest.fixture
def admin_client() -> Iterator[Mnemos]:
    """A sync client with the suite's key and no default agent."""
    if not KEY:
        pytest.skip("MNEMOS_API_KEY is not set (an admin key is needed)")
    with Mnemos(URL, KEY) as c:
        yield c


@pytest.fixture
def needs_key() -> None:
    """Skip a test that needs the server to check keys."""
    if not KEY:
        pytest.skip("MNEMOS_API_KEY is not set (the server must run with auth.mode = \"keys\")")


@pytest.fixture
def unique() -> Callable[[str], str]:
    """Makes unique names for namespaces, projects and sessions (``unique("ns")``)."""

    def make(label: str) -> str:
        return f"{PREFIX}-{_slug(label, 20)}-{uuid.uuid4().hex[:10]}"

    return make


@pytest.fixture
def server() -> dict:
    """The server's address and the suite's key."""
    return {"url": URL, "key": KEY}
