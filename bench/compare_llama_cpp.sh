#!/usr/bin/env bash
# bench/compare_llama_cpp.sh — Duet against llama.cpp on the same GGUF file,
# threads and test sizes, alternating the two engines in one run so that
# both see the same machine state: for each round, duet pp -> llama.cpp pp ->
# duet tg -> llama.cpp tg. Prints the medians, the ratios Duet / llama.cpp for
# pp and tg, and each engine's peak RSS; keeps every JSON result under
# build/bench-results/<time>/.
#
# llama.cpp runs through the PyPI package llama-cpp-python, built from source
# with -DGGML_NATIVE=ON (so it uses this CPU's AVX2 / AVX-512 / VNNI like a
# native llama.cpp build) into the venv build/bench-venv. The first run builds
# it: about 15 minutes on 2 cores; later runs reuse the venv. With
# --llama-bench PATH the peer is a native llama-bench binary instead (a
# llama.cpp or ik_llama.cpp build of your own; bench/README.md), run through
# bench/llama_bench_json.py, and no venv is needed.
#
# Usage: bash bench/compare_llama_cpp.sh [PIPELINE.yaml] [--threads T] [--rounds R]
#            [-p N] [-n N] [--depth D] [-r REPS] [--duet PATH]
#            [--llama-bench PATH [--llama-bench-args "ARGS"]] [-- DUET_BENCH_ARGS...]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${BENCH_VENV:-$ROOT/build/bench-venv}"
source "$ROOT/bench/script_helpers.sh"
source "$ROOT/bench/llama_cpp_venv.sh"

usage() {
  cat <<EOF
Usage: bash bench/compare_llama_cpp.sh [PIPELINE.yaml] [options] [-- DUET_BENCH_ARGS...]

Runs 'duet bench' and llama.cpp (llama-cpp-python) alternately on the
pipeline's model and prints the ratios Duet / llama.cpp.

  PIPELINE.yaml        default: configs/smollm2-onednn.yaml if it exists,
                       else configs/smollm2.yaml
  --threads T          threads for both engines (default 2); passed to Duet as
                       --set backend.options.threads=T when its backend takes it
  --rounds R           alternating rounds (default 3)
  -p, --prompt-tokens N  pp test size (default 512)
  -n, --gen-tokens N   tg test size (default 128)
  --depth D            tokens cached before the tg test (default 0)
  -r, --repetitions N  timed runs per engine, test and round (default 1; each
                       after one warm-up run)
  --duet PATH          the duet binary (default \$DUET_BIN or build/bin/duet)
  --llama-bench PATH   the peer is this llama-bench binary (llama.cpp's or
                       ik_llama.cpp's) instead of llama-cpp-python; --depth
                       must be 0 (older llama-bench builds have no depth)
  --llama-bench-args "ARGS"  more arguments for it, split on spaces (e.g.
                       "-rtr 1" for ik_llama.cpp's run-time repacking)
  --install-only       only build llama-cpp-python into the venv, then exit
  -h, --help           this help
  -- ARGS...           extra arguments for 'duet bench' (e.g. --set k=v)

Environment: BENCH_VENV (default build/bench-venv), LLAMA_CPP_PYTHON_VERSION
(default $LLAMA_CPP_PYTHON_VERSION), LLAMA_CPP_CMAKE_ARGS (default
-DGGML_NATIVE=ON -DLLAVA_BUILD=OFF), LLAMA_CPP_CFLAGS (default
-mno-amx-tile -mno-amx-int8 -mno-amx-bf16). A change of these rebuilds it.
EOF
}

PIPELINE=""
THREADS=2
ROUNDS=3
PP=512
TG=128
DEPTH=0
REPS=1
DUET="${DUET_BIN:-$ROOT/build/bin/duet}"
DUET_EXTRA=()
INSTALL_ONLY=0
LLAMA_BENCH=""
LLAMA_BENCH_ARGS=
while (($#)); do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --threads|-t) (($# >= 2)) || die "$1 needs a value"; THREADS="$2"; shift 2 ;;
    --rounds) (($# >= 2)) || die "$1 needs a value"; ROUNDS="$2"; shift 2 ;;
    -p|--prompt-tokens) (($# >= 2)) || die "$1 needs a value"; PP="$2"; shift 2 ;;
    -n|--gen-tokens) (($# >= 2)) || die "$1 needs a value"; TG="$2"; shift 2 ;;
    --depth) (($# >= 2)) || die "$1 needs a value"; DEPTH="$2"; shift 2 ;;
    -r|--repetitions) (($# >= 2)) || die "$1 needs a value"; REPS="$2"; shift 2 ;;
    --install-only) INSTALL_ONLY=1; shift ;;
    --duet) (($# >= 2)) || die "$1 needs a value"; DUET="$2"; shift 2 ;;
    --llama-bench) (($# >= 2)) || die "$1 needs a value"; LLAMA_BENCH="$2"; shift 2 ;;
    --llama-bench-args) (($# >= 2)) || die "$1 needs a value"; LLAMA_BENCH_ARGS="$2"; shift 2 ;;
    --threads=*|--rounds=*|--prompt-tokens=*|--gen-tokens=*|--depth=*|--repetitions=*|--duet=*|--llama-bench=*|--llama-bench-args=*)
      set -- "${1%%=*}" "${1#*=}" "${@:2}" ;;
    --) shift; DUET_EXTRA=("$@"); break ;;
    -*) die "unknown option '$1'; see --help" ;;
    *) [[ -z "$PIPELINE" ]] || die "more than one pipeline given ('$PIPELINE', '$1')"; PIPELINE="$1"; shift ;;
  esac
done
need_count --threads "$THREADS" 1
need_count --rounds "$ROUNDS" 1
need_count --prompt-tokens "$PP" 1
need_count --gen-tokens "$TG" 1
need_count --depth "$DEPTH" 0
need_count --repetitions "$REPS" 1

if [[ -z "$PIPELINE" ]]; then
  PIPELINE="$ROOT/configs/smollm2.yaml"
  [[ -f "$ROOT/configs/smollm2-onednn.yaml" ]] && PIPELINE="$ROOT/configs/smollm2-onednn.yaml"
fi
((INSTALL_ONLY)) || [[ -f "$PIPELINE" ]] || die "pipeline '$PIPELINE' does not exist"
((INSTALL_ONLY)) || [[ -x "$DUET" ]] || die "no duet binary at '$DUET'; build it first: cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build, or pass --duet PATH"
command -v python3 >/dev/null || die "python3 is needed (for the venv and the report)"
if [[ -n "$LLAMA_BENCH" ]]; then
  [[ -x "$LLAMA_BENCH" ]] || die "--llama-bench '$LLAMA_BENCH' is not an executable; build llama-bench (bench/README.md)"
  ((DEPTH == 0)) || die "--depth $DEPTH with --llama-bench: older llama-bench builds cannot cache tokens first; use --depth 0 or llama-cpp-python"
  ((INSTALL_ONLY)) && die "--install-only builds llama-cpp-python, which --llama-bench does not use"
fi

# --- llama-cpp-python, built once into the venv --------------------------
[[ -n "$LLAMA_BENCH" ]] || ensure_llama_cpp_python
if ((INSTALL_ONLY)); then
  "$VENV/bin/python" -c 'import llama_cpp; print(llama_cpp.__version__, llama_cpp.llama_print_system_info().decode())'
  exit 0
fi

# --- Duet's settings ---------------------------------------------------------
mkdir -p "$ROOT/build/bench-logs"  # with --llama-bench, nothing above has made it
DUET_SET=()
if "$DUET" validate -q "$PIPELINE" --set "backend.options.threads=$THREADS" "${DUET_EXTRA[@]}" \
    >/dev/null 2>"$ROOT/build/bench-logs/validate.err"; then
  DUET_SET=(--set "backend.options.threads=$THREADS")
elif grep -q "threads" "$ROOT/build/bench-logs/validate.err" &&
     "$DUET" validate -q "$PIPELINE" "${DUET_EXTRA[@]}" >/dev/null 2>&1; then
  echo "note: the pipeline's backend takes no threads option; Duet runs it as it is (llama.cpp gets $THREADS threads)" >&2
else
  cat "$ROOT/build/bench-logs/validate.err" >&2
  die "'duet validate $PIPELINE' fails; fix the pipeline first"
fi

RUN_DIR="$ROOT/build/bench-results/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$RUN_DIR"

duet_bench() {  # duet_bench KIND OUT
  "$DUET" bench "$PIPELINE" --tests "$1" -p "$PP" -n "$TG" --depth "$DEPTH" -r "$REPS" --warmup 1 -o json \
    "${DUET_SET[@]}" "${DUET_EXTRA[@]}" >"$2" || die "duet bench failed ($1); see above"
}

llama_bench() {  # llama_bench KIND OUT
  if [[ -n "$LLAMA_BENCH" ]]; then
    local extra
    read -r -a extra <<<"$LLAMA_BENCH_ARGS"
    python3 "$ROOT/bench/llama_bench_json.py" "$LLAMA_BENCH" "$MODEL" --threads "$THREADS" --tests "$1" \
      -p "$PP" -n "$TG" -r "$REPS" -- "${extra[@]}" >"$2" || die "llama-bench failed ($1); see above"
    return
  fi
  "$PY" "$ROOT/bench/llama_cpp_bench.py" "$MODEL" --threads "$THREADS" --tests "$1" -p "$PP" -n "$TG" \
    --depth "$DEPTH" -r "$REPS" --warmup 1 --n-ctx "$N_CTX" >"$2" || die "llama_cpp_bench.py failed ($1); see above"
}

json_field() {  # json_field FILE KEY
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

echo "Duet $PIPELINE vs llama.cpp: pp$PP, tg$TG$( ((DEPTH)) && echo "@d$DEPTH"), $THREADS threads, $ROUNDS rounds -> $RUN_DIR" >&2
cut -d' ' -f1-3 /proc/loadavg >"$RUN_DIR/loadavg-start" 2>/dev/null || true
MODEL=""
for ((round = 1; round <= ROUNDS; ++round)); do
  echo "round $round/$ROUNDS: duet pp" >&2
  duet_bench pp "$RUN_DIR/duet-pp-$round.json"
  if [[ -z "$MODEL" ]]; then
    MODEL="$(json_field "$RUN_DIR/duet-pp-1.json" model)"
    # The same KV-cache size as Duet's (llama.cpp allocates n_ctx up front).
    N_CTX="$(json_field "$RUN_DIR/duet-pp-1.json" kv_cache_capacity_tokens)"
  fi
  echo "round $round/$ROUNDS: llama.cpp pp" >&2
  llama_bench pp "$RUN_DIR/llama-pp-$round.json"
  echo "round $round/$ROUNDS: duet tg" >&2
  duet_bench tg "$RUN_DIR/duet-tg-$round.json"
  echo "round $round/$ROUNDS: llama.cpp tg" >&2
  llama_bench tg "$RUN_DIR/llama-tg-$round.json"
done

cut -d' ' -f1-3 /proc/loadavg >"$RUN_DIR/loadavg-end" 2>/dev/null || true

echo >&2
python3 "$ROOT/bench/compare_report.py" "$RUN_DIR"
