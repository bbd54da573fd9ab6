// CUDA twins of kernels/cpu/optimizers.cpp: one fused kernel per step.
//
// Validation, the scalar coefficients (computed in double on the host and
// rounded once) and the per-element float arithmetic are those of the CPU
// code, in the same order. The explicit __f*_rn intrinsics keep nvcc from
// fusing a multiply and an add into an FMA and use IEEE division and square
// root whatever the compiler flags, so the result matches the CPU bit for bit
// (given a CPU build that does not contract either).

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace trainhost::kernels::cuda {
namespace {

using cpu::AdamHyper;
using cpu::SgdHyper;
using detail::check_launch;
using detail::first_index;
using detail::grid_stride;
using detail::kThreads;

// --- kernels -------------------------------------------------------------------------

struct SgdCoefficients {
    float lr;
    float momentum;
    float weight_decay;
    float momentum_grad_weight;  // float(1 - dampening), computed in double
    bool use_momentum;
    bool nesterov;
    bool first_step;
};

__global__ void sgd_step_kernel(float* param, const float* grad, float* momentum_buffer, std::size_t n,
                                SgdCoefficients k) {
    for (std::size_t i = first_index(); i < n; i += grid_stride()) {
        const float p = param[i];
        float direction = grad[i];
        if (k.weight_decay != 0.0f) {
            direction = __fadd_rn(direction, __fmul_rn(k.weight_decay, p));
        }
        if (k.use_momentum) {
            // PyTorch initialises the buffer to a clone of the first direction,
            // without the (1 - dampening) factor.
            const float buffer =
                k.first_step ? direction
                             : __fadd_rn(__fmul_rn(momentum_buffer[i], k.momentum),
                                         __fmul_rn(k.momentum_grad_weight, direction));
            momentum_buffer[i] = buffer;
            direction = k.nesterov ? __fadd_rn(direction, __fmul_rn(k.momentum, buffer)) : buffer;
        }
        param[i] = __fadd_rn(p, __fmul_rn(-k.lr, direction));
    }
}

struct AdamCoefficients {
    float beta1;
    float beta2;
    float eps;
    float weight_decay;
    float step_size;               // float(lr / (1 - beta1^step))
    float bias_correction2_sqrt;   // float(sqrt(1 - beta2^step))
    float decoupled_decay_factor;  // float(1 - lr * weight_decay)
    float one_minus_beta1;
    float one_minus_beta2;
    bool has_weight_decay;
    bool decoupled_weight_decay;
};

__global__ void adam_step_kernel(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
                                 AdamCoefficients k) {
    for (std::size_t i = first_index(); i < n; i += grid_stride()) {
        float p = param[i];
        float g = grad[i];
        if (k.has_weight_decay) {
            if (k.decoupled_weight_decay) {
                p = __fmul_rn(p, k.decoupled_decay_factor);
            } else {
                g = __fadd_rn(g, __fmul_rn(k.weight_decay, p));
            }
        }
        const float m = __fadd_rn(__fmul_rn(k.beta1, exp_avg[i]), __fmul_rn(k.one_minus_beta1, g));
        // one_minus_beta2 * g * g groups as (one_minus_beta2 * g) * g, as in C++.
        const float v = __fadd_rn(__fmul_rn(k.beta2, exp_avg_sq[i]), __fmul_rn(__fmul_rn(k.one_minus_beta2, g), g));
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
        const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), k.bias_correction2_sqrt), k.eps);
        param[i] = __fadd_rn(p, __fdiv_rn(__fmul_rn(-k.step_size, m), denom));
    }
}

}  // namespace

void sgd_step(float* param, const float* grad, float* momentum_buffer, std::size_t n, const cpu::SgdHyper& hyper,
              bool first_step, cudaStream_t stream) {
    cpu::validate_sgd(hyper, momentum_buffer);
    if (n == 0) {
        return;
    }
    SgdCoefficients k{};
    k.lr = static_cast<float>(hyper.lr);
    k.momentum = static_cast<float>(hyper.momentum);
    k.weight_decay = static_cast<float>(hyper.weight_decay);
    // PyTorch computes 1 - dampening as a Python float before the tensor op.
    k.momentum_grad_weight = static_cast<float>(1.0 - hyper.dampening);
    k.use_momentum = hyper.momentum != 0.0;
    k.nesterov = hyper.nesterov;
    k.first_step = first_step;
    sgd_step_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(param, grad, momentum_buffer, n, k);
    check_launch("sgd_step");
}

void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
               const cpu::AdamHyper& hyper, std::int64_t step, cudaStream_t stream) {
    cpu::validate_adam(hyper, step);
    if (n == 0) {
        return;
    }
    const cpu::AdamScalars scalars = cpu::adam_scalars(hyper, step);  // the CPU's rounding, exactly
    AdamCoefficients k{};
    k.beta1 = static_cast<float>(hyper.beta1);
    k.beta2 = static_cast<float>(hyper.beta2);
    k.eps = static_cast<float>(hyper.eps);
    k.weight_decay = static_cast<float>(hyper.weight_decay);
    k.step_size = scalars.step_size;
    k.bias_correction2_sqrt = scalars.bias_correction2_sqrt;
    k.decoupled_decay_factor = scalars.decoupled_decay_factor;
    k.one_minus_beta1 = scalars.one_minus_beta1;
    k.one_minus_beta2 = scalars.one_minus_beta2;
    k.has_weight_decay = hyper.weight_decay != 0.0;
    k.decoupled_weight_decay = hyper.decoupled_weight_decay;
    adam_step_kernel<<<detail::blocks_for(n), kThreads, 0, stream>>>(param, grad, exp_avg, exp_avg_sq, n, k);
    check_launch("adam_step");
}

}  // namespace trainhost::kernels::cuda
