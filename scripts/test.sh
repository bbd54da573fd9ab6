#!/usr/bin/env bash
# Set up, build, and run every test. With --sanitize: the same under ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=build; flags=()
if [ "${1:-}" = "--sanitize" ]; then
  build=build-asan; flags=(-DCMAKE_BUILD_TYPE=Debug -DTRAINHOST_SANITIZE=ON)
fi
cmake -S . -B "$build" -G Ninja -DTRAINHOST_BUILD_TESTS=ON "${flags[@]}" >/dev/null
ninja -C "$build"
ctest --test-dir "$build" --output-on-failure -j2
