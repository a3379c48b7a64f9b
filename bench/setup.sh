#!/usr/bin/env bash
# Creates bench/.venv with mem0 and sentence-transformers (torch, CPU) for
# bench/mem0_side_by_side.py. Not part of the test suite.
set -euo pipefail
cd "$(dirname "$0")"
python3 -m venv .venv
.venv/bin/pip install --quiet --upgrade pip
.venv/bin/pip install --quiet -r requirements.txt
.venv/bin/python -c 'import mem0, torch, sentence_transformers; print("mem0", mem0.__version__ if hasattr(mem0, "__version__") else "?", "torch", torch.__version__)'
