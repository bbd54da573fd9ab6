// CUDA twins of max_pool2d_forward / max_pool2d_backward in kernels/cpu/conv.cpp.

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.hpp"

#include <stdexcept>
#include <string>

namespace trainhost::kernels::cuda {
namespace {

using cpu::PoolShape;
using detail::check_launch;
using detail::first_index;
using detail::grid_stride;
using detail::kThreads;

struct PoolGeometry {
    int height, width, kernel, stride, out_height, out_width;
};

// One thread per output. The scan order and the update rule are the CPU's:
// the first element is always taken, then an element replaces the best unless
// it is <= best, and nothing replaces a NaN, so NaN propagates and ties keep
// the first maximum.
__global__ void max_pool2d_forward_kernel(const float* x, float* y, std::int32_t* argmax, std::size_t outputs,
                                          PoolGeometry g) {
    const std::size_t plane_outputs = static_cast<std::size_t>(g.out_height) * g.out_width;
    const std::size_t plane_inputs = static_cast<std::size_t>(g.height) * g.width;
    for (std::size_t out = first_index(); out < outputs; out += grid_stride()) {
        const std::size_t plane = out / plane_outputs;
        const auto within = static_cast<int>(out - plane * plane_outputs);
        const int oy = within / g.out_width;
        const int ox = within - oy * g.out_width;
        const float* in = x + plane * plane_inputs;
        float best = 0.0f;
        int best_index = -1;
        for (int ki = 0; ki < g.kernel; ++ki) {
            for (int kj = 0; kj < g.kernel; ++kj) {
                const int index = (oy * g.stride + ki) * g.width + ox * g.stride + kj;
                const float v = in[index];
                if (best_index < 0 || (best == best && !(v <= best))) {
                    best = v;
                    best_index = index;
                }
            }
        }
        y[out] = best;
        if (argmax != nullptr) {
            argmax[out] = best_index;
        }
    }
}

// One thread per input element: gathers dy from every output whose window
// covers it and whose argmax is it, in increasing output order, starting from
// 0 -- the same float additions in the same order as the CPU's scatter.
__global__ void max_pool2d_backward_kernel(const float* dy, const std::int32_t* argmax, float* dx, std::size_t inputs,
                                           PoolGeometry g) {
    const std::size_t plane_outputs = static_cast<std::size_t>(g.out_height) * g.out_width;
    const std::size_t plane_inputs = static_cast<std::size_t>(g.height) * g.width;
    for (std::size_t i = first_index(); i < inputs; i += grid_stride()) {
        const std::size_t plane = i / plane_inputs;
        const auto index = static_cast<int>(i - plane * plane_inputs);
        const int iy = index / g.width;
        const int ix = index - iy * g.width;
        // Outputs o with o * stride <= i <= o * stride + kernel - 1, clipped to the output.
        const int oy_first = iy < g.kernel ? 0 : (iy - g.kernel) / g.stride + 1;
        const int oy_last = min(iy / g.stride, g.out_height - 1);
        const int ox_first = ix < g.kernel ? 0 : (ix - g.kernel) / g.stride + 1;
        const int ox_last = min(ix / g.stride, g.out_width - 1);
        const std::size_t base = plane * plane_outputs;
        float sum = 0.0f;
        for (int oy = oy_first; oy <= oy_last; ++oy) {
            for (int ox = ox_first; ox <= ox_last; ++ox) {
                const std::size_t out = base + static_cast<std::size_t>(oy) * g.out_width + ox;
                if (argmax[out] == index) {
                    sum = __fadd_rn(sum, dy[out]);
                }
            }
        }
        dx[i] = sum;
    }
}

// Returns the geometry, or throws for a shape whose windows would read outside the input.
PoolGeometry geometry(const char* name, const PoolShape& s) {
    if (s.batch < 0 || s.channels < 0 || s.kernel < 1 || s.stride < 1 || s.height < s.kernel ||
        s.width < s.kernel) {
        throw std::invalid_argument(std::string(name) + ": invalid shape (batch " + std::to_string(s.batch) +
                                    ", channels " + std::to_string(s.channels) + ", " + std::to_string(s.height) +
                                    "x" + std::to_string(s.width) + ", kernel " + std::to_string(s.kernel) +
                                    ", stride " + std::to_string(s.stride) + ")");
    }
    return PoolGeometry{s.height, s.width, s.kernel, s.stride, s.out_height(), s.out_width()};
}

}  // namespace

void max_pool2d_forward(const cpu::PoolShape& s, const float* x, float* y, std::int32_t* argmax,
                        cudaStream_t stream) {
    const PoolGeometry g = geometry("max_pool2d_forward", s);
    const std::size_t outputs =
        static_cast<std::size_t>(s.batch) * s.channels * static_cast<std::size_t>(g.out_height) * g.out_width;
    if (outputs == 0) {
        return;
    }
    max_pool2d_forward_kernel<<<detail::blocks_for(outputs), kThreads, 0, stream>>>(x, y, argmax, outputs, g);
    check_launch("max_pool2d_forward");
}

void max_pool2d_backward(const cpu::PoolShape& s, const float* dy, const std::int32_t* argmax, float* dx,
                         cudaStream_t stream) {
    const PoolGeometry g = geometry("max_pool2d_backward", s);
    const std::size_t inputs = static_cast<std::size_t>(s.batch) * s.channels * static_cast<std::size_t>(s.height) *
                               static_cast<std::size_t>(s.width);
    if (inputs == 0) {
        return;
    }
    max_pool2d_backward_kernel<<<detail::blocks_for(inputs), kThreads, 0, stream>>>(dy, argmax, dx, inputs, g);
    check_launch("max_pool2d_backward");
}

}  // namespace trainhost::kernels::cuda
