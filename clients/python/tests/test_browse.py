"""The browsing operations (agents, bulk forget/restore, a memory's associations,
neighbourhood graph and retention curve, sessions and namespaces lists) and the
listing filters of ``GET /v1/memories``, through the sync client against a real
server."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from mnemos_client import (
    AgentsResponse,
    AssociationsResponse,
    BulkResponse,
    GraphResponse,
    InvalidArgument,
    Mnemos,
    NamespacesResponse,
    NotFound,
    PermissionDenied,
    RetentionResponse,
    SessionsResponse,
)


def test_list_filters_total_and_retention(client: Mnemos, agent: str) -> None:
    old = client.tools.remember(
        "The staging database listens on port 5433", occurred_at="2020-03-01T09:00:00Z", session_id="s-a"
    ).memory
    middle = client.tools.remember(
        "Deploys to staging go through the ops/deploy.sh script",
        occurred_at=datetime(2021, 6, 1, 12, 0, tzinfo=timezone.utc),
        session_id="s-b",
    ).memory
    new = client.tools.remember(
        "Grafana dashboards live in the observability repository", occurred_at="2023-01-15T08:30:00Z"
    ).memory

    # retention comes with memories read as resources
    page = client.memories.list()
    assert {m.id for m in page} == {old.id, middle.id, new.id}
    assert all(m.retention is not None and 0 <= m.retention <= 1 for m in page)
    assert page.total is None, "total only when asked for"
    got = client.get(new.id)
    assert got.retention is not None and 0 < got.retention <= 1
    assert got["retention"] == got.retention

    # with_total counts every match, not just the page
    first = client.memories.list(limit=1, with_total=True)
    assert len(first) == 1 and first.total == 3 and first.next_cursor
    assert client.memories.list(limit=1, with_total=True, cursor=first.next_cursor).total == 3

    # session, time range (datetimes or RFC 3339 strings), full text (every word)
    assert [m.id for m in client.get_all(session_id="s-a")] == [old.id]
    assert [m.id for m in client.memories.list(session_id="s-b")] == [middle.id]
    in_range = client.get_all(
        occurred_after=datetime(2021, 1, 1, tzinfo=timezone.utc), occurred_before="2023-01-01T00:00:00Z"
    )
    assert [m.id for m in in_range] == [middle.id]
    assert {m.id for m in client.get_all(occurred_before=datetime(2021, 6, 1, 12, 0))} == {old.id}
    assert [m.id for m in client.get_all(q="STAGING port")] == [old.id]
    assert {m.id for m in client.iter_all(q="staging")} == {old.id, middle.id}
    assert [m.id for m in client.memories.iter(q="staging", page_size=1)] == [
        m.id for m in client.get_all(q="staging")
    ]
    counted = client.memories.list(q="staging", occurred_before="2021-01-01T00:00:00Z", with_total=True)
    assert [m.id for m in counted] == [old.id] and counted.total == 1
    assert client.get_all(q="staging", session_id="s-nowhere") == []

    with pytest.raises(InvalidArgument) as caught:
        client.memories.list(occurred_after="last tuesday")
    assert caught.value.field == "occurred_after"


def test_list_occurred_after_alone(client: Mnemos) -> None:
    client.tools.remember("An old note about the harbour ferry", occurred_at="2020-03-01T09:00:00Z")
    recent = client.tools.remember(
        "A recent note about seven blue pencils", occurred_at="2023-01-15T08:30:00Z"
    ).memory
    # a naive datetime is taken as UTC; the bound is inclusive
    after = datetime(2023, 1, 15, 8, 30)
    assert [m.id for m in client.get_all(occurred_after=after)] == [recent.id]
    assert client.memories.list(occurred_after=after, with_total=True).total == 1


def test_bulk_forget_and_restore(client: Mnemos) -> None:
    ids = [r.memory.id for r in client.tools.remember_batch([
        "The red kettle is in the second cupboard",
        "The lighthouse keeper retires in March",
        "Winter tyres go on in November",
    ])]
    a, b, c = ids

    forgotten = client.memories.bulk([a, b, "no-such-memory"], "forget")
    assert isinstance(forgotten, BulkResponse)
    assert (forgotten.changed, forgotten.unchanged, forgotten.missing) == ([a, b], [], ["no-such-memory"])
    assert [client.get(i).status for i in ids] == ["archived", "archived", "active"]

    again = client.memories.forget_many([a, c])
    assert (again.changed, again.unchanged, again.missing) == ([c], [a], [])
    assert {m.id for m in client.get_all(status="archived")} == {a, b, c}

    restored = client.memories.restore_many([a, b])
    assert (restored.changed, restored.unchanged, restored.missing) == ([a, b], [], [])
    assert client.memories.bulk([a], "restore").unchanged == [a]
    assert [client.get(i).status for i in ids] == ["active", "active", "archived"]
    assert client.get(a).version > 1, "forget and restore keep the history"

    nothing = client.memories.forget_many([])
    assert (nothing.changed, nothing.unchanged, nothing.missing) == ([], [], [])

    with pytest.raises(InvalidArgument) as caught:
        client.memories.bulk([a], "delete")
    assert caught.value.field == "action"
    with pytest.raises(InvalidArgument) as caught:
        client.memories.bulk([], "forget")
    assert caught.value.field == "ids"
    with pytest.raises(TypeError):
        client.memories.forget_many(a)


def test_associations_graph_and_retention(client: Mnemos) -> None:
    a = client.tools.remember("Alpha service publishes to the billing queue").memory
    b = client.tools.remember("The billing queue is drained nightly by a cron job").memory
    c = client.tools.remember("The nightly cron host is called tinker").memory
    lone = client.tools.remember("The office plants are watered on Wednesdays").memory
    client.tools.associate(a.id, b.id, relation="feeds", weight=0.9)
    client.tools.associate(b.id, c.id, relation="runs_on", weight=0.4)

    links = client.memories.associations(b.id)
    assert isinstance(links, AssociationsResponse) and len(links) == 2
    assert [link.weight for link in links] == sorted((link.weight for link in links), reverse=True)
    strongest = links.associations[0]
    assert (strongest.from_id, strongest.to_id, strongest.relation) == (a.id, b.id, "feeds")
    assert strongest.weight == pytest.approx(0.9)
    assert strongest.other.id == a.id and strongest.other.content == a.content
    assert strongest.other.type == a.type and strongest.other.status == "active"
    assert isinstance(strongest.created_at, datetime)
    assert {link.other.id for link in links} == {a.id, c.id}
    assert len(client.memories.associations(lone.id)) == 0

    near = client.memories.graph(a.id, depth=1)
    assert isinstance(near, GraphResponse)
    assert [(n.id, n.depth) for n in near.nodes] == [(a.id, 0), (b.id, 1)]
    assert [(e.from_id, e.to_id, e.relation) for e in near.edges] == [(a.id, b.id, "feeds")]
    far = client.memories.graph(a.id)  # depth 2 by default
    assert {(n.id, n.depth) for n in far.nodes} == {(a.id, 0), (b.id, 1), (c.id, 2)}
    assert far.nodes[0].id == a.id and far.nodes[0].content == a.content
    assert {(e.from_id, e.to_id) for e in far.edges} == {(a.id, b.id), (b.id, c.id)}
    capped = client.memories.graph(a.id, depth=2, limit=2)
    assert [n.id for n in capped.nodes] == [a.id, b.id]

    with pytest.raises(InvalidArgument) as caught:
        client.memories.graph(a.id, depth=9)
    assert caught.value.field == "depth"
    with pytest.raises(InvalidArgument) as caught:
        client.memories.graph(a.id, limit=0)
    assert caught.value.field == "limit"
    with pytest.raises(NotFound) as missing:
        client.memories.graph("no-such-memory")
    assert missing.value.field == "id"
    with pytest.raises(NotFound):
        client.memories.associations("no-such-memory")

    curve = client.memories.retention(a.id, days=60, points=7)
    assert isinstance(curve, RetentionResponse)
    assert 0 < curve.retention <= 1
    assert len(curve) == 7 and all(isinstance(p.at, datetime) for p in curve)
    values = [p.retention for p in curve]
    assert all(0 <= v <= 1 for v in values)
    assert values == sorted(values, reverse=True) and values[-1] < values[0], "unused memories fade"
    times = [p.at for p in curve.points]
    assert times == sorted(times) and (times[-1] - times[0]).days >= 59
    assert len(client.memories.retention(a.id)) == 31  # the defaults: 30 days, 31 points

    with pytest.raises(InvalidArgument) as caught:
        client.memories.retention(a.id, points=1)
    assert caught.value.field == "points"
    with pytest.raises(InvalidArgument) as caught:
        client.memories.retention(a.id, days=5000)
    assert caught.value.field == "days"
    with pytest.raises(NotFound):
        client.memories.retention("no-such-memory")


def test_agents(admin_client: Mnemos, server: dict, new_agent) -> None:
    busy, quiet, silent = new_agent("busy"), new_agent("quiet"), new_agent("silent")
    stored = admin_client.tools.remember_batch(
        ["The first note of the busy agent", "The second note of the busy agent"], agent_id=busy
    )
    admin_client.tools.remember("The only note of the quiet agent", agent_id=quiet)
    admin_client.memories.forget_many([stored.results[0].memory.id], agent_id=busy)

    listed = admin_client.agents()
    assert isinstance(listed, AgentsResponse)
    by_id = {a.agent_id: a for a in listed}
    assert (by_id[busy].memories, by_id[busy].active) == (2, 1)
    assert (by_id[quiet].memories, by_id[quiet].active) == (1, 1)
    assert silent not in by_id, "only agents with memories"
    assert isinstance(by_id[busy].last_at, datetime)
    assert [a.agent_id for a in listed] == sorted(a.agent_id for a in listed)

    # a key bound to one agent sees that agent only
    created = admin_client.admin.keys.create(quiet, ["read"], name="pytest agents")
    try:
        with Mnemos(server["url"], created.secret) as bound:
            assert [a.agent_id for a in bound.agents()] == [quiet]
            with pytest.raises(PermissionDenied):
                bound.memories.forget_many(["anything"])
    finally:
        admin_client.admin.keys.revoke(created.key.id)


def test_sessions_list(client: Mnemos, unique) -> None:
    assert len(client.sessions.list()) == 0
    first, second = unique("first"), unique("second")
    client.sessions.add_message(first, "user", "We deploy on Tuesdays.", at="2024-05-01T09:00:00Z")
    client.sessions.post_messages(
        second,
        [
            {"role": "user", "content": "The freeze starts on Friday."},
            {"role": "assistant", "content": "Noted."},
        ],
    )

    listed = client.sessions.list()
    assert isinstance(listed, SessionsResponse)
    assert [s.session_id for s in listed] == [second, first], "the most recently spoken first"
    newest = listed.sessions[0]
    assert newest.total_messages == 2 and newest.tokens > 0
    assert (newest.compactions, newest.compacted_through, newest.summary) == (0, 0, None)
    assert isinstance(newest.created_at, datetime) and isinstance(newest.last_message_at, datetime)
    assert listed.sessions[1].last_message_at == datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)
    assert [s.session_id for s in client.sessions.list(limit=1)] == [second]

    with pytest.raises(InvalidArgument) as caught:
        client.sessions.list(limit=0)
    assert caught.value.field == "limit"


def test_kv_namespaces(client: Mnemos, unique) -> None:
    small, large = unique("ns-small"), unique("ns-large")
    client.kv.configure(small, 2)
    client.kv.put(large, "k1", {"v": 1})
    client.kv.put(large, "k2", "two")
    client.kv.get(large, "k1")

    listed = client.kv.namespaces()
    assert isinstance(listed, NamespacesResponse)
    names = [ns.namespace for ns in listed]
    assert names == sorted(names)
    by_name = {ns.namespace: ns for ns in listed}
    assert small in by_name and large in by_name
    assert (by_name[small].entries, by_name[small].max_entries) == (0, 2)
    assert by_name[large].entries == 2 and by_name[large].puts == 2 and by_name[large].hits == 1
    stats = client.kv.stats(large)
    assert by_name[large].to_dict() == stats.to_dict()
