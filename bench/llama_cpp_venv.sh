# bench/llama_cpp_venv.sh — sourced by the benchmark scripts that measure
# llama.cpp through the PyPI package llama-cpp-python. Defines
#   ensure_llama_cpp_python [server]
# which builds llama-cpp-python once into the venv $VENV (llama.cpp from
# source, -march=native through GGML_NATIVE, AMX left out; see
# bench/README.md), with the [server] extra's packages when asked, and sets
# PY to the venv's python. The caller defines ROOT and VENV and sources
# bench/script_helpers.sh (die).
#
# Environment: LLAMA_CPP_PYTHON_VERSION (default 0.3.36), LLAMA_CPP_CMAKE_ARGS
# (default -DGGML_NATIVE=ON -DLLAVA_BUILD=OFF), LLAMA_CPP_CFLAGS (default
# -mno-amx-tile -mno-amx-int8 -mno-amx-bf16). A change of these rebuilds it.

LLAMA_CPP_PYTHON_VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
# -march=native (GGML_NATIVE) but without AMX: ggml's AMX matmul dies with
# SIGILL (tileloadd) in ggml_backend_amx_mul_mat on the VMs this project runs
# on, though cpuinfo lists amx_int8. Set LLAMA_CPP_CFLAGS="" to keep AMX.
LLAMA_CPP_CMAKE_ARGS="${LLAMA_CPP_CMAKE_ARGS:--DGGML_NATIVE=ON -DLLAVA_BUILD=OFF}"
LLAMA_CPP_CFLAGS="${LLAMA_CPP_CFLAGS--mno-amx-tile -mno-amx-int8 -mno-amx-bf16}"

ensure_llama_cpp_python() {  # ensure_llama_cpp_python [server]
  local stamp="$VENV/.llama-cpp-python-build"
  local want="llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION CMAKE_ARGS=$LLAMA_CPP_CMAKE_ARGS CFLAGS=$LLAMA_CPP_CFLAGS"
  local log="$ROOT/build/bench-logs/llama-cpp-python-install.log"
  mkdir -p "$ROOT/build/bench-logs"
  command -v python3 >/dev/null || die "python3 is needed (for the venv)"
  if ! "$VENV/bin/python" -c 'import llama_cpp' >/dev/null 2>&1 || [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
    echo "Building llama-cpp-python $LLAMA_CPP_PYTHON_VERSION (llama.cpp from source: $LLAMA_CPP_CMAKE_ARGS," >&2
    echo "CFLAGS '$LLAMA_CPP_CFLAGS') into $VENV; about 15 minutes on 2 cores, once. Log: $log" >&2
    [[ -x "$VENV/bin/pip" ]] || python3 -m venv "$VENV" || die "cannot create the venv $VENV (apt-get install python3-venv?)"
    command -v cmake >/dev/null || die "cmake is needed to build llama.cpp"
    rm -f "$stamp"
    if ! CMAKE_ARGS="$LLAMA_CPP_CMAKE_ARGS" CFLAGS="$LLAMA_CPP_CFLAGS" CXXFLAGS="$LLAMA_CPP_CFLAGS" \
        CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$VENV/bin/pip" install --no-cache-dir --force-reinstall -v \
        "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" >"$log" 2>&1; then
      tail -n 20 "$log" >&2
      die "installing llama-cpp-python failed; the full log is $log"
    fi
    "$VENV/bin/python" -c 'import llama_cpp' || die "llama_cpp does not import after the install; see $log"
    echo "$want" >"$stamp"
  fi
  # The server's own packages (uvicorn, fastapi, ...) on top of the built
  # package: pip keeps the installed llama-cpp-python, which satisfies the pin.
  if [[ "${1:-}" == server ]] && ! "$VENV/bin/python" -c 'import llama_cpp.server.app, uvicorn' >/dev/null 2>&1; then
    echo "Installing llama-cpp-python[server]'s packages into $VENV. Log: $log" >&2
    if ! CMAKE_ARGS="$LLAMA_CPP_CMAKE_ARGS" CFLAGS="$LLAMA_CPP_CFLAGS" CXXFLAGS="$LLAMA_CPP_CFLAGS" \
        "$VENV/bin/pip" install "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION" >>"$log" 2>&1; then
      tail -n 20 "$log" >&2
      die "installing llama-cpp-python[server] failed; the full log is $log"
    fi
    "$VENV/bin/python" -c 'import llama_cpp.server.app, uvicorn' ||
      die "llama_cpp.server does not import after the install; see $log"
  fi
  PY="$VENV/bin/python"
}
