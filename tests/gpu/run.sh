#!/usr/bin/env bash
# The one GPU check, for a machine with an NVIDIA GPU (about 5 minutes on an H200):
# build with CUDA, run the [cuda] tests, run the failure scenarios on the GPU with
# the driver's own memory count, and time the autoencoder and the Fashion-MNIST CNN
# against PyTorch on the same GPU. Output: a short table; logs under $OUT if set.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$(mktemp -d)}
jobs=$(nproc)
log() { printf '%s\n' "$*" | tee -a "$out/gpu.log"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.log"
command -v cmake >/dev/null && command -v ninja >/dev/null || { log "needs cmake and ninja"; exit 2; }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAINHOST_CUDA=ON >"$out/configure.log" 2>&1 ||
  { log "configure failed (see configure.log)"; tail -20 "$out/configure.log"; exit 1; }
ninja -C build-gpu -j"$jobs" >"$out/build.log" 2>&1 || { log "build failed"; tail -40 "$out/build.log"; exit 1; }

# On a GPU machine a skip is a failure: every [cuda] test must really run.
build-gpu/tests/trainhost_tests "[cuda]" -r compact >"$out/cuda_tests.log" 2>&1
status=$?
if grep -q "no CUDA device" "$out/cuda_tests.log"; then log "FAIL: [cuda] tests skipped on a GPU machine"; status=1; fi
log "[cuda] tests: $(tail -1 "$out/cuda_tests.log")"

bin=build-gpu/core/trainhost
scenario() {  # name, args...
  local name=$1; shift
  if "$bin" "$@" --report "$out/$name.json" >"$out/$name.log" 2>&1; then
    python3 - "$out/$name.json" "$name" <<'PY' | tee -a "$out/gpu.log"
import json, sys
r = json.load(open(sys.argv[1])); f = r["fits"]
ends = {e["memory"]["bytes_in_use"] for fit in f for e in fit["epochs"][1:]}
lost = max((v for fit in f for v in fit.get("unaccounted_device_bytes", {}).values()), default=0)
after = max(fit["memory_after_teardown"]["bytes_in_use"] for fit in f)
ok = len(ends) <= 1 and lost == 0 and after == 0 and r["exit_code"] == 0
print(f"{sys.argv[2]:<22} {'flat' if len(ends) <= 1 else 'GROWS'}  after teardown {after} B  unaccounted {lost} B  {'ok' if ok else 'FAIL'}")
PY
  else
    log "$name: exit $? (see $name.log)"; status=1
  fi
}
scenario togpu_every_epoch --config examples/failures/togpu_every_epoch.toml --plugins=togpu --epochs 10
scenario forward_loop --config examples/failures/forward_loop.toml --device cuda
scenario teardown --config examples/failures/teardown.toml --device cuda --plugins=early_stopping,progress
scenario iterative_pruning --config examples/failures/iterative_pruning.toml --device cuda \
  --plugins=pruning,early_stopping,checkpoint --repeat 20

# Speed against PyTorch on the same GPU (torch comes with the device image).
bench() {  # name, config, epochs
  "$bin" --config "$2" --device cuda --epochs "$3" --report "$out/$1.bench.json" >"$out/$1.bench.log" 2>&1 || {
    log "$1: trainhost failed"; status=1; return; }
  python3 bench/torch_peer.py --epochs "$3" --device cuda --json "$out/$1.torch.json" "$2" >"$out/$1.torch.log" 2>&1 || {
    log "$1: torch peer failed (see $1.torch.log)"; return; }
  python3 - "$out/$1.bench.json" "$out/$1.torch.json" "$1" <<'PY' | tee -a "$out/gpu.log"
import json, statistics, sys
t = statistics.median(e["metrics"]["samples_per_second"] for e in json.load(open(sys.argv[1]))["fits"][0]["epochs"])
p = json.load(open(sys.argv[2]))["samples_per_second"]
print(f"{sys.argv[3]:<22} trainhost {t:10.0f}/s  pytorch {p:10.0f}/s  ratio {t / p:5.2f}")
PY
}
bench autoencoder bench/configs/autoencoder.toml 3
bench fashion_mnist_cnn examples/fashion_mnist_cnn.toml 2
exit $status
