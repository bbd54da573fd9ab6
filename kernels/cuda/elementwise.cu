// CUDA twins of kernels/cpu/elementwise.cpp.
//
// Arithmetic mirrors the CPU code operation for operation. Where the CPU does
// a multiply followed by an add, the explicit __fmul_rn / __fadd_rn (and the
// double __d*_rn) intrinsics stop nvcc from contracting them into one fused
// multiply-add, which would round differently from the CPU.

#include "kernels/cuda/common.cuh"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cuda/kernels.hpp"

#include <stdexcept>
#include <string>

namespace trainhost::kernels::cuda {
namespace {

using detail::check;
using detail::check_launch;
using detail::first_index;
using detail::grid_stride;
using detail::kThreads;

__global__ void fill_kernel(float* y, std::size_t n, float value) {
    for (std::size_t i = first_index(); i < n; i += grid_stride()) {
        y[i] = value;
    }
}

__global__ void scale_kernel(float* x, std::size_t n, float factor) {
    for (std::size_t i = first_index(); i < n; i += grid_stride()) {
        x[i] = __fmul_rn(x[i], factor);
    }
}

__global__ void clamp_kernel(float* x, std::size_t n, float bound) {
    for (std::size_t i = first_index(); i < n; i += grid_stride()) {
        const float v = x[i];
        if (!isnan(v)) {
            x[i] = fminf(fmaxf(v, -bound), bound);
        }
    }
}

__global__ void axpy_kernel(float a, const float* x, float* y, std::size_t n) {
    for (std::size_t i = first_index(); i < n; i += grid_stride()) {
        y[i] = __fadd_rn(y[i], __fmul_rn(a, x[i]));
    }
}

__global__ void add_row_bias_kernel(float* y, const float* bias, std::size_t total, std::size_t cols) {
    for (std::size_t i = first_index(); i < total; i += grid_stride()) {
        y[i] = __fadd_rn(y[i], bias[i % cols]);
    }
}

// One value of each activation and of its derivative from the output, with the
// CPU's arithmetic (kernels/cpu/elementwise.cpp).
struct Relu {
    __device__ static float value(float v) { return (v > 0.0f || isnan(v)) ? v : 0.0f; }  // NaN passes through
    __device__ static float gradient(float y, float dy) { return !(y <= 0.0f) ? dy : 0.0f; }  // NaN passes dy
};

struct Sigmoid {
    __device__ static float value(float x) {
        const double v = static_cast<double>(x);
        if (v >= 0.0) return static_cast<float>(1.0 / (1.0 + exp(-v)));
        const double e = exp(v);
        return static_cast<float>(e / (1.0 + e));
    }
    __device__ static float gradient(float y, float dy) {
        const double s = static_cast<double>(y);
        return static_cast<float>(__dmul_rn(__dmul_rn(static_cast<double>(dy), s), 1.0 - s));
    }
};

struct Tanh {
    __device__ static float value(float x) { return static_cast<float>(tanh(static_cast<double>(x))); }
    __device__ static float gradient(float y, float dy) {
        const double t = static_cast<double>(y);
        return static_cast<float>(__dmul_rn(static_cast<double>(dy), __dsub_rn(1.0, __dmul_rn(t, t))));
    }
};

// The column sum of dz alone (bias_gradient), or of dz = the activation's
// gradient, written as it goes (bias_activation_backward).
struct NoActivation {
    __device__ static float gradient(float, float dy) { return dy; }
};

// Column sums: each block owns kBiasCols consecutive columns (threadIdx.x, so
// every warp reads 32 consecutive floats of one row) and all the rows: row lane
// threadIdx.y sums rows y, y + kBiasLanes, ... in order, in double, then the
// lanes are combined by a fixed-shape tree in shared memory. The order of every
// addition depends only on (rows, cols), never on scheduling, so results are
// reproducible run to run.
constexpr int kBiasCols = 32;
constexpr int kBiasLanes = 16;  // power of two, for the tree

// dz null: only the sums (dz is dy itself).
template <typename Act>
__global__ void column_sums_kernel(const float* y, const float* dy, float* dz, float* dbias, std::size_t rows,
                                   std::size_t cols) {
    __shared__ double partial[kBiasLanes][kBiasCols + 1];  // +1: no bank conflicts down a column
    const std::size_t c = static_cast<std::size_t>(blockIdx.x) * kBiasCols + threadIdx.x;
    double sum = 0.0;
    if (c < cols) {
        for (std::size_t r = threadIdx.y; r < rows; r += kBiasLanes) {
            const std::size_t i = r * cols + c;
            const float g = Act::gradient(y ? y[i] : 0.0f, dy[i]);
            if (dz) dz[i] = g;
            sum += static_cast<double>(g);
        }
    }
    partial[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    for (int stride = kBiasLanes / 2; stride > 0; stride /= 2) {
        if (static_cast<int>(threadIdx.y) < stride) {
            partial[threadIdx.y][threadIdx.x] += partial[threadIdx.y + stride][threadIdx.x];
        }
        __syncthreads();
    }
    if (threadIdx.y == 0 && c < cols) {
        dbias[c] = static_cast<float>(partial[0][threadIdx.x]);
    }
}

template <typename Act>
__global__ void bias_activation_forward_kernel(float* y, const float* bias, std::size_t total, std::size_t cols) {
    for (std::size_t i = first_index(); i < total; i += grid_stride()) {
        y[i] = Act::value(__fadd_rn(y[i], bias[i % cols]));
    }
}

template <typename Act>
void launch_column_sums(const char* name, const float* y, const float* dy, float* dz, float* dbias, std::size_t rows,
                        std::size_t cols, cudaStream_t stream) {
    if (cols == 0) {
        return;
    }
    // rows == 0 still runs: every column sum is 0, as on the CPU.
    const std::size_t blocks = (cols + kBiasCols - 1) / kBiasCols;
    if (blocks > 0x7fffffffu) {
        throw std::invalid_argument(std::string(name) + ": too many columns (" + std::to_string(cols) + ")");
    }
    column_sums_kernel<Act><<<static_cast<unsigned int>(blocks), dim3(kBiasCols, kBiasLanes), 0, stream>>>(
        y, dy, dz, dbias, rows, cols);
    check_launch(name);
}

template <typename Act>
void launch_bias_activation_forward(float* y, const float* bias, std::size_t rows, std::size_t cols,
                                    cudaStream_t stream) {
    const std::size_t total = rows * cols;
    if (total == 0) {
        return;
    }
    bias_activation_forward_kernel<Act><<<detail::blocks_for(total), kThreads, 0, stream>>>(y, bias, total, cols);
    check_launch("bias_activation_forward");
}

__global__ void dropout_kernel(const float* in, const std::uint8_t* keep, float* out, std::size_t n,
                               float keep_scale) {
    for (std::size_t i = first_index(); i < n; i += grid_stride()) {
        out[i] = __fmul_rn(in[i], keep[i] != 0 ? keep_scale : 0.0f);  // NaN stays NaN where dropped, as on the CPU
    }
}

__global__ void multiply_by_mask_kernel(float* x, const float* mask, std::size_t n) {
    for (std::size_t i = first_index(); i < n; i += grid_stride()) {
        x[i] = __fmul_rn(x[i], mask[i]);
    }
}

__global__ void mask_below_kernel(const float* x, float threshold, float* mask, std::size_t n) {
    for (std::size_t i = first_index(); i < n; i += grid_stride()) {
        if (fabsf(x[i]) <= threshold) {
            mask[i] = 0.0f;
        }
    }
}

void apply_dropout_mask(const char* name, const float* in, const std::uint8_t* keep, float* out, std::size_t n,
                        double drop_probability, cudaStream_t stream) {
    const float keep_scale = cpu::dropout_keep_scale(drop_probability);
    if (n == 0) {
        return;
    }
    // Everything dropped (keep_scale 0) is a product too: NaN stays NaN, as in PyTorch.
    dropout_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(in, keep, out, n, keep_scale);
    check_launch(name);
}

}  // namespace

void fill(float* y, std::size_t n, float value, cudaStream_t stream) {
    if (n == 0) {
        return;
    }
    fill_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(y, n, value);
    check_launch("fill");
}

void copy(const float* x, float* y, std::size_t n, cudaStream_t stream) {
    if (n == 0 || x == y) {
        return;
    }
    check(cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, stream), "copy");
}

void scale(float* x, std::size_t n, float factor, cudaStream_t stream) {
    if (n == 0) {
        return;
    }
    scale_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(x, n, factor);
    check_launch("scale");
}

void clamp(float* x, std::size_t n, float bound, cudaStream_t stream) {
    if (n == 0) {
        return;
    }
    clamp_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(x, n, bound);
    check_launch("clamp");
}

void axpy(float a, const float* x, float* y, std::size_t n, cudaStream_t stream) {
    if (n == 0) {
        return;
    }
    axpy_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(a, x, y, n);
    check_launch("axpy");
}

void add_row_bias(float* y, const float* bias, std::size_t rows, std::size_t cols, cudaStream_t stream) {
    const std::size_t total = rows * cols;
    if (total == 0) {
        return;
    }
    add_row_bias_kernel<<<detail::blocks_for(total), kThreads, 0, stream>>>(y, bias, total, cols);
    check_launch("add_row_bias");
}

void bias_gradient(const float* dy, float* dbias, std::size_t rows, std::size_t cols, cudaStream_t stream) {
    launch_column_sums<NoActivation>("bias_gradient", nullptr, dy, nullptr, dbias, rows, cols, stream);
}

void bias_activation_forward(cpu::Activation kind, float* y, const float* bias, std::size_t rows, std::size_t cols,
                             cudaStream_t stream) {
    switch (kind) {
    case cpu::Activation::relu: launch_bias_activation_forward<Relu>(y, bias, rows, cols, stream); return;
    case cpu::Activation::sigmoid: launch_bias_activation_forward<Sigmoid>(y, bias, rows, cols, stream); return;
    case cpu::Activation::tanh: launch_bias_activation_forward<Tanh>(y, bias, rows, cols, stream); return;
    }
    throw std::invalid_argument("bias_activation_forward: unknown activation");
}

void bias_activation_backward(cpu::Activation kind, const float* y, const float* dy, float* dz, float* dbias,
                              std::size_t rows, std::size_t cols, cudaStream_t stream) {
    constexpr const char* name = "bias_activation_backward";
    switch (kind) {
    case cpu::Activation::relu: launch_column_sums<Relu>(name, y, dy, dz, dbias, rows, cols, stream); return;
    case cpu::Activation::sigmoid: launch_column_sums<Sigmoid>(name, y, dy, dz, dbias, rows, cols, stream); return;
    case cpu::Activation::tanh: launch_column_sums<Tanh>(name, y, dy, dz, dbias, rows, cols, stream); return;
    }
    throw std::invalid_argument("bias_activation_backward: unknown activation");
}

void dropout_forward(const float* x, const std::uint8_t* keep, float* y, std::size_t n, double drop_probability,
                     cudaStream_t stream) {
    apply_dropout_mask("dropout_forward", x, keep, y, n, drop_probability, stream);
}

void dropout_backward(const float* dy, const std::uint8_t* keep, float* dx, std::size_t n, double drop_probability,
                      cudaStream_t stream) {
    apply_dropout_mask("dropout_backward", dy, keep, dx, n, drop_probability, stream);
}

void multiply_by_mask(float* x, const float* mask, std::size_t n, cudaStream_t stream) {
    if (n == 0) {
        return;
    }
    multiply_by_mask_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(x, mask, n);
    check_launch("multiply_by_mask");
}

void mask_below(const float* x, float threshold, float* mask, std::size_t n, cudaStream_t stream) {
    if (n == 0) {
        return;
    }
    mask_below_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(x, threshold, mask, n);
    check_launch("mask_below");
}

}  // namespace trainhost::kernels::cuda
