#!/usr/bin/env bash
# Creates the Python virtual environment the test oracles run in (Hugging Face
# `tokenizers`, the `gguf` reader, matplotlib for the report of `duet
# compare --report`, the `openai` and LangChain clients the `duet serve`
# tests talk through and `jsonschema` that checks their structured answers, at pinned versions) and prints the path
# of its python on stdout; everything else goes to stderr. Idempotent: when
# the environment already holds exactly these pins it only prints the path.
# The venv lives in ${DUET_VENV:-<repo>/build/venv}; DUET_PYTHON picks the
# interpreter that creates it (default python3).
#   usage: py=$(bash scripts/python-env.sh) && "$py" tests/tokenizer_oracle.py --out x.json
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
venv="${DUET_VENV:-$root/build/venv}"
pins=(gguf==0.19.0 jsonschema==4.26.0 langchain-core==1.8.3 langchain-openai==1.8.1 nanobind==2.9.2
      matplotlib==3.11.2 numpy==2.4.6 openai==3.57.0 pytest==8.4.2 tokenizers==0.23.3)
stamp="$venv/duet-pins.txt"

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${pins[*]}" ]; then
  echo "$venv/bin/python"
  exit 0
fi

python="${DUET_PYTHON:-python3}"
if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
  echo "python-env: '$python' cannot create virtual environments (no venv/ensurepip module);" \
       "on Debian install python3-venv (bash scripts/install-deps.sh)" >&2
  exit 1
fi
echo "python-env: installing ${pins[*]} into $venv" >&2
rm -f "$stamp"
"$python" -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}" >&2
echo "${pins[*]}" > "$stamp"
echo "$venv/bin/python"
