#!/usr/bin/env bash
# Installs the SDK from the build tree, builds examples/stage-plugin out of
# tree against it with find_package(Duet), and runs its stage with the
# installed duet: through the conformance kit, alone (`duet run`, the
# session path) and under `duet serve` (the batching scheduler). Both must
# give the plain decode pipeline's text, and the drafts must save passes.
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
server=
cleanup() {
  [[ -n "$server" ]] && kill "$server" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/examples/stage-plugin" -B "$tmp/example" -G Ninja \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/example" >/dev/null

duet="$tmp/prefix/bin/duet"
"$duet" plugins --plugin-path "$tmp/example" >"$tmp/plugins.txt"
for expected in "example-bigram 1.0.0  loaded" "stage bigram_decode"; do
  grep -qF "$expected" "$tmp/plugins.txt" || { echo "missing '$expected' in:"; cat "$tmp/plugins.txt"; exit 1; }
done

# The SDK's conformance kit: the stage gives core decode's tokens alone and
# batched, greedy and sampled, and stops for room where decode does.
"$duet" conformance --plugin "$tmp/example/duet-example-bigram.so" >"$tmp/conformance.txt" ||
  { cat "$tmp/conformance.txt"; echo "duet conformance failed on the example stage"; exit 1; }
grep -q "5 cases: 5 pass, 0 FAIL" "$tmp/conformance.txt" ||
  { cat "$tmp/conformance.txt"; echo "duet conformance did not pass every stage case"; exit 1; }

sets=(--set "plugins.paths=[$tmp/example]" --set "model.path=$src/models/SmolLM2-135M-Instruct.Q4_1.gguf"
      --set backend.plugin=onednn --set backend.options.threads=1
      --set backend.options.batch_invariant=true)
prompt="Repeat this list exactly, once: red, green, blue, amber, teal, plum, navy, gold."
field() { python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))$2))" "$1"; }

"$duet" run "$src/examples/stage-plugin/pipeline.yaml" "${sets[@]}" --prompt "$prompt" --json >"$tmp/bigram.json"
"$duet" run "$src/configs/smollm2-onednn.yaml" "${sets[@]:2}" --prompt "$prompt" --json >"$tmp/plain.json"
[[ "$(field "$tmp/bigram.json" '["generated_token_ids"]')" == "$(field "$tmp/plain.json" '["generated_token_ids"]')" ]] ||
  { echo "bigram_decode's tokens differ from decode's"; cat "$tmp/bigram.json" "$tmp/plain.json"; exit 1; }
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['tokens_per_decode_pass'] > 1, r['tokens_per_decode_pass']" "$tmp/bigram.json" ||
  { echo "bigram_decode's drafts saved no passes"; exit 1; }

"$duet" serve "$src/examples/stage-plugin/pipeline.yaml" "${sets[@]}" --port 0 2>"$tmp/serve.err" &
server=$!
port=
for _ in $(seq 1 600); do
  port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$tmp/serve.err")
  [[ -n "$port" ]] && break
  kill -0 "$server" 2>/dev/null || { echo "duet serve exited:"; cat "$tmp/serve.err"; exit 1; }
  sleep 0.1
done
[[ -n "$port" ]] || { echo "duet serve did not start:"; cat "$tmp/serve.err"; exit 1; }
body=$(python3 -c "import json,sys; print(json.dumps({'messages': [{'role': 'user', 'content': sys.argv[1]}], 'max_tokens': 128}))" "$prompt")
curl -sS --max-time 120 -H 'Content-Type: application/json' -d "$body" \
  "http://127.0.0.1:$port/v1/chat/completions" >"$tmp/answer.json"
served=$(field "$tmp/answer.json" '["choices"][0]["message"]["content"]')
[[ "$served" == "$(field "$tmp/plain.json" '["text"]')" ]] ||
  { echo "duet serve's answer differs from decode's:"; cat "$tmp/answer.json" "$tmp/plain.json"; exit 1; }
kill -TERM "$server"
wait "$server" || { echo "duet serve exited with $? after SIGTERM"; cat "$tmp/serve.err"; exit 1; }
server=
echo "sdk stage example: built, installed, run alone and under duet serve"
