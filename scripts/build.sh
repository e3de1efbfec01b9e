#!/usr/bin/env bash
# Configures and builds Duet in build/. Extra arguments go to cmake's
# configure step. Warnings are errors, as in CI. Where the test venv
# (scripts/python-env.sh) exists, the Python package is built for it too.
# The configure step runs every time (a fraction of a second once cached): a
# configure that failed half-way is retried, and packages installed since the
# last run (oneDNN, OpenCL, CUDA) are found.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="${DUET_BUILD_DIR:-$root/build}"
venv="${DUET_VENV:-$root/build/venv}"
python=""
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import nanobind' 2>/dev/null; then
  python="$venv/bin/python"
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDUET_WERROR=ON \
  -DDUET_PYTHON="$python" "$@" >/dev/null
cmake --build "$build" -j "${DUET_JOBS:-2}"
