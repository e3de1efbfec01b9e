#!/usr/bin/env bash
# Compiles the cuda backend and runs the host-side test of its kernels'
# weight decoding (cuda_formats_test: nvcc-compiled, no GPU needed). For CI,
# where nothing else compiles CUDA code: sanitize.sh builds without it and
# the fresh Debian roots of fresh-machine-test.sh have no CUDA toolkit.
#
# Run it after scripts/sanitize.sh: it turns CUDA on in that build
# (build-asan/, one GPU architecture, sm_90) and so compiles only the cuda
# targets, on top of the objects already there. The kernels' GPU tests (label
# gpu) need a device and are not run here.
#
# Where CMake finds no nvcc it says so and exits 1: CI's machines have the
# CUDA toolkit, and a missing one must not pass as a compiled backend.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="${DUET_ASAN_BUILD_DIR:-$root/build-asan}"
if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "cuda-check: $build is not configured; run scripts/sanitize.sh first" >&2
  exit 1
fi
# The cached flags (sanitizers included) stay as sanitize.sh set them.
cmake -S "$root" -B "$build" -DDUET_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
if ! grep -q "duet_plugin_cuda" "$build/build.ninja"; then
  echo "cuda-check: CMake found no nvcc (or no cuBLAS / static CUDA runtime): the cuda backend" \
    "was not compiled; install the CUDA toolkit" >&2
  exit 1
fi
cmake --build "$build" -j "${DUET_JOBS:-2}" --target duet_plugin_cuda cuda_formats_test cuda_test
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
"$build/tests/cuda_formats_test" --gtest_brief=1
