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
# A test that hangs fails after 15 minutes (the slowest, the demo under ASan, takes ~2.5).
ctest --test-dir "$build" --output-on-failure -j2 --timeout 900
