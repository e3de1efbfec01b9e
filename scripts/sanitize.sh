#!/usr/bin/env bash
# Builds the project with AddressSanitizer and UndefinedBehaviorSanitizer
# (GCC, build-asan/) and runs the unit tests under them; any report fails
# the run. The GPU backend is left out: its code cannot run here anyway.
# Extra arguments go to ctest.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="${DUET_ASAN_BUILD_DIR:-$root/build-asan}"
bash "$root/scripts/install-deps.sh"
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# Configured every time, as in build.sh.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDUET_WITH_CUDA=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_MODULE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$build" -j "${DUET_JOBS:-2}"
# Leaks are checked too; a plugin library unloaded at exit must not hide one.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
ctest --test-dir "$build" -L unit --output-on-failure -j "${DUET_JOBS:-2}" "$@"
