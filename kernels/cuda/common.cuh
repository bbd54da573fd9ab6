#pragma once

// Internal helpers shared by the .cu files of trainhost_kernels_cuda.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace trainhost::kernels::cuda::detail {

constexpr int kThreads = 256;          // block size of the one-dimensional kernels
constexpr std::size_t kMaxBlocks = 65535;  // grid-stride loops cover anything larger

inline unsigned int blocks_for(std::size_t n) {
    return static_cast<unsigned int>(std::min<std::size_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

[[noreturn]] inline void fail(const char* what, cudaError_t error) {
    throw std::runtime_error(std::string("trainhost::kernels::cuda::") + what + ": " + cudaGetErrorName(error) +
                             ": " + cudaGetErrorString(error));
}

// After a launch: configuration errors (and sticky errors of earlier work) surface here.
inline void check_launch(const char* kernel) {
    const cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) {
        fail(kernel, error);
    }
}

// A failed call also sets the runtime's last-error state: cleared here, so that the
// next launch's check does not report this failure under its own kernel's name.
inline void check(cudaError_t error, const char* what) {
    if (error != cudaSuccess) {
        cudaGetLastError();
        fail(what, error);
    }
}

// Grid-stride index helpers, 64-bit throughout.
__device__ inline std::size_t first_index() {
    return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::size_t grid_stride() { return static_cast<std::size_t>(gridDim.x) * blockDim.x; }

}  // namespace trainhost::kernels::cuda::detail
