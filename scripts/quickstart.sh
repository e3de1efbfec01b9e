#!/usr/bin/env bash
# The README's first command: install what is needed, fetch the model, build,
# and run the default pipeline on the real model.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/fetch-model.sh"
bash "$root/scripts/build.sh"
duet="${DUET_BUILD_DIR:-$root/build}/bin/duet"

"$duet" validate "$root/configs/smollm2.yaml"
"$duet" inspect "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
