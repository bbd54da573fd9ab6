#pragma once

// Optimizer update steps over one flat parameter buffer, matching PyTorch's
// torch.optim.SGD and torch.optim.Adam / AdamW (single-tensor, non-fused,
// non-amsgrad, maximize=False). Per-element arithmetic is float, in the order of
// PyTorch's formulas (its lerp_ for Adam's first moment, which may fuse a multiply
// and an add, can differ in the last bit); scalar coefficients that PyTorch
// computes as Python floats are computed in double from the settings as given, and
// rounded once: the settings are double here for that reason (float(1 - 0.999) is
// not float(1 - float(0.999)), 1.3e-5 apart).

#include <cstddef>
#include <cstdint>

namespace trainhost::kernels::cpu {

struct SgdHyper {
    double lr;
    double momentum = 0.0;
    double dampening = 0.0;
    double weight_decay = 0.0;
    bool nesterov = false;
};

// One SGD step:
//   d = g + weight_decay * p
//   if momentum != 0:
//       buf = first_step ? d : momentum * buf + (1 - dampening) * d
//       d   = nesterov ? d + momentum * buf : buf
//   p -= lr * d
// momentum_buffer (n floats) may be nullptr only when momentum == 0; on the
// first step its previous contents are ignored and overwritten.
// Throws std::invalid_argument for the hyperparameters torch.optim.SGD
// rejects (negative lr / momentum / weight_decay, nesterov without momentum
// or with dampening) and for a missing momentum buffer.
void sgd_step(float* param, const float* grad, float* momentum_buffer, std::size_t n, const SgdHyper& hyper,
              bool first_step);

struct AdamHyper {
    double lr = 1e-3;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0.0;
    bool decoupled_weight_decay = false;  // true = AdamW
};

// One Adam / AdamW step. `step` is 1-based and already incremented, i.e. 1 on
// the first call; exp_avg and exp_avg_sq must start zeroed.
//   Adam:  g += weight_decay * p          AdamW: p *= 1 - lr * weight_decay
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   p -= (lr / (1 - beta1^step)) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
// Throws std::invalid_argument for step < 1 and for the hyperparameters
// torch.optim.Adam rejects (negative lr / eps / weight_decay, betas outside
// [0, 1)).
void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
               const AdamHyper& hyper, std::int64_t step);

// The per-step scalars of Adam, which PyTorch evaluates in Python (double)
// precision and every backend's twin rounds to float exactly so.
struct AdamScalars {
    float step_size;               // float(lr / (1 - beta1^step))
    float bias_correction2_sqrt;   // float(sqrt(1 - beta2^step))
    float decoupled_decay_factor;  // float(1 - lr * weight_decay)
    float one_minus_beta1;
    float one_minus_beta2;
};
[[nodiscard]] AdamScalars adam_scalars(const AdamHyper& hyper, std::int64_t step);

// The checks above, shared by every backend's twin so that all refuse alike.
void validate_sgd(const SgdHyper& hyper, const float* momentum_buffer);
void validate_adam(const AdamHyper& hyper, std::int64_t step);

}  // namespace trainhost::kernels::cpu
