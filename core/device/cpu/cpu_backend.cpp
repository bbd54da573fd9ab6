#include "device/cpu/cpu_backend.hpp"

#include "kernels/cpu/blas.hpp"
#include "kernels/cpu/conv.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/losses.hpp"
#include "kernels/cpu/optimizers.hpp"

namespace trainhost::device {

namespace k = kernels::cpu;

void CpuBackend::gemm(bool transpose_a, bool transpose_b, int m, int n, int kk, float alpha, const float* a, int lda,
                      const float* b, int ldb, float beta, float* c, int ldc) {
    k::gemm(transpose_a, transpose_b, m, n, kk, alpha, a, lda, b, ldb, beta, c, ldc);
}

void CpuBackend::add_row_bias(float* y, const float* bias, std::size_t rows, std::size_t cols) {
    k::add_row_bias(y, bias, rows, cols);
}

void CpuBackend::bias_gradient(const float* dy, float* dbias, std::size_t rows, std::size_t cols) {
    k::bias_gradient(dy, dbias, rows, cols);
}

void CpuBackend::activation_forward(Activation kind, const float* x, float* y, std::size_t n) {
    switch (kind) {
    case Activation::relu: k::relu_forward(x, y, n); break;
    case Activation::sigmoid: k::sigmoid_forward(x, y, n); break;
    case Activation::tanh: k::tanh_forward(x, y, n); break;
    }
}

void CpuBackend::activation_backward(Activation kind, const float*, const float* y, const float* dy, float* dx,
                                     std::size_t n) {
    switch (kind) {
    case Activation::relu: k::relu_backward(y, dy, dx, n); break;
    case Activation::sigmoid: k::sigmoid_backward(y, dy, dx, n); break;
    case Activation::tanh: k::tanh_backward(y, dy, dx, n); break;
    }
}

void CpuBackend::bias_activation_forward(Activation kind, float* y, const float* bias, std::size_t rows,
                                         std::size_t cols) {
    k::bias_activation_forward(kind, y, bias, rows, cols);
}

void CpuBackend::bias_activation_backward(Activation kind, const float* y, const float* dy, float* dz, float* dbias,
                                          std::size_t rows, std::size_t cols) {
    k::bias_activation_backward(kind, y, dy, dz, dbias, rows, cols);
}

void CpuBackend::dropout_forward(const float* x, const std::uint8_t* keep, float* y, std::size_t n, double p) {
    k::dropout_forward(x, keep, y, n, p);
}

void CpuBackend::dropout_backward(const float* dy, const std::uint8_t* keep, float* dx, std::size_t n, double p) {
    k::dropout_backward(dy, keep, dx, n, p);
}

double CpuBackend::loss(LossKind kind, const float* output, const std::int32_t* labels, const float* targets,
                        std::size_t rows, std::size_t cols, float* grad, std::size_t* correct, Workspace) {
    switch (kind) {
    case LossKind::cross_entropy: {
        int hits = 0;
        double value = k::cross_entropy(output, labels, static_cast<int>(rows), static_cast<int>(cols), grad,
                                        correct ? &hits : nullptr);
        if (correct) *correct = static_cast<std::size_t>(hits);
        return value;
    }
    case LossKind::bce_with_logits: return k::bce_with_logits(output, targets, rows * cols, grad);
    case LossKind::mse: return k::mse(output, targets, rows * cols, grad);
    }
    return 0;
}

void CpuBackend::sgd_step(float* param, const float* grad, float* momentum, std::size_t n, const SgdHyper& hyper,
                          bool first_step) {
    k::sgd_step(param, grad, momentum, n, hyper, first_step);
}

void CpuBackend::adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
                           const AdamHyper& hyper, std::int64_t step) {
    k::adam_step(param, grad, exp_avg, exp_avg_sq, n, hyper, step);
}

void CpuBackend::fill(float* y, std::size_t n, float value) { k::fill(y, n, value); }

void CpuBackend::copy(const float* x, float* y, std::size_t n) { k::copy(x, y, n); }

void CpuBackend::scale(float* x, std::size_t n, float factor) { k::scale(x, n, factor); }

double CpuBackend::squared_norm(const float* x, std::size_t n) { return k::squared_norm(x, n); }

void CpuBackend::clamp(float* x, std::size_t n, float bound) { k::clamp(x, n, bound); }

void CpuBackend::axpy(float a, const float* x, float* y, std::size_t n) { k::axpy(a, x, y, n); }

k::Convolution& CpuBackend::convolution(const ConvShape& s) const {
    auto& made = convolutions_[s];
    if (!made) made = std::make_unique<k::Convolution>(s);
    return *made;
}

std::size_t CpuBackend::conv_workspace(const ConvShape& s) const { return convolution(s).workspace_floats(); }

void CpuBackend::conv2d_forward(const ConvShape& s, const float* x, const float* weight, const float* bias, float* y,
                                Workspace workspace) {
    const k::Convolution& conv = convolution(s);
    require_workspace(workspace, conv.workspace_floats(), "conv2d_forward");
    conv.forward(x, weight, bias, y, workspace.data);
}

void CpuBackend::conv2d_backward(const ConvShape& s, const float* x, const float* weight, const float* dy,
                                 float* dweight, float* dbias, float* dx, Workspace workspace) {
    const k::Convolution& conv = convolution(s);
    require_workspace(workspace, conv.workspace_floats(), "conv2d_backward");
    conv.backward(x, weight, dy, dweight, dbias, dx, workspace.data);
}

std::size_t CpuBackend::pool_indices(const PoolShape& s) const {
    return static_cast<std::size_t>(s.batch) * s.channels * s.out_height() * s.out_width();
}

void CpuBackend::max_pool2d_forward(const PoolShape& s, const float* x, float* y, std::int32_t* indices) {
    if (indices == nullptr) throw std::invalid_argument("max_pool2d_forward: the CPU needs its argmax indices");
    k::max_pool2d_forward(s, x, y, indices);
}

void CpuBackend::max_pool2d_backward(const PoolShape& s, const float*, const float*, const float* dy,
                                     const std::int32_t* indices, float* dx) {
    if (indices == nullptr) throw std::invalid_argument("max_pool2d_backward: the CPU needs its argmax indices");
    k::max_pool2d_backward(s, dy, indices, dx);
}

void CpuBackend::multiply_by_mask(float* x, const float* mask, std::size_t n) { k::multiply_by_mask(x, mask, n); }

void CpuBackend::mask_below(const float* x, float threshold, float* mask, std::size_t n) {
    k::mask_below(x, threshold, mask, n);
}

float CpuBackend::kth_smallest_magnitude(const std::vector<MaskedSpan>& spans, std::uint64_t k) {
    if (k == 0) return 0.0f;
    std::vector<float> kept;
    for (const MaskedSpan& span : spans)
        for (std::size_t i = 0; i < span.n; ++i)
            if (span.mask == nullptr || span.mask[i] != 0.0f) kept.push_back(span.values[i]);
    return k::magnitude_threshold(kept.data(), kept.size(), static_cast<std::size_t>(k));
}

}  // namespace trainhost::device
