#include "kernels/cpu/optimizers.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace trainhost::kernels::cpu {
namespace {

void require(bool condition, const std::string& message) {
    if (!condition) {
        throw std::invalid_argument(message);
    }
}

// False for NaN as well, so NaN hyperparameters are rejected.
bool is_non_negative(double x) { return x >= 0.0; }

}  // namespace

void validate_sgd(const SgdHyper& hyper, const float* momentum_buffer) {
    require(is_non_negative(hyper.lr), "sgd_step: lr must be >= 0, got " + std::to_string(hyper.lr));
    require(is_non_negative(hyper.momentum), "sgd_step: momentum must be >= 0, got " + std::to_string(hyper.momentum));
    require(is_non_negative(hyper.weight_decay),
            "sgd_step: weight_decay must be >= 0, got " + std::to_string(hyper.weight_decay));
    require(std::isfinite(hyper.dampening), "sgd_step: dampening must be finite");
    require(!hyper.nesterov || (hyper.momentum > 0.0 && hyper.dampening == 0.0),
            "sgd_step: Nesterov momentum requires a momentum and zero dampening");
    require(hyper.momentum == 0.0f || momentum_buffer != nullptr,
            "sgd_step: momentum != 0 needs a momentum buffer");
}

void validate_adam(const AdamHyper& hyper, std::int64_t step) {
    require(step >= 1, "adam_step: step is 1-based, got " + std::to_string(step));
    require(is_non_negative(hyper.lr), "adam_step: lr must be >= 0, got " + std::to_string(hyper.lr));
    require(is_non_negative(hyper.eps), "adam_step: eps must be >= 0, got " + std::to_string(hyper.eps));
    require(is_non_negative(hyper.weight_decay),
            "adam_step: weight_decay must be >= 0, got " + std::to_string(hyper.weight_decay));
    require(hyper.beta1 >= 0.0 && hyper.beta1 < 1.0,
            "adam_step: beta1 must be in [0, 1), got " + std::to_string(hyper.beta1));
    require(hyper.beta2 >= 0.0 && hyper.beta2 < 1.0,
            "adam_step: beta2 must be in [0, 1), got " + std::to_string(hyper.beta2));
}


void sgd_step(float* param, const float* grad, float* momentum_buffer, std::size_t n, const SgdHyper& hyper,
              bool first_step) {
    validate_sgd(hyper, momentum_buffer);
    const bool use_momentum = hyper.momentum != 0.0;
    // PyTorch computes 1 - dampening as a Python float before the tensor op.
    const auto momentum_grad_weight = static_cast<float>(1.0 - hyper.dampening);
    // A tensor op rounds its scalar argument to the tensor's type.
    const auto lr = static_cast<float>(hyper.lr);
    const auto momentum = static_cast<float>(hyper.momentum);
    const auto weight_decay = static_cast<float>(hyper.weight_decay);

    for (std::size_t i = 0; i < n; ++i) {
        float direction = grad[i];
        if (hyper.weight_decay != 0.0) {
            direction += weight_decay * param[i];
        }
        if (use_momentum) {
            float& buffer = momentum_buffer[i];
            // PyTorch initialises the buffer to a clone of the first direction,
            // without the (1 - dampening) factor.
            buffer = first_step ? direction : buffer * momentum + momentum_grad_weight * direction;
            direction = hyper.nesterov ? direction + momentum * buffer : buffer;
        }
        param[i] += -lr * direction;
    }
}

AdamScalars adam_scalars(const AdamHyper& hyper, std::int64_t step) {
    // In float, the bias corrections would visibly lose accuracy once beta^step is
    // close to 1 in the first steps of beta2 = 0.999.
    const double lr = hyper.lr;
    const double steps = static_cast<double>(step);
    const double bias_correction1 = 1.0 - std::pow(hyper.beta1, steps);
    const double bias_correction2 = 1.0 - std::pow(hyper.beta2, steps);
    return AdamScalars{static_cast<float>(lr / bias_correction1), static_cast<float>(std::sqrt(bias_correction2)),
                       static_cast<float>(1.0 - lr * hyper.weight_decay), static_cast<float>(1.0 - hyper.beta1),
                       static_cast<float>(1.0 - hyper.beta2)};
}

void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
               const AdamHyper& hyper, std::int64_t step) {
    validate_adam(hyper, step);

    const AdamScalars k = adam_scalars(hyper, step);
    const float step_size = k.step_size;
    const float bias_correction2_sqrt = k.bias_correction2_sqrt;
    const float decoupled_decay_factor = k.decoupled_decay_factor;
    const float one_minus_beta1 = k.one_minus_beta1;
    const float one_minus_beta2 = k.one_minus_beta2;
    const bool has_weight_decay = hyper.weight_decay != 0.0;
    const auto beta1 = static_cast<float>(hyper.beta1);
    const auto beta2 = static_cast<float>(hyper.beta2);
    const auto eps = static_cast<float>(hyper.eps);
    const auto weight_decay = static_cast<float>(hyper.weight_decay);

    for (std::size_t i = 0; i < n; ++i) {
        float g = grad[i];
        if (has_weight_decay) {
            if (hyper.decoupled_weight_decay) {
                param[i] *= decoupled_decay_factor;
            } else {
                g += weight_decay * param[i];
            }
        }
        exp_avg[i] = beta1 * exp_avg[i] + one_minus_beta1 * g;
        exp_avg_sq[i] = beta2 * exp_avg_sq[i] + one_minus_beta2 * g * g;
        const float denom = std::sqrt(exp_avg_sq[i]) / bias_correction2_sqrt + eps;
        param[i] += (-step_size * exp_avg[i]) / denom;
    }
}

}  // namespace trainhost::kernels::cpu

