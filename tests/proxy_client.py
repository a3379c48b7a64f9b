"""Drive the mnemos memory proxy with the official OpenAI Python SDK.

Called by tests/api/proxy.rs with:
  MNEMOS_URL    the mnemos server (http://127.0.0.1:<port>)
  UPSTREAM_URL  the OpenAI-compatible server behind it (…/v1)
  AGENT         an agent that has memories about the question
  EMPTY_AGENT   an agent with no memory
  SESSION       the session the chat exchanges belong to
  RESPONSES_SESSION  the session the Responses API exchanges belong to
  EMBED_URL     an OpenAI-compatible server of embeddings (…/v1) that mnemos's
                proxy.embeddings_url names, or empty to skip the embeddings checks

Prints one JSON summary on stdout; exits non-zero on the first failed check.
"""

import json
import os
import sys

import urllib.error
import urllib.request
import openai

MNEMOS = os.environ["MNEMOS_URL"]
UPSTREAM = os.environ["UPSTREAM_URL"]
AGENT = os.environ["AGENT"]
EMPTY_AGENT = os.environ["EMPTY_AGENT"]
SESSION = os.environ["SESSION"]
RESPONSES_SESSION = os.environ["RESPONSES_SESSION"]
EMBED_URL = os.environ.get("EMBED_URL", "")
QUESTION = "Which database does the billing service use, and what port does it listen on?"
summary = {"ok": False, "checks": []}


def check(name, condition, detail=""):
    summary["checks"].append(name)
    if not condition:
        summary["failed"] = f"{name}: {detail}"
        print(json.dumps(summary))
        sys.exit(1)


def client(agent, session=None):
    headers = {"X-Mnemos-Agent-Id": agent}
    if session:
        headers["X-Mnemos-Session-Id"] = session
    return openai.OpenAI(
        base_url=f"{MNEMOS}/v1", api_key="unused", default_headers=headers, max_retries=0, timeout=120
    )


def ask(agent, session=None, stream=False):
    messages = [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": QUESTION},
    ]
    raw = client(agent, session).chat.completions.with_raw_response.create(
        model="smollm2", messages=messages, max_tokens=24, temperature=0, stream=stream,
        **({"stream_options": {"include_usage": True}} if stream else {}),
    )
    return raw.headers, raw.parse()


# 1. Plain completion, with memory.
headers, completion = ask(AGENT, SESSION)
injected = int(headers["x-mnemos-memories-injected"])
memory_tokens = int(headers["x-mnemos-memory-tokens"])
budget = int(headers["x-mnemos-memory-budget"])
check("plain: memories injected", injected >= 1, dict(headers))
check("plain: within budget", 0 < memory_tokens <= budget, f"{memory_tokens} > {budget}")
check("plain: agent echoed", headers["x-mnemos-agent-id"] == AGENT)
answer = completion.choices[0].message.content
check("plain: an answer", isinstance(answer, str) and answer.strip() != "", repr(answer))
with_memory_prompt = completion.usage.prompt_tokens
summary["plain"] = {"injected": injected, "memory_tokens": memory_tokens, "budget": budget,
                    "prompt_tokens": with_memory_prompt, "answer": answer}

# 2. The same question for an agent without memories: the upstream saw a shorter prompt,
#    longer by about what the proxy says it injected.
headers, bare = ask(EMPTY_AGENT)
check("empty agent: nothing injected", headers["x-mnemos-memories-injected"] == "0", dict(headers))
grown = with_memory_prompt - bare.usage.prompt_tokens
summary["prompt_growth"] = grown
check("the upstream received the memory block", grown > 0, f"{with_memory_prompt} vs {bare.usage.prompt_tokens}")
check("memory tokens match the upstream's count within 25%",
      abs(grown - memory_tokens) <= max(4, 0.25 * grown), f"upstream +{grown}, header {memory_tokens}")

# 3. Streaming: SSE chunks come through unchanged, headers included.
headers, stream = ask(AGENT, SESSION, stream=True)
check("stream: memories injected", int(headers["x-mnemos-memories-injected"]) >= 1, dict(headers))
check("stream: event stream", headers["content-type"].startswith("text/event-stream"), headers["content-type"])
parts, chunks, usage = [], 0, None
for chunk in stream:
    chunks += 1
    if chunk.choices and chunk.choices[0].delta.content:
        parts.append(chunk.choices[0].delta.content)
    if chunk.usage:
        usage = chunk.usage
streamed = "".join(parts)
check("stream: several chunks and text", chunks > 1 and streamed.strip() != "", f"{chunks} chunks, {streamed!r}")
summary["stream"] = {"chunks": chunks, "answer": streamed, "prompt_tokens": usage.prompt_tokens if usage else None}

# 4. An upstream error passes through with its status and body.
bad = {"model": "smollm2", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8,
       "response_format": {"type": "no-such-format"}}
request = urllib.request.Request(f"{UPSTREAM}/chat/completions", data=json.dumps(bad).encode(),
                                 headers={"Content-Type": "application/json"})
try:
    urllib.request.urlopen(request, timeout=60)
    direct_status, direct_body = 200, None
except urllib.error.HTTPError as error:
    direct_status, direct_body = error.code, json.loads(error.read())
check("the upstream rejects the bad request", direct_status >= 400, str(direct_status))
try:
    client(AGENT).chat.completions.create(**bad)
    check("upstream error raised", False, "no error")
except openai.APIStatusError as error:
    check("upstream status passes through", error.status_code == direct_status,
          f"{error.status_code} vs {direct_status}")
    check("upstream body passes through", error.response.json() == direct_body, error.response.text)
summary["upstream_error"] = direct_status

# 5. A request naming no agent is refused by mnemos, in OpenAI's envelope (type,
#    param) and the contract's (code, field) at once.
anonymous = openai.OpenAI(base_url=f"{MNEMOS}/v1", api_key="unused", max_retries=0, timeout=120)
try:
    anonymous.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "hi"}])
    check("missing agent refused", False, "no error")
except openai.BadRequestError as error:
    body = error.response.json()
    check("missing agent: invalid_argument", body["error"]["code"] == "invalid_argument", error.response.text)
    check("missing agent: field", body["error"]["field"] == "X-Mnemos-Agent-Id", error.response.text)
    check("missing agent: OpenAI type", error.type == "invalid_request_error", error.response.text)
    check("missing agent: OpenAI param", error.param == "X-Mnemos-Agent-Id", error.response.text)
    check("missing agent: OpenAI code", error.code == "invalid_argument", error.response.text)
    check("missing agent: message", "X-Mnemos-Agent-Id" in error.message, error.message)

# 5b. A client that sets only base_url, api_key and `user`: the user is the agent.
raw = anonymous.chat.completions.with_raw_response.create(
    model="smollm2", messages=[{"role": "user", "content": QUESTION}], max_tokens=16, temperature=0,
    user=AGENT)
check("user names the agent", raw.headers["x-mnemos-agent-id"] == AGENT, dict(raw.headers))
check("user: memories injected", int(raw.headers["x-mnemos-memories-injected"]) >= 1, dict(raw.headers))

# 6. The model list passes through.
models = client(AGENT).models.list()
check("models listed", len(models.data) >= 1)

# 7. The Responses API, plain: the memory goes into the instructions.
raw = client(AGENT, RESPONSES_SESSION).responses.with_raw_response.create(
    model="smollm2", instructions="You are a terse assistant.", input=QUESTION,
    max_output_tokens=24, temperature=0)
check("responses: memories injected", int(raw.headers["x-mnemos-memories-injected"]) >= 1, dict(raw.headers))
response = raw.parse()
check("responses: an answer", response.output_text.strip() != "", repr(response.output_text))
summary["responses"] = {"answer": response.output_text,
                        "input_tokens": response.usage.input_tokens if response.usage else None}

# 8. The Responses API, streaming: events come through, the last one completes it.
raw = client(AGENT, RESPONSES_SESSION).responses.with_raw_response.create(
    model="smollm2", input=[{"role": "user", "content": QUESTION}],
    max_output_tokens=24, temperature=0, stream=True)
check("responses stream: memories injected", int(raw.headers["x-mnemos-memories-injected"]) >= 1,
      dict(raw.headers))
kinds, deltas = [], []
for event in raw.parse():
    kinds.append(event.type)
    if event.type == "response.output_text.delta":
        deltas.append(event.delta)
streamed = "".join(deltas)
check("responses stream: text deltas", streamed.strip() != "", f"{kinds}")
check("responses stream: completed", kinds[-1] == "response.completed", f"{kinds}")
summary["responses_stream"] = {"events": len(kinds), "answer": streamed}

# 9. Embeddings pass through unchanged (the same vectors as the server's own answer).
if EMBED_URL:
    texts = ["The billing service uses PostgreSQL.", "Tea is brewed with hot water."]
    through = client(AGENT).embeddings.create(model="smollm2", input=texts)
    direct = openai.OpenAI(base_url=EMBED_URL, api_key="unused", max_retries=0).embeddings.create(
        model="smollm2", input=texts)
    check("embeddings: one vector per text", len(through.data) == 2, str(len(through.data)))
    check("embeddings: same vectors as the server's own",
          [d.embedding for d in through.data] == [d.embedding for d in direct.data])
    summary["embeddings"] = {"dimensions": len(through.data[0].embedding)}

summary["ok"] = True
print(json.dumps(summary))
