#!/usr/bin/env bash
# The README's second command: install what is needed, fetch the model, build,
# and run the whole test suite (labels unit, model and gpu; gpu tests skip
# with a stated reason when no CUDA device exists). Extra arguments go to ctest,
# e.g. `bash scripts/test.sh -L unit`.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/fetch-model.sh"
bash "$root/scripts/python-env.sh" >/dev/null  # first: build.sh builds the Python package for it
bash "$root/scripts/build.sh"
ctest --test-dir "${DUET_BUILD_DIR:-$root/build}" --output-on-failure -j "${DUET_JOBS:-2}" "$@"
