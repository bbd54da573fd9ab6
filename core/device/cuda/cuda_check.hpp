// CUDA, cuBLAS and cuDNN calls that fail throw with the call and the library's text.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <stdexcept>
#include <string>
#include <string_view>

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

// Whether an allocating call failed for want of memory (false when it succeeded).
// Any other failure, such as a fault an earlier kernel left or a library that did
// not load, throws naming the device and the call: it must not read as "out of memory".
[[noreturn]] inline void fail(std::string_view device, const char* call, const char* reason) {
    throw std::runtime_error(std::string(device) + ": " + call + ": " + reason);
}
inline bool out_of_memory(cudaError_t status, std::string_view device, const char* call) {
    if (status == cudaSuccess) return false;
    cudaGetLastError();  // clear the last-error state for the next call
    if (status == cudaErrorMemoryAllocation) return true;
    fail(device, call, cudaGetErrorString(status));
}
inline bool out_of_memory(cublasStatus_t status, std::string_view device, const char* call) {
    if (status == CUBLAS_STATUS_SUCCESS) return false;
    if (status == CUBLAS_STATUS_ALLOC_FAILED) return true;
    fail(device, call, cublasGetStatusString(status));
}
inline bool out_of_memory(cudnnStatus_t status, std::string_view device, const char* call) {
    if (status == CUDNN_STATUS_SUCCESS) return false;
    if (status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
        status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
        return true;
    fail(device, call, cudnnGetErrorString(status));
}

}  // namespace trainhost::device::cuda_detail

#define TRAINHOST_CUDA_CHECK(call) ::trainhost::device::cuda_detail::check((call), #call)
