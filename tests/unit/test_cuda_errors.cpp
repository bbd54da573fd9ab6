// How a failed CUDA, cuBLAS or cuDNN allocation is told apart: out of memory is an
// answer, anything else a fault with its cause. Needs the toolkit, not a GPU.
#include "device/cuda/cuda_check.hpp"

#include <catch2/catch.hpp>

using trainhost::device::cuda_detail::check;
using trainhost::device::cuda_detail::out_of_memory;

TEST_CASE("only a want of memory reads as out of memory and any other failure names its call and cause", "[device]") {
    CHECK_FALSE(out_of_memory(cudaSuccess, "cuda:0", "cudaMallocFromPoolAsync"));
    CHECK(out_of_memory(cudaErrorMemoryAllocation, "cuda:0", "cudaMallocFromPoolAsync"));
    CHECK_THROWS_WITH(out_of_memory(cudaErrorInvalidValue, "cuda:0", "cudaMallocFromPoolAsync"),
                      std::string("cuda:0: cudaMallocFromPoolAsync: ") + cudaGetErrorString(cudaErrorInvalidValue));

    CHECK_FALSE(out_of_memory(CUBLAS_STATUS_SUCCESS, "cuda:0", "cublasCreate"));
    CHECK(out_of_memory(CUBLAS_STATUS_ALLOC_FAILED, "cuda:0", "cublasCreate"));
    CHECK_THROWS_WITH(out_of_memory(CUBLAS_STATUS_NOT_INITIALIZED, "cuda:0", "cublasCreate"),
                      std::string("cuda:0: cublasCreate: ") + cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED));

    CHECK_FALSE(out_of_memory(CUDNN_STATUS_SUCCESS, "cuda:1", "cudnnCreate"));
    CHECK(out_of_memory(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED, "cuda:1", "cudnnCreate"));
    CHECK(out_of_memory(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "cuda:1", "cudnnCreate"));
    // A cuDNN whose sub-libraries do not load (a wheel that does not match the headers).
    CHECK_THROWS_WITH(out_of_memory(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED, "cuda:1", "cudnnCreate"),
                      std::string("cuda:1: cudnnCreate: ") + cudnnGetErrorString(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED));
}

TEST_CASE("a fault of earlier asynchronous work says so wherever it surfaces", "[device]") {
    const std::string hint = "a fault of earlier asynchronous work, not necessarily of this call; "
                             "CUDA_LAUNCH_BLOCKING=1 reports it at the kernel that caused it";
    CHECK_NOTHROW(check(cudaSuccess, "cudaStreamSynchronize(stream_)"));
    for (const cudaError_t fault : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorMisalignedAddress,
                                    cudaErrorIllegalInstruction, cudaErrorAssert}) {
        INFO(cudaGetErrorName(fault));
        CHECK_THROWS_WITH(check(fault, "cudaStreamSynchronize(stream_)"),
                          std::string("cudaStreamSynchronize(stream_): ") + cudaGetErrorString(fault) + " (" + hint + ")");
        CHECK_THROWS_WITH(out_of_memory(fault, "cuda:0", "cudaMallocFromPoolAsync"),
                          std::string("cuda:0: cudaMallocFromPoolAsync: ") + cudaGetErrorString(fault) + " (" + hint + ")");
    }
    // A call's own failure names only its cause.
    CHECK_THROWS_WITH(check(cudaErrorInvalidValue, "cudaMemcpyAsync(...)"),
                      std::string("cudaMemcpyAsync(...): ") + cudaGetErrorString(cudaErrorInvalidValue));
}
