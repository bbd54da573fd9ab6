#!/usr/bin/env bash
# Prepares tests/gpu/run.sh for a GPU machine that has the NVIDIA driver, CUDA's
# libraries (cuBLAS, cuDNN: the toolkit's or PyTorch's wheels) and python3 with
# torch, but none of this project's build dependencies (Boost, fmt, toml++, ...) and
# no network. Run it where the project builds (the CUDA toolkit and cuDNN are needed,
# a GPU is not). It writes .gpu-bundle/ (ignored by git), well under 64 MiB:
#   build.tar.xz    the Release build with CUDA, without objects, plus runtime-lib/:
#                   the shared libraries the binaries need beyond glibc, libstdc++,
#                   zlib and CUDA's own
#   fashion-mnist/  the dataset files, for a machine that has none
#   source-dir, build-dir   where this checkout and the build live: the build
#                   refers to both by path
# Usage: tests/gpu/prepare.sh [BUILD_DIR]   (default build-gpu; an existing build
# configured the same way is reused). Take .gpu-bundle along to the GPU machine and
# run tests/gpu/run.sh there.
set -euo pipefail
cd "$(dirname "$0")/../.."
bundle=.gpu-bundle
data=${TRAINHOST_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}

build=${1:-build-gpu}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAINHOST_CUDA=ON >/dev/null
ninja -C "$build" -j"$(nproc)"

rm -rf "$bundle" && mkdir -p "$bundle/fashion-mnist"
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
mkdir -p "$staging/build-gpu"
tar -C "$build" --exclude=CMakeFiles --exclude=Testing --exclude='*.o' --exclude='*.a' --exclude='.ninja_*' \
  --exclude='*.ninja' -cf - . | tar -C "$staging/build-gpu" -xf -
mkdir -p "$staging/build-gpu/runtime-lib"
# Everything the binaries load that a machine with CUDA and a C++ runtime may lack.
provided='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libz|libcuda|libcudart|libcublas|libcublasLt|libcudnn)\.so'
for binary in "$build"/core/trainhost "$build"/tests/trainhost_tests "$build"/plugins/*.so; do
  ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $provided ]] || cp -L "$path" "$staging/build-gpu/runtime-lib/$name"
done
tar -C "$staging" -cf - build-gpu | xz -T0 -6 >"$bundle/build.tar.xz"
cp "$data"/*-ubyte.gz "$bundle/fashion-mnist/"
pwd >"$bundle/source-dir"
(cd "$build" && pwd) >"$bundle/build-dir"
echo "$bundle: $(du -sh "$bundle" | cut -f1) (runtime-lib: $(ls "$staging/build-gpu/runtime-lib" | tr '\n' ' '))"
