#!/usr/bin/env bash
# The README's first command: install what is needed, fetch the model, build,
# and run the default pipeline (configs/smollm2.yaml) on the real model.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/fetch-model.sh" smollm2
bash "$root/scripts/build.sh"
duet="${DUET_BUILD_DIR:-$root/build}/bin/duet"

# The default pipeline on its built-in default prompt, "What is the capital
# of France?"; pass --prompt "..." to duet run for another question.
"$duet" run "$root/configs/smollm2.yaml"
