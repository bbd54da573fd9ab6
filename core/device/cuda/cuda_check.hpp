// CUDA, cuBLAS and cuDNN calls that fail throw with the call and the library's text.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace trainhost::device::cuda_detail {

// A fault a kernel hit surfaces at whatever call next waits for the device, often a
// copy or a synchronize far from the kernel; such an error says so.
[[nodiscard]] inline bool asynchronous_fault(cudaError_t status) noexcept {
    switch (status) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorMisalignedAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout: return true;
    default: return false;
    }
}
[[nodiscard]] inline std::string describe(cudaError_t status) {
    std::string text = cudaGetErrorString(status);
    if (asynchronous_fault(status))
        text += " (a fault of earlier asynchronous work, not necessarily of this call; CUDA_LAUNCH_BLOCKING=1 "
                "reports it at the kernel that caused it)";
    return text;
}
// Clears the runtime's last-error state, which every failed call sets, so that the
// next kernel launch's check does not report this failure under its own name.
inline void forget_failure(cudaError_t status) noexcept {
    if (status != cudaSuccess) cudaGetLastError();
}
inline void check(cudaError_t status, const char* call) {
    if (status == cudaSuccess) return;
    forget_failure(status);
    throw std::runtime_error(std::string(call) + ": " + describe(status));
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
    forget_failure(status);
    if (status == cudaErrorMemoryAllocation) return true;
    fail(device, call, describe(status).c_str());
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
