#pragma once

#include "device/backend.hpp"

#include <map>
#include <memory>

namespace trainhost::device {

// Forwards to kernels/cpu: GEMM through OpenBLAS, convolution through oneDNN.
class CpuBackend final : public Backend {
public:
    void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const float* a, int lda,
              const float* b, int ldb, float beta, float* c, int ldc) override;
    void add_row_bias(float* y, const float* bias, std::size_t rows, std::size_t cols) override;
    void bias_gradient(const float* dy, float* dbias, std::size_t rows, std::size_t cols) override;
    void activation_forward(Activation kind, const float* x, float* y, std::size_t n) override;
    void activation_backward(Activation kind, const float* x, const float* y, const float* dy, float* dx,
                             std::size_t n) override;
    void bias_activation_forward(Activation kind, float* y, const float* bias, std::size_t rows,
                                 std::size_t cols) override;
    void bias_activation_backward(Activation kind, const float* y, const float* dy, float* dz, float* dbias,
                                  std::size_t rows, std::size_t cols) override;
    void dropout_forward(const float* x, const std::uint8_t* keep, float* y, std::size_t n, double p) override;
    void dropout_backward(const float* dy, const std::uint8_t* keep, float* dx, std::size_t n, double p) override;
    [[nodiscard]] std::size_t loss_workspace(LossKind, std::size_t, std::size_t) const override { return 0; }
    double loss(LossKind kind, const float* output, const std::int32_t* labels, const float* targets, std::size_t rows,
                std::size_t cols, float* grad, std::size_t* correct, Workspace workspace) override;
    void sgd_step(float* param, const float* grad, float* momentum, std::size_t n, const SgdHyper& hyper,
                  bool first_step) override;
    void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
                   const AdamHyper& hyper, std::int64_t step) override;
    void fill(float* y, std::size_t n, float value) override;
    void scale(float* x, std::size_t n, float factor) override;
    [[nodiscard]] double squared_norm(const float* x, std::size_t n) override;
    void clamp(float* x, std::size_t n, float bound) override;
    void axpy(float a, const float* x, float* y, std::size_t n) override;
    void copy(const float* x, float* y, std::size_t n) override;
    [[nodiscard]] std::size_t conv_workspace(const ConvShape& s) const override;
    void conv2d_forward(const ConvShape& s, const float* x, const float* weight, const float* bias, float* y,
                        Workspace workspace) override;
    void conv2d_backward(const ConvShape& s, const float* x, const float* weight, const float* dy, float* dweight,
                         float* dbias, float* dx, Workspace workspace) override;
    [[nodiscard]] std::size_t pool_indices(const PoolShape& s) const override;
    void max_pool2d_forward(const PoolShape& s, const float* x, float* y, std::int32_t* indices) override;
    void max_pool2d_backward(const PoolShape& s, const float* x, const float* y, const float* dy,
                             const std::int32_t* indices, float* dx) override;
    void multiply_by_mask(float* x, const float* mask, std::size_t n) override;
    void mask_below(const float* x, float threshold, float* mask, std::size_t n) override;
    [[nodiscard]] float kth_smallest_magnitude(const std::vector<MaskedSpan>& spans, std::uint64_t k) override;

private:
    // oneDNN generates a convolution's kernels once per shape: a layer meets a few
    // (full batches, and each split's last one), and asking for a workspace makes them.
    kernels::cpu::Convolution& convolution(const ConvShape& s) const;
    mutable std::map<ConvShape, std::unique_ptr<kernels::cpu::Convolution>> convolutions_;
};

}  // namespace trainhost::device
