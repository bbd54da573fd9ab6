// CUDA, cuBLAS and cuDNN calls that fail throw with the call and the library's text.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <stdexcept>
#include <string>

namespace trainhost::device::cuda_detail {

inline void check(cudaError_t status, const char* call) {
    if (status != cudaSuccess) throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(status));
}
inline void check(cublasStatus_t status, const char* call) {
    if (status != CUBLAS_STATUS_SUCCESS)
        throw std::runtime_error(std::string(call) + ": " + cublasGetStatusString(status));
}
inline void check(cudnnStatus_t status, const char* call) {
    if (status != CUDNN_STATUS_SUCCESS) throw std::runtime_error(std::string(call) + ": " + cudnnGetErrorString(status));
}

}  // namespace trainhost::device::cuda_detail

#define TRAINHOST_CUDA_CHECK(call) ::trainhost::device::cuda_detail::check((call), #call)
