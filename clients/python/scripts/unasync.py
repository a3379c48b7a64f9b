#!/usr/bin/env python3
"""Generate the sync client (``_sync.py``) from the async one (``_async.py``).

    python clients/python/scripts/unasync.py          # rewrite _sync.py
    python clients/python/scripts/unasync.py --check  # exit 1 if _sync.py is stale

The transformation is textual and small: ``async``/``await`` go, ``Async`` prefixes
go (``AsyncMnemos`` -> ``Mnemos``, ``httpx.AsyncClient`` -> ``httpx.Client``,
``AsyncIterator`` -> ``Iterator``), ``asyncio.sleep`` becomes ``time.sleep`` and
``aclose``/``__aenter__``/``__aexit__`` their sync names.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "mnemos_client"
SOURCE = PACKAGE / "_async.py"
TARGET = PACKAGE / "_sync.py"

HEADER = (
    "# Generated from _async.py by scripts/unasync.py: do not edit by hand.\n"
    "# Edit _async.py and run `python clients/python/scripts/unasync.py`.\n"
)

RULES = [
    (r"^import asyncio$", "import time"),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bawait ", ""),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\baclose\b", "close"),
    (r"\bAsync([A-Z_]\w*)", r"\1"),
    (r"\b_AsyncResource\b", "_Resource"),
    (r"The async client", "The sync client"),
    (r"Async client of", "Sync client of"),
]


def generate(source: str) -> str:
    """The sync module's text from the async module's."""
    out = []
    for line in source.splitlines(keepends=True):
        for pattern, replacement in RULES:
            line = re.sub(pattern, replacement, line)
        out.append(line)
    return HEADER + "".join(out)


def main(argv: list[str]) -> int:
    generated = generate(SOURCE.read_text(encoding="utf-8"))
    if "--check" in argv:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != generated:
            print(f"{TARGET} is stale: run python {Path(__file__).as_posix()}", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(generated, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
