#!/usr/bin/env bash
# bench/ab_plugins.sh — two builds of a backend plugin compared at the same
# moment: `duet bench` runs with plugin directory A on one CPU and with B on
# another at once (one thread each, pinned with taskset), then again with the
# CPUs swapped, and the script prints each pair's tokens/s and the ratio
# B / A. On a shared or virtual machine whose speed drifts between minutes,
# runs taken one after the other compare the drift as much as the plugins;
# two runs side by side share it (memory bandwidth included, which the two
# then split, so absolute figures are below a lone run's).
#
# Usage: bash bench/ab_plugins.sh DIR_A DIR_B PIPELINE.yaml [--cpus C0,C1] [--rounds R]
#            [-- DUET_BENCH_ARGS...]
# DIR_A, DIR_B: directories holding the plugin builds (given to duet as
# DUET_PLUGIN_PATH), e.g. a copy of build/plugins from an older commit.
# DUET_BENCH_ARGS default to: -n 32 --tests tg -r 3. The backend is onednn
# unless they hold a --set backend.plugin=... of their own.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/bench/script_helpers.sh"

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
}

(($# >= 1)) && [[ "$1" == -h || "$1" == --help ]] && { usage; exit 0; }
(($# >= 3)) || die "needs DIR_A DIR_B PIPELINE.yaml; see --help"
DIR_A="$1"; DIR_B="$2"; PIPELINE="$3"; shift 3
CPUS="0,1"
ROUNDS=1
BENCH_ARGS=(-n 32 --tests tg -r 3)
while (($#)); do
  case "$1" in
    --cpus) (($# >= 2)) || die "$1 needs a value"; CPUS="$2"; shift 2 ;;
    --rounds) (($# >= 2)) || die "$1 needs a value"; ROUNDS="$2"; shift 2 ;;
    --) shift; (($#)) && BENCH_ARGS=("$@"); break ;;
    *) die "unknown argument '$1'; see --help" ;;
  esac
done
need_count --rounds "$ROUNDS" 1
[[ "$CPUS" =~ ^[0-9]+,[0-9]+$ ]] || die "--cpus '$CPUS' is not two CPU numbers like 0,1"
CPU0="${CPUS%,*}"; CPU1="${CPUS#*,}"
[[ "$CPU0" != "$CPU1" ]] || die "--cpus names one CPU twice ('$CPUS'); the runs need one each"
for d in "$DIR_A" "$DIR_B"; do
  compgen -G "$d/*.so" >/dev/null || die "'$d' holds no plugin (.so); pass a directory like build/plugins"
done
[[ -f "$PIPELINE" ]] || die "pipeline '$PIPELINE' does not exist"
DUET="${DUET_BIN:-$ROOT/build/bin/duet}"
[[ -x "$DUET" ]] || die "no duet binary at '$DUET'; build it first (bash scripts/build.sh)"
command -v taskset >/dev/null || die "taskset (util-linux) is needed to pin the runs"

PIN=(--set backend.plugin=onednn)
for arg in "${BENCH_ARGS[@]}"; do [[ "$arg" == backend.plugin=* ]] && PIN=(); done

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
run() {  # run CPU DIR OUTFILE
  DUET_PLUGIN_PATH="$2" taskset -c "$1" "$DUET" bench "$PIPELINE" -o json \
    "${PIN[@]}" --set backend.options.threads=1 "${BENCH_ARGS[@]}" >"$3" 2>"$3.err" ||
    { cat "$3.err" >&2; die "duet bench failed with plugins from '$2'"; }
}

echo "| round | CPUs (A, B) | test | A t/s | B t/s | B / A |"
echo "| ---: | --- | --- | ---: | ---: | ---: |"
for ((round = 1; round <= ROUNDS; ++round)); do
  for swap in 0 1; do
    ca=$CPU0; cb=$CPU1
    ((swap)) && { ca=$CPU1; cb=$CPU0; }
    run "$ca" "$DIR_A" "$OUT/a.json" & pid=$!
    run "$cb" "$DIR_B" "$OUT/b.json"
    wait "$pid" || exit 1
    python3 - "$OUT/a.json" "$OUT/b.json" "$round" "$ca,$cb" <<'EOF'
import json, sys
a, b = (json.load(open(p))["results"] for p in sys.argv[1:3])
for ra, rb in zip(a, b):
    key = "tokens_per_second_median" if "tokens_per_second_median" in ra else "aggregate_tokens_per_second_median"
    ta, tb = ra[key], rb[key]  # --batch rows: the aggregate
    print("| %s | %s | %s | %.2f | %.2f | %.3f |" % (sys.argv[3], sys.argv[4], ra["test"], ta, tb, tb / ta))
EOF
  done
done
