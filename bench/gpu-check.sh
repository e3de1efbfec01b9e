#!/usr/bin/env bash
# bench/gpu-check.sh — the cuda backend's checks on a machine with an
# NVIDIA GPU, in one run: build, the gpu-labelled tests, op conformance
# against the reference backend, and prefill/decode throughput on a
# SmolLM2-shaped random Q4_1 model (the real model need not be present).
#
#   OUT=/tmp/gpu-check bash bench/gpu-check.sh
#
# Everything it produces goes to $OUT (default $BUILD/gpu-check):
#   summary.txt           one line per step with its exit status and time
#   summary.json          the same, machine-readable
#   nvidia-smi.txt        the device and driver
#   configure.log, build.log
#   ctest-gpu.log/.xml    ctest -L gpu (JUnit XML)
#   conformance.log/.json backend_conformance_test, cuda cases, if built
#   bench-*.json          `duet bench` results (graphs+PDL+fusion, without PDL,
#                         without fusion, without graphs),
#                         or run-*.json from `duet run --json` without duet bench
#   graph-stats.txt       how many decode passes were captured and replayed
#
# It builds in $BUILD (default ./build-gpu) for sm_90 only ($CUDA_ARCH),
# with every core ($JOBS), only the targets it needs: a few minutes on 16
# cores. (Carrying a build from another machine does not work: the test
# binaries have the build folder's absolute path compiled in, and the
# build folder is far over 64 MiB.) A step that fails is recorded and the
# script goes on where it can; it exits non-zero if any step failed. The
# whole run needs about 5-8 minutes; give it a 560 s limit.
set -u -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$root/build-gpu}
out=${OUT:-$build/gpu-check}
jobs=${JOBS:-$(nproc)}
arch=${CUDA_ARCH:-90}
mkdir -p "$out"
: >"$out/summary.txt"
steps_json=()
failed=0

# step NAME COMMAND...: runs the command, records its status and duration.
step() {
  local name=$1
  shift
  local start end rc
  start=$(date +%s.%N)
  "$@"
  rc=$?
  end=$(date +%s.%N)
  local secs
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  printf '%-28s rc=%-3d %6ss\n' "$name" "$rc" "$secs" | tee -a "$out/summary.txt"
  steps_json+=("{\"step\": \"$name\", \"rc\": $rc, \"seconds\": $secs}")
  [ "$rc" -eq 0 ] || failed=1
  return "$rc"
}

write_summary() {
  local IFS=,
  printf '{"steps": [%s], "failed": %s}\n' "${steps_json[*]}" "$failed" >"$out/summary.json"
}
trap write_summary EXIT

step nvidia-smi bash -c "nvidia-smi >'$out/nvidia-smi.txt' 2>&1"

configure() {
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    >"$out/configure.log" 2>&1
}
step configure configure || exit 1

targets="duet_cli duet_plugin_cuda duet_plugin_reference duet_plugin_samplers cuda_test duet_make_random_model"
step build bash -c "ninja -C '$build' -j '$jobs' $targets >'$out/build.log' 2>&1" || exit 1
# Optional: it also builds every other backend the machine has libraries for.
if grep -q '^backend_conformance_test:' <(ninja -C "$build" -t targets all 2>/dev/null); then
  step build-conformance bash -c "ninja -C '$build' -j '$jobs' backend_conformance_test \
    >'$out/build-conformance.log' 2>&1"
fi

duet=$build/bin/duet
step plugins bash -c "'$duet' plugins >'$out/plugins.txt' 2>&1"

step ctest-gpu bash -c "cd '$build' && ctest -L gpu --output-on-failure --timeout 900 \
  --output-junit '$out/ctest-gpu.xml' >'$out/ctest-gpu.log' 2>&1"

if [ -x "$build/tests/backend_conformance_test" ]; then
  step conformance bash -c "'$build/tests/backend_conformance_test' --gtest_filter='*cuda*' \
    --gtest_output=json:'$out/conformance.json' >'$out/conformance.log' 2>&1"
fi

model=$build/random-smollm2-q4_1.gguf
step make-model bash -c "'$build/bin/duet_make_random_model' '$model' >'$out/make-model.log' 2>&1" || exit 1

config=$root/configs/smollm2-cuda.yaml
# name, then --set overrides for the backend
variants=(
  "graphs-pdl backend.options.cuda_graphs=true backend.options.pdl=true backend.options.fuse=true"
  "graphs backend.options.cuda_graphs=true backend.options.pdl=false backend.options.fuse=true"
  "unfused backend.options.cuda_graphs=true backend.options.pdl=true backend.options.fuse=false"
  "eager backend.options.cuda_graphs=false backend.options.pdl=false backend.options.fuse=true"
)
if "$duet" bench --help >/dev/null 2>&1; then
  for v in "${variants[@]}"; do
    read -r name a b c <<<"$v"
    step "bench-$name" bash -c "'$duet' bench '$config' --set model.path='$model' --set $a --set $b --set $c \
      -p 512 -n 128 -r 5 -o json >'$out/bench-$name.json' 2>'$out/bench-$name.log'"
  done
else
  # Without duet bench: one run of a ~500-token prompt and 128 new tokens.
  prompt=$(for i in $(seq 1 250); do printf 'ab cd '; done)
  for v in "${variants[@]}"; do
    read -r name a b c <<<"$v"
    step "run-$name" bash -c "'$duet' run '$config' --set model.path='$model' --set $a --set $b --set $c \
      --set model.chat=false --set stages.1.decode.max_new_tokens=128 --json --prompt '$prompt' \
      >'$out/run-$name.json' 2>'$out/run-$name.log'"
  done
fi

step graph-stats bash -c "'$duet' run '$config' --set model.path='$model' --set backend.options.graph_stats=true \
  --set model.chat=false --set stages.1.decode.max_new_tokens=64 --prompt 'ab cd ef gh' \
  >/dev/null 2>'$out/graph-stats.txt'"

exit "$failed"
