#!/usr/bin/env bash
# Decode speed with a long cache against decode speed with a short one:
# tg N at depth 0 and at depth D (default 1919, so that the timed tokens see
# 1,919–2,046 cached positions), for each KV-cache dtype, in rounds that
# alternate the dtypes; each round is one `duet bench --interleave` process
# whose repetitions alternate the two depths. Prints each round's tokens/s
# and ratio, then the median ratio per dtype.
#
#   bash bench/long_context.sh [PIPELINE.yaml] [--rounds 3] [--dtypes f16,q8_0]
#        [--depth 1919] [-n 128] [-r 3] [--duet build/bin/duet] [-- DUET_BENCH_ARGS...]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
pipeline="$root/configs/smollm2-onednn.yaml"
rounds=3 dtypes=f16,q8_0 depth=1919 n=128 reps=3 duet="$root/build/bin/duet"
extra=()
usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --dtypes) dtypes=$2; shift 2 ;;
    --depth) depth=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    --duet) duet=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    -*) echo "long_context.sh: unknown option '$1'; see --help" >&2; exit 2 ;;
    *) pipeline=$1; shift ;;
  esac
done
[ -x "$duet" ] || { echo "long_context.sh: $duet is missing; build first (bash scripts/test.sh)" >&2; exit 2; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
IFS=, read -r -a kinds <<< "$dtypes"
for ((round = 1; round <= rounds; round++)); do
  for dtype in "${kinds[@]}"; do
    "$duet" bench "$pipeline" --tests tg -n "$n" -r "$reps" --depth "0,$depth" --interleave -o json \
      --set "components.kv_cache.dtype=$dtype" "${extra[@]}" > "$out/$dtype-$round.json"
  done
done

python3 - "$out" "$depth" "${kinds[@]}" <<'EOF'
import glob, json, os, statistics, sys
out, depth, kinds = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for kind in kinds:
    ratios = []
    for path in sorted(glob.glob(os.path.join(out, f"{kind}-*.json"))):
        results = {r["depth"]: r["tokens_per_second_median"] for r in json.load(open(path))["results"]}
        short, long = results[0], results[depth]
        ratios.append(long / short)
        print(f"{kind:5} round {path.rsplit('-', 1)[1][:-5]}: depth 0 {short:7.1f} t/s, "
              f"depth {depth} {long:7.1f} t/s, ratio {long / short:.2f}")
    print(f"{kind:5} median ratio {statistics.median(ratios):.2f} over {len(ratios)} rounds")
EOF
