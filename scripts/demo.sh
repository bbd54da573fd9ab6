#!/usr/bin/env bash
# Set up, build, and train the Fashion-MNIST demo on the CPU with three plugins.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DTRAINHOST_BUILD_TESTS=ON >/dev/null
ninja -C build trainhost progress early_stopping lr_scheduler
exec build/core/trainhost --config examples/fashion_mnist.toml --plugins=progress,early_stopping,lr_scheduler --device cpu "$@"
