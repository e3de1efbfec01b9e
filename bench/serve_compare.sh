#!/usr/bin/env bash
# bench/serve_compare.sh — `duet serve` against llama-cpp-python's
# OpenAI-compatible server (llama_cpp.server) and, given its binary, against
# llama.cpp's own `llama-server -np N -cb` (N slots decoded in one batch), on
# the same GGUF file, threads and requests, and against `duet bench --batch`
# (what the server adds to the batching engine). First `duet bench --batch
# N` runs alone; then the servers run at once on 127.0.0.1 and take waves of
# concurrent streaming clients in turn (bench/serve_bench.py): round by
# round, a Duet wave, then each peer's, so all see the same machine state.
# Prints a table and keeps every JSON result under
# build/bench-results/serve-<time>/.
#
# llama-cpp-python (with its [server] extra) is installed only into the venv
# build/bench-venv, built from source once (about 15 minutes on 2 cores;
# bench/README.md). It answers one request at a time; its default of
# interrupting a running request when another arrives is turned off
# (--interrupt_requests False), so that every client gets its answer.
# llama-server is not built here: pass the binary from a llama.cpp checkout
# (bench/README.md: cmake --build build --target llama-server).
#
# Usage: bash bench/serve_compare.sh [PIPELINE.yaml] [--threads T] [--clients N]
#            [--rounds R] [--max-tokens M] [--duet PATH] [--no-llama]
#            [--llama-server PATH] [-- DUET_SET_ARGS...]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${BENCH_VENV:-$ROOT/build/bench-venv}"
source "$ROOT/bench/script_helpers.sh"
source "$ROOT/bench/llama_cpp_venv.sh"

usage() {
  cat <<EOF
Usage: bash bench/serve_compare.sh [PIPELINE.yaml] [options] [-- DUET_SET_ARGS...]

Streams the same concurrent requests through 'duet serve', llama-cpp-python's
server and (with --llama-server) llama.cpp's llama-server, alternately, and runs
'duet bench --batch N' on the same pipeline.

  PIPELINE.yaml        default: configs/smollm2-serve.yaml
  --threads T          threads for both engines (default 2; Duet gets
                       --set backend.options.threads=T)
  --clients N          concurrent streaming clients per wave (default 16;
                       at most the pipeline's batching.max_sequences)
  --rounds R           alternating rounds, one timed wave per engine each
                       (default 3; one untimed wave per engine first)
  --max-tokens M       tokens each request generates (default 64); the
                       model's end tokens are banned so that all do
  --duet PATH          the duet binary (default \$DUET_BIN or build/bin/duet)
  --no-llama           no llama-cpp-python install or server
  --llama-server PATH  also run llama.cpp's llama-server binary with -np N -cb
                       (N = --clients; -c N*512, so each slot holds 512 tokens)
  -h, --help           this help
  -- ARGS...           more arguments for 'duet serve' and 'duet bench'
                       (e.g. --set backend.plugin=reference; without a
                       --set backend.plugin=..., onednn is pinned)

Environment: BENCH_VENV (default build/bench-venv), LLAMA_CPP_PYTHON_VERSION
(default $LLAMA_CPP_PYTHON_VERSION), LLAMA_CPP_CMAKE_ARGS, LLAMA_CPP_CFLAGS
(see bench/README.md).
EOF
}

PIPELINE="$ROOT/configs/smollm2-serve.yaml"
THREADS=2
CLIENTS=16
ROUNDS=3
MAX_TOKENS=64
DUET="${DUET_BIN:-$ROOT/build/bin/duet}"
LLAMA=1
LLAMA_SERVER=""
DUET_EXTRA=()
while (($#)); do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --threads) (($# >= 2)) || die "$1 needs a value"; THREADS="$2"; shift 2 ;;
    --clients) (($# >= 2)) || die "$1 needs a value"; CLIENTS="$2"; shift 2 ;;
    --rounds) (($# >= 2)) || die "$1 needs a value"; ROUNDS="$2"; shift 2 ;;
    --max-tokens) (($# >= 2)) || die "$1 needs a value"; MAX_TOKENS="$2"; shift 2 ;;
    --duet) (($# >= 2)) || die "$1 needs a value"; DUET="$2"; shift 2 ;;
    --no-llama) LLAMA=0; shift ;;
    --llama-server) (($# >= 2)) || die "$1 needs a value"; LLAMA_SERVER="$2"; shift 2 ;;
    --threads=*|--clients=*|--rounds=*|--max-tokens=*|--duet=*|--llama-server=*) set -- "${1%%=*}" "${1#*=}" "${@:2}" ;;
    --) shift; DUET_EXTRA=("$@"); break ;;
    -*) die "unknown option '$1'; see --help" ;;
    *) PIPELINE="$1"; shift ;;
  esac
done
need_count --threads "$THREADS" 1
need_count --clients "$CLIENTS" 1
need_count --rounds "$ROUNDS" 1
need_count --max-tokens "$MAX_TOKENS" 1
[[ -f "$PIPELINE" ]] || die "pipeline '$PIPELINE' does not exist"
[[ -x "$DUET" ]] || die "no duet binary at '$DUET'; build it first (bash scripts/build.sh), or pass --duet PATH"
[[ -z "$LLAMA_SERVER" || -x "$LLAMA_SERVER" ]] ||
  die "--llama-server '$LLAMA_SERVER' is not an executable; build llama.cpp's llama-server (bench/README.md)"

# A CPU comparison: Duet runs on onednn unless the arguments pin a backend
# (the default pipeline lists [cuda, onednn, reference], whose options are
# per backend, so threads alone would not validate).
PIN=(--set backend.plugin=onednn)
for arg in "${DUET_EXTRA[@]}"; do [[ "$arg" == backend.plugin=* ]] && PIN=(); done
DUET_ARGS=("${PIN[@]}" --set "backend.options.threads=$THREADS" "${DUET_EXTRA[@]}")
"$DUET" validate -q "$PIPELINE" "${DUET_ARGS[@]}" >/dev/null || die "'duet validate $PIPELINE' fails with these settings"
((LLAMA)) && ensure_llama_cpp_python server

RUN_DIR="$ROOT/build/bench-results/serve-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$RUN_DIR"
cut -d' ' -f1-3 /proc/loadavg >"$RUN_DIR/loadavg-start" 2>/dev/null || true

# duet bench --batch first, alone; its JSON also names the model file.
echo "duet bench --batch $CLIENTS -p 32 -n $MAX_TOKENS" >&2
"$DUET" bench "$PIPELINE" --batch "$CLIENTS" -p 32 -n "$MAX_TOKENS" -r 3 -o json "${DUET_ARGS[@]}" \
  >"$RUN_DIR/duet-bench.json" || die "duet bench --batch $CLIENTS failed"
MODEL_PATH=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["model"])' "$RUN_DIR/duet-bench.json")
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# duet serve on a port of its own choosing, read from its first lines.
: >"$RUN_DIR/duet-serve.log"
"$DUET" serve "$PIPELINE" --port 0 --max-queue "$CLIENTS" "${DUET_ARGS[@]}" 2>"$RUN_DIR/duet-serve.log" &
PIDS+=($!)
DUET_URL=""
for _ in $(seq 600); do
  port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$RUN_DIR/duet-serve.log" | head -1)
  [[ -n "$port" ]] && { DUET_URL="http://127.0.0.1:$port"; break; }
  kill -0 "${PIDS[0]}" 2>/dev/null || { cat "$RUN_DIR/duet-serve.log" >&2; die "duet serve exited"; }
  sleep 0.1
done
[[ -n "$DUET_URL" ]] || die "duet serve did not start within 60 s; see $RUN_DIR/duet-serve.log"
MODEL=$(curl -s "$DUET_URL/v1/models" | python3 -c 'import json, sys; print(json.load(sys.stdin)["data"][0]["id"])')
# The model's end tokens (eos, eot and the chat end tokens Duet also stops
# on), banned in every request so that all answers run to max_tokens.
BANS=()
ends=$("$DUET" inspect "$MODEL_PATH" | sed -n 's/^ *\(eos\|eot\) token *\([0-9]*\).*/\2/p')
for text in "<|im_end|>" "<|endoftext|>"; do  # a control token only where the text is one token
  ends+=" $("$DUET" tokenize "$MODEL_PATH" --prompt "$text" --parse-special --no-bos --ids |
    python3 -c 'import json, sys; ids = json.load(sys.stdin); print(ids[0] if len(ids) == 1 else "")')"
done
for t in $ends; do
  [[ " ${BANS[*]} " == *" $t "* ]] || BANS+=(--ban-token "$t")
done
((${#BANS[@]})) || die "could not read the model's end tokens with 'duet inspect'"

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# await_server NAME URL LOG: waits until URL/v1/models answers, while the
# last started process lives.
await_server() {
  local pid=${PIDS[-1]}
  for _ in $(seq 600); do
    curl -sf "$2/v1/models" >/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$3" >&2; die "$1 exited"; }
    sleep 0.1
  done
  die "$1 did not start within 60 s; see $3"
}
LLAMA_URL=""
if ((LLAMA)); then
  port=$(free_port)
  "$PY" -m llama_cpp.server --model "$MODEL_PATH" --host 127.0.0.1 --port "$port" \
    --n_threads "$THREADS" --n_threads_batch "$THREADS" --n_ctx 2048 --verbose False \
    --interrupt_requests False >"$RUN_DIR/llama-cpp-python.log" 2>&1 &
  PIDS+=($!)
  LLAMA_URL="http://127.0.0.1:$port"
  await_server llama_cpp.server "$LLAMA_URL" "$RUN_DIR/llama-cpp-python.log"
fi
SERVER_URL=""
if [[ -n "$LLAMA_SERVER" ]]; then
  port=$(free_port)
  "$LLAMA_SERVER" -m "$MODEL_PATH" --host 127.0.0.1 --port "$port" -t "$THREADS" -tb "$THREADS" \
    -np "$CLIENTS" -cb -c $((CLIENTS * 512)) --no-webui >"$RUN_DIR/llama-server.log" 2>&1 &
  PIDS+=($!)
  SERVER_URL="http://127.0.0.1:$port"
  await_server llama-server "$SERVER_URL" "$RUN_DIR/llama-server.log"
  "$LLAMA_SERVER" --version >"$RUN_DIR/llama-server-version" 2>&1 || true
fi

echo "duet serve ($DUET_URL) vs llama_cpp.server (${LLAMA_URL:-not run}) and llama-server" \
  "(${SERVER_URL:-not run}): $MODEL, $THREADS threads," \
  "$CLIENTS clients, $MAX_TOKENS tokens each, $ROUNDS rounds -> $RUN_DIR" >&2
wave() {  # wave URL LABEL ROUND WARMUP [SERVE_BENCH_ARGS...]
  python3 "$ROOT/bench/serve_bench.py" "$1" --clients "$CLIENTS" --waves 1 --warmup "$4" \
    --max-tokens "$MAX_TOKENS" --label "$2" --first-index $(( $3 * 4 * CLIENTS )) "${BANS[@]}" "${@:5}" \
    >"$RUN_DIR/$2-$3.json" || die "serve_bench.py failed against $2 ($1)"
}
for ((round = 1; round <= ROUNDS; ++round)); do
  warm=$(( round == 1 ? 1 : 0 ))
  echo "round $round/$ROUNDS: duet serve" >&2
  wave "$DUET_URL" duet "$round" "$warm"
  if ((LLAMA)); then
    echo "round $round/$ROUNDS: llama_cpp.server" >&2
    wave "$LLAMA_URL" llama "$round" "$warm"
  fi
  if [[ -n "$SERVER_URL" ]]; then
    echo "round $round/$ROUNDS: llama-server" >&2
    wave "$SERVER_URL" llama-server "$round" "$warm" --bias-pairs  # b4747 reads no other form
  fi
done
cleanup
PIDS=()

cut -d' ' -f1-3 /proc/loadavg >"$RUN_DIR/loadavg-end" 2>/dev/null || true

python3 - "$RUN_DIR" "$ROUNDS" "$LLAMA" "${SERVER_URL:+1}" <<'EOF'
import json, math, os, statistics, sys
run_dir, rounds, llama, server = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1"

def engine(label):
    runs = [json.load(open(os.path.join(run_dir, "%s-%d.json" % (label, r)))) for r in range(1, rounds + 1)]
    waves = [w for r in runs for w in r["waves"]]
    ttft = sorted(t for w in waves for t in w["ttft_s"])
    rank = lambda q: ttft[max(0, math.ceil(q * len(ttft)) - 1)]
    steady = [w["steady_tokens_per_second"] for w in waves]
    agg = [w["aggregate_tokens_per_second"] for w in waves]
    return {"aggregate_tokens_per_second": statistics.median(agg),
            "aggregate_stdev": statistics.stdev(agg) if len(agg) > 1 else 0.0,
            "steady_tokens_per_second": statistics.median(steady) if None not in steady else None,
            "ttft_p50_s": rank(0.5), "ttft_p99_s": rank(0.99), "waves": len(waves)}

summary = {"duet": engine("duet")}
peers = ([("llama_cpp.server", "llama_cpp_python", "llama")] if llama else []) + \
        ([("llama-server", "llama_server", "llama-server")] if server else [])
for _, key, label in peers:
    summary[key] = engine(label)
row = json.load(open(os.path.join(run_dir, "duet-bench.json")))["results"][0]
summary["duet_bench_aggregate_tokens_per_second"] = row["aggregate_tokens_per_second_median"]
d = summary["duet"]
if d["steady_tokens_per_second"] is not None:
    summary["serve_steady_vs_bench"] = d["steady_tokens_per_second"] / summary["duet_bench_aggregate_tokens_per_second"]
for _, key, _ in peers:
    summary["duet_vs_%s_aggregate" % key] = d["aggregate_tokens_per_second"] / summary[key]["aggregate_tokens_per_second"]
json.dump(summary, open(os.path.join(run_dir, "summary.json"), "w"), indent=1)

fmt = lambda v, spec: "-" if v is None else format(v, spec)
print("| engine | agg t/s | stddev | steady t/s | TTFT p50 s | TTFT p99 s | waves |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for name, e in [("duet serve", d)] + [(name, summary[key]) for name, key, _ in peers]:
    print("| %s | %s | %s | %s | %s | %s | %d |" % (name, fmt(e["aggregate_tokens_per_second"], ".1f"),
          fmt(e["aggregate_stdev"], ".1f"), fmt(e["steady_tokens_per_second"], ".1f"),
          fmt(e["ttft_p50_s"], ".2f"), fmt(e["ttft_p99_s"], ".2f"), e["waves"]))
print("| duet bench --batch | %.1f (full-decode steps) | | | | | |" % summary["duet_bench_aggregate_tokens_per_second"])
if "serve_steady_vs_bench" in summary:
    print("\nduet serve steady / duet bench: %.2f" % summary["serve_steady_vs_bench"])
for name, key, _ in peers:
    print("duet serve / %s (aggregate): %.2fx" % (name, summary["duet_vs_%s_aggregate" % key]))
print("results: %s" % run_dir)
EOF
