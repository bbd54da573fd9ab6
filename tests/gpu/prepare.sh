#!/usr/bin/env bash
# Prepares tests/gpu/run.sh for a GPU machine that has the NVIDIA driver, CUDA's
# libraries (cuBLAS, cuDNN: the toolkit's or PyTorch's wheels) and python3 with
# torch, but none of this project's build dependencies (Boost, fmt, toml++, ...) and
# no network. Run it where the project builds (the CUDA toolkit and cuDNN are needed,
# a GPU is not). It writes .gpu-bundle/ (ignored by git), well under 64 MiB:
#   build.tar.xz    the Release build with CUDA, without objects, plus runtime-lib/:
#                   the shared libraries the binaries need beyond glibc, libstdc++,
#                   zlib and CUDA's own (and, in runtime-lib/fallback/, this
#                   machine's libstdc++ for a machine whose own is older)
#   fashion-mnist/  the dataset files, for a machine that has none
#   source-dir, build-dir   where this checkout and the build live: the build
#                   refers to both by path
# Usage: tests/gpu/prepare.sh [BUILD_DIR]   (default build-gpu, configured here; an
# existing Release build with the CUDA backend is reused as it is). Take .gpu-bundle
# along to the GPU machine and run tests/gpu/run.sh there.
set -euo pipefail
cd "$(dirname "$0")/../.."
bundle=.gpu-bundle
data=${TRAINHOST_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}

build=${1:-build-gpu}

if [[ -f $build/CMakeCache.txt ]]; then
  grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$build/CMakeCache.txt" && [[ -d $build/kernels/cuda ]] ||
    { echo "prepare.sh: $build is not a Release build with the CUDA backend; name another folder" >&2; exit 1; }
else
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAINHOST_CUDA=ON >/dev/null
fi
ninja -C "$build" -j"$(nproc)"

rm -rf "$bundle" && mkdir -p "$bundle/fashion-mnist"
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
mkdir -p "$staging/build-gpu"
tar -C "$build" --exclude=CMakeFiles --exclude=Testing --exclude='*.o' --exclude='*.a' --exclude='.ninja_*' \
  --exclude='*.ninja' -cf - . | tar -C "$staging/build-gpu" -xf -
mkdir -p "$staging/build-gpu/runtime-lib/fallback"
# Everything the binaries load that a machine with CUDA and a C++ runtime may lack:
# not glibc's own libraries, not zlib, not CUDA's.
provided='^(linux-vdso|ld-linux|libc|libm|libmvec|libdl|libpthread|librt|libutil|libresolv|libanl|libcrypt|libgcc_s|libstdc\+\+|libz|libcuda|libcudart|libcublas|libcublasLt|libcudnn)\.so'
for binary in "$build"/core/trainhost "$build"/tests/trainhost_tests "$build"/plugins/*.so "$build"/test_plugins/*.so; do
  ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ $name =~ ^(libstdc\+\+|libgcc_s)\.so ]]; then cp -L "$path" "$staging/build-gpu/runtime-lib/fallback/$name"
  elif [[ ! $name =~ $provided ]]; then cp -L "$path" "$staging/build-gpu/runtime-lib/$name"; fi
done
tar -C "$staging" -cf - build-gpu | xz -T0 -6 >"$bundle/build.tar.xz"
cp "$data"/*-ubyte.gz "$bundle/fashion-mnist/"
# The paths compiled into the build, as CMake wrote them.
sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" >"$bundle/source-dir"
sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$build/CMakeCache.txt" >"$bundle/build-dir"
echo "$bundle: $(du -sh "$bundle" | cut -f1) (runtime-lib: $(ls "$staging/build-gpu/runtime-lib" | tr '\n' ' '))"
