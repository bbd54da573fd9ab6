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
ninja -C build-bench -j "${JOBS:-1}" --quiet trainhost >&2 \
    || { echo "bench/run.sh: building trainhost in build-bench failed (see above)" >&2; exit 1; }

read -r load _ 2>/dev/null </proc/loadavg || load="?"  # other work on the machine skews figures
export OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads
# PyTorch's OpenMP workers spin while idle and then fight OpenBLAS's threads for the
# same cores; on 2 busy cores that made its 2-thread MLP ~10x slower than with
# PASSIVE, which lets idle workers sleep (see bench/README.md).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
workdir=$(mktemp -d)
trap 'rm -rf "$workdir"' EXIT
configs=(bench/configs/mlp_fashion_mnist.toml bench/configs/autoencoder.toml bench/configs/cnn_fashion_mnist.toml)

# Runs a command and writes its peak resident memory (KiB, the kernel's own count
# through getrusage) to a file; exits with the command's status.
peak_rss() {  # file, command...
    "$python" -c 'import resource, subprocess, sys
rc = subprocess.run(sys.argv[2:]).returncode
open(sys.argv[1], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(rc)' "$@"
}

# trainhost and PyTorch alternate per workload so that both see similar background load.
for config in "${configs[@]}"; do
    name=$(basename "$config" .toml)
    echo "$name: trainhost, then pytorch ($epochs epochs, $threads threads)" >&2
    peak_rss "$workdir/$name.rss" build-bench/core/trainhost --config "$config" --device cpu --epochs "$epochs" \
        --report "$workdir/$name.json" >"$workdir/$name.log" 2>&1 \
        || { cat "$workdir/$name.log" >&2; exit 1; }
    peak_rss "$workdir/$name.torch.rss" "$python" bench/torch_peer.py --threads "$threads" --epochs "$epochs" \
        "$config" >>"$workdir/torch.txt"
done
# What the libraries alone take, for reading the memory table.
peak_rss "$workdir/libraries.rss" build-bench/core/trainhost --version >/dev/null
peak_rss "$workdir/libraries.torch.rss" "$python" -c "import torch; torch.zeros(1) + 1"

"$python" - "$workdir" "$threads" "$load" <<'EOF'
import json, pathlib, statistics, sys
workdir, threads, load = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
torch = dict(line.split() for line in (workdir / "torch.txt").read_text().splitlines())
print(f"\nmedian training samples/s per epoch, {threads} threads, load average {load} before the run\n")
print(f"| {'workload':<18} | {'trainhost samples/s':>19} | {'pytorch samples/s':>17} | {'ratio (trainhost/pytorch)':>25} |")
print(f"|{'-' * 20}|{'-' * 20}:|{'-' * 18}:|{'-' * 26}:|")
for name, peer in torch.items():
    epochs = json.loads((workdir / f"{name}.json").read_text())["fits"][0]["epochs"]
    ours = statistics.median(e["metrics"]["samples_per_second"] for e in epochs)
    print(f"| {name:<18} | {ours:>19.0f} | {float(peer):>17.0f} | {ours / float(peer):>25.2f} |")

def mib(file):
    return int((workdir / file).read_text()) / 1024
print(f"\npeak resident memory (MiB) of the whole process, data and libraries included\n")
print(f"| {'workload':<18} | {'trainhost MiB':>13} | {'pytorch MiB':>11} | {'ratio (trainhost/pytorch)':>25} |")
print(f"|{'-' * 20}|{'-' * 14}:|{'-' * 12}:|{'-' * 26}:|")
for name in [*torch, "libraries"]:
    ours, peer = mib(f"{name}.rss"), mib(f"{name}.torch.rss")
    label = name if name != "libraries" else "(libraries alone)"
    print(f"| {label:<18} | {ours:>13.0f} | {peer:>11.0f} | {ours / peer:>25.2f} |")
EOF
