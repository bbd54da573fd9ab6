// The numeric operations on a CUDA GPU, all ordered on the core's stream: GEMM
// through cuBLAS; convolution, max pooling and standalone activations through
// cuDNN; everything else (a dense layer's fused bias and activation included)
// through kernels/cuda. Each is the twin of the CPU backend's operation.
#pragma once

#include "device/backend.hpp"
#include "device/memory_resource.hpp"

#include <array>
#include <map>
#include <memory>

typedef struct CUstream_st* cudaStream_t;
typedef struct cublasContext* cublasHandle_t;
typedef struct cudnnContext* cudnnHandle_t;
typedef struct cudnnTensorStruct* cudnnTensorDescriptor_t;
typedef struct cudnnActivationStruct* cudnnActivationDescriptor_t;

namespace trainhost::device {

struct ConvDescriptors;
struct PoolDescriptors;
struct VectorDescriptor;
struct ActivationDescriptor;

class CudaBackend final : public Backend {
public:
    explicit CudaBackend(int ordinal);
    ~CudaBackend() override;
    // The core's stream and library handles (ledger leases of the owner "core"),
    // and the cuBLAS workspace leased with the handle.
    void bind(cudaStream_t stream, cublasHandle_t blas, void* blas_workspace, std::size_t blas_workspace_bytes,
              cudnnHandle_t dnn);
    void unbind() noexcept {
        stream_ = nullptr;
        blas_ = nullptr;
        dnn_ = nullptr;
    }

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
    [[nodiscard]] std::size_t loss_workspace(LossKind kind, std::size_t rows, std::size_t cols) const override;
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
    // Every call makes its device current first: with several GPUs, whichever
    // device ran last would otherwise receive the launch.
    void activate() const;
    // cuDNN's descriptors, made on first use and kept.
    [[nodiscard]] const ConvDescriptors& descriptors(const ConvShape& s);
    [[nodiscard]] const PoolDescriptors& descriptors(const PoolShape& s);
    [[nodiscard]] cudnnTensorDescriptor_t vector_descriptor(std::size_t n);
    [[nodiscard]] cudnnActivationDescriptor_t activation_descriptor(Activation kind);

    int ordinal_;
    cudaStream_t stream_ = nullptr;
    cublasHandle_t blas_ = nullptr;
    cudnnHandle_t dnn_ = nullptr;
    std::map<std::array<int, 8>, std::unique_ptr<ConvDescriptors>> conv_descriptors_;
    std::map<std::array<int, 6>, std::unique_ptr<PoolDescriptors>> pool_descriptors_;
    std::map<std::size_t, std::unique_ptr<VectorDescriptor>> vector_descriptors_;
    std::array<std::unique_ptr<ActivationDescriptor>, 3> activation_descriptors_;
};

// Runs every operation of the backend once on tiny data, so that the modules the
// driver loads lazily on first use (ours, cuBLAS's, cuDNN's) are loaded before a
// fit measures the device's free memory. Scratch comes from `memory` and is
// given back, and the pool trimmed, before it returns.
void warm_up(CudaBackend& backend, MemoryResource& memory);

}  // namespace trainhost::device
