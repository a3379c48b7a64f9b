"""Memories through the sync client: the tools, the /v1/memories resources and the
mem0-shaped methods, against a real server."""

from __future__ import annotations

from datetime import datetime
from typing import Optional

import pytest

from mnemos_client import (
    HistoryEntry,
    InvalidArgument,
    Memory,
    Mnemos,
    NotFound,
    RecallResponse,
)

# Distinct sentences (none a near-duplicate of another, none a fact that supersedes another).
SENTENCES = [
    "The staging database listens on port 5433",
    "Deploys go through the ops/deploy.sh script",
    "We shipped version two of the billing service on Friday",
    "Grafana dashboards live in the observability repository",
    "The nightly backup job uploads snapshots to cold storage",
    "Customer support escalations are triaged every Monday morning",
    "Feature flags are managed with a YAML file in the config directory",
    "The mobile app release train leaves every second Thursday",
    "Load tests run against the perf cluster before each launch",
    "Incident reviews are written within three days of an outage",
    "The design system uses an eight pixel spacing grid",
    "Interns get a laptop and a buddy on their first day",
]


def test_remember_then_recall(client: Mnemos, agent: str) -> None:
    stored = client.tools.remember(
        "The staging DB runs on port 5433", tags=["db"], importance=0.8, metadata={"source": "pytest"}
    )
    memory = stored.memory
    assert isinstance(memory, Memory)
    assert memory.agent_id == agent
    assert memory.content == "The staging DB runs on port 5433"
    assert memory.tags == ["db"]
    assert memory.importance == pytest.approx(0.8)
    assert memory.metadata == {"source": "pytest"}
    assert isinstance(memory.created_at, datetime) and memory.created_at.tzinfo is not None
    assert stored.routing.type == memory.type
    assert stored.deduplicated_into is None

    recalled = client.tools.recall("which port does staging use?", limit=5)
    assert isinstance(recalled, RecallResponse)
    assert recalled.results, recalled.note
    top = recalled.results[0]
    assert top.memory.id == memory.id
    assert 0 < top.score <= 1
    assert top.matched_by
    assert recalled.took_ms >= 0
    # dict-style reads by wire name, and the JSON as received
    assert recalled["results"][0]["memory"]["content"] == memory.content
    assert recalled.to_dict()["results"][0]["memory"]["id"] == memory.id

    # the same text again is deduplicated into the first memory
    again = client.tools.remember("The staging DB runs on port 5433")
    assert again.deduplicated_into == memory.id


def test_mem0_add_with_chat_messages_and_search(client: Mnemos) -> None:
    added = client.add(
        [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "I prefer Postgres over MySQL for new services."},
            {"role": "assistant", "content": "Noted, Postgres it is."},
        ],
        metadata={"conversation": "c-1"},
    )
    assert added, "the conversation should yield at least one memory"
    assert all(isinstance(m, Memory) for m in added)
    assert any("Postgres" in m.content for m in added)
    assert all(m.metadata.get("conversation") == "c-1" for m in added)

    hits = client.search("which database does the user prefer?", limit=5)
    assert any("Postgres" in hit.memory.content for hit in hits)
    assert [m.id for m in hits.memories] == [h.memory.id for h in hits.results]


def test_mem0_add_string_and_infer_false(client: Mnemos, agent: str) -> None:
    verbatim = client.add(
        [
            {"role": "system", "content": "ignored"},
            {"role": "user", "content": "Remember that the office closes at six on Fridays"},
            {"role": "assistant", "content": "The quarterly report is due on the fifth"},
        ],
        infer=False,
        tags=["verbatim"],
    )
    assert [m.content for m in verbatim] == [
        "Remember that the office closes at six on Fridays",
        "The quarterly report is due on the fifth",
    ]
    assert all(m.tags == ["verbatim"] and m.agent_id == agent for m in verbatim)

    mined = client.add("I prefer dark mode in every editor.")
    assert isinstance(mined, list)
    assert any("dark mode" in m.content for m in mined)

    with pytest.raises(ValueError):
        client.add("x", tags=["only with infer=False"])


def test_memories_add_resource(client: Mnemos) -> None:
    stored = client.memories.add(
        [
            {"role": "user", "content": "How do I restart staging?"},
            {"role": "assistant", "content": "1. Stop the worker.\n2. Run make restart."},
        ],
        session_id="chat-1",
    )
    assert stored.stored
    assert all(m.session_id == "chat-1" for m in stored)

    with pytest.raises(InvalidArgument) as caught:
        client.memories.add([{"role": "robot", "content": "beep"}])
    assert caught.value.field == "messages[0].role"


def test_get_all_follows_pages(client: Mnemos, agent: str) -> None:
    batch = client.tools.remember_batch(SENTENCES)
    assert len(batch) == len(SENTENCES)
    assert all(r.deduplicated_into is None for r in batch)
    ids = {r.memory.id for r in batch}

    # one page at a time, by hand
    first = client.memories.list(limit=5)
    assert len(first.memories) == 5 and first.next_cursor
    seen = [m.id for m in first]
    cursor: Optional[str] = first.next_cursor
    pages = 1
    while cursor:
        page = client.memories.list(limit=5, cursor=cursor)
        seen.extend(m.id for m in page)
        cursor = page.next_cursor
        pages += 1
    assert pages >= 3
    assert set(seen) == ids and len(seen) == len(ids)

    # get_all pages by itself (page_size smaller than the total)
    everything = client.get_all(page_size=5)
    assert [m.id for m in everything] == seen
    assert all(m.agent_id == agent for m in everything)
    created = [m.created_at for m in everything]
    assert created == sorted(created, reverse=True), "newest first"

    # limit caps the total; the iterator streams
    assert len(client.get_all(limit=7, page_size=5)) == 7
    streamed = client.iter_all(page_size=4)
    assert next(streamed).id == seen[0]
    assert [m.id for m in streamed] == seen[1:]
    assert [m.id for m in client.memories.iter(page_size=5, max_items=6)] == seen[:6]


def test_get_update_history(client: Mnemos) -> None:
    memory = client.tools.remember("The staging DB runs on port 5433", tags=["db"]).memory
    assert memory.version == 1

    got = client.get(memory.id)
    assert got.id == memory.id and got.content == memory.content

    updated = client.update(memory.id, "The staging DB runs on port 5434")
    assert updated.content == "The staging DB runs on port 5434"
    assert updated.version == 2

    updated = client.memories.update(memory.id, importance=0.9, tags=["db", "staging"], title="Staging DB")
    assert updated.version == 3
    assert updated.title == "Staging DB" and updated.tags == ["db", "staging"]
    cleared = client.memories.update(memory.id, title=None)
    assert cleared.title is None

    history = client.history(memory.id)
    assert all(isinstance(v, HistoryEntry) for v in history)
    assert [v.version for v in history][:2] == [1, 2]
    assert history[0].content == "The staging DB runs on port 5433"
    assert history[0].reason
    assert isinstance(history[0].archived_at, datetime)

    same = client.tools.memory_history(memory.id)
    assert same.id == memory.id
    assert [v.version for v in same.versions] == [v.version for v in history]
    assert [v.version for v in client.memories.history(memory.id)] == [v.version for v in history]

    assert client.get(memory.id).content == "The staging DB runs on port 5434"


def test_delete_one(client: Mnemos) -> None:
    keep = client.tools.remember("Keep this note about the quarterly roadmap").memory
    gone = client.tools.remember("Delete this note about an old lunch order").memory
    assert client.memories.delete(gone.id).deleted == gone.id
    with pytest.raises(NotFound):
        client.get(gone.id)
    with pytest.raises(NotFound):
        client.delete(gone.id)
    client.delete(keep.id)
    assert client.get_all() == []


def test_delete_all(client: Mnemos, new_agent) -> None:
    other = new_agent("other")
    client.tools.remember_batch(SENTENCES[:4])
    client.tools.remember("A memory of another agent that must survive", agent_id=other)

    assert client.delete_all() == 4
    assert client.get_all() == []
    assert client.memories.delete_all().deleted == 0
    assert len(client.get_all(other)) == 1


def test_min_score_filters_weak_results(client: Mnemos) -> None:
    client.tools.remember_batch(SENTENCES)
    query = "which port does the staging database listen on"
    everything = client.search(query, limit=20)
    assert len(everything) >= 2, everything.note
    scores = [r.score for r in everything]
    assert scores == sorted(scores, reverse=True)
    assert "staging database" in everything.results[0].memory.content

    floor = (scores[0] + scores[-1]) / 2
    strong = client.search(query, limit=20, min_score=floor)
    assert strong.results, "the best match scores above the floor"
    assert all(r.score >= floor for r in strong)
    assert len(strong) < len(everything)
    assert strong.note  # says why fewer than limit came back

    assert all(r.score >= 1.0 for r in client.tools.recall(query, min_score=1.0, limit=5))
    with pytest.raises(InvalidArgument) as caught:
        client.search(query, min_score=1.5)
    assert caught.value.field == "min_score"


def test_search_filters(client: Mnemos) -> None:
    client.tools.remember("The blue team owns the payments API", tags=["teams"])
    client.tools.remember("The payments API rate limit is 100 requests per second", tags=["limits"])
    hits = client.search("payments API", filters={"tags": ["limits"]})
    assert hits.results and all("limits" in h.memory.tags for h in hits)
    hits = client.search("payments API", tags=["teams"])
    assert hits.results and all("teams" in h.memory.tags for h in hits)
    with pytest.raises(InvalidArgument) as caught:
        client.search("payments API", filters={"no_such_filter": 1})
    assert caught.value.field == "no_such_filter"


def test_tools(client: Mnemos, agent: str) -> None:
    a = client.tools.remember("Alpha service publishes to the billing queue").memory
    b = client.tools.remember("The billing queue is drained nightly by a cron job").memory
    edge = client.tools.associate(a.id, b.id, relation="related_to", weight=0.8)
    assert (edge.from_id, edge.to_id, edge.relation, edge.agent_id) == (a.id, b.id, "related_to", agent)

    spread = client.tools.spreading_activation(a.id, depth=2)
    assert any(r.memory.id == b.id and r.path[0] == a.id for r in spread)

    dry = client.tools.forget(query="billing queue", dry_run=True)
    assert dry.dry_run and set(dry.forgotten) == {a.id, b.id}
    assert client.get(a.id).status == "active"
    done = client.tools.forget(b.id)
    assert done.forgotten == [b.id] and not done.dry_run
    assert client.get(b.id).status == "archived"

    stats = client.tools.reflect()
    assert stats.agent_id == agent and stats.total == 2
    assert stats.by_status.get("archived") == 1

    context = client.tools.build_context("billing queue", context_budget=300)
    assert "billing queue" in context.context
    assert context.metadata.injected_count >= 1
    sections = context.metadata.sections
    assert sections and all(s.name in context.context and s.tokens > 0 for s in sections)
    assert sum(s.memories for s in sections) == context.metadata.injected_count

    turn = client.tools.extract_turn("I prefer tabs over spaces.", "Noted.", session_id="s-1")
    assert any("tabs" in m.content for m in turn)

    run = client.tools.consolidate()
    assert run.agent_id == agent and run.trigger
    assert isinstance(run.report.get("decision_log"), list)
    runs = client.cognition.runs(limit=5)
    assert run.id in [r.id for r in runs]


def test_memory_types_and_listing_filters(client: Mnemos) -> None:
    client.tools.remember("Run make restart to restart staging", memory_type="procedural", tags=["ops"])
    client.tools.remember("The team celebrated the launch with pizza", memory_type="episodic")
    procedural = client.get_all(memory_type="procedural")
    assert [m.type for m in procedural] == ["procedural"]
    assert [m.content for m in client.get_all(tag="ops")] == ["Run make restart to restart staging"]
    hits = client.search("restart staging", types="procedural")
    assert hits.results and all(h.memory.type == "procedural" for h in hits)


def test_request_escape_hatch(client: Mnemos, agent: str) -> None:
    client.tools.remember("Raw requests still map errors")
    page = client.request("GET", "/v1/memories", params={"agent_id": agent, "limit": 1})
    assert isinstance(page, dict) and len(page["memories"]) == 1
    with pytest.raises(NotFound):
        client.request("GET", "/v1/memories/does-not-exist", params={"agent_id": agent})
