#!/usr/bin/env bash
# The one GPU check, for a machine with an NVIDIA GPU (a few minutes on an H200):
# run the [cuda] tests, run the failure scenarios on the GPU with the driver's own
# memory count, and time the autoencoder and the Fashion-MNIST CNN against PyTorch
# on the same GPU. Prints a short table; gpu.log and gpu-logs.tgz go to $OUT if set.
#
# With .gpu-bundle/ (tests/gpu/prepare.sh) it runs the build prepared there, for a
# machine without this project's build dependencies; without it, it builds here
# with -DTRAINHOST_CUDA=ON.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
logs=$(mktemp -d)
summary=${OUT:-$logs}/gpu.log  # written as it goes: a run cut short still leaves its table
status=0
exec 3>&1  # the script's own output, wherever a stage's is redirected
log() { printf '%s\n' "$*" | tee -a "$summary" >&3; }
finish() {
  trap - EXIT TERM INT
  if [[ -n ${OUT:-} ]]; then tar -C "$logs" -czf "$OUT/gpu-logs.tgz" . 2>/dev/null; fi
  exit "$status"
}
fail() { log "FAIL: $*"; status=1; }
trap finish EXIT
trap 'fail "stopped by a signal"; finish' TERM INT
# Names that must lead to a given place; an earlier run's link is replaced.
link() {  # path, target
  [[ -e $1 && $1 -ef $2 ]] && return 0
  # Something real in the way (not a link of an earlier run): never link inside it.
  if [[ -e $1 && ! -L $1 ]]; then fail "$1 exists and is not $2"; finish; fi
  mkdir -p "$(dirname "$1")" && ln -sfn "$2" "$1" && [[ $1 -ef $2 ]] || { fail "$1 cannot lead to $2"; finish; }
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$summary"
# The runtime libraries the machine offers (cuDNN promises only that a newer runtime
# than the build's works).
python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'cuDNN', torch.backends.cudnn.version())" \
  2>&1 | tail -1 | tee -a "$summary"

# Each stage gets what is left of the 6 minutes the script may take, less a margin for
# the table; one that overruns is killed and fails, so the script still ends in time.
deadline=340
stage_times=()
within_budget() {  # stage name, command...
  local stage=$1 left=$((deadline - SECONDS)) started=$SECONDS rc
  shift
  if ((left < 5)); then fail "$stage: not run, the 6-minute budget is spent"; return 124; fi
  timeout -k 10 "$left" "$@"  # -k: trainhost takes a TERM as an interrupt, ending only after its step
  rc=$?
  stage_times+=("$stage $((SECONDS - started)) s")  # for sizing the budget from a real run
  ((rc == 124)) && fail "$stage: killed after ${left} s, at the end of the 6-minute budget"
  return "$rc"
}

# CUDA's libraries where this machine keeps them: the toolkit, or the wheels PyTorch uses.
cuda_library_path() {
  python3 - <<'PY'
import glob, os, site, sys
wanted = ["libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcudnn.so.9"]
# The toolkit's, then PyTorch's wheels (built for the CUDA the machine runs), then the
# system's, which may be built for another CUDA.
roots = ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"]
for base in site.getsitepackages():
    roots += sorted(glob.glob(os.path.join(base, "nvidia", "*", "lib")) + glob.glob(os.path.join(base, "nvidia", "lib")))
roots.append("/usr/lib/x86_64-linux-gnu")
found = []
for name in wanted:
    hit = next((r for r in roots if os.path.exists(os.path.join(r, name))), None)
    if hit is None:
        print(f"cuda_library_path: {name} not found", file=sys.stderr)
    elif hit not in found:
        found.append(hit)
print(":".join(found))
PY
}

if [[ -f .gpu-bundle/build.tar.xz ]]; then
  rm -rf build-gpu
  python3 -c "import tarfile; tarfile.open('.gpu-bundle/build.tar.xz').extractall('.')" ||
    { fail "could not unpack .gpu-bundle/build.tar.xz"; finish; }
  # The build names its checkout and itself by path (the test binary finds trainhost
  # and the plugins there): make those paths lead here.
  link "$(cat .gpu-bundle/source-dir)" "$root"
  link "$(cat .gpu-bundle/build-dir)" "$root/build-gpu"
  [[ -d /usr/share/datasets/fashion-mnist ]] || link /usr/share/datasets/fashion-mnist "$root/.gpu-bundle/fashion-mnist"
  library_path="$root/build-gpu/runtime-lib:$(cuda_library_path 2>>"$summary")"
  log "using the prepared build (.gpu-bundle)"
else
  command -v cmake >/dev/null && command -v ninja >/dev/null || { fail "needs cmake and ninja, or .gpu-bundle"; finish; }
  # A cuDNN that came with PyTorch's wheels rather than with the toolkit.
  CUDNN_ROOT=${CUDNN_ROOT:-$(python3 -c "import nvidia.cudnn; print(nvidia.cudnn.__path__[0])" 2>/dev/null)}
  export CUDNN_ROOT
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAINHOST_CUDA=ON >"$logs/configure.log" 2>&1 ||
    { fail "configure (configure.log)"; tail -20 "$logs/configure.log"; finish; }
  ninja -C build-gpu -j"$(nproc)" >"$logs/build.log" 2>&1 || { fail "build (build.log)"; tail -40 "$logs/build.log"; finish; }
  library_path=""
fi
# Only trainhost's own processes see the carried libraries: python3 and torch keep theirs.
th() { LD_LIBRARY_PATH="$library_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }
bin=build-gpu/core/trainhost
# ldd reports a library's missing symbol version (GLIBCXX_...) on stderr.
missing() {
  for binary in "$bin" build-gpu/tests/trainhost_tests build-gpu/plugins/*.so build-gpu/test_plugins/*.so; do
    th ldd "$binary" 2>&1
  done | grep "not found"
}
# This machine's own C++ runtime first; the build machine's only where this one is older.
if [[ -n $library_path ]] && missing >/dev/null; then library_path="$library_path:$root/build-gpu/runtime-lib/fallback"; fi
if missing >/dev/null; then missing | sort -u | tee -a "$summary"; fail "libraries missing"; finish; fi
# Which CUDA libraries trainhost loads (torch's own are printed above).
th ldd "$bin" | awk '$1 ~ /^lib(cudart|cublas|cublasLt|cudnn)\.so/ {print "loads", $1, $3}' | tee -a "$summary"
# th's environment as a command prefix, for what runs under timeout (which runs no shell function).
th_env=(env "LD_LIBRARY_PATH=$library_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")

# On a GPU machine a skip is a failure: every [cuda] test must really run.
within_budget "[cuda] tests" "${th_env[@]}" build-gpu/tests/trainhost_tests "[cuda]" -r compact >"$logs/cuda_tests.log" 2>&1 ||
  fail "[cuda] tests (cuda_tests.log)"
grep -q "no CUDA device" "$logs/cuda_tests.log" && fail "[cuda] tests skipped on a GPU machine"
grep -q "Fashion-MNIST is not installed" "$logs/cuda_tests.log" && fail "[cuda] tests skipped: no Fashion-MNIST"
log "[cuda] tests: $(grep -v '^$' "$logs/cuda_tests.log" | tail -1)"
grep -E "FAILED|failed" "$logs/cuda_tests.log" | head -20 | tee -a "$summary"

scenario() {  # name, args...
  local name=$1; shift
  within_budget "$name" "${th_env[@]}" "$bin" "$@" --report "$logs/$name.json" >"$logs/$name.log" 2>&1
  local rc=$?
  if ((rc != 0)); then fail "$name: exit $rc ($name.log)"; tail -5 "$logs/$name.log" | tee -a "$summary"; return; fi
  python3 - "$logs/$name.json" "$name" <<'PY' 2>&1 | tee -a "$summary" || status=1
import json, sys
r = json.load(open(sys.argv[1])); f = r["fits"]
def held(fit):  # what must stay the same: epoch ends after the first, or a predict fit's passes
    passes = fit["predict_memory"]
    if passes:
        return [passes["after_first_pass"]["bytes_in_use"], passes["after_last_pass"]["bytes_in_use"]]
    return [e["memory"]["bytes_in_use"] for e in fit["epochs"][1:]]
ends = {b for fit in f for b in held(fit)}
# Per fit: the first fit may also hold library kernel code the driver loads at a
# kernel's first launch (the warm-up's small shapes do not reach every kernel), so it
# is shown; from the second fit on the driver's count must be exact.
lost = [max(fit.get("unaccounted_device_bytes", {}).values(), default=0) for fit in f]
after = max(fit["memory_after_teardown"]["bytes_in_use"] for fit in f)
ok = len(f) >= 2 and len(ends) <= 1 and max(lost[1:], default=1) == 0 and after == 0 and r["exit_code"] == 0
print(f"{sys.argv[2]:<22} {'flat' if len(ends) <= 1 else 'GROWS'}  after teardown {after} B  "
      f"unaccounted: fit 1 {lost[0]} B, later fits max {max(lost[1:], default=0)} B ({len(f)} fits)  {'ok' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
}
# The example moves to a second CPU device; here the move is to the GPU, from home on the CPU.
sed 's/^target = "cpu:1"$/target = "cuda"/' examples/failures/togpu_every_epoch.toml >"$logs/togpu_every_epoch.toml"
grep -q '^target = "cuda"$' "$logs/togpu_every_epoch.toml" || fail "togpu_every_epoch.toml: no target line to point at the GPU"
# Two fits or more each: the driver's count is judged from the second fit on.
scenario togpu_every_epoch --config "$logs/togpu_every_epoch.toml" --plugins=togpu --epochs 10 --device cpu --verbose \
  --repeat 2
grep -q "moved the model from cpu:0 to cuda:0" "$logs/togpu_every_epoch.log" || fail "togpu_every_epoch never moved to cuda:0"
scenario forward_loop --config examples/failures/forward_loop.toml --device cuda --repeat 2
scenario teardown --config examples/failures/teardown.toml --device cuda --plugins=early_stopping,progress --repeat 2
scenario iterative_pruning --config examples/failures/iterative_pruning.toml --device cuda \
  --plugins=pruning,early_stopping,checkpoint --repeat 20

# Speed against PyTorch on the same GPU (torch comes with the device image).
bench() {  # name, config, epochs
  within_budget "$1 bench" "${th_env[@]}" "$bin" --config "$2" --device cuda --epochs "$3" --report "$logs/$1.bench.json" \
    >"$logs/$1.bench.log" 2>&1
  local rc=$?
  if ((rc != 0)); then fail "$1: trainhost exit $rc ($1.bench.log)"; tail -5 "$logs/$1.bench.log" | tee -a "$summary"; return; fi
  # PyTorch twice: with the data resident on the GPU (its fastest), and fed from host
  # memory with each step's loss read back, as trainhost is.
  local feed
  for feed in resident host; do
    within_budget "$1 torch peer" python3 bench/torch_peer.py --epochs "$3" --device cuda --feed "$feed" \
      --json "$logs/$1.torch-$feed.json" "$2" >"$logs/$1.torch-$feed.log" 2>&1 ||
      { fail "$1: torch peer, $feed data ($1.torch-$feed.log)"; tail -5 "$logs/$1.torch-$feed.log" | tee -a "$summary"; return; }
  done
  python3 - "$logs/$1.bench.json" "$logs/$1.torch-resident.json" "$logs/$1.torch-host.json" "$1" <<'PY' | tee -a "$summary"
import json, statistics, sys
t = statistics.median(e["metrics"]["samples_per_second"] for e in json.load(open(sys.argv[1]))["fits"][0]["epochs"])
resident, host = (json.load(open(path))["samples_per_second"] for path in sys.argv[2:4])
print(f"{sys.argv[4]:<22} trainhost {t:9.0f}/s  pytorch resident {resident:9.0f}/s (ratio {t / resident:5.2f})"
      f"  host-fed {host:9.0f}/s (ratio {t / host:5.2f})")
# Peak device memory, both fed from the host: trainhost's core leases (the ledger's
# peak in use) against PyTorch's tensors (max_memory_allocated).
ours = next((o.get("peak_bytes_in_use") for o in json.load(open(sys.argv[1]))["owners"] if o.get("owner") == "core"), None)
peer = json.load(open(sys.argv[3])).get("peak_device_bytes_allocated")
if ours and peer:
    print(f"{sys.argv[4]:<22} peak memory: trainhost core {ours / 2**20:8.1f} MiB  pytorch host-fed {peer / 2**20:8.1f} MiB"
          f" (ratio {ours / peer:5.2f})")
PY
}
bench autoencoder bench/configs/autoencoder.toml 3
bench fashion_mnist_cnn examples/fashion_mnist_cnn.toml 2
# At batch 32 and 64 a step is a handful of small kernels, so the two lines above weigh
# mostly launch overhead (PyTorch's Python and dispatcher against trainhost's C++). At
# batch 1024 the matrix products and convolutions weigh most.
large_batch() {  # name, config, epochs, then "key value" pairs: the config's lines to change
  local name=$1 config=$2 epochs=$3 pair key value
  shift 3
  cp "$config" "$logs/$name.toml"
  for pair in "batch_size 1024" "$@"; do
    read -r key value <<<"$pair"
    sed -i "s/^$key = [0-9]*/$key = $value/" "$logs/$name.toml"
    grep -q "^$key = $value\b" "$logs/$name.toml" || { fail "$name: no '$key = ' line in $config"; return; }
  done
  bench "$name" "$logs/$name.toml" "$epochs"
}
large_batch autoencoder_b1024 bench/configs/autoencoder.toml 3 "samples 32768"
large_batch fashion_mnist_cnn_b1024 examples/fashion_mnist_cnn.toml 2

# The tests that run CUDA work in this process ([memcheck]) under compute-sanitizer,
# where the machine has one that works (not under gVisor), with what is left of a
# 330 s budget: an out-of-bounds access that happens to read finite values passes
# every comparison above. Its own findings exit 99; anything else means it could not
# run. API errors are not its findings here: every call's status is checked by the
# code, and tests provoke some on purpose.
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
left=$((330 - SECONDS))
if [[ ! -x $sanitizer ]]; then
  log "memcheck: no compute-sanitizer on this machine"
elif ((left < 30)); then
  fail "memcheck: not run, ${left} s left of the budget"
else
  started=$SECONDS
  th timeout -k 10 "$left" "$sanitizer" --tool memcheck --report-api-errors no --error-exitcode 99 \
    build-gpu/tests/trainhost_tests "[memcheck]" -r compact >"$logs/memcheck.log" 2>&1
  rc=$?
  # Under gVisor the tool says so and the program then fails its first allocation.
  grep -q "Device not supported" "$logs/memcheck.log" && rc=unsupported
  case $rc in
  unsupported) log "memcheck: cannot run on this machine (Device not supported), no verdict" ;;
  0) log "memcheck: no errors in $((SECONDS - started)) s ($(grep -v '^=' "$logs/memcheck.log" | grep -v '^$' | tail -1))" ;;
  99) fail "memcheck found errors (memcheck.log)"; grep -m 20 "^=========" "$logs/memcheck.log" | tee -a "$summary" ;;
  124) fail "memcheck: did not finish in ${left} s (memcheck.log)" ;;
  *) log "memcheck: exit $rc, no verdict (memcheck.log)"; tail -3 "$logs/memcheck.log" | tee -a "$summary" ;;
  esac
fi
log "stage times: $(IFS=,; echo "${stage_times[*]}" | sed 's/,/, /g') (total ${SECONDS} s)"
log "status: $([[ $status == 0 ]] && echo ok || echo FAILED)"
finish
