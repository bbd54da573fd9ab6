// The numeric operations the model needs, over device pointers. One implementation
// per backend (cpu now, cuda next), each over its kernels/ twin; layers, losses and
// optimizers are written once against this interface.
#pragma once

#include "kernels/cpu/conv.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/optimizers.hpp"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainhost::device {

using Activation = kernels::cpu::Activation;
enum class LossKind { cross_entropy, bce_with_logits, mse };

using SgdHyper = kernels::cpu::SgdHyper;
using AdamHyper = kernels::cpu::AdamHyper;
using ConvShape = kernels::cpu::ConvShape;
using PoolShape = kernels::cpu::PoolShape;

// Scratch memory the caller holds for one call (a ledger lease, so that no backend
// allocates behind the ledger's back): `size` floats on the backend's device.
struct Workspace {
    float* data = nullptr;
    std::size_t size = 0;
};

// A workspace smaller than the call needs is a caller's bug: refuse it before any
// kernel could write past its end.
inline void require_workspace(const Workspace& workspace, std::size_t needed, const char* what) {
    if (needed > 0 && (workspace.data == nullptr || workspace.size < needed))
        throw std::invalid_argument(std::string(what) + ": workspace of " + std::to_string(workspace.size) +
                                    " floats, needs " + std::to_string(needed));
}

class Backend {
public:
    Backend() = default;
    Backend(const Backend&) = delete;
    Backend& operator=(const Backend&) = delete;
    virtual ~Backend() = default;

    // C = alpha * op(A) op(B) + beta * C, row-major.
    virtual void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const float* a, int lda,
                      const float* b, int ldb, float beta, float* c, int ldc) = 0;
    virtual void add_row_bias(float* y, const float* bias, std::size_t rows, std::size_t cols) = 0;
    virtual void bias_gradient(const float* dy, float* dbias, std::size_t rows, std::size_t cols) = 0;
    virtual void activation_forward(Activation kind, const float* x, float* y, std::size_t n) = 0;
    // x and y are the forward pass's input and output; each backend reads what its
    // library needs (the CPU only y, cuDNN both).
    virtual void activation_backward(Activation kind, const float* x, const float* y, const float* dy, float* dx,
                                     std::size_t n) = 0;
    // A dense layer's bias and activation in one pass, in place: y = act(y + bias)
    // over a rows x cols matrix. Backward: dz = the activation's backward pass from
    // the output y, dbias = column sums of dz; dz may be dy.
    virtual void bias_activation_forward(Activation kind, float* y, const float* bias, std::size_t rows,
                                         std::size_t cols) = 0;
    virtual void bias_activation_backward(Activation kind, const float* y, const float* dy, float* dz, float* dbias,
                                          std::size_t rows, std::size_t cols) = 0;
    virtual void dropout_forward(const float* x, const std::uint8_t* keep, float* y, std::size_t n, double p) = 0;
    virtual void dropout_backward(const float* dy, const std::uint8_t* keep, float* dx, std::size_t n, double p) = 0;
    // Mean loss over the batch; gradient of that mean into `grad` (nullable).
    // Classification reads `labels` (rows entries), the others `targets`.
    // `workspace` holds at least loss_workspace(kind, rows, cols) floats.
    [[nodiscard]] virtual std::size_t loss_workspace(LossKind kind, std::size_t rows, std::size_t cols) const = 0;
    virtual double loss(LossKind kind, const float* output, const std::int32_t* labels, const float* targets,
                        std::size_t rows, std::size_t cols, float* grad, std::size_t* correct, Workspace workspace) = 0;
    virtual void sgd_step(float* param, const float* grad, float* momentum, std::size_t n, const SgdHyper& hyper,
                          bool first_step) = 0;
    virtual void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
                           const AdamHyper& hyper, std::int64_t step) = 0;
    virtual void fill(float* y, std::size_t n, float value) = 0;
    virtual void copy(const float* x, float* y, std::size_t n) = 0;
    virtual void scale(float* x, std::size_t n, float factor) = 0;
    // Gradient clipping: Σ x² (a part of the global norm), read back to the host; and
    // x = min(max(x, -bound), bound), a NaN kept as torch.clamp keeps it.
    [[nodiscard]] virtual double squared_norm(const float* x, std::size_t n) = 0;
    virtual void clamp(float* x, std::size_t n, float bound) = 0;
    // y += a * x: gradient accumulation adds the window's held sum to a batch's gradients.
    virtual void axpy(float a, const float* x, float* y, std::size_t n) = 0;

    // NCHW convolution and max pooling. `workspace` holds at least conv_workspace(s)
    // floats; a layer sizes it for its largest batch, grows it where a smaller batch
    // needs more, and passes it whole. A layer sizes its pooling indices once.
    [[nodiscard]] virtual std::size_t conv_workspace(const ConvShape& s) const = 0;
    virtual void conv2d_forward(const ConvShape& s, const float* x, const float* weight, const float* bias, float* y,
                                Workspace workspace) = 0;
    virtual void conv2d_backward(const ConvShape& s, const float* x, const float* weight, const float* dy,
                                 float* dweight, float* dbias, float* dx, Workspace workspace) = 0;
    // Pooling's backward pass has what each library needs: the forward input and
    // output (cuDNN) and `indices`, pool_indices(s) entries the forward pass wrote
    // (the CPU's argmax; none on the GPU, where `indices` may be null).
    [[nodiscard]] virtual std::size_t pool_indices(const PoolShape& s) const = 0;
    virtual void max_pool2d_forward(const PoolShape& s, const float* x, float* y, std::int32_t* indices) = 0;
    virtual void max_pool2d_backward(const PoolShape& s, const float* x, const float* y, const float* dy,
                                     const std::int32_t* indices, float* dx) = 0;

    // Pruning support: x *= mask; mask = 0 where |x| <= threshold (others kept);
    // the k-th smallest |x| (1-based) over the entries each span's mask keeps.
    virtual void multiply_by_mask(float* x, const float* mask, std::size_t n) = 0;
    virtual void mask_below(const float* x, float threshold, float* mask, std::size_t n) = 0;
    struct MaskedSpan {
        const float* values;
        const float* mask;  // null: every entry counts
        std::size_t n;
    };
    [[nodiscard]] virtual float kth_smallest_magnitude(const std::vector<MaskedSpan>& spans, std::uint64_t k) = 0;
};

}  // namespace trainhost::device
