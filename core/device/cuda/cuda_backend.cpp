#include "device/cuda/cuda_backend.hpp"

#include "device/cuda/cuda_check.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cuda/kernels.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
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

// cuDNN computes standalone activations; NaN propagates, as on the CPU.
void CudaBackend::activation_forward(Activation kind, const float* x, float* y, std::size_t n) {
    activate();
    if (n == 0) return;
    const float one = 1.0f, zero = 0.0f;
    const cudnnTensorDescriptor_t d = vector_descriptor(n);
    TRAINHOST_CUDA_CHECK(cudnnActivationForward(dnn_, activation_descriptor(kind), &one, d, x, &zero, d, y));
}

void CudaBackend::activation_backward(Activation kind, const float* x, const float* y, const float* dy, float* dx,
                                      std::size_t n) {
    activate();
    if (n == 0) return;
    const float one = 1.0f, zero = 0.0f;
    const cudnnTensorDescriptor_t d = vector_descriptor(n);
    TRAINHOST_CUDA_CHECK(
        cudnnActivationBackward(dnn_, activation_descriptor(kind), &one, d, y, d, dy, d, x, &zero, d, dx));
}

void CudaBackend::bias_activation_forward(Activation kind, float* y, const float* bias, std::size_t rows,
                                          std::size_t cols) {
    activate();
    kc::bias_activation_forward(kind, y, bias, rows, cols, stream_);
}

void CudaBackend::bias_activation_backward(Activation kind, const float* y, const float* dy, float* dz, float* dbias,
                                           std::size_t rows, std::size_t cols) {
    activate();
    kc::bias_activation_backward(kind, y, dy, dz, dbias, rows, cols, stream_);
}

void CudaBackend::dropout_forward(const float* x, const std::uint8_t* keep, float* y, std::size_t n, double p) {
    activate();
    kc::dropout_forward(x, keep, y, n, p, stream_);
}

void CudaBackend::dropout_backward(const float* dy, const std::uint8_t* keep, float* dx, std::size_t n, double p) {
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

void CudaBackend::scale(float* x, std::size_t n, float factor) {
    activate();
    kc::scale(x, n, factor, stream_);
}

// cuBLAS's nrm2 (scaled, so no square overflows float), deterministic since
// atomics are off; the host pointer makes it wait for the stream.
double CudaBackend::squared_norm(const float* x, std::size_t n) {
    activate();
    if (n == 0) return 0;
    float norm = 0;
    TRAINHOST_CUDA_CHECK(cublasSnrm2_64(blas_, static_cast<std::int64_t>(n), x, 1, &norm));
    return static_cast<double>(norm) * norm;
}

void CudaBackend::clamp(float* x, std::size_t n, float bound) {
    activate();
    kc::clamp(x, n, bound, stream_);
}

void CudaBackend::axpy(float a, const float* x, float* y, std::size_t n) {
    activate();
    kc::axpy(a, x, y, n, stream_);
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

namespace {

// One cuDNN descriptor, destroyed with its owner. Members of this type make a
// struct exception-safe: those made before one that fails are destroyed.
template <typename T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class DnnDescriptor {
public:
    DnnDescriptor() { TRAINHOST_CUDA_CHECK(Create(&value_)); }
    ~DnnDescriptor() {
        if (value_ != nullptr) Destroy(value_);
    }
    DnnDescriptor(const DnnDescriptor&) = delete;
    DnnDescriptor& operator=(const DnnDescriptor&) = delete;
    [[nodiscard]] T get() const noexcept { return value_; }

private:
    T value_ = nullptr;
};

using TensorDescriptor = DnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDescriptor = DnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor = DnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                                            cudnnDestroyConvolutionDescriptor>;
using PoolingDescriptor = DnnDescriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;
using ActivationModeDescriptor = DnnDescriptor<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor,
                                               cudnnDestroyActivationDescriptor>;

// NCHW with every dimension checked to fit cuDNN's int.
void set_nchw(const TensorDescriptor& d, std::size_t n, std::size_t c, std::size_t h, std::size_t w) {
    constexpr std::size_t kMax = std::numeric_limits<int>::max();
    // Factor by factor, so that the product cannot wrap around first.
    const bool fits = n <= kMax && c <= kMax / std::max<std::size_t>(n, 1) && h <= kMax / std::max<std::size_t>(n * c, 1) &&
                      w <= kMax / std::max<std::size_t>(n * c * h, 1);
    if (!fits)
        throw std::invalid_argument("cuDNN tensor of " + std::to_string(n) + "x" + std::to_string(c) + "x" +
                                    std::to_string(h) + "x" + std::to_string(w) + " elements is too large");
    TRAINHOST_CUDA_CHECK(cudnnSetTensor4dDescriptor(d.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(n),
                                                    static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)));
}

// Deterministic algorithms, as on the CPU; the workspace covers the largest of them.
constexpr cudnnConvolutionFwdAlgo_t kForward = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
constexpr cudnnConvolutionBwdDataAlgo_t kBackwardData = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
constexpr cudnnConvolutionBwdFilterAlgo_t kBackwardFilter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;

}  // namespace

// cuDNN's descriptors of one convolution shape, batch included.
struct ConvDescriptors {
    TensorDescriptor x, y, bias;
    FilterDescriptor w;
    ConvolutionDescriptor conv;
    explicit ConvDescriptors(const ConvShape& s) {
        set_nchw(x, s.batch, s.channels, s.height, s.width);
        set_nchw(y, s.batch, s.filters, s.out_height(), s.out_width());
        set_nchw(bias, 1, s.filters, 1, 1);
        TRAINHOST_CUDA_CHECK(
            cudnnSetFilter4dDescriptor(w.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.filters, s.channels, s.kernel, s.kernel));
        TRAINHOST_CUDA_CHECK(cudnnSetConvolution2dDescriptor(conv.get(), s.padding, s.padding, s.stride, s.stride, 1, 1,
                                                             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        // fp32 results to compare with the CPU at 1e-5: no TF32 tensor-core math.
        TRAINHOST_CUDA_CHECK(cudnnSetConvolutionMathType(conv.get(), CUDNN_FMA_MATH));
    }
};

// cuDNN's descriptors of one pooling shape, batch included. The deterministic max
// pooling, as on the CPU; NaN propagates, as on the CPU and in PyTorch.
struct PoolDescriptors {
    TensorDescriptor x, y;
    PoolingDescriptor pool;
    explicit PoolDescriptors(const PoolShape& s) {
        set_nchw(x, s.batch, s.channels, s.height, s.width);
        set_nchw(y, s.batch, s.channels, s.out_height(), s.out_width());
        TRAINHOST_CUDA_CHECK(cudnnSetPooling2dDescriptor(pool.get(), CUDNN_POOLING_MAX_DETERMINISTIC, CUDNN_PROPAGATE_NAN,
                                                         s.kernel, s.kernel, 0, 0, s.stride, s.stride));
        // cuDNN's output size must be the one the layer allocated.
        int n = 0, c = 0, h = 0, w = 0;
        TRAINHOST_CUDA_CHECK(cudnnGetPooling2dForwardOutputDim(pool.get(), x.get(), &n, &c, &h, &w));
        if (h != s.out_height() || w != s.out_width())
            throw std::logic_error("cuDNN pools " + std::to_string(s.height) + "x" + std::to_string(s.width) + " to " +
                                   std::to_string(h) + "x" + std::to_string(w) + ", the layer to " +
                                   std::to_string(s.out_height()) + "x" + std::to_string(s.out_width()));
    }
};

// Made once per shape: a step would otherwise build and destroy several descriptors
// per layer, host work beside kernels of microseconds. A layer sees a few batch
// sizes (the full one, the last partial one, validation's), so few shapes.
const ConvDescriptors& CudaBackend::descriptors(const ConvShape& s) {
    const std::array<int, 8> key{s.batch, s.channels, s.height, s.width, s.filters, s.kernel, s.stride, s.padding};
    std::unique_ptr<ConvDescriptors>& slot = conv_descriptors_[key];
    if (!slot) slot = std::make_unique<ConvDescriptors>(s);
    return *slot;
}

const PoolDescriptors& CudaBackend::descriptors(const PoolShape& s) {
    const std::array<int, 6> key{s.batch, s.channels, s.height, s.width, s.kernel, s.stride};
    std::unique_ptr<PoolDescriptors>& slot = pool_descriptors_[key];
    if (!slot) slot = std::make_unique<PoolDescriptors>(s);
    return *slot;
}

// A flat tensor of n elements, for the elementwise cuDNN calls.
struct VectorDescriptor {
    TensorDescriptor tensor;
    explicit VectorDescriptor(std::size_t n) { set_nchw(tensor, 1, 1, 1, n); }
};

struct ActivationDescriptor {
    ActivationModeDescriptor mode;
    explicit ActivationDescriptor(Activation kind) {
        const cudnnActivationMode_t cudnn_mode = kind == Activation::relu      ? CUDNN_ACTIVATION_RELU
                                                 : kind == Activation::sigmoid ? CUDNN_ACTIVATION_SIGMOID
                                                                               : CUDNN_ACTIVATION_TANH;
        TRAINHOST_CUDA_CHECK(cudnnSetActivationDescriptor(mode.get(), cudnn_mode, CUDNN_PROPAGATE_NAN, 0.0));
    }
};

cudnnTensorDescriptor_t CudaBackend::vector_descriptor(std::size_t n) {
    std::unique_ptr<VectorDescriptor>& slot = vector_descriptors_[n];
    if (!slot) slot = std::make_unique<VectorDescriptor>(n);
    return slot->tensor.get();
}

cudnnActivationDescriptor_t CudaBackend::activation_descriptor(Activation kind) {
    std::unique_ptr<ActivationDescriptor>& slot = activation_descriptors_[static_cast<std::size_t>(kind)];
    if (!slot) slot = std::make_unique<ActivationDescriptor>(kind);
    return slot->mode.get();
}

CudaBackend::CudaBackend(int ordinal) : ordinal_(ordinal) {}
CudaBackend::~CudaBackend() = default;

std::size_t CudaBackend::conv_workspace(const ConvShape& s) const {
    activate();
    // Sized for the largest batch the layer will see; cuDNN needs a handle to ask.
    const ConvDescriptors d(s);
    std::size_t forward = 0, data = 0, filter = 0;
    TRAINHOST_CUDA_CHECK(cudnnGetConvolutionForwardWorkspaceSize(dnn_, d.x.get(), d.w.get(), d.conv.get(), d.y.get(),
                                                                 kForward, &forward));
    TRAINHOST_CUDA_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(dnn_, d.w.get(), d.y.get(), d.conv.get(),
                                                                      d.x.get(), kBackwardData, &data));
    TRAINHOST_CUDA_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(dnn_, d.x.get(), d.y.get(), d.conv.get(),
                                                                        d.w.get(), kBackwardFilter, &filter));
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
    TRAINHOST_CUDA_CHECK(cudnnConvolutionForward(dnn_, &one, d.x.get(), x, d.w.get(), weight, d.conv.get(), kForward,
                                                 workspace.data, bytes, &zero, d.y.get(), y));
    TRAINHOST_CUDA_CHECK(cudnnAddTensor(dnn_, &one, d.bias.get(), bias, &one, d.y.get(), y));
}

void CudaBackend::conv2d_backward(const ConvShape& s, const float* x, const float* weight, const float* dy,
                                  float* dweight, float* dbias, float* dx, Workspace workspace) {
    activate();
    const ConvDescriptors& d = descriptors(s);
    const float one = 1.0f, zero = 0.0f;
    const std::size_t bytes = workspace.size * sizeof(float);
    TRAINHOST_CUDA_CHECK(cudnnConvolutionBackwardFilter(dnn_, &one, d.x.get(), x, d.y.get(), dy, d.conv.get(),
                                                        kBackwardFilter, workspace.data, bytes, &zero, d.w.get(), dweight));
    TRAINHOST_CUDA_CHECK(cudnnConvolutionBackwardBias(dnn_, &one, d.y.get(), dy, &zero, d.bias.get(), dbias));
    if (dx != nullptr)
        TRAINHOST_CUDA_CHECK(cudnnConvolutionBackwardData(dnn_, &one, d.w.get(), weight, d.y.get(), dy, d.conv.get(),
                                                          kBackwardData, workspace.data, bytes, &zero, d.x.get(), dx));
}

std::size_t CudaBackend::pool_indices(const PoolShape&) const { return 0; }

// cuDNN refuses an empty batch, which the CPU's loops simply do nothing for.
void CudaBackend::max_pool2d_forward(const PoolShape& s, const float* x, float* y, std::int32_t*) {
    activate();
    if (s.batch == 0) return;
    const PoolDescriptors& d = descriptors(s);
    const float one = 1.0f, zero = 0.0f;
    TRAINHOST_CUDA_CHECK(cudnnPoolingForward(dnn_, d.pool.get(), &one, d.x.get(), x, &zero, d.y.get(), y));
}

void CudaBackend::max_pool2d_backward(const PoolShape& s, const float* x, const float* y, const float* dy,
                                      const std::int32_t*, float* dx) {
    activate();
    if (s.batch == 0) return;
    const PoolDescriptors& d = descriptors(s);
    const float one = 1.0f, zero = 0.0f;
    TRAINHOST_CUDA_CHECK(cudnnPoolingBackward(dnn_, d.pool.get(), &one, d.y.get(), y, d.y.get(), dy, d.x.get(), x, &zero,
                                              d.x.get(), dx));
}

}  // namespace trainhost::device
