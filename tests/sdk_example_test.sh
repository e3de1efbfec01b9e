#!/usr/bin/env bash
# Installs the SDK from the build tree, builds examples/sampler-plugin out of
# tree against it with find_package(Duet), and checks that the installed duet
# loads the plugin and validates a pipeline that uses it.
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/examples/sampler-plugin" -B "$tmp/example" -G Ninja \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/example" >/dev/null

duet="$tmp/prefix/bin/duet"
"$duet" plugins --plugin-path "$tmp/example" >"$tmp/plugins.txt"
for expected in "example-ban 1.0.0  loaded" "sampler ban_tokens" "reference 0.1.0  loaded" "sampler greedy"; do
  grep -qF "$expected" "$tmp/plugins.txt" || { echo "missing '$expected' in:"; cat "$tmp/plugins.txt"; exit 1; }
done
"$duet" validate "$src/examples/sampler-plugin/pipeline.yaml" --set "plugins.paths=[$tmp/example]" >"$tmp/validate.txt"
grep -qF "chain [ban_tokens, greedy]" "$tmp/validate.txt" || { cat "$tmp/validate.txt"; exit 1; }

# A bad option of the third-party link is reported with its key path.
if "$duet" validate "$src/examples/sampler-plugin/pipeline.yaml" --set "plugins.paths=[$tmp/example]" \
     --set 'components.sampler.chain.0.ban_tokens.ids=x' 2>"$tmp/err.txt"; then
  echo "a bad ids value was accepted"; exit 1
fi
grep -qF "components.sampler.chain[0].ban_tokens.ids: 'x' is not a token id" "$tmp/err.txt" || { cat "$tmp/err.txt"; exit 1; }
echo "sdk example: built, installed and loaded"
