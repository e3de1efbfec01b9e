#!/usr/bin/env bash
# Configures (once) and builds Duet in build/. Extra arguments go to cmake's
# configure step. Warnings are errors, as in CI.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="${DUET_BUILD_DIR:-$root/build}"
if [ ! -f "$build/CMakeCache.txt" ] || [ $# -gt 0 ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDUET_WERROR=ON "$@" >/dev/null
fi
cmake --build "$build" -j "${DUET_JOBS:-2}"
