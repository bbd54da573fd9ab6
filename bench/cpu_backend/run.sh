#!/usr/bin/env bash
# OpenBLAS against oneDNN on the CPU backend's own work: the GEMMs of one training
# step of each bench/configs workload's dense layers, and the CNN's two convolutions
# (forward and backward) through im2col and OpenBLAS, and through oneDNN's primitives.
# Needs libbenchmark-dev and libdnnl-dev. THREADS (default nproc) sets both
# libraries' threads.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build-bench
for header in benchmark/benchmark.h oneapi/dnnl/dnnl.hpp; do
  [[ -f /usr/include/$header ]] ||
    { echo "bench/cpu_backend/run.sh: $header is missing: apt-get install libbenchmark-dev libdnnl-dev" >&2; exit 1; }
done
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAINHOST_BUILD_TESTS=OFF >/dev/null
ninja -C "$build" -j"${JOBS:-1}" openblas_vs_onednn >/dev/null
threads=${THREADS:-$(nproc)}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
read -r load _ </proc/loadavg
# Both libraries' thread pools sleep when idle, as in bench/run.sh (OMP_WAIT_POLICY).
OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} \
  "$build/bench/cpu_backend/openblas_vs_onednn" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_format=json --benchmark_out="$out" --benchmark_out_format=json >/dev/null
python3 - "$out" "$threads" "$load" <<'PY'
import json, sys
runs = {b["run_name"]: b for b in json.load(open(sys.argv[1]))["benchmarks"] if b.get("aggregate_name") == "median"}
def ms(name):
    b = runs[name]
    return b["real_time"] * {"ns": 1e-6, "us": 1e-3, "ms": 1, "s": 1e3}[b["time_unit"]]
print(f"{sys.argv[2]} threads, load average {sys.argv[3]} before; median of 5, ms per training step")
print(f"{'work':<48}{'OpenBLAS':>10}{'oneDNN':>10}{'oneDNN speed':>14}")
def row(label, ours, theirs):
    print(f"{label:<48}{ms(ours):>10.3f}{ms(theirs):>10.3f}{ms(ours) / ms(theirs):>13.2f}x")
for workload in ("mlp_fashion_mnist", "autoencoder", "cnn_fashion_mnist_dense"):
    row(f"dense GEMMs, {workload}", f"gemm_step/{workload}/openblas/real_time", f"gemm_step/{workload}/onednn/real_time")
# OpenBLAS's column: im2col and one GEMM per sample, trainhost's convolution before oneDNN's.
for layer in ("cnn_conv1_1x28x28_to_16", "cnn_conv2_16x14x14_to_32"):
    for variant in ("onednn_plain", "kernels_cpu"):
        row(f"conv {layer.removeprefix('cnn_')}, {variant}", f"conv_step/{layer}/im2col/real_time",
            f"conv_step/{layer}/{variant}/real_time")
PY
