#!/usr/bin/env bash
# Training throughput of trainhost against PyTorch on the same models and data shapes.
#   bench/run.sh [--threads N] [--epochs E]
# N defaults to nproc, E to 3. Environment: PYTHON (an interpreter with torch and
# numpy), JOBS (ninja -j for the build, default 1).
set -euo pipefail
cd "$(dirname "$0")/.."

threads=$(nproc)
epochs=3
while [[ $# -gt 0 ]]; do
    case $1 in
        --threads) threads=$2; shift 2 ;;
        --epochs) epochs=$2; shift 2 ;;
        -h | --help) sed -n '2,5s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "bench/run.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

python=""
for candidate in ${PYTHON:-} python3 /usr/bin/python3; do
    if "$candidate" -c 'import torch, numpy' 2>/dev/null; then python=$candidate; break; fi
done
if [[ -z $python ]]; then
    echo "bench/run.sh: no python3 with PyTorch found; install it: apt-get install python3-torch" >&2
    echo "              (or point PYTHON at an interpreter that has torch and numpy)" >&2
    exit 1
fi

if [[ ! -f build-bench/build.ninja ]]; then
    cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAINHOST_BUILD_TESTS=OFF >/dev/null
fi
ninja -C build-bench -j "${JOBS:-1}" --quiet trainhost

export OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads
workdir=$(mktemp -d)
trap 'rm -rf "$workdir"' EXIT
configs=(bench/configs/mlp_fashion_mnist.toml bench/configs/autoencoder.toml)

for config in "${configs[@]}"; do
    name=$(basename "$config" .toml)
    echo "trainhost: $name ($epochs epochs, $threads threads)" >&2
    build-bench/core/trainhost --config "$config" --device cpu --epochs "$epochs" \
        --report "$workdir/$name.json" >"$workdir/$name.log" 2>&1 \
        || { cat "$workdir/$name.log" >&2; exit 1; }
done
echo "pytorch: ${configs[*]} ($epochs epochs, $threads threads)" >&2
"$python" bench/torch_peer.py --threads "$threads" --epochs "$epochs" "${configs[@]}" >"$workdir/torch.txt"

"$python" - "$workdir" "$threads" <<'EOF'
import json, pathlib, statistics, sys
workdir, threads = pathlib.Path(sys.argv[1]), sys.argv[2]
torch = dict(line.split() for line in (workdir / "torch.txt").read_text().splitlines())
print(f"\nmedian training samples/s per epoch, {threads} threads\n")
print(f"| {'workload':<18} | {'trainhost samples/s':>19} | {'pytorch samples/s':>17} | {'ratio (trainhost/pytorch)':>25} |")
print(f"|{'-' * 20}|{'-' * 20}:|{'-' * 18}:|{'-' * 26}:|")
for name, peer in torch.items():
    epochs = json.loads((workdir / f"{name}.json").read_text())["fits"][0]["epochs"]
    ours = statistics.median(e["metrics"]["samples_per_second"] for e in epochs)
    print(f"| {name:<18} | {ours:>19.0f} | {float(peer):>17.0f} | {ours / float(peer):>25.2f} |")
EOF
