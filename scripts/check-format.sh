#!/usr/bin/env bash
# Checks that every C++ and CUDA source in the repository is formatted as
# .clang-format says (100 columns, Google style); lists the files that are
# not and exits 1. `bash scripts/check-format.sh --fix` rewrites them instead.
# Uses Debian 12's clang-format (14), installed here if missing:
# another version may format some constructs differently.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/install-deps.sh clang-format
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i --style=file "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --style=file "$f" | cmp -s - "$f" || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'check-format: not formatted as .clang-format says: %s\n' "${bad[@]}" >&2
  echo "check-format: run 'bash scripts/check-format.sh --fix' and commit the result" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted as .clang-format says"
