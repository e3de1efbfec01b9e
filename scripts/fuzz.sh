#!/usr/bin/env bash
# Builds the libFuzzer targets with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer (build-fuzz/), then runs each target for
# SECONDS (default 60) on its committed seeds (tests/fuzz/seeds/TARGET) and
# a growing corpus in build-fuzz/corpus/TARGET. Findings land in
# build-fuzz/findings/; every run appends its executions to
# build-fuzz/fuzz-ledger.tsv (end time, target, seconds it ran, executions,
# exit status: 0, 72 when interrupted, else a finding)
# so that totals add up across runs. Usage: bash scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="${DUET_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(gguf_fuzz pipeline_yaml_fuzz tokenizer_fuzz sampler_config_fuzz serve_request_fuzz
                                     grammar_fuzz)

bash "$root/scripts/install-deps.sh"
command -v clang++ >/dev/null || { echo "fuzz: clang++ is needed (apt-get install clang)" >&2; exit 1; }
bash "$root/scripts/fetch-model.sh"
sanitize="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
# Configured every time, as in build.sh.
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDUET_FUZZ=ON -DDUET_BUILD_TESTS=OFF -DDUET_WITH_CUDA=OFF -DCMAKE_CXX_FLAGS="$sanitize" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_MODULE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$build" -j "${DUET_JOBS:-2}" --target "${targets[@]}"

mkdir -p "$build/findings"
status=0
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t"
  dirs=("$build/corpus/$t")
  [ -d "$root/tests/fuzz/seeds/$t" ] && dirs+=("$root/tests/fuzz/seeds/$t")
  log="$build/findings/$t.log"
  echo "== $t for ${seconds}s (log: $log)"
  rc=0
  start=$(date +%s)
  # A log of this run's own (two runs of one target may overlap), moved to
  # $log when it ends: the executions counted are this run's.
  run_log=$(mktemp "$build/findings/$t.XXXXXX")
  (cd "$build/findings" && "$build/tests/fuzz/$t" -max_total_time="$seconds" -print_final_stats=1 \
      -rss_limit_mb=4096 -timeout=10 "${dirs[@]}" >"$run_log" 2>&1) || rc=$?
  mv -f "$run_log" "$log"
  if [ $rc -eq 72 ]; then  # libFuzzer's exit code when interrupted (SIGINT)
    echo "$t: interrupted"
    [ $status -ne 0 ] || status=130
  elif [ $rc -ne 0 ]; then
    status=1
    echo "$t: FINDING; reproducer and report in $build/findings"
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  printf '%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$t" "$(($(date +%s) - start))" "${execs:-0}" "$rc" \
    >>"$build/fuzz-ledger.tsv"
  grep -E "^stat::(number_of_executed_units|peak_rss_mb)" "$log" || true
done
exit $status
