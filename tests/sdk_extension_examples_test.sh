#!/usr/bin/env bash
# Installs the SDK from the build tree, builds examples/attention-plugin and
# examples/kv-cache-plugin out of tree against it with find_package(Duet),
# and checks with the installed duet and the real model (logits saved by
# `duet perplexity --save-logits` on a short text):
#  - attention 'sliding_window' with a window covering the context gives
#    logits bit-for-bit those of 'full' on reference (f32, f16, q8_0), within
#    1e-6 NMSE on onednn; a short window changes them;
#  - KV-cache storage 'mmap_file' gives logits bit-for-bit those of the
#    in-memory 'contiguous' cache of the same dtype (reference: f32, f16,
#    q8_0; onednn: f32, f16), removes its file unless keep: true;
#  - bad options, an unwritable or non-regular path, a max_bytes too small
#    (exit 2) and a file that cannot be reserved (RLIMIT_FSIZE, exit 5, no
#    file left behind) are one-line errors naming the key;
#  - configs/smollm2-sliding-window.yaml validates;
#  - duet_add_plugin optimises without a build type, installs into the
#    folder the installed duet searches, and fails the link of a plugin with
#    an undefined symbol.
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
for example in attention-plugin kv-cache-plugin; do
  cmake -S "$src/examples/$example" -B "$tmp/$example" -G Ninja \
    -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$tmp/$example" >/dev/null
done
paths="plugins.paths=[$tmp/attention-plugin, $tmp/kv-cache-plugin]"
duet="$tmp/prefix/bin/duet"
fail() { echo "FAILED: $*"; exit 1; }

"$duet" plugins --plugin-path "$tmp/attention-plugin" --plugin-path "$tmp/kv-cache-plugin" >"$tmp/plugins.txt"
for expected in "sliding-window 1.0.0  loaded" "mmap-kv-cache 1.0.0  loaded" \
                "attention sliding_window for backend reference" "kv_cache mmap_file (plugin mmap-kv-cache)"; do
  grep -qF "$expected" "$tmp/plugins.txt" || { cat "$tmp/plugins.txt"; fail "missing '$expected'"; }
done
backends=(reference)
grep -q "^  onednn .* loaded" "$tmp/plugins.txt" && backends+=(onednn)

# The SDK's conformance kit passes the out-of-tree attention (a window wider
# than the kit's 71 positions attends as 'full' does).
"$duet" conformance --plugin "$tmp/attention-plugin/duet-sliding-window.so" --option window=4096 \
  >"$tmp/conformance.txt" || { cat "$tmp/conformance.txt"; fail "duet conformance failed"; }
grep -q " 0 FAIL" "$tmp/conformance.txt" && grep -q "reference  paged q8_0 .* pass" "$tmp/conformance.txt" ||
  { cat "$tmp/conformance.txt"; fail "duet conformance did not pass every case"; }

printf 'The quick brown fox jumps over the lazy dog. Paris is the capital of France.' >"$tmp/text.txt"
# logits NAME BACKEND DTYPE [--set K=V]...: saves the logits of a pipeline
# on BACKEND with a DTYPE cache of 64 slots to $tmp/NAME.bin.
logits() {
  local name=$1 backend=$2 dtype=$3
  shift 3
  "$duet" perplexity "$src/configs/smollm2-$backend.yaml" "$tmp/text.txt" --set "$paths" \
    --set components.kv_cache.capacity_tokens=64 --set components.kv_cache.dtype="$dtype" "$@" \
    --save-logits "$tmp/$name.bin" >/dev/null 2>"$tmp/$name.err" || { cat "$tmp/$name.err"; fail "$name"; }
}
# Overrides choosing the plugins' components (words: $tmp has no spaces).
window() {
  echo --set components.attention.impl=sliding_window --set components.attention.options.window="$1" \
    --set components.attention.options.sinks="$2"
}
mmap() { echo --set components.kv_cache.impl=mmap_file --set components.kv_cache.options.path="$1"; }

# Attention: a window covering the context is 'full'; a short one is not.
for dtype in f32 f16 q8_0; do
  logits full-$dtype reference $dtype --set components.attention.impl=full
  # shellcheck disable=SC2046
  logits window-$dtype reference $dtype $(window 64 4)
  cmp -s "$tmp/full-$dtype.bin" "$tmp/window-$dtype.bin" || fail "reference $dtype: window 64 is not bit-for-bit 'full'"
done
# shellcheck disable=SC2046
logits short reference f32 $(window 4 2)
cmp -s "$tmp/full-f32.bin" "$tmp/short.bin" && fail "window 4 gives the logits of 'full'"
if [[ " ${backends[*]} " == *" onednn "* ]]; then
  logits onednn-full onednn f16 --set components.attention.impl=full
  # shellcheck disable=SC2046
  "$duet" perplexity "$src/configs/smollm2-onednn.yaml" "$tmp/text.txt" --set "$paths" \
    --set components.kv_cache.capacity_tokens=64 $(window 64 0) --kl-base "$tmp/onednn-full.bin" --json >"$tmp/kl.json"
  nmse=$(sed 's/.*"logits_nmse":\([^,}]*\).*/\1/' "$tmp/kl.json")
  awk -v x="$nmse" 'BEGIN { exit !(x <= 1e-6) }' || fail "onednn: window 64 is $nmse NMSE off 'full' (bound 1e-6)"
fi

# KV-cache storage: bit-for-bit the in-memory cache; no file left behind.
for backend in "${backends[@]}"; do
  dtypes=(f32 f16 q8_0)
  [ "$backend" = onednn ] && dtypes=(f32 f16)  # onednn keeps q8_0 in tiles of its own
  for dtype in "${dtypes[@]}"; do
    logits mem-$backend-$dtype "$backend" "$dtype"
    # shellcheck disable=SC2046
    logits file-$backend-$dtype "$backend" "$dtype" $(mmap "$tmp/kv.bin")
    cmp -s "$tmp/mem-$backend-$dtype.bin" "$tmp/file-$backend-$dtype.bin" ||
      fail "$backend $dtype: mmap_file logits differ from contiguous"
    [ ! -e "$tmp/kv.bin" ] || fail "mmap_file left $tmp/kv.bin behind"
  done
done
# shellcheck disable=SC2046
logits kept reference f16 $(mmap "$tmp/kv-kept.bin") --set components.kv_cache.options.keep=true
# 30 layers x K,V x 64 slots x 3 heads x 64 dims x 2 bytes
[ "$(stat -c %s "$tmp/kv-kept.bin")" = $((30 * 2 * 64 * 3 * 64 * 2)) ] || fail "keep: true left no file of the cache's size"

# expect CODE MESSAGE COMMAND...: the command fails with exit code CODE and
# prints MESSAGE on stderr.
expect() {
  local code=$1 message=$2 rc=0
  shift 2
  "$@" >/dev/null 2>"$tmp/err.txt" || rc=$?
  [ "$rc" = "$code" ] || { cat "$tmp/err.txt"; fail "exit code $rc, expected $code: $*"; }
  grep -qF -- "$message" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "no '$message'"; }
}
ref=("$src/configs/smollm2-reference.yaml" --set "$paths" --set components.kv_cache.capacity_tokens=64)
# shellcheck disable=SC2046
expect 2 "components.attention.options.window is required (the number of positions each token attends to" \
  "$duet" validate "${ref[@]}" --set components.attention.impl=sliding_window
expect 2 "'windw' was given: did you mean 'window'?" "$duet" validate "${ref[@]}" \
  --set components.attention.impl=sliding_window --set components.attention.options.windw=8
# shellcheck disable=SC2046
expect 2 "components.attention.options.window" "$duet" validate "${ref[@]}" $(window 0 0)
# shellcheck disable=SC2046
expect 2 "components.attention.options.sinks" "$duet" validate "${ref[@]}" $(window 8 -1)
expect 2 "components.kv_cache.options.path: missing" "$duet" validate "${ref[@]}" --set components.kv_cache.impl=mmap_file
# shellcheck disable=SC2046
expect 2 "'/proc/self/kv.bin' cannot be created: its directory '/proc/self' is not writable" \
  "$duet" run "${ref[@]}" $(mmap /proc/self/kv.bin)
# shellcheck disable=SC2046
expect 2 "its directory '$tmp/nosuch' does not exist" "$duet" validate "${ref[@]}" $(mmap "$tmp/nosuch/kv.bin")
# shellcheck disable=SC2046
expect 2 "'$tmp' already exists; name a new file" "$duet" validate "${ref[@]}" $(mmap "$tmp")
# An existing file is never overwritten (a typo naming the model must not
# destroy it), nor a kept cache reused.
# shellcheck disable=SC2046
expect 2 "'$tmp/kv-kept.bin' already exists" "$duet" run "${ref[@]}" $(mmap "$tmp/kv-kept.bin")
[ "$(stat -c %s "$tmp/kv-kept.bin")" = $((30 * 2 * 64 * 3 * 64 * 2)) ] || fail "an existing file was changed"
# shellcheck disable=SC2046
expect 2 "components.kv_cache.options.max_bytes: the cache needs 2949120 bytes but the file may hold 1000" \
  "$duet" validate "${ref[@]}" $(mmap "$tmp/kv.bin") --set components.kv_cache.options.max_bytes=1000
# A file-size limit below the cache is refused before the file is made
# (posix_fallocate would end the process with SIGXFSZ); a full disk fails
# posix_fallocate itself, before anything is written to the mapping.
# shellcheck disable=SC2046
expect 5 "components.kv_cache.options.path: '$tmp/kv.bin': the KV cache needs 2949120 bytes but this process may write files of at most 102400 (ulimit -f)" \
  bash -c 'ulimit -f 100; exec "$@"' limit "$duet" run "${ref[@]}" $(mmap "$tmp/kv.bin")
[ ! -e "$tmp/kv.bin" ] || fail "a failed reservation left $tmp/kv.bin behind"

"$duet" validate "$src/configs/smollm2-sliding-window.yaml" --set "$paths" >"$tmp/validate.txt" ||
  { cat "$tmp/validate.txt"; fail "configs/smollm2-sliding-window.yaml does not validate"; }
grep -qF "attention: sliding_window" "$tmp/validate.txt" || { cat "$tmp/validate.txt"; fail "attention not sliding_window"; }
# duet_add_plugin's build rules. No build type: still optimised.
cmake -S "$src/examples/sampler-plugin" -B "$tmp/sampler-plugin" -G Ninja \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
ninja -C "$tmp/sampler-plugin" -t commands >"$tmp/commands.txt"
grep -q -- "-O2 .*ban_tokens.cc" "$tmp/commands.txt" ||
  { cat "$tmp/commands.txt"; fail "a plugin built without a build type is not optimised"; }
cmake --build "$tmp/sampler-plugin" >/dev/null
# cmake --install puts it where the installed duet looks without being told.
cmake --install "$tmp/sampler-plugin" >/dev/null
[ -f "$tmp/prefix/lib/duet/plugins/duet-example-ban.so" ] || fail "cmake --install put the plugin elsewhere"
"$duet" plugins >"$tmp/installed.txt"
grep -qF "example-ban 1.0.0  loaded" "$tmp/installed.txt" ||
  { cat "$tmp/installed.txt"; fail "the installed plugin is not found"; }
# An undefined symbol fails the link, not the load.
mkdir -p "$tmp/undefined-src"
cat >"$tmp/undefined-src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(Undefined LANGUAGES CXX)
find_package(Duet REQUIRED)
duet_add_plugin(undefined SOURCES undefined.cc)
CMAKE
cat >"$tmp/undefined-src/undefined.cc" <<'CXX'
#include "duet/plugin.h"
int declared_never_defined();
void register_components(duet::PluginRegistrar&) { (void)declared_never_defined(); }
DUET_DEFINE_PLUGIN("undefined", "1.0.0", "calls a function nobody defines", nullptr, register_components)
CXX
cmake -S "$tmp/undefined-src" -B "$tmp/undefined" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
if cmake --build "$tmp/undefined" >"$tmp/undefined.log" 2>&1; then
  fail "a plugin with an undefined symbol linked"
fi
grep -q "undefined reference to .*declared_never_defined" "$tmp/undefined.log" ||
  { cat "$tmp/undefined.log"; fail "the link error does not name the symbol"; }

echo "sdk extension examples: built, installed, loaded and checked on ${backends[*]}"
