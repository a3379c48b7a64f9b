"""The async client against a real server (plain ``asyncio.run``: no plugin needed),
and its parity with the sync one."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import mnemos_client
from mnemos_client import AsyncMnemos, InvalidArgument, Memory, Mnemos, NotFound, Unauthenticated

ROOT = Path(__file__).resolve().parent.parent


def test_remember_then_recall_async(server: dict, agent: str) -> None:
    async def scenario() -> None:
        async with AsyncMnemos(server["url"], server["key"] or None, agent_id=agent) as m:
            stored = await m.tools.remember("The async staging DB runs on port 6543", tags=["db"])
            assert stored.memory.agent_id == agent
            hits = await m.search("which port does async staging use?", limit=3)
            assert hits.results and hits.results[0].memory.id == stored.memory.id
            assert 0 < hits.results[0].score <= 1

            added = await m.add(
                [
                    {"role": "user", "content": "I prefer Rust for command line tools."},
                    {"role": "assistant", "content": "Got it."},
                ]
            )
            assert any("Rust" in x.content for x in added)

            updated = await m.update(stored.memory.id, "The async staging DB runs on port 6544")
            assert updated.version == 2
            history = await m.history(stored.memory.id)
            assert history[0].content == "The async staging DB runs on port 6543"
            assert (await m.get(stored.memory.id)).content.endswith("6544")

            await m.delete(stored.memory.id)
            with pytest.raises(NotFound):
                await m.get(stored.memory.id)
            assert (await m.health()).status in ("ok", "degraded")

    asyncio.run(scenario())


def test_get_all_paging_async(server: dict, agent: str) -> None:
    sentences = [
        "Async paging note about the red kettle",
        "Async paging note about a green bicycle",
        "Async paging note about seven blue pencils",
        "Async paging note about the lighthouse keeper",
        "Async paging note about winter tyres",
        "Async paging note about a jazz record",
        "Async paging note about the harbour ferry",
    ]

    async def scenario() -> None:
        async with AsyncMnemos(server["url"], server["key"] or None, agent_id=agent) as m:
            batch = await m.tools.remember_batch(sentences)
            ids = {r.memory.id for r in batch}
            assert len(ids) == len(sentences)
            everything = await m.get_all(page_size=3)
            assert {x.id for x in everything} == ids and len(everything) == len(ids)
            assert all(isinstance(x, Memory) for x in everything)
            streamed = [x.id async for x in m.iter_all(page_size=2, limit=5)]
            assert streamed == [x.id for x in everything[:5]]
            assert await m.delete_all() == len(sentences)
            assert await m.get_all() == []

    asyncio.run(scenario())


def test_browsing_async(server: dict, agent: str, unique) -> None:
    session, ns = unique("chat"), unique("ns")

    async def scenario() -> None:
        async with AsyncMnemos(server["url"], server["key"] or None, agent_id=agent) as m:
            a = (await m.tools.remember("Async note: the ferry leaves at nine", session_id=session)).memory
            b = (await m.tools.remember("Async note: the ferry ticket office opens at eight")).memory
            await m.tools.associate(a.id, b.id, relation="related_to", weight=0.6)

            assert agent in [x.agent_id for x in await m.agents()]
            page = await m.memories.list(q="ferry nine", with_total=True)
            assert [x.id for x in page] == [a.id] and page.total == 1
            assert page.memories[0].retention is not None
            assert [x.id for x in await m.get_all(session_id=session)] == [a.id]
            assert [x.id async for x in m.iter_all(q="ticket")] == [b.id]

            links = await m.memories.associations(a.id)
            assert [link.other.id for link in links] == [b.id]
            graph = await m.memories.graph(a.id, depth=1, limit=10)
            assert [n.id for n in graph.nodes] == [a.id, b.id] and len(graph.edges) == 1
            curve = await m.memories.retention(a.id, days=10, points=3)
            assert len(curve.points) == 3 and 0 < curve.retention <= 1

            forgotten = await m.memories.forget_many([a.id, "missing"])
            assert (forgotten.changed, forgotten.missing) == ([a.id], ["missing"])
            assert (await m.memories.restore_many([a.id])).changed == [a.id]
            with pytest.raises(InvalidArgument) as caught:
                await m.memories.bulk([a.id], "archive")
            assert caught.value.field == "action"

            await m.sessions.add_message(session, "user", "When does the ferry leave?")
            assert [x.session_id for x in await m.sessions.list()] == [session]
            await m.kv.put(ns, "k", 1)
            assert ns in [x.namespace for x in await m.kv.namespaces()]
            with pytest.raises(InvalidArgument) as caught:
                await m.memories.graph(a.id, depth=0)
            assert caught.value.field == "depth"

    asyncio.run(scenario())


def test_errors_async(server: dict, agent: str) -> None:
    async def scenario() -> None:
        async with AsyncMnemos(server["url"], server["key"] or None, agent_id=agent) as m:
            with pytest.raises(InvalidArgument) as caught:
                await m.tools.remember("bad", importance=-1)
            assert caught.value.field == "importance"
            with pytest.raises(NotFound) as missing:
                await m.memories.get("missing")
            assert missing.value.field == "id"
        if server["key"]:
            async with AsyncMnemos(server["url"], "mnm_" + "1" * 12 + "_" + "1" * 64, agent_id=agent) as bad:
                with pytest.raises(Unauthenticated):
                    await bad.search("anything")

    asyncio.run(scenario())


def test_close_without_context_manager(server: dict, agent: str) -> None:
    m = Mnemos(server["url"], server["key"] or None, agent_id=agent)
    assert m.health().version
    m.close()

    async def scenario() -> None:
        a = AsyncMnemos(server["url"], server["key"] or None, agent_id=agent)
        assert (await a.health()).version
        await a.close()

    asyncio.run(scenario())


# ------------------------------------------------------------------------- parity


def _public_methods(cls: type) -> dict:
    return {
        name: member
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") or name in ("__enter__", "__exit__", "__aenter__", "__aexit__")
    }


@pytest.mark.parametrize(
    ("sync_cls", "async_cls"),
    [
        (mnemos_client.Mnemos, mnemos_client.AsyncMnemos),
        (mnemos_client.Tools, mnemos_client.AsyncTools),
        (mnemos_client.Memories, mnemos_client.AsyncMemories),
        (mnemos_client.Cognition, mnemos_client.AsyncCognition),
        (mnemos_client.Projects, mnemos_client.AsyncProjects),
        (mnemos_client.Kv, mnemos_client.AsyncKv),
        (mnemos_client.Sessions, mnemos_client.AsyncSessions),
        (mnemos_client.Admin, mnemos_client.AsyncAdmin),
        (mnemos_client.AdminKeys, mnemos_client.AsyncAdminKeys),
    ],
)
def test_sync_and_async_have_the_same_methods(sync_cls: type, async_cls: type) -> None:
    sync_methods = _public_methods(sync_cls)
    async_methods = {
        name.replace("__aenter__", "__enter__").replace("__aexit__", "__exit__"): m
        for name, m in _public_methods(async_cls).items()
    }
    assert set(sync_methods) == set(async_methods)
    for name, method in sync_methods.items():
        assert list(inspect.signature(method).parameters) == list(
            inspect.signature(async_methods[name]).parameters
        ), name


def test_sync_client_is_generated_from_the_async_one() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "unasync.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
