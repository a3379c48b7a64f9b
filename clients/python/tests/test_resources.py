"""Sessions, projects, KV namespaces, admin keys and the service routes, through the
sync client against a real server."""

from __future__ import annotations

import json

import pytest

from mnemos_client import (
    Conflict,
    CreatedKey,
    Health,
    ImportReport,
    InvalidArgument,
    Mnemos,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)


def test_health(server: dict) -> None:
    with Mnemos(server["url"], "") as anonymous:
        health = anonymous.health()
    assert isinstance(health, Health)
    assert health.status in ("ok", "degraded")
    assert health.version and health.uptime_seconds >= 0


def test_health_detail_metrics_openapi(admin_client: Mnemos) -> None:
    health = admin_client.health()
    assert health.backends and "store" in health.backends
    assert health.actors and all(a.name and a.state for a in health.actors)
    assert "mnemos_" in admin_client.metrics()
    document = admin_client.openapi()
    assert document["info"]["title"] == "mnemos"
    assert "/tools/recall" in document["paths"]


def test_every_documented_operation_has_a_method(admin_client: Mnemos) -> None:
    """Each REST operation of /openapi.json (not the proxy, /mcp) is covered here."""
    covered = {
        ("GET", "/health"), ("GET", "/metrics"),
        ("POST", "/tools/remember"), ("POST", "/tools/remember_batch"), ("POST", "/tools/recall"),
        ("POST", "/tools/associate"), ("POST", "/tools/spreading_activation"), ("POST", "/tools/forget"),
        ("POST", "/tools/consolidate"), ("POST", "/tools/reflect"), ("POST", "/tools/memory_history"),
        ("POST", "/tools/build_context"), ("POST", "/tools/extract_turn"),
        ("GET", "/v1/memories"), ("POST", "/v1/memories"), ("DELETE", "/v1/memories"),
        ("GET", "/v1/memories/{id}"), ("PATCH", "/v1/memories/{id}"), ("DELETE", "/v1/memories/{id}"),
        ("GET", "/v1/memories/{id}/history"), ("GET", "/v1/cognition/runs"),
        ("GET", "/v1/projects"), ("GET", "/v1/projects/{project_id}"), ("PUT", "/v1/projects/{project_id}"),
        ("PUT", "/v1/projects/{project_id}/sessions/{session_id}"),
        ("PUT", "/v1/namespaces/{namespace}"), ("GET", "/v1/namespaces/{namespace}/stats"),
        ("GET", "/v1/namespaces/{namespace}/entries"), ("GET", "/v1/namespaces/{namespace}/entries/{key}"),
        ("PUT", "/v1/namespaces/{namespace}/entries/{key}"), ("DELETE", "/v1/namespaces/{namespace}/entries/{key}"),
        ("POST", "/v1/namespaces/{namespace}/search"),
        ("POST", "/v1/sessions/{id}/messages"), ("GET", "/v1/sessions/{id}/messages"),
        ("POST", "/v1/sessions/{id}/compact"),
        ("POST", "/v1/admin/archive"), ("POST", "/v1/admin/reembed"), ("GET", "/v1/admin/reembed"),
        ("GET", "/v1/admin/keys"), ("POST", "/v1/admin/keys"),
        ("DELETE", "/v1/admin/keys/{id}"), ("GET", "/v1/admin/audit"),
        ("DELETE", "/v1/agents/{agent}"), ("DELETE", "/v1/tenants/{tenant}"),
        ("GET", "/v1/export"), ("POST", "/v1/import"),
        ("GET", "/v1/agents"), ("POST", "/v1/memories/bulk"), ("GET", "/v1/memories/{id}/associations"),
        ("GET", "/v1/memories/{id}/graph"), ("GET", "/v1/memories/{id}/retention"),
        ("GET", "/v1/sessions"), ("GET", "/v1/namespaces"),
        ("GET", "/v1/entities"), ("GET", "/v1/entities/{id}"), ("GET", "/v1/facts"),
        ("POST", "/v1/entities/{id}/merge"), ("POST", "/v1/entities/{id}/split"),
    }
    documented = {
        (method.upper(), path)
        for path, operations in admin_client.openapi()["paths"].items()
        for method, operation in operations.items()
        if method in ("get", "post", "put", "patch", "delete")
        # the OpenAI-compatible proxy and MCP are other protocols, not REST operations
        and not {"proxy", "mcp"} & set(operation.get("tags", []))
        and not path.startswith("/mcp")
    }
    missing = documented - covered
    assert not missing, f"operations of /openapi.json the client has no method for: {sorted(missing)}"


def test_sessions(client: Mnemos, agent: str, unique) -> None:
    session = unique("chat")
    one = client.sessions.add_message(session, "user", "We deploy on Tuesdays.")
    assert [m.role for m in one.messages] == ["user"]
    assert one.session.session_id == session and one.session.agent_id == agent
    several = client.sessions.post_messages(
        session,
        [
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "And we freeze on Fridays."},
        ],
    )
    assert [m.content for m in several.messages] == ["Noted.", "And we freeze on Fridays."]
    assert several.messages[0].seq < several.messages[1].seq

    window = client.sessions.get(session)
    assert [(m.role, m.content) for m in window.messages] == [
        ("user", "We deploy on Tuesdays."),
        ("assistant", "Noted."),
        ("user", "And we freeze on Fridays."),
    ]
    assert window.total_messages == 3
    assert window.tokens > 0 and window.context_tokens > 0
    assert [m.seq for m in window.messages] == sorted(m.seq for m in window.messages)

    compacted = client.sessions.compact(session)
    assert compacted.session_id == session
    assert isinstance(compacted.compacted, bool)

    with pytest.raises(InvalidArgument) as caught:
        client.sessions.post_messages(session, [{"role": "user", "content": "x"}], role="user", content="y")
    assert caught.value.field == "messages"
    with pytest.raises(InvalidArgument) as caught:
        client.sessions.post_messages(session, [{"role": "robot", "content": "x"}])
    assert caught.value.field == "messages[0].role"


def test_projects(client: Mnemos, agent: str, unique) -> None:
    project_id = unique("proj")
    created = client.projects.put(project_id, name="ACME audit", isolated=True)
    assert (created.project_id, created.agent_id, created.name, created.isolated) == (
        project_id,
        agent,
        "ACME audit",
        True,
    )
    renamed = client.projects.put(project_id, name="ACME audit 2026")
    assert renamed.name == "ACME audit 2026" and renamed.isolated

    attached = client.projects.attach_session(project_id, "s-42")
    assert attached.sessions == ["s-42"]
    got = client.projects.get(project_id)
    assert got.sessions == ["s-42"] and got.name == "ACME audit 2026"
    assert [p.project_id for p in client.projects.list()] == [project_id]

    memory = client.tools.remember("ACME keeps its books in SAP", session_id="s-42").memory
    assert memory.project_id == project_id
    assert [m.id for m in client.get_all(project_id=project_id)] == [memory.id]
    hits = client.search("where are the books kept", project_id=project_id)
    assert memory.id in [h.memory.id for h in hits]
    hidden = client.search("where are the books kept")
    assert memory.id not in [h.memory.id for h in hidden], "an isolated project's memories need project_id"

    with pytest.raises(NotFound):
        client.projects.get(unique("missing"))


def test_kv(client: Mnemos, agent: str, unique) -> None:
    ns = unique("ns")
    configured = client.kv.configure(ns, 3)
    assert configured.stats.namespace == ns and configured.stats.max_entries == 3

    put = client.kv.put(ns, "task:1", {"goal": "draft notes"}, tags=["open"], ttl_seconds=3600)
    assert put.created and put.evicted == []
    assert put.entry.value == {"goal": "draft notes"} and put.entry.written_by == agent
    assert put.entry.expires_at is not None
    replaced = client.kv.put(ns, "task:1", {"goal": "draft the notes"}, tags=["open"])
    assert not replaced.created
    client.kv.put(ns, "task:2", "plain string value", tags=["done"])
    client.kv.put(ns, "key/with spaces", [1, 2, 3])

    entry = client.kv.get(ns, "task:1")
    assert entry.value == {"goal": "draft the notes"} and entry.tags == ["open"]
    assert client.kv.get(ns, "key/with spaces").value == [1, 2, 3]

    # a fourth key evicts the least recently used one (task:2: task:1 and the
    # spaced key were read since)
    overflow = client.kv.put(ns, "task:3", None)
    assert overflow.evicted == ["task:2"]
    assert client.kv.get(ns, "task:3").value is None

    assert [e.key for e in client.kv.list(ns, tag="open")] == ["task:1"]
    assert {e.key for e in client.kv.list(ns)} == {"task:1", "task:3", "key/with spaces"}
    found = client.kv.search(ns, "draft notes", limit=5)
    assert found.results and found.results[0].entry.key == "task:1"

    assert client.kv.delete(ns, "task:1").deleted == "task:1"
    with pytest.raises(NotFound) as caught:
        client.kv.get(ns, "task:1")
    assert caught.value.field
    stats = client.kv.stats(ns)
    assert stats.entries == 2 and stats.evictions == 1 and stats.puts >= 5 and stats.misses >= 1
    with pytest.raises(NotFound) as caught:
        client.kv.stats(unique("missing"))
    assert caught.value.field == "namespace"


def test_admin_keys(admin_client: Mnemos, server: dict, new_agent) -> None:
    agent, other = new_agent("keyed"), new_agent("other")
    created = admin_client.admin.keys.create(agent, ["read", "write"], name="pytest bound key")
    assert isinstance(created, CreatedKey)
    assert created.secret.startswith("mnm_")
    assert (created.key.agent, created.key.status, sorted(created.key.scopes)) == (agent, "active", ["read", "write"])

    listed = {k.id: k for k in admin_client.admin.keys.list()}
    assert created.key.id in listed and listed[created.key.id].name == "pytest bound key"
    assert all(not hasattr(k, "secret") and "secret" not in k for k in listed.values())

    with Mnemos(server["url"], created.secret) as bound:
        # the key supplies the agent
        memory = bound.tools.remember("Written with a key bound to one agent").memory
        assert memory.agent_id == agent
        assert memory.provenance and memory.provenance.get("key_id") == created.key.id
        assert [m.id for m in bound.get_all()] == [memory.id]
        with pytest.raises(PermissionDenied) as caught:
            bound.get_all(other)
        assert caught.value.status == 403 and caught.value.field == "agent_id"
        with pytest.raises(PermissionDenied):
            bound.admin.keys.list()

        revoked = admin_client.admin.keys.revoke(created.key.id)
        assert revoked.revoked == created.key.id
        with pytest.raises(Unauthenticated):
            bound.get_all()
    statuses = {k.id: k.status for k in admin_client.admin.keys.list()}
    assert statuses[created.key.id] == "revoked"
    with pytest.raises(NotFound):
        admin_client.admin.keys.revoke("000000000000")

    actions = [(e.action, e.target) for e in admin_client.admin.audit(limit=200)]
    assert ("key.create", created.key.id) in actions and ("key.revoke", created.key.id) in actions


def test_archive_and_erase(admin_client: Mnemos, new_agent) -> None:
    run = admin_client.admin.archive()
    assert run.trigger == "api" and run.id

    agent = new_agent("erased")
    admin_client.tools.remember("A memory that erase removes", agent_id=agent)
    admin_client.sessions.add_message("s-1", "user", "hello", agent_id=agent)
    erased = admin_client.admin.erase_agent(agent)
    assert erased.agent_id == agent
    assert erased.system_of_record.memories == 1 and erased.system_of_record.sessions == 1
    assert admin_client.get_all(agent) == []


def test_reembed_status_and_a_refused_start(admin_client: Mnemos) -> None:
    status = admin_client.admin.reembed_status()
    assert status.phase in ("idle", "done") and "|" in status.serving
    if status.target is None or status.target == status.serving:
        # the stored vectors come from the configured model: nothing to re-embed
        with pytest.raises(Conflict) as refused:
            admin_client.admin.reembed()
        assert refused.value.code == "conflict" and "configured model" in refused.value.message


def test_erase_tenant(admin_client: Mnemos, server: dict, unique) -> None:
    tenant = unique("tenant")
    try:
        created = admin_client.admin.keys.create("*", ["read", "write"], tenant=tenant, name="pytest tenant")
    except PermissionDenied:
        pytest.skip("the suite's key administers one tenant only (erasing tenants needs the default tenant)")
    with Mnemos(server["url"], created.secret, agent_id="someone") as tenant_client:
        tenant_client.tools.remember("A memory of a tenant that will be erased")
        erased = admin_client.admin.erase_tenant(tenant)
        assert erased.tenant == tenant and erased.keys_revoked >= 1
        assert [a.agent_id for a in erased.agents] == ["someone"]
        with pytest.raises(Unauthenticated):
            tenant_client.get_all()


def test_export_and_import(client: Mnemos, agent: str) -> None:
    client.tools.remember("Exports keep every record", tags=["transfer"])
    text = client.transfer.export()
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["kind"] == "header" and lines[-1]["kind"] == "trailer"
    assert any(line["kind"] == "memory" and line["agent_id"] == agent for line in lines)
    again = client.transfer.import_(text)
    assert isinstance(again, ImportReport)
    assert again.written.memories == 0 and again.unchanged.memories == lines[0]["counts"]["memories"]
    truncated = "\n".join(text.splitlines()[:-1])
    with pytest.raises(InvalidArgument) as refused:
        client.transfer.import_(truncated)
    assert refused.value.field == "trailer"


def test_entities(client: Mnemos) -> None:
    import time

    client.tools.remember("Melanie went to the pottery class with Caroline.")
    client.tools.remember("Caroline moved to Lisbon in June 2024.")
    deadline = time.monotonic() + 15
    names: dict = {}
    while time.monotonic() < deadline:
        names = {e.name: e for e in client.entities.list()}
        if {"Melanie", "Caroline", "Lisbon"} <= names.keys():
            break
        time.sleep(0.1)
    assert {"Melanie", "Caroline", "Lisbon"} <= names.keys(), names
    caroline = names["Caroline"]
    assert caroline.kind == "person" and caroline.mentions == 2

    detail = client.entities.get(caroline.id)
    assert detail.entity.id == caroline.id
    assert len(detail.memories) == 2
    for mention in detail.memories:
        assert mention.memory.content[mention.start:mention.end] == "Caroline"
    assert {r.entity.name for r in detail.related} >= {"Melanie", "Lisbon"}

    places = client.entities.list(kind="place")
    assert [e.name for e in places] == ["Lisbon"]
    first = client.entities.list(limit=1)
    assert len(first) == 1 and first.next_cursor
    rest = client.entities.list(cursor=first.next_cursor)
    assert first.entities[0].id not in {e.id for e in rest}
    with pytest.raises(InvalidArgument) as refused:
        client.entities.list(kind="planet")
    assert refused.value.field == "kind"
    with pytest.raises(NotFound):
        client.entities.get("ent_000000000000000000000000")


def test_facts(client: Mnemos) -> None:
    import time

    client.tools.remember("Dana works at Initech.", occurred_at="2022-02-01T00:00:00Z")
    client.tools.remember("Dana joined Globex.", occurred_at="2023-09-01T00:00:00Z")
    deadline = time.monotonic() + 15
    facts = client.facts.list(subject="dana", attribute="works_at")
    while len(facts) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
        facts = client.facts.list(subject="dana", attribute="works_at")
    assert [(f.value, f.current) for f in facts] == [("Initech", False), ("Globex", True)], facts
    initech, globex = facts.facts
    assert initech.valid_to == globex.valid_from
    assert initech.closed_by_memory_id == globex.source_memory_ids[0]
    assert initech.value_entity_id and initech.subject_entity_id
    then = client.facts.list(subject="Dana", as_of="2023-01-15")
    assert [f.value for f in then] == ["Initech"]
    back_then = client.tools.recall("Where does Dana work?", as_of="2023-01-15")
    assert [f.value for f in back_then.facts] == ["Initech"], back_then
    assert back_then.results[0].memory.content == "Dana works at Initech.", back_then
    assert "Dana joined Globex." not in [m.content for m in back_then.memories]
    detail = client.entities.get(initech.value_entity_id)
    assert [f.subject for f in detail.referenced_by] == ["Dana"]
    with pytest.raises(InvalidArgument) as refused:
        client.facts.list(as_of="when pigs fly")
    assert refused.value.field == "as_of"


def test_entity_merge_and_split(client: Mnemos) -> None:
    import time

    client.tools.remember("Yesterday, Melanie painted the fence.")
    client.tools.remember("Yesterday, Mel bought a kiln.")
    deadline = time.monotonic() + 15
    names: dict = {}
    while time.monotonic() < deadline:
        names = {e.name: e for e in client.entities.list()}
        if {"Melanie", "Mel"} <= names.keys():
            break
        time.sleep(0.1)
    assert {"Melanie", "Mel"} <= names.keys(), names
    # Before anyone merges, each is offered as possibly the other (a short form).
    offered = client.entities.get(names["Melanie"].id).possibly_same
    assert [(c.entity.name, c.reason) for c in offered] == [("Mel", "short form")], offered
    assert -1.0 <= offered[0].similarity <= 1.0
    merged = client.entities.merge(names["Mel"].id, into=names["Melanie"].id)
    assert merged.merge.alias == "mel" and merged.merge.origin == "user"
    assert merged.entity is not None and merged.entity.mentions == 2
    assert "Mel" not in {e.name for e in client.entities.list()}
    detail = client.entities.get(names["Melanie"].id)
    assert detail.aliases == ["mel"] and len(detail.memories) == 2
    assert detail.possibly_same == [] and {m.source for m in detail.memories} == {"rules"}
    split = client.entities.split(names["Melanie"].id, alias="Mel")
    assert split.merge.undone_at is not None
    assert split.entity is not None and split.entity.id == names["Mel"].id
    assert client.entities.get(names["Melanie"].id).aliases == []
    with pytest.raises(NotFound) as missing:
        client.entities.split(names["Melanie"].id, alias="Mel")
    assert missing.value.field == "alias"
