#!/usr/bin/env bash
# Configures and builds Duet in build/. Extra arguments go to cmake's
# configure step. Warnings are errors, as in CI.
# The configure step runs every time (a fraction of a second once cached): a
# configure that failed half-way is retried, and packages installed since the
# last run (oneDNN, OpenCL, CUDA) are found.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="${DUET_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDUET_WERROR=ON "$@" >/dev/null
cmake --build "$build" -j "${DUET_JOBS:-2}"
