#include "device/cuda/cuda_device.hpp"

#include "device/cuda/cuda_backend.hpp"
#include "device/cuda/cuda_check.hpp"

#include <cstring>
#include <fmt/format.h>
#include <memory>
#include <new>

namespace trainhost::device {

using cuda_detail::forget_failure;
using cuda_detail::out_of_memory;

namespace {

// The handle plus its workspace: a BLAS lease is both.
struct CudaBlasContext {
    cublasHandle_t handle = nullptr;
    void* workspace = nullptr;
};

constexpr std::size_t kGranularity = 512;  // what the pool rounds small allocations to

}  // namespace

CudaProbe probe_cuda() noexcept {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    // The runtime says "insufficient driver" where no NVIDIA driver is installed at
    // all, which reads like a request to upgrade one.
    if (status == cudaErrorInsufficientDriver)
        return CudaProbe{0, fmt::format("no CUDA device: no NVIDIA driver, or one older than CUDA {}.{} needs",
                                        CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10)};
    if (status != cudaSuccess) return CudaProbe{0, std::string("no CUDA device: ") + cudaGetErrorString(status)};
    if (count == 0) return CudaProbe{0, "no CUDA device: the driver reports none"};
    return CudaProbe{count, ""};
}

CudaMemoryResource::CudaMemoryResource(int ordinal, std::string name) : ordinal_(ordinal), name_(std::move(name)) {
    TRAINHOST_CUDA_CHECK(cudaSetDevice(ordinal_));
    // Some virtual GPUs lack stream-ordered pools; the pool call would only say
    // "operation not supported".
    int pools_supported = 0;
    TRAINHOST_CUDA_CHECK(cudaDeviceGetAttribute(&pools_supported, cudaDevAttrMemoryPoolsSupported, ordinal_));
    if (pools_supported == 0)
        throw std::runtime_error(fmt::format("{}: the device has no stream-ordered memory pools (cudaMallocAsync), "
                                             "which trainhost's CUDA memory needs",
                                             name_));
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = ordinal_;
    TRAINHOST_CUDA_CHECK(cudaMemPoolCreate(&pool_, &props));
    // Keep freed memory cached in the pool between steps: flat after the first step.
    std::uint64_t keep = ~std::uint64_t{0};
    const cudaError_t status = cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep);
    if (status != cudaSuccess) {
        forget_failure(cudaMemPoolDestroy(pool_));  // no destructor runs for a constructor that throws
        cuda_detail::check(status, "cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep)");
    }
}

CudaMemoryResource::~CudaMemoryResource() {
    if (pool_ != nullptr) {
        forget_failure(cudaSetDevice(ordinal_));
        if (stream_ != nullptr) forget_failure(cudaStreamSynchronize(stream_));
        forget_failure(cudaMemPoolDestroy(pool_));
    }
}

std::size_t CudaMemoryResource::rounded(std::size_t bytes) const noexcept {
    if (bytes > ~std::size_t{0} - kGranularity) return bytes;  // no device has that much: the allocation fails
    return (bytes + kGranularity - 1) / kGranularity * kGranularity;
}

void* CudaMemoryResource::allocate(std::size_t bytes, std::size_t& reserved) {
    reserved = rounded(bytes);
    void* address = nullptr;
    if (out_of_memory(cudaSetDevice(ordinal_), name_, "cudaSetDevice") ||
        out_of_memory(cudaMallocFromPoolAsync(&address, bytes, pool_, stream_), name_, "cudaMallocFromPoolAsync"))
        return nullptr;
    stats_.in_use += bytes;
    stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
    ++stats_.allocations;
    return address;
}

void CudaMemoryResource::deallocate(void* address, std::size_t bytes, std::size_t) noexcept {
    if (address == nullptr) return;
    forget_failure(cudaSetDevice(ordinal_));
    forget_failure(cudaFreeAsync(address, stream_));
    stats_.in_use -= bytes;
    --stats_.allocations;
}

void CudaMemoryResource::copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) {
    TRAINHOST_CUDA_CHECK(cudaSetDevice(ordinal_));
    TRAINHOST_CUDA_CHECK(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream_));
    TRAINHOST_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaMemoryResource::copy_from_host(void* device_dst, const void* host_src, std::size_t bytes) {
    TRAINHOST_CUDA_CHECK(cudaSetDevice(ordinal_));
    TRAINHOST_CUDA_CHECK(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
    // The host buffer may go away when this returns.
    TRAINHOST_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaMemoryResource::trim() noexcept {
    forget_failure(cudaSetDevice(ordinal_));
    if (stream_ != nullptr) forget_failure(cudaStreamSynchronize(stream_));
    forget_failure(cudaMemPoolTrimTo(pool_, 0));
}

MemoryStats CudaMemoryResource::stats() const noexcept {
    MemoryStats stats = stats_;
    std::uint64_t reserved = 0;
    const cudaError_t status = cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved);
    if (status == cudaSuccess) stats.reserved = reserved;
    forget_failure(status);
    return stats;
}

void* CudaPinnedResource::allocate(std::size_t bytes, std::size_t& reserved) {
    reserved = rounded(bytes);
    void* address = nullptr;
    if (out_of_memory(cudaMallocHost(&address, bytes), name_, "cudaMallocHost")) return nullptr;
    stats_.in_use += bytes;
    stats_.reserved += bytes;
    stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
    ++stats_.allocations;
    return address;
}

void CudaPinnedResource::deallocate(void* address, std::size_t bytes, std::size_t reserved) noexcept {
    if (address == nullptr) return;
    forget_failure(cudaFreeHost(address));
    stats_.in_use -= bytes;
    stats_.reserved -= reserved;
    --stats_.allocations;
}

void CudaPinnedResource::copy_to_host(void* host_dst, const void* src, std::size_t bytes) { std::memcpy(host_dst, src, bytes); }

void CudaPinnedResource::copy_from_host(void* dst, const void* host_src, std::size_t bytes) {
    std::memcpy(dst, host_src, bytes);
}

CudaDevice::CudaDevice(int ordinal)
    : ordinal_(ordinal), name_("cuda:" + std::to_string(ordinal)),
      memory_(std::make_unique<CudaMemoryResource>(ordinal, name_)),
      pinned_(std::make_unique<CudaPinnedResource>(name_ + "/pinned")), backend_(std::make_unique<CudaBackend>(ordinal)) {}

CudaDevice::~CudaDevice() = default;

Backend& CudaDevice::backend() noexcept { return *backend_; }

void CudaDevice::adopt_core_objects(void* stream, void* blas, void* dnn) {
    if (stream == nullptr) {  // the core takes them back
        memory_->bind_stream(nullptr);
        backend_->unbind();
        return;
    }
    auto* stream_handle = static_cast<cudaStream_t>(stream);
    const auto* blas_context = static_cast<const CudaBlasContext*>(blas);
    memory_->bind_stream(stream_handle);
    backend_->bind(stream_handle, blas_context->handle, blas_context->workspace, kBlasWorkspaceBytes,
                   static_cast<cudnnHandle_t>(dnn));
}

void CudaDevice::warm_up() { device::warm_up(*backend_, *memory_); }

void* CudaDevice::create_object(th_resource_kind kind) {
    if (out_of_memory(cudaSetDevice(ordinal_), name_, "cudaSetDevice")) return nullptr;
    switch (kind) {
    case TH_RESOURCE_STREAM: {
        cudaStream_t stream = nullptr;
        return out_of_memory(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), name_, "cudaStreamCreateWithFlags")
                   ? nullptr
                   : stream;
    }
    case TH_RESOURCE_EVENT: {
        cudaEvent_t event = nullptr;
        return out_of_memory(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), name_, "cudaEventCreateWithFlags")
                   ? nullptr
                   : event;
    }
    case TH_RESOURCE_BLAS_HANDLE: {
        // Given back whole, handle and workspace, on either way out that is not success.
        const auto give_back = [this, kind](CudaBlasContext* partial) { destroy_object(kind, partial); };
        std::unique_ptr<CudaBlasContext, decltype(give_back)> context(new (std::nothrow) CudaBlasContext(), give_back);
        if (context == nullptr ||
            out_of_memory(cublasCreate(&context->handle), name_, "cublasCreate") ||
            out_of_memory(cudaMalloc(&context->workspace, kBlasWorkspaceBytes), name_, "cudaMalloc (cuBLAS workspace)") ||
            out_of_memory(cublasSetWorkspace(context->handle, context->workspace, kBlasWorkspaceBytes), name_,
                          "cublasSetWorkspace"))
            return nullptr;
        return context.release();
    }
    case TH_RESOURCE_DNN_HANDLE: {
        cudnnHandle_t handle = nullptr;
        return out_of_memory(cudnnCreate(&handle), name_, "cudnnCreate") ? nullptr : handle;
    }
    default: return nullptr;
    }
}

void CudaDevice::destroy_object(th_resource_kind kind, void* object) noexcept {
    forget_failure(cudaSetDevice(ordinal_));
    switch (kind) {
    case TH_RESOURCE_STREAM:
        forget_failure(cudaStreamSynchronize(static_cast<cudaStream_t>(object)));
        forget_failure(cudaStreamDestroy(static_cast<cudaStream_t>(object)));
        break;
    case TH_RESOURCE_EVENT: forget_failure(cudaEventDestroy(static_cast<cudaEvent_t>(object))); break;
    case TH_RESOURCE_BLAS_HANDLE: {
        auto* context = static_cast<CudaBlasContext*>(object);
        if (context->handle) cublasDestroy(context->handle);
        if (context->workspace) forget_failure(cudaFree(context->workspace));
        delete context;
        break;
    }
    case TH_RESOURCE_DNN_HANDLE: cudnnDestroy(static_cast<cudnnHandle_t>(object)); break;
    default: break;
    }
}

std::uint64_t CudaDevice::object_bytes(th_resource_kind kind) const noexcept {
    return kind == TH_RESOURCE_BLAS_HANDLE ? kBlasWorkspaceBytes : 0;
}

void CudaDevice::stream_synchronize(void* stream) {
    TRAINHOST_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

void CudaDevice::event_record(void* event, void* stream) {
    TRAINHOST_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
}

// Not ready is an answer; anything else is a fault that must not pass for "still running".
bool CudaDevice::event_query(void* event) {
    const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (status == cudaErrorNotReady) {
        forget_failure(status);
        return false;
    }
    TRAINHOST_CUDA_CHECK(status);
    return true;
}

void CudaDevice::synchronize() {
    TRAINHOST_CUDA_CHECK(cudaSetDevice(ordinal_));
    TRAINHOST_CUDA_CHECK(cudaDeviceSynchronize());
}

std::optional<std::uint64_t> CudaDevice::driver_free_bytes() const {
    std::size_t free = 0, total = 0;
    cudaError_t status = cudaSetDevice(ordinal_);
    if (status == cudaSuccess) status = cudaMemGetInfo(&free, &total);
    forget_failure(status);
    if (status != cudaSuccess) return std::nullopt;
    return free;
}

}  // namespace trainhost::device
