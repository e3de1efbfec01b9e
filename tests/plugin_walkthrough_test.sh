#!/usr/bin/env bash
# docs/plugin-walkthrough.md, as written: installs the SDK from the build
# tree, writes every file the page shows (```LANG file=NAME blocks) into an
# empty folder, and runs every command block marked `walkthrough` there with
# $DUET and $MODEL set as the page's step 0 sets them. Each command must
# succeed, and what the page says they show must be in their output.
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
export DUET="$tmp/prefix" MODEL="$src/models/SmolLM2-135M-Instruct.Q4_1.gguf"
mkdir "$tmp/work"
python3 - "$src/docs/plugin-walkthrough.md" "$tmp/work" <<'PY'
import os, re, sys
page, out = sys.argv[1], sys.argv[2]
text = open(page).read()
blocks = re.findall(r"^```(\S+)([^\n]*)\n(.*?)^```$", text, re.M | re.S)
files = commands = 0
for lang, info, body in blocks:
    m = re.search(r"file=(\S+)", info)
    if m:
        with open(os.path.join(out, m.group(1)), "w") as f:
            f.write(body)
        files += 1
    elif lang == "sh" and info.strip() == "walkthrough":
        commands += 1
        with open(os.path.join(out, "step%d.sh" % commands), "w") as f:
            f.write(body)
assert files == 7 and commands == 3, "page has %d files, %d command blocks" % (files, commands)
PY
cd "$tmp/work"
fail() { echo "plugin walkthrough: $*"; exit 1; }
bash -euo pipefail step1.sh >"$tmp/step1.out" 2>&1 || { cat "$tmp/step1.out"; fail "build, install, list failed"; }
grep -q "walkthrough 1.0.0" "$tmp/step1.out" || { cat "$tmp/step1.out"; fail "duet plugins does not list it"; }
[[ -f "$DUET/lib/duet/plugins/duet-walkthrough.so" ]] || fail "not installed into the plugin folder"
bash -euo pipefail step2.sh >"$tmp/step2.out" 2>&1 || { cat "$tmp/step2.out"; fail "the conformance kit failed"; }
for expected in "attention 'timed_full'" "KV-cache storage 'zeroed_rows'" "stage 'first_match_decode'" \
                "sampler 'gap_filter'                 -          -                           -        -  skip" \
                "sampler 'gap_filter'                 -          200 random rows             -        -  pass"; do
  grep -qF "$expected" "$tmp/step2.out" || { cat "$tmp/step2.out"; fail "no '$expected' in the kit's tables"; }
done
grep -q " FAIL:" "$tmp/step2.out" && { cat "$tmp/step2.out"; fail "a case failed"; }
bash -euo pipefail step3.sh >"$tmp/step3.out" 2>&1 || { cat "$tmp/step3.out"; fail "validate or run failed"; }
for expected in "attention timed_full" "timed_full: " "tokens per pass" "valid: pipeline.yaml"; do
  grep -qF "$expected" "$tmp/step3.out" || { cat "$tmp/step3.out"; fail "no '$expected' in duet run's output"; }
done
grep -qi "two three" "$tmp/step3.out" || { cat "$tmp/step3.out"; fail "the answer does not repeat the words"; }
echo "plugin walkthrough: every file built, every command ran"
