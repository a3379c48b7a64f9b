#!/usr/bin/env python3
"""MCP conformance check of mnemos with the official MCP Python SDK as the client.

    python3 tests/mcp_client.py stdio <command> [args...]   # env: inherited (MNEMOS__DATA_DIR, ...)
    python3 tests/mcp_client.py http <url>                   # e.g. http://127.0.0.1:8077/mcp
                                                             # env MNEMOS_KEY: send it as the bearer key

Initialises a session, lists the tools (all twenty-three, each with an input schema that has
`required` unless every argument is optional, the contract's enums and bounds, and an output
schema where the answer has one), calls every tool with valid arguments, then makes bad
calls and checks that they come back as tool results with `isError` whose structured
content carries `invalid_argument` and the field (MCP 2025-11-25); an unknown tool is a
JSON-RPC error. With MNEMOS_DEFAULT_AGENT set (the server acts as that agent when a call
names none), the calls after the first leave agent_id out.
Prints a JSON summary on stdout; exits non-zero on any failure.
"""

import asyncio
import json
import os
import sys
import traceback

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

try:  # mcp >= 2: streamable_http_client; mcp 1.x: streamablehttp_client
    from mcp.client.streamable_http import streamable_http_client as _http_client
except ImportError:  # pragma: no cover - older SDK
    from mcp.client.streamable_http import streamablehttp_client as _http_client

try:
    from mcp.shared.exceptions import MCPError as _McpError
except ImportError:  # pragma: no cover - older SDK
    from mcp.shared.exceptions import McpError as _McpError

TOOLS = {
    "remember", "remember_batch", "recall", "associate", "spreading_activation",
    "forget", "consolidate", "reflect", "memory_history", "build_context",
    "extract_turn", "project_put", "project_list", "kv_put", "kv_get", "kv_search",
    "kv_list_by_tag", "kv_stats", "kv_delete",
    "list_memories", "get_memory", "update_memory", "delete_memory",
    "entities", "entity", "facts", "entity_merge", "entity_split",
}
AGENT = os.environ.get("MNEMOS_DEFAULT_AGENT") or "mcp-client"
DEFAULT_AGENT = bool(os.environ.get("MNEMOS_DEFAULT_AGENT"))


def implicit(arguments):
    """With a connection default agent, leave out an agent_id that names it."""
    if DEFAULT_AGENT and arguments.get("agent_id") == AGENT:
        return {k: v for k, v in arguments.items() if k != "agent_id"}
    return arguments


def attr(obj, *names):
    """First present attribute among snake_case / camelCase spellings across SDK versions."""
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return None


def check(condition, message):
    if not condition:
        raise AssertionError(message)


async def call(session, name, arguments):
    """Call a tool; return its structured content (falling back to the text JSON)."""
    result = await session.call_tool(name, implicit(arguments))
    check(not attr(result, "is_error", "isError"), f"{name} returned an error result: {result}")
    structured = attr(result, "structured_content", "structuredContent")
    text = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    check(text, f"{name}: no text content")
    check(json.loads(text[0]) == structured, f"{name}: text content differs from structured content")
    check(isinstance(structured, dict), f"{name}: structured content is not an object: {structured}")
    return structured


async def expect_error(session, name, arguments, code, field):
    """A failing call is a tool result with isError: the message as text, the contract's
    {code, message, field} as structured content (the SDK does not raise)."""
    result = await session.call_tool(name, implicit(arguments))
    check(attr(result, "is_error", "isError") is True, f"{name} with bad arguments succeeded: {result}")
    data = attr(result, "structured_content", "structuredContent") or {}
    text = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    check(data.get("code") == code, f"{name}: structured content {data}, want code {code}")
    check(data.get("field") == field, f"{name}: field {data.get('field')!r}, want {field!r}")
    check(text and (field is None or field in text[0]), f"{name}: text does not name {field}: {text}")
    return {"tool": name, "data": data}


async def expect_invalid(session, name, arguments, field):
    return await expect_error(session, name, arguments, "invalid_argument", field)


async def exercise(session):
    summary = {}
    init = await session.initialize()
    summary["protocol_version"] = attr(init, "protocol_version", "protocolVersion")
    summary["server"] = attr(init, "server_info", "serverInfo").name

    listed = await session.list_tools()
    names = {tool.name for tool in listed.tools}
    check(names == TOOLS, f"tools/list: {sorted(names)}")
    for tool in listed.tools:
        schema = attr(tool, "input_schema", "inputSchema")
        check(isinstance(schema, dict) and schema.get("type") == "object", f"{tool.name}: schema {schema}")
        # A tool whose every argument has a default (forget takes an id or a query,
        # consolidate only an agent, which a key bound to one supplies) requires nothing.
        optional = {"forget", "consolidate", "reflect", "project_list", "list_memories", "entities", "facts"}
        check(tool.name in optional or schema.get("required"), f"{tool.name}: schema has no required fields")
        check("$ref" not in json.dumps(schema), f"{tool.name}: schema has a $ref")
        check(tool.description and len(tool.description) > 40, f"{tool.name}: no useful description")
    summary["tools"] = sorted(names)
    by_name = {tool.name: tool for tool in listed.tools}
    remember_schema = attr(by_name["remember"], "input_schema", "inputSchema")["properties"]
    check("semantic" in (remember_schema["type"].get("enum") or []), f"remember.type has no enum: {remember_schema['type']}")
    check(remember_schema["importance"].get("maximum") == 1, f"importance has no bound: {remember_schema['importance']}")
    for name in ("recall", "list_memories", "remember", "get_memory"):
        output = attr(by_name[name], "output_schema", "outputSchema")
        check(isinstance(output, dict) and output.get("type") == "object", f"{name}: no output schema")

    first = await call(session, "remember", {
        "agent_id": AGENT, "content": "Alice prefers green tea in the morning",
        "type": "semantic", "tags": ["preference"], "importance": 0.8,
    })
    second = await call(session, "remember", {
        "agent_id": AGENT, "content": "Alice's office is on the fourth floor of the Lyon building",
    })
    first_id, second_id = first["memory"]["id"], second["memory"]["id"]
    check(first["memory"]["type"] == "semantic", f"remember: {first}")

    batch = await call(session, "remember_batch", {
        "agent_id": AGENT,
        "memories": [{"content": "The deploy script lives in ops/deploy.sh"},
                     {"content": "Standup is at 9:30 every weekday", "tags": ["routine"]}],
    })
    check(len(batch["results"]) == 2, f"remember_batch: {batch}")

    recalled = await call(session, "recall", {"agent_id": AGENT, "query": "what tea does Alice like?", "limit": 3})
    check(recalled["results"] and recalled["results"][0]["id"] == first_id, f"recall: {recalled}")
    hit = recalled["results"][0]
    check(set(hit) <= {"id", "type", "content", "score", "occurred_at", "created_at", "tags"}
          and 0 < hit["score"] <= 1, f"recall hit is not compact: {hit}")
    check(len(json.dumps(hit)) < 300, f"compact hit is long: {hit}")
    full = await call(session, "recall", {"agent_id": AGENT, "query": "what tea does Alice like?", "limit": 1,
                                          "verbose": True})
    check(full["results"][0]["memory"]["id"] == first_id and "importance" in full["results"][0]["memory"],
          f"verbose recall: {full}")

    edge = await call(session, "associate", {
        "agent_id": AGENT, "from_id": first_id, "to_id": second_id, "relation": "about_alice", "weight": 0.9,
    })
    check(edge["from_id"] == first_id and edge["to_id"] == second_id, f"associate: {edge}")

    spread = await call(session, "spreading_activation", {"agent_id": AGENT, "seed_id": first_id, "depth": 2})
    check(any(r["memory"]["id"] == second_id for r in spread["results"]), f"spreading_activation: {spread}")

    history = await call(session, "memory_history", {"id": first_id, "agent_id": AGENT})
    check(history["id"] == first_id and isinstance(history["versions"], list), f"memory_history: {history}")

    stats = await call(session, "reflect", {"agent_id": AGENT})
    check(json.dumps(stats).count("semantic") >= 1, f"reflect: {stats}")

    run = await call(session, "consolidate", {"agent_id": AGENT})
    check("id" in run, f"consolidate: {run}")

    context = await call(session, "build_context", {"agent_id": AGENT, "query": "Alice", "context_budget": 200})
    check("Alice" in context["context"] and context["metadata"]["injected_count"] >= 1, f"build_context: {context}")

    turn = {"agent_id": AGENT, "user": "I prefer dark mode in every editor. How do I restart the worker?",
            "assistant": "1. Stop the worker.\n2. Run make restart."}
    extracted = await call(session, "extract_turn", turn)
    kinds = sorted(m["type"] for m in extracted["stored"])
    check(kinds == ["procedural", "semantic"], f"extract_turn: {extracted}")
    again = await call(session, "extract_turn", turn)
    check(sorted(m["id"] for m in again["stored"]) == sorted(m["id"] for m in extracted["stored"]),
          f"extract_turn again: {again}")

    forgotten = await call(session, "forget", {"agent_id": AGENT, "id": second_id})
    check(forgotten["forgotten"] == [second_id], f"forget: {forgotten}")

    # Projects: an isolated project's memory is recalled only inside the project.
    created = await call(session, "project_put", {
        "agent_id": AGENT, "project_id": "vault", "isolated": True, "session_id": "vault-session",
    })
    check(created["isolated"] is True and created["sessions"] == ["vault-session"], f"project_put: {created}")
    listed = await call(session, "project_list", {"agent_id": AGENT})
    check([p["project_id"] for p in listed["projects"]] == ["vault"], f"project_list: {listed}")
    hidden = await call(session, "remember", {
        "agent_id": AGENT, "content": "The vault combination is 4 8 15 16", "session_id": "vault-session",
    })
    check(hidden["memory"]["project_id"] == "vault", f"remember in a project session: {hidden}")
    outside = await call(session, "recall", {"agent_id": AGENT, "query": "vault combination"})
    check(all(r["id"] != hidden["memory"]["id"] for r in outside["results"]), f"recall outside: {outside}")
    inside = await call(session, "recall", {"agent_id": AGENT, "query": "vault combination", "project_id": "vault"})
    check(inside["results"][0]["id"] == hidden["memory"]["id"], f"recall inside: {inside}")

    # Memories as resources of the tools: list, get, update, delete.
    page = await call(session, "list_memories", {"agent_id": AGENT, "limit": 2})
    check(len(page["memories"]) == 2 and page["next_cursor"], f"list_memories: {page}")
    got_memory = await call(session, "get_memory", {"agent_id": AGENT, "id": first_id})
    check(got_memory["content"] == "Alice prefers green tea in the morning", f"get_memory: {got_memory}")
    updated = await call(session, "update_memory", {"agent_id": AGENT, "id": first_id,
                                                    "content": "Alice prefers green tea in the morning, with honey"})
    check(updated["content"].endswith("with honey") and updated["version"] == 2,
          f"update_memory: {updated}")
    gone = await call(session, "delete_memory", {"agent_id": AGENT, "id": hidden["memory"]["id"]})
    check(gone["deleted"] == hidden["memory"]["id"], f"delete_memory: {gone}")
    await expect_error(session, "get_memory", {"agent_id": AGENT, "id": hidden["memory"]["id"]}, "not_found", "id")

    # Memories as MCP resources of the connection's agent: listed, read, with history.
    if DEFAULT_AGENT:
        listed = await session.list_resources()
        uris = [str(r.uri) for r in listed.resources]
        check(f"mnemos://memories/{first_id}" in uris, f"resources/list: {uris}")
        check(all(r.name for r in listed.resources), f"resources/list names: {listed.resources}")
        read = await session.read_resource(f"mnemos://memories/{first_id}")
        body = json.loads(read.contents[0].text)
        check(body["id"] == first_id and body["content"].endswith("with honey"), f"resources/read: {body}")
        versions = json.loads((await session.read_resource(f"mnemos://memories/{first_id}/history")).contents[0].text)
        check(len(versions["versions"]) >= 1, f"resources/read history: {versions}")
        templates = await session.list_resource_templates()
        shapes = [attr(t, "uri_template", "uriTemplate") for t in attr(templates, "resource_templates", "resourceTemplates")]
        check("mnemos://memories/{id}" in shapes, f"resources/templates/list: {shapes}")
        try:
            await session.read_resource("mnemos://memories/0190f0f0-0000-7000-8000-000000000000")
        except _McpError as error:
            check(error.error.code == -32002, f"a missing resource: JSON-RPC code {error.error.code}")
        else:
            raise AssertionError("a missing resource was read")
        summary["resources"] = len(uris)
    else:
        try:
            await session.list_resources()
        except _McpError as error:
            check("agent_id" in error.error.message, f"resources without an agent: {error.error.message}")
        else:
            raise AssertionError("resources/list without a connection agent answered")

    # KV namespaces: shared by name between nodes, LRU-bounded.
    put = await call(session, "kv_put", {
        "agent_id": "planner", "namespace": "crew", "key": "task:1", "value": {"owner": None, "goal": "draft release notes"},
        "tags": ["open"],
    })
    check(put["created"] is True and put["evicted"] == [], f"kv_put: {put}")
    got = await call(session, "kv_get", {"namespace": "crew", "key": "task:1", "agent_id": "worker"})
    check(got["value"]["goal"] == "draft release notes" and got["written_by"] == "planner", f"kv_get: {got}")
    found = await call(session, "kv_search", {"namespace": "crew", "query": "release notes"})
    check([r["entry"]["key"] for r in found["results"]] == ["task:1"], f"kv_search: {found}")
    tagged = await call(session, "kv_list_by_tag", {"namespace": "crew", "tag": "open"})
    check([e["key"] for e in tagged["entries"]] == ["task:1"], f"kv_list_by_tag: {tagged}")
    kv_stats = await call(session, "kv_stats", {"namespace": "crew"})
    check(kv_stats["entries"] == 1 and kv_stats["hits"] == 1 and kv_stats["puts"] == 1, f"kv_stats: {kv_stats}")
    deleted = await call(session, "kv_delete", {"namespace": "crew", "key": "task:1", "agent_id": "worker"})
    check(deleted["deleted"] == "task:1", f"kv_delete: {deleted}")

    # Entities and facts: kept from the outbox, so poll (with a deadline) until they show.
    await call(session, "remember", {"agent_id": "mcp-facts", "content": "Ana lives in Lisbon.",
                                    "occurred_at": "2023-01-10T00:00:00Z"})
    await call(session, "remember", {"agent_id": "mcp-facts", "content": "Ana moved to Porto.",
                                    "occurred_at": "2023-06-01T00:00:00Z"})
    deadline = asyncio.get_running_loop().time() + 20
    while True:
        facts = await call(session, "facts", {"agent_id": "mcp-facts", "subject": "ana", "attribute": "lives_in"})
        if len(facts["facts"]) == 2 or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.1)
    values = [(f["value"], f["current"]) for f in facts["facts"]]
    check(values == [("Lisbon", False), ("Porto", True)], f"facts: {facts}")
    march = await call(session, "facts", {"agent_id": "mcp-facts", "subject": "Ana", "as_of": "March 2023"})
    check([f["value"] for f in march["facts"]] == ["Lisbon"], f"facts as of March 2023: {march}")
    listed_entities = await call(session, "entities", {"agent_id": "mcp-facts", "q": "ana"})
    check([e["name"] for e in listed_entities["entities"]] == ["Ana"], f"entities: {listed_entities}")
    ana = await call(session, "entity", {"agent_id": "mcp-facts", "id": listed_entities["entities"][0]["id"]})
    check(len(ana["memories"]) >= 1 and len(ana["facts"]) == 2, f"entity: {ana}")
    summary["errors_facts"] = await expect_invalid(session, "facts", {"agent_id": "mcp-facts", "as_of": "when pigs fly"}, "as_of")
    await call(session, "remember", {"agent_id": "mcp-facts", "content": "Ask Nat about the kiln."})
    deadline = asyncio.get_running_loop().time() + 20
    while True:
        nat = await call(session, "entities", {"agent_id": "mcp-facts", "q": "nat"})
        if nat["entities"] or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.1)
    check([e["name"] for e in nat["entities"]] == ["Nat"], f"entities: {nat}")
    ana_id = listed_entities["entities"][0]["id"]
    merged = await call(session, "entity_merge", {"agent_id": "mcp-facts", "id": nat["entities"][0]["id"], "into": ana_id})
    check(merged["merge"]["alias"] == "nat" and merged["merge"]["origin"] == "user", f"entity_merge: {merged}")
    split = await call(session, "entity_split", {"agent_id": "mcp-facts", "id": ana_id, "alias": "Nat"})
    check(split["merge"]["undone_at"] and split["entity"]["name"] == "Nat", f"entity_split: {split}")

    summary["calls"] = ["remember", "remember", "remember_batch", "recall", "associate", "spreading_activation",
                        "memory_history", "reflect", "consolidate", "build_context", "extract_turn",
                        "extract_turn", "forget", "project_put", "project_list", "remember", "recall", "recall",
                        "kv_put", "kv_get", "kv_search", "kv_list_by_tag", "kv_stats", "kv_delete",
                        "remember", "remember", "facts", "facts", "entities", "entity",
                        "remember", "entities", "entity_merge", "entity_split"]
    summary["errors"] = [
        await expect_invalid(session, "recall", {"agent_id": AGENT}, "query"),
        await expect_invalid(session, "remember", {"agent_id": AGENT, "content": 42}, "content"),
        await expect_invalid(session, "reflect", {"agent_id": AGENT, "surprise": True}, "surprise"),
        await expect_invalid(session, "extract_turn", {"agent_id": AGENT, "assistant": "ok"}, "user"),
        await expect_invalid(session, "kv_put", {"agent_id": AGENT, "namespace": "crew", "key": "k"}, "value"),
        await expect_invalid(session, "kv_stats", {"namespace": "bad name"}, "namespace"),
        await expect_invalid(session, "recall", {"agent_id": AGENT, "query": "tea", "min_score": 2}, "min_score"),
    ]
    try:
        result = await session.call_tool("no_such_tool", {})
    except _McpError as error:
        check(error.error.code == -32602, f"unknown tool: JSON-RPC code {error.error.code}")
    else:
        raise AssertionError(f"an unknown tool answered a result: {result}")
    return summary


async def main(argv):
    if len(argv) < 3 or argv[1] not in ("stdio", "http"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[1] == "stdio":
        params = StdioServerParameters(command=argv[2], args=argv[3:], env=dict(os.environ))
        transport = stdio_client(params)
    elif os.environ.get("MNEMOS_KEY"):
        # A server with API keys: every request carries Authorization: Bearer <key>.
        headers = {"Authorization": f"Bearer {os.environ['MNEMOS_KEY']}"}
        try:
            from mcp.shared._httpx_utils import create_mcp_http_client

            transport = _http_client(argv[2], http_client=create_mcp_http_client(headers=headers))
        except (ImportError, TypeError):  # pragma: no cover - mcp 1.x takes headers itself
            transport = _http_client(argv[2], headers=headers)
    else:
        transport = _http_client(argv[2])
    async with transport as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            summary = await exercise(session)
    summary["transport"] = argv[1]
    summary["ok"] = True
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv)))
    except BaseException as error:  # noqa: BLE001 - report everything, then fail
        if isinstance(error, SystemExit):
            raise
        traceback.print_exc()
        print(json.dumps({"ok": False, "error": f"{type(error).__name__}: {error}"}))
        sys.exit(1)
