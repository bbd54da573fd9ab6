#include "device/cuda/cuda_backend.hpp"

#include "device/cuda/cuda_check.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cuda/kernels.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <vector>

namespace trainhost::device {

namespace kc = kernels::cuda;

void CudaBackend::bind(cudaStream_t stream, cublasHandle_t blas, void* blas_workspace, std::size_t blas_workspace_bytes,
                       cudnnHandle_t dnn) {
    activate();
    stream_ = stream;
    blas_ = blas;
    dnn_ = dnn;
    TRAINHOST_CUDA_CHECK(cublasSetStream(blas_, stream_));
    // cublasSetStream puts cuBLAS back on its own workspace pool, which the ledger
    // does not see: hand it the leased workspace again, after the stream.
    TRAINHOST_CUDA_CHECK(cublasSetWorkspace(blas_, blas_workspace, blas_workspace_bytes));
    TRAINHOST_CUDA_CHECK(cudnnSetStream(dnn_, stream_));
    // Reproducible results, as on the CPU: no atomics-based reductions in cuBLAS.
    TRAINHOST_CUDA_CHECK(cublasSetAtomicsMode(blas_, CUBLAS_ATOMICS_NOT_ALLOWED));
}

void CudaBackend::activate() const { TRAINHOST_CUDA_CHECK(cudaSetDevice(ordinal_)); }

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
void CudaBackend::gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const float* a, int lda,
                       const float* b, int ldb, float beta, float* c, int ldc) {
    activate();
    TRAINHOST_CUDA_CHECK(cublasSgemm(blas_, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                     n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
}

void CudaBackend::add_row_bias(float* y, const float* bias, std::size_t rows, std::size_t cols) {
    activate();
    kc::add_row_bias(y, bias, rows, cols, stream_);
}

void CudaBackend::bias_gradient(const float* dy, float* dbias, std::size_t rows, std::size_t cols) {
    activate();
    kc::bias_gradient(dy, dbias, rows, cols, stream_);
}

void CudaBackend::activation_forward(Activation kind, const float* x, float* y, std::size_t n) {
    activate();
    switch (kind) {
    case Activation::relu: kc::relu_forward(x, y, n, stream_); break;
    case Activation::sigmoid: kc::sigmoid_forward(x, y, n, stream_); break;
    case Activation::tanh: kc::tanh_forward(x, y, n, stream_); break;
    }
}

void CudaBackend::activation_backward(Activation kind, const float* y, const float* dy, float* dx, std::size_t n) {
    activate();
    switch (kind) {
    case Activation::relu: kc::relu_backward(y, dy, dx, n, stream_); break;
    case Activation::sigmoid: kc::sigmoid_backward(y, dy, dx, n, stream_); break;
    case Activation::tanh: kc::tanh_backward(y, dy, dx, n, stream_); break;
    }
}

void CudaBackend::dropout_forward(const float* x, const std::uint8_t* keep, float* y, std::size_t n, float p) {
    activate();
    kc::dropout_forward(x, keep, y, n, p, stream_);
}

void CudaBackend::dropout_backward(const float* dy, const std::uint8_t* keep, float* dx, std::size_t n, float p) {
    activate();
    kc::dropout_backward(dy, keep, dx, n, p, stream_);
}

std::size_t CudaBackend::loss_workspace(LossKind kind, std::size_t rows, std::size_t cols) const {
    const std::size_t bytes = kind == LossKind::cross_entropy ? kc::cross_entropy_scratch_bytes(static_cast<int>(rows))
                                                              : kc::elementwise_loss_scratch_bytes(rows * cols);
    return (bytes + sizeof(float) - 1) / sizeof(float);
}

double CudaBackend::loss(LossKind kind, const float* output, const std::int32_t* labels, const float* targets,
                         std::size_t rows, std::size_t cols, float* grad, std::size_t* correct, Workspace workspace) {
    activate();
    const std::size_t scratch_bytes = workspace.size * sizeof(float);
    switch (kind) {
    case LossKind::cross_entropy: {
        int hits = 0;
        const double value = kc::cross_entropy(output, labels, static_cast<int>(rows), static_cast<int>(cols), grad,
                                               correct ? &hits : nullptr, workspace.data, scratch_bytes, stream_);
        if (correct) *correct = static_cast<std::size_t>(hits);
        return value;
    }
    case LossKind::bce_with_logits:
        return kc::bce_with_logits(output, targets, rows * cols, grad, workspace.data, scratch_bytes, stream_);
    case LossKind::mse: return kc::mse(output, targets, rows * cols, grad, workspace.data, scratch_bytes, stream_);
    }
    return 0;
}

void CudaBackend::sgd_step(float* param, const float* grad, float* momentum, std::size_t n, const SgdHyper& hyper,
                           bool first_step) {
    activate();
    kc::sgd_step(param, grad, momentum, n, hyper, first_step, stream_);
}

void CudaBackend::adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
                            const AdamHyper& hyper, std::int64_t step) {
    activate();
    kc::adam_step(param, grad, exp_avg, exp_avg_sq, n, hyper, step, stream_);
}

void CudaBackend::fill(float* y, std::size_t n, float value) {
    activate();
    kc::fill(y, n, value, stream_);
}

void CudaBackend::copy(const float* x, float* y, std::size_t n) {
    activate();
    kc::copy(x, y, n, stream_);
}

void CudaBackend::multiply_by_mask(float* x, const float* mask, std::size_t n) {
    activate();
    kc::multiply_by_mask(x, mask, n, stream_);
}

void CudaBackend::mask_below(const float* x, float threshold, float* mask, std::size_t n) {
    activate();
    kc::mask_below(x, threshold, mask, n, stream_);
}

// Selection runs on the host: it happens once per pruning step, not per batch.
float CudaBackend::kth_smallest_magnitude(const std::vector<MaskedSpan>& spans, std::uint64_t k) {
    activate();
    if (k == 0) return 0.0f;
    std::vector<float> kept, values, mask;
    for (const MaskedSpan& span : spans) {
        values.resize(span.n);
        TRAINHOST_CUDA_CHECK(cudaMemcpyAsync(values.data(), span.values, span.n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
        if (span.mask) {
            mask.resize(span.n);
            TRAINHOST_CUDA_CHECK(cudaMemcpyAsync(mask.data(), span.mask, span.n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
        }
        TRAINHOST_CUDA_CHECK(cudaStreamSynchronize(stream_));
        for (std::size_t i = 0; i < span.n; ++i)
            if (span.mask == nullptr || mask[i] != 0.0f) kept.push_back(values[i]);
    }
    return kernels::cpu::magnitude_threshold(kept.data(), kept.size(), static_cast<std::size_t>(k));
}

// cuDNN's descriptors of one convolution shape, batch included.
struct ConvDescriptors {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    explicit ConvDescriptors(const ConvShape& s) {
        try {
            describe(s);
        } catch (...) {
            destroy();  // the destructor does not run for a constructor that throws
            throw;
        }
    }
    ~ConvDescriptors() { destroy(); }
    ConvDescriptors(const ConvDescriptors&) = delete;
    ConvDescriptors& operator=(const ConvDescriptors&) = delete;

private:
    void describe(const ConvShape& s) {
        TRAINHOST_CUDA_CHECK(cudnnCreateTensorDescriptor(&x));
        TRAINHOST_CUDA_CHECK(cudnnCreateTensorDescriptor(&y));
        TRAINHOST_CUDA_CHECK(cudnnCreateTensorDescriptor(&bias));
        TRAINHOST_CUDA_CHECK(cudnnCreateFilterDescriptor(&w));
        TRAINHOST_CUDA_CHECK(cudnnCreateConvolutionDescriptor(&conv));
        TRAINHOST_CUDA_CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.batch, s.channels, s.height, s.width));
        TRAINHOST_CUDA_CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.batch, s.filters,
                                                        s.out_height(), s.out_width()));
        TRAINHOST_CUDA_CHECK(cudnnSetTensor4dDescriptor(bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, s.filters, 1, 1));
        TRAINHOST_CUDA_CHECK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.filters, s.channels, s.kernel, s.kernel));
        TRAINHOST_CUDA_CHECK(cudnnSetConvolution2dDescriptor(conv, s.padding, s.padding, s.stride, s.stride, 1, 1,
                                                             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        // fp32 results to compare with the CPU at 1e-5: no TF32 tensor-core math.
        TRAINHOST_CUDA_CHECK(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH));
    }
    void destroy() noexcept {
        if (conv) cudnnDestroyConvolutionDescriptor(conv);
        if (w) cudnnDestroyFilterDescriptor(w);
        if (bias) cudnnDestroyTensorDescriptor(bias);
        if (y) cudnnDestroyTensorDescriptor(y);
        if (x) cudnnDestroyTensorDescriptor(x);
    }
};

// Made once per shape: a step's convolutions would otherwise build and destroy five
// descriptors each, host work beside kernels of microseconds. A layer sees a few
// batch sizes (the full one, the last partial one, validation's), so few shapes.
const ConvDescriptors& CudaBackend::descriptors(const ConvShape& s) {
    const std::array<int, 8> key{s.batch, s.channels, s.height, s.width, s.filters, s.kernel, s.stride, s.padding};
    std::unique_ptr<ConvDescriptors>& slot = conv_descriptors_[key];
    if (!slot) slot = std::make_unique<ConvDescriptors>(s);
    return *slot;
}

CudaBackend::CudaBackend(int ordinal) : ordinal_(ordinal) {}
CudaBackend::~CudaBackend() = default;

namespace {

// Deterministic algorithms, as on the CPU; the workspace covers the largest of them.
constexpr cudnnConvolutionFwdAlgo_t kForward = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
constexpr cudnnConvolutionBwdDataAlgo_t kBackwardData = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
constexpr cudnnConvolutionBwdFilterAlgo_t kBackwardFilter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;

}  // namespace

std::size_t CudaBackend::conv_workspace(const ConvShape& s) const {
    activate();
    // Sized for the largest batch the layer will see; cuDNN needs a handle to ask.
    const ConvDescriptors d(s);
    std::size_t forward = 0, data = 0, filter = 0;
    TRAINHOST_CUDA_CHECK(cudnnGetConvolutionForwardWorkspaceSize(dnn_, d.x, d.w, d.conv, d.y, kForward, &forward));
    TRAINHOST_CUDA_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(dnn_, d.w, d.y, d.conv, d.x, kBackwardData, &data));
    TRAINHOST_CUDA_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(dnn_, d.x, d.y, d.conv, d.w, kBackwardFilter, &filter));
    return (std::max({forward, data, filter}) + sizeof(float) - 1) / sizeof(float) + 1;
}

// The whole workspace goes to cuDNN, which refuses one too small for the call: it
// was sized once for the layer's largest batch, and asking per call would cost three
// queries a step.
void CudaBackend::conv2d_forward(const ConvShape& s, const float* x, const float* weight, const float* bias, float* y,
                                 Workspace workspace) {
    activate();
    const ConvDescriptors& d = descriptors(s);
    const float one = 1.0f, zero = 0.0f;
    const std::size_t bytes = workspace.size * sizeof(float);
    TRAINHOST_CUDA_CHECK(cudnnConvolutionForward(dnn_, &one, d.x, x, d.w, weight, d.conv, kForward, workspace.data, bytes,
                                                 &zero, d.y, y));
    TRAINHOST_CUDA_CHECK(cudnnAddTensor(dnn_, &one, d.bias, bias, &one, d.y, y));
}

void CudaBackend::conv2d_backward(const ConvShape& s, const float* x, const float* weight, const float* dy,
                                  float* dweight, float* dbias, float* dx, Workspace workspace) {
    activate();
    const ConvDescriptors& d = descriptors(s);
    const float one = 1.0f, zero = 0.0f;
    const std::size_t bytes = workspace.size * sizeof(float);
    TRAINHOST_CUDA_CHECK(cudnnConvolutionBackwardFilter(dnn_, &one, d.x, x, d.y, dy, d.conv, kBackwardFilter, workspace.data,
                                                        bytes, &zero, d.w, dweight));
    TRAINHOST_CUDA_CHECK(cudnnConvolutionBackwardBias(dnn_, &one, d.y, dy, &zero, d.bias, dbias));
    if (dx != nullptr)
        TRAINHOST_CUDA_CHECK(cudnnConvolutionBackwardData(dnn_, &one, d.w, weight, d.y, dy, d.conv, kBackwardData,
                                                          workspace.data, bytes, &zero, d.x, dx));
}

// Pooling keeps the argmax of the forward pass, as on the CPU, so both backends share
// one layer and one backward rule (cuDNN's pooling backward wants x and y instead).
void CudaBackend::max_pool2d_forward(const PoolShape& s, const float* x, float* y, std::int32_t* argmax) {
    activate();
    kc::max_pool2d_forward(s, x, y, argmax, stream_);
}

void CudaBackend::max_pool2d_backward(const PoolShape& s, const float* dy, const std::int32_t* argmax, float* dx) {
    activate();
    kc::max_pool2d_backward(s, dy, argmax, dx, stream_);
}

}  // namespace trainhost::device
