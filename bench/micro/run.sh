#!/usr/bin/env bash
# Google Benchmark figures for the contract's overheads, with the ratios that the
# targets are stated in: ledger cost per allocate+free pair (target <= 50 ns over
# untracked), and 8-plugin hook dispatch as a share of one autoencoder step (< 1%).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build-bench
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAINHOST_BUILD_TESTS=OFF >/dev/null
ninja -C "$build" -j"${JOBS:-1}" contract_bench >/dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
OPENBLAS_NUM_THREADS=${THREADS:-$(nproc)} "$build/bench/micro/contract_bench" \
  --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_format=json --benchmark_out="$out" --benchmark_out_format=json >/dev/null
python3 - "$out" <<'PY'
import json, sys
runs = {b["run_name"]: b for b in json.load(open(sys.argv[1]))["benchmarks"] if b.get("aggregate_name") == "median"}
def ns(name):
    b = runs[name]
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]]
    return b["real_time"] * scale
untracked, tracked = ns("untracked_pair"), ns("ledger_pair")
hooks, step = ns("hook_to_8_plugins"), ns("autoencoder_step")
print(f"{'measure':<44}{'median':>14}")
print(f"{'allocate+free, untracked':<44}{untracked:>11.1f} ns")
print(f"{'allocate+free, through the ledger':<44}{tracked:>11.1f} ns")
print(f"{'ledger overhead per pair (target <= 50 ns)':<44}{tracked - untracked:>11.1f} ns")
print(f"{'one hook to 8 plugins':<44}{hooks:>11.1f} ns")
print(f"{'one autoencoder training step':<44}{step / 1e6:>11.2f} ms")
print(f"{'dispatch share of a step (target < 1%)':<44}{100 * hooks / step:>11.4f} %")
PY
