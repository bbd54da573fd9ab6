#!/usr/bin/env bash
# Installs the Debian packages trainhost needs, if any are missing. Idempotent.
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config libboost-dev libboost-stacktrace-dev libtomlplusplus-dev libfmt-dev catch2 libopenblas-dev libdnnl-dev
          zlib1g-dev libcli11-dev nlohmann-json3-dev dataset-fashion-mnist python3)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  # Through env: sudo drops the caller's DEBIAN_FRONTEND.
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
