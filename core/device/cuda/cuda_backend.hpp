// The numeric operations on a CUDA GPU: GEMM through cuBLAS, convolution through
// cuDNN, everything else (pooling included) through kernels/cuda, all ordered on
// the core's stream. Each is the twin of the CPU backend's operation.
#pragma once

#include "device/backend.hpp"
#include "device/memory_resource.hpp"

#include <array>
#include <map>
#include <memory>

typedef struct CUstream_st* cudaStream_t;
typedef struct cublasContext* cublasHandle_t;
typedef struct cudnnContext* cudnnHandle_t;

namespace trainhost::device {

struct ConvDescriptors;

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
    void activation_backward(Activation kind, const float* y, const float* dy, float* dx, std::size_t n) override;
    void dropout_forward(const float* x, const std::uint8_t* keep, float* y, std::size_t n, float p) override;
    void dropout_backward(const float* dy, const std::uint8_t* keep, float* dx, std::size_t n, float p) override;
    [[nodiscard]] std::size_t loss_workspace(LossKind kind, std::size_t rows, std::size_t cols) const override;
    double loss(LossKind kind, const float* output, const std::int32_t* labels, const float* targets, std::size_t rows,
                std::size_t cols, float* grad, std::size_t* correct, Workspace workspace) override;
    void sgd_step(float* param, const float* grad, float* momentum, std::size_t n, const SgdHyper& hyper,
                  bool first_step) override;
    void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::size_t n,
                   const AdamHyper& hyper, std::int64_t step) override;
    void fill(float* y, std::size_t n, float value) override;
    void copy(const float* x, float* y, std::size_t n) override;
    [[nodiscard]] std::size_t conv_workspace(const ConvShape& s) const override;
    void conv2d_forward(const ConvShape& s, const float* x, const float* weight, const float* bias, float* y,
                        Workspace workspace) override;
    void conv2d_backward(const ConvShape& s, const float* x, const float* weight, const float* dy, float* dweight,
                         float* dbias, float* dx, Workspace workspace) override;
    void max_pool2d_forward(const PoolShape& s, const float* x, float* y, std::int32_t* argmax) override;
    void max_pool2d_backward(const PoolShape& s, const float* dy, const std::int32_t* argmax, float* dx) override;
    void multiply_by_mask(float* x, const float* mask, std::size_t n) override;
    void mask_below(const float* x, float threshold, float* mask, std::size_t n) override;
    [[nodiscard]] float kth_smallest_magnitude(const std::vector<MaskedSpan>& spans, std::uint64_t k) override;

private:
    // Every call makes its device current first: with several GPUs, whichever
    // device ran last would otherwise receive the launch.
    void activate() const;
    [[nodiscard]] const ConvDescriptors& descriptors(const ConvShape& s);

    int ordinal_;
    cudaStream_t stream_ = nullptr;
    cublasHandle_t blas_ = nullptr;
    cudnnHandle_t dnn_ = nullptr;
    std::map<std::array<int, 8>, std::unique_ptr<ConvDescriptors>> conv_descriptors_;
};

// Runs every operation of the backend once on tiny data, so that the modules the
// driver loads lazily on first use (ours, cuBLAS's, cuDNN's) are loaded before a
// fit measures the device's free memory. Scratch comes from `memory` and is
// given back, and the pool trimmed, before it returns.
void warm_up(CudaBackend& backend, MemoryResource& memory);

}  // namespace trainhost::device
