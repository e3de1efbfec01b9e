#!/usr/bin/env bash
# Installs the Debian 12 packages Duet builds and tests with, and any package
# named as an argument. Idempotent: when everything is present it only checks
# and returns.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config python3 python3-pip python3-venv python3-dev
  libboost-dev libboost-program-options-dev libboost-filesystem-dev
  libyaml-cpp-dev libdnnl-dev ocl-icd-opencl-dev libpcre2-dev libgtest-dev libgmock-dev
  nlohmann-json3-dev curl
)
# Extra packages a script needs for itself, e.g. clang-format for check-format.sh.
packages+=("$@")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
