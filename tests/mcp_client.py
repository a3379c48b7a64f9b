#!/usr/bin/env python3
"""MCP conformance check of mnemos with the official MCP Python SDK as the client.

    python3 tests/mcp_client.py stdio <command> [args...]   # env: inherited (MNEMOS__DATA_DIR, ...)
    python3 tests/mcp_client.py http <url>                   # e.g. http://127.0.0.1:8077/mcp
                                                             # env MNEMOS_KEY: send it as the bearer key

Initialises a session, lists the tools (all nineteen, each with an input schema that has
`required` unless every argument is optional), calls every tool with valid arguments, then makes bad calls and checks
that they fail with an MCP error whose data carries `invalid_argument` and the field.
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
}
AGENT = "mcp-client"


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
    result = await session.call_tool(name, arguments)
    check(not attr(result, "is_error", "isError"), f"{name} returned an error result: {result}")
    structured = attr(result, "structured_content", "structuredContent")
    text = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    check(text, f"{name}: no text content")
    check(json.loads(text[0]) == structured, f"{name}: text content differs from structured content")
    check(isinstance(structured, dict), f"{name}: structured content is not an object: {structured}")
    return structured


async def expect_invalid(session, name, arguments, field):
    try:
        result = await session.call_tool(name, arguments)
    except _McpError as error:
        data = error.error.data or {}
        check(error.error.code == -32602, f"{name}: JSON-RPC code {error.error.code}, want -32602")
        check(data.get("code") == "invalid_argument", f"{name}: data {data}")
        check(data.get("field") == field, f"{name}: field {data.get('field')!r}, want {field!r}")
        check(field in error.error.message, f"{name}: message does not name {field}: {error.error.message}")
        return {"tool": name, "code": error.error.code, "data": data}
    raise AssertionError(f"{name} with bad arguments succeeded: {result}")


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
        optional = {"forget", "consolidate", "reflect", "project_list"}
        check(tool.name in optional or schema.get("required"), f"{tool.name}: schema has no required fields")
        check("$ref" not in json.dumps(schema), f"{tool.name}: schema has a $ref")
        check(tool.description and len(tool.description) > 40, f"{tool.name}: no useful description")
    summary["tools"] = sorted(names)

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
    check(recalled["results"] and recalled["results"][0]["memory"]["id"] == first_id, f"recall: {recalled}")

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
    check(all(r["memory"]["id"] != hidden["memory"]["id"] for r in outside["results"]), f"recall outside: {outside}")
    inside = await call(session, "recall", {"agent_id": AGENT, "query": "vault combination", "project_id": "vault"})
    check(inside["results"][0]["memory"]["id"] == hidden["memory"]["id"], f"recall inside: {inside}")

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

    summary["calls"] = ["remember", "remember", "remember_batch", "recall", "associate", "spreading_activation",
                        "memory_history", "reflect", "consolidate", "build_context", "extract_turn",
                        "extract_turn", "forget", "project_put", "project_list", "remember", "recall", "recall",
                        "kv_put", "kv_get", "kv_search", "kv_list_by_tag", "kv_stats", "kv_delete"]
    summary["errors"] = [
        await expect_invalid(session, "recall", {"agent_id": AGENT}, "query"),
        await expect_invalid(session, "remember", {"agent_id": AGENT, "content": 42}, "content"),
        await expect_invalid(session, "reflect", {"agent_id": AGENT, "surprise": True}, "surprise"),
        await expect_invalid(session, "extract_turn", {"agent_id": AGENT, "assistant": "ok"}, "user"),
        await expect_invalid(session, "kv_put", {"agent_id": AGENT, "namespace": "crew", "key": "k"}, "value"),
        await expect_invalid(session, "kv_stats", {"namespace": "bad name"}, "namespace"),
    ]
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
