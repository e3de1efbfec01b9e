#!/usr/bin/env bash
# shellcheck disable=SC2317  # functions run through step(), which it cannot follow
# bench/gpu-check.sh — the cuda backend's checks on a machine with an
# NVIDIA GPU, in one run of a few minutes: the gpu-labelled tests, op
# conformance against the reference backend, the batching scheduler on cuda,
# prefill/decode throughput on SmolLM2-shaped and 1B-class random models
# (the real model need not be present), decode at depth, and the card's own
# copy bandwidth to set the 1B decode figure against.
#
# Two ways to get a build:
#   - A build made elsewhere and copied over (the GPU machine may lack Boost,
#     yaml-cpp, PCRE2 and oneDNN and reach no registry). On the development
#     machine, from the project root:
#       bash ../shared/tools/gpu-bundle.sh $(bash bench/gpu-check.sh --targets)
#     then on the GPU machine, from the copy's root:
#       source .gpu/env.sh && OUT=/tmp/gpu-check bash bench/gpu-check.sh
#     ($DUET_GPU_BUILD, which env.sh sets, is the build used.)
#   - Without $DUET_GPU_BUILD it configures and builds those targets itself
#     in $BUILD (default ./build-gpu) for sm_$CUDA_ARCH (90) with $JOBS jobs.
#
# Everything it produces goes to $OUT (default $BUILD/gpu-check), six files:
#   summary.txt    one line per step: exit status and seconds; then the
#                  headline figures (tok/s of every bench, the bandwidth)
#   summary.json   the same, machine-readable
#   logs.txt       every step's output, each under a "==== step" header
#                  (nvidia-smi, duet plugins, ctest, the benches' stderr,
#                  the decode profile's per-kernel table when nsys or ncu
#                  exists)
#   bench.jsonl    one line per benchmark: {"name", "result"} with duet
#                  bench's JSON, or the bandwidth measurement
#   ctest-gpu.xml  ctest -L gpu as JUnit XML
#   conformance.json  backend_conformance_test's cuda cases (gtest JSON)
# A step that fails is recorded and the script goes on where it can; it
# exits non-zero if any step failed. Steps that need what is absent (the
# conformance test, PyTorch for the bandwidth) are recorded as skipped.
# BUDGET_S=N starts no step after N seconds (each skipped one is recorded
# and counts as a failure), so that a run under a time limit still writes
# its summary. SANITIZE=1 adds compute-sanitizer memcheck and racecheck on cuda_test
# (several minutes more); TORCH_COMPARE=1 times PyTorch eager and
# torch.compile on the same shapes (bench/torch_bench.py; minutes more).
set -u -o pipefail

targets="duet_cli duet_plugin_cuda duet_plugin_reference duet_plugin_samplers
  duet_plugin_speculative cuda_test backend_conformance_test scheduler_test window_cache_test
  duet_make_random_model"
if [ "${1:-}" = "--targets" ]; then
  # shellcheck disable=SC2086  # one line of words
  echo $targets
  exit 0
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${DUET_GPU_BUILD:-${BUILD:-$root/build-gpu}}
out=${OUT:-$build/gpu-check}
jobs=${JOBS:-$(nproc)}
arch=${CUDA_ARCH:-90}
mkdir -p "$out"
: >"$out/summary.txt"
: >"$out/logs.txt"
: >"$out/bench.jsonl"
steps_json=()
failed=0

# step NAME COMMAND...: runs the command with its output appended to
# logs.txt under a header, and records its status and duration.
step() {
  local name=$1
  shift
  local start end rc secs
  if [ -n "${BUDGET_S:-}" ] && [ "$SECONDS" -ge "$BUDGET_S" ]; then
    skip "$name" "not started: past BUDGET_S=$BUDGET_S seconds"
    failed=1
    return 1
  fi
  printf '\n==== %s\n' "$name" >>"$out/logs.txt"
  start=$(date +%s.%N)
  "$@" >>"$out/logs.txt" 2>&1
  rc=$?
  end=$(date +%s.%N)
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  printf '%-28s rc=%-3d %6ss\n' "$name" "$rc" "$secs" >>"$out/summary.txt"
  steps_json+=("{\"step\": \"$name\", \"rc\": $rc, \"seconds\": $secs}")
  [ "$rc" -eq 0 ] || failed=1
  return "$rc"
}

skip() {
  printf '%-28s skipped: %s\n' "$1" "$2" >>"$out/summary.txt"
  steps_json+=("{\"step\": \"$1\", \"skipped\": \"$2\"}")
}

write_summary() {
  local IFS=,
  printf '{"steps": [%s], "failed": %s}\n' "${steps_json[*]}" "$failed" >"$out/summary.json"
  # Headline figures: every bench result's tests and tokens/s.
  python3 - "$out/bench.jsonl" >>"$out/summary.txt" 2>/dev/null <<'PY'
import json, sys
print()
def rate(t):  # pp/tg tests, or batch tests (aggregate decode tokens/s)
    v = t.get("tokens_per_second_median", t.get("aggregate_tokens_per_second_median"))
    return f'{t["test"]} {v:.1f} t/s'
for line in open(sys.argv[1]):
    b = json.loads(line)
    r = b["result"]
    if "results" in r:
        print(f'{b["name"]:<24} ' + ", ".join(rate(t) for t in r["results"]))
    else:
        print(f'{b["name"]:<24} {json.dumps(r)}')
PY
}
trap write_summary EXIT

step nvidia-smi nvidia-smi

if [ -z "${DUET_GPU_BUILD:-}" ]; then
  step configure cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="$arch" || exit 1
  # shellcheck disable=SC2086  # the target list is words
  step build ninja -C "$build" -j "$jobs" $targets || exit 1
fi

duet=$build/bin/duet
step plugins "$duet" plugins

step ctest-gpu bash -c "cd '$build' && ctest -L gpu --output-on-failure --timeout 600 \
  --output-junit '$out/ctest-gpu.xml'"

if [ -x "$build/tests/backend_conformance_test" ]; then
  step conformance "$build/tests/backend_conformance_test" --gtest_filter='*cuda*' \
    --gtest_output=json:"$out/conformance.json"
else
  skip conformance "backend_conformance_test was not built"
fi

if [ -x "$build/tests/scheduler_test" ]; then
  step scheduler-cuda "$build/tests/scheduler_test" --gtest_filter='*/cuda*'
else
  skip scheduler-cuda "scheduler_test was not built"
fi

# Gemma 3's window layers in rings (components.kv_cache.window_layers: ring)
# against the full cache on cuda: each pass maps the window layers' step onto
# the rings, a second step ForwardPass uploads beside the pass's own.
if [ -x "$build/tests/window_cache_test" ]; then
  step window-cache-cuda "$build/tests/window_cache_test" --gtest_filter='*/cuda*'
else
  skip window-cache-cuda "window_cache_test was not built"
fi

if [ "${SANITIZE:-0}" = 1 ]; then
  for tool in memcheck racecheck; do
    step "sanitizer-$tool" compute-sanitizer --tool "$tool" --error-exitcode 1 \
      "$build/tests/cuda_test"
  done
fi

# bench NAME ARGS...: duet bench ARGS -o json, its result appended to
# bench.jsonl as {"name": NAME, "result": ...}.
bench() {
  step "bench-$1" bench_json "$@"
}
bench_json() {
  local name=$1 json
  shift
  json=$("$duet" bench "$@" -o json) || return
  printf '{"name": "%s", "result": %s}\n' "$name" "$(tr -d '\n' <<<"$json")" >>"$out/bench.jsonl"
}

models=$build/gpu-check-models
mkdir -p "$models"
smol=$models/random-smollm2-q4_1.gguf
step make-smollm2 "$build/bin/duet_make_random_model" "$smol" --type q4_1 || exit 1

config=$root/configs/smollm2-cuda.yaml
# The decode pass's variants: name, then --set overrides for the backend.
variants=(
  "graphs-pdl backend.options.cuda_graphs=true backend.options.pdl=true backend.options.fuse=true"
  "graphs backend.options.cuda_graphs=true backend.options.pdl=false backend.options.fuse=true"
  "unfused backend.options.cuda_graphs=true backend.options.pdl=true backend.options.fuse=false"
  "eager backend.options.cuda_graphs=false backend.options.pdl=false backend.options.fuse=true"
)
for v in "${variants[@]}"; do
  read -r name a b c <<<"$v"
  bench "smollm2-$name" "$config" --set model.path="$smol" --set "$a" --set "$b" --set "$c" \
    -p 512 -n 128 -r 5
done
bench smollm2-depth "$config" --set model.path="$smol" --tests tg -n 128 -d 0,1919 -r 3 --interleave
# The same without the split of decode attention over the context, for A/B.
bench smollm2-depth-nosplit "$config" --set model.path="$smol" --set backend.options.split_attention=0 \
  --tests tg -n 128 -d 0,1919 -r 3 --interleave
for dtype in f16 q8_0; do
  bench "smollm2-depth-$dtype" "$config" --set model.path="$smol" \
    --set components.kv_cache.dtype=$dtype --tests tg -n 128 -d 0,1919 -r 3 --interleave
done
bench smollm2-prompts "$config" --set model.path="$smol" --tests pp -p 128,512,1024,2000 -r 3
# The same with prompt rows attending in tiles of 32 (off by default), for A/B.
bench smollm2-prompts-tiled "$config" --set model.path="$smol" \
  --set backend.options.tiled_attention=true --tests pp -p 512,2000 -r 3
batch_sets=(--set model.path="$smol" --set components.kv_cache.block_tokens=16
  --set components.kv_cache.capacity_tokens=8192 --set batching.max_sequences=64)
bench smollm2-batch "$config" "${batch_sets[@]}" --batch 1,4,8,16,64 -r 3
# Decode steps of 16 and 64 sequences through the gemv instead of cuBLAS
# (matmul_min_rows), to choose the default; and the batch-invariant mode.
bench smollm2-batch-gemv "$config" "${batch_sets[@]}" --set backend.options.matmul_min_rows=65 \
  --batch 16,64 -r 3
bench smollm2-batch-invariant "$config" "${batch_sets[@]}" \
  --set backend.options.batch_invariant=true --batch 1,8,16 -r 3

# The K-quant formats and the other architectures on cuda against the
# reference backend: random models of SmolLM2's shape, each answering two
# prompts greedily (duet compare; the reference takes seconds per answer;
# the table goes to logs.txt; a variant that fails or answers otherwise
# fails the step), then timed; the Gemma 3 one (512-position windows) also
# decoding past its window.
fidelity() {
  local model=$1 dir
  dir=$(dirname "$model")
  cat >"$dir/pipeline.yaml" <<YAML
model: {path: "$model", chat: false}
backend: {plugin: reference}
components:
  attention: {impl: default}
  kv_cache: {impl: contiguous, capacity_tokens: 2048, dtype: f32}
  sampler: {seed: 42, chain: [greedy]}
stages:
  - prefill: {chunk_tokens: 512}
  - decode: {max_new_tokens: 32}
YAML
  cat >"$dir/experiment.yaml" <<YAML
pipeline: pipeline.yaml
baseline: reference
variants:
  - name: reference
  - name: cuda
    set: {backend.plugin: cuda}
  - name: cuda-f16-cache
    set: {backend.plugin: cuda, components.kv_cache.dtype: f16}
workload:
  greedy: {prompts: ["The capital of France is", "ab cd ef gh"], tokens: 24}
YAML
  local table
  table=$("$duet" compare "$dir/experiment.yaml" -o table)
  local rc=$?
  echo "$table"
  [ "$rc" -eq 0 ] || return "$rc"
  ! grep -q '^Failed' <<<"$table" || return 1  # a variant that did not run
  # Every greedy answer the reference's, token for token ("24/24 same").
  python3 -c '
import re, sys
cells = re.findall(r"(\d+)/(\d+) same(, parts at \d+)?", sys.stdin.read())
sys.exit(0 if cells and all(a == b and not p for a, b, p in cells) else 1)' <<<"$table"
}
for spec in "llama q4_k" "llama q6_k" "qwen3 q5_k" "gemma3 q4_k"; do
  read -r arch type <<<"$spec"
  model=$models/$arch-$type/random.gguf
  mkdir -p "$(dirname "$model")"
  if step "make-$arch-$type" "$build/bin/duet_make_random_model" "$model" --arch "$arch" --type "$type"; then
    step "fidelity-$arch-$type" fidelity "$model"
    bench "$arch-$type" "$config" --set model.path="$model" -p 256 -n 128 -r 3
    if [ "$arch" = gemma3 ]; then
      bench "$arch-$type-depth" "$config" --set model.path="$model" --tests tg -n 128 -d 0,1919 \
        -r 3 --interleave
    fi
  fi
done

for type in q4_1 f16; do
  big=$models/random-llama-1b-$type.gguf
  if step "make-llama-1b-$type" "$build/bin/duet_make_random_model" "$big" --shape llama-1b \
    --type "$type"; then
    bench "llama-1b-$type" "$config" --set model.path="$big" --set components.kv_cache.capacity_tokens=2048 \
      -p 512 -n 128 -r 3
  fi
  rm -f "$big"
done

# The card's device-to-device copy bandwidth (bytes read + written per
# second), the yardstick for a decode that reads every weight each token.
bandwidth() {
  python3 - "$out/bench.jsonl" <<'PY'
import json, sys, torch
n = 1 << 30
src = torch.empty(n, dtype=torch.uint8, device="cuda")
dst = torch.empty_like(src)
for _ in range(3):
    dst.copy_(src)
torch.cuda.synchronize()
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
reps = 20
start.record()
for _ in range(reps):
    dst.copy_(src)
end.record()
torch.cuda.synchronize()
seconds = start.elapsed_time(end) / 1e3 / reps
result = {"bytes": n, "copy_seconds": seconds, "read_plus_write_bytes_per_second": 2 * n / seconds,
          "device": torch.cuda.get_device_name()}
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"name": "copy-bandwidth", "result": result}) + "\n")
print(result)
PY
}
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  step copy-bandwidth bandwidth
else
  skip copy-bandwidth "no python3 with CUDA PyTorch"
fi

# PyTorch on the same shapes, eager and torch.compile (static cache, CUDA
# graphs): the figures duet is set against. Compilation takes minutes, so
# only with TORCH_COMPARE=1 (each shape bounded at $TORCH_TIMEOUT seconds).
if [ "${TORCH_COMPARE:-0}" != 1 ]; then
  skip torch-compare "TORCH_COMPARE=1 runs it (PyTorch compilation takes minutes)"
elif python3 -c 'import torch, transformers; assert torch.cuda.is_available()' 2>/dev/null; then
  for shape in smollm2-135m llama-1b; do
    step "torch-$shape" timeout "${TORCH_TIMEOUT:-300}" python3 "$root/bench/torch_bench.py" \
      --shape "$shape" --out "$out/bench.jsonl"
  done
else
  skip torch-compare "no python3 with CUDA PyTorch and transformers"
fi

# Where a decode step's time goes, kernel by kernel (graph nodes traced one
# by one), when Nsight Systems is installed: the profile a missed decode
# target is reported with. The table goes to logs.txt.
nsys_bin=$(command -v nsys)
for candidate in /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys; do
  [ -z "$nsys_bin" ] && [ -x "$candidate" ] && nsys_bin=$candidate
done
if [ -n "$nsys_bin" ]; then
  profile=$build/gpu-check-decode
  if step profile-decode "$nsys_bin" profile --force-overwrite true --trace cuda \
    --cuda-graph-trace node -o "$profile" "$duet" bench "$config" --set model.path="$smol" \
    --tests tg -n 64 -r 1; then
    step profile-kernels "$nsys_bin" stats --force-export true --report cuda_gpu_kern_sum \
      --format table "$profile.nsys-rep"
  fi
  rm -f "$profile.nsys-rep" "$profile.sqlite"
else
  skip profile-decode "no nsys (Nsight Systems) on this machine"
fi

# The same table from Nsight Compute, which this workplace's GPU image has
# where nsys is missing (it reads counters on Firecracker machines, not on
# gVisor ones): kernel times only, clocks left alone, graph nodes one by
# one, two decode steps' kernels (~270 each for SmolLM2) after the warm-up
# run and the first tokens, summed per kernel.
ncu_bin=$(command -v ncu)
for candidate in /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
  [ -z "$ncu_bin" ] && [ -x "$candidate" ] && ncu_bin=$candidate
done
if [ -n "$ncu_bin" ]; then
  step profile-decode-ncu "$ncu_bin" --clock-control none --metrics gpu__time_duration.sum \
    --graph-profiling node --launch-skip 3000 --launch-count 540 --print-summary per-kernel \
    "$duet" bench "$config" --set model.path="$smol" --tests tg -n 16 -r 1
else
  skip profile-decode-ncu "no ncu (Nsight Compute) on this machine"
fi

step graph-stats "$duet" run "$config" --set model.path="$smol" --set backend.options.graph_stats=true \
  --set model.chat=false --set stages.1.decode.max_new_tokens=64 --prompt 'ab cd ef gh'

exit "$failed"
