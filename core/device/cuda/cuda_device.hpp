// A CUDA GPU: memory from a stream-ordered cudaMallocAsync pool (the caching
// allocator; trimmed at fit end), pinned host memory for transfers, real streams,
// events, cuBLAS handles with their workspace and cuDNN handles.
#pragma once

#include "device/device.hpp"

#include <memory>
#include <string>

typedef struct CUstream_st* cudaStream_t;
typedef struct CUmemPoolHandle_st* cudaMemPool_t;

namespace trainhost::device {

class CudaBackend;

struct CudaProbe {
    int count = 0;
    std::string status;  // why there is no device, when count is 0
};
[[nodiscard]] CudaProbe probe_cuda() noexcept;

class CudaMemoryResource final : public MemoryResource {
public:
    CudaMemoryResource(int ordinal, std::string name);
    ~CudaMemoryResource() override;
    void bind_stream(cudaStream_t stream) noexcept { stream_ = stream; }

    [[nodiscard]] const std::string& device_name() const noexcept override { return name_; }
    [[nodiscard]] void* allocate(std::size_t bytes, std::size_t& reserved) override;
    [[nodiscard]] std::size_t rounded(std::size_t bytes) const noexcept override;
    void deallocate(void* address, std::size_t bytes, std::size_t reserved) noexcept override;
    void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) override;
    void copy_from_host(void* device_dst, const void* host_src, std::size_t bytes) override;
    void trim() noexcept override;
    [[nodiscard]] MemoryStats stats() const noexcept override;

private:
    int ordinal_;
    std::string name_;
    cudaMemPool_t pool_ = nullptr;
    cudaStream_t stream_ = nullptr;  // the core's stream: every allocation is ordered on it
    MemoryStats stats_;
};

class CudaPinnedResource final : public MemoryResource {
public:
    explicit CudaPinnedResource(std::string name) : name_(std::move(name)) {}
    [[nodiscard]] const std::string& device_name() const noexcept override { return name_; }
    [[nodiscard]] void* allocate(std::size_t bytes, std::size_t& reserved) override;
    [[nodiscard]] std::size_t rounded(std::size_t bytes) const noexcept override { return bytes; }
    void deallocate(void* address, std::size_t bytes, std::size_t reserved) noexcept override;
    void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) override;
    void copy_from_host(void* device_dst, const void* host_src, std::size_t bytes) override;
    [[nodiscard]] MemoryStats stats() const noexcept override { return stats_; }
    [[nodiscard]] bool host_addressable() const noexcept override { return true; }

private:
    std::string name_;
    MemoryStats stats_;
};

class CudaDevice final : public Device {
public:
    explicit CudaDevice(int ordinal);
    ~CudaDevice() override;

    [[nodiscard]] const std::string& name() const noexcept override { return name_; }
    [[nodiscard]] MemoryResource& memory() noexcept override { return *memory_; }
    [[nodiscard]] MemoryResource& pinned() noexcept override { return *pinned_; }
    [[nodiscard]] Backend& backend() noexcept override;
    [[nodiscard]] void* create_object(th_resource_kind kind) override;
    void destroy_object(th_resource_kind kind, void* object) noexcept override;
    [[nodiscard]] std::uint64_t object_bytes(th_resource_kind kind) const noexcept override;
    void stream_synchronize(void* stream) override;
    void event_record(void* event, void* stream) override;
    [[nodiscard]] bool event_query(void* event) override;
    void synchronize() override;
    [[nodiscard]] bool wants_core_objects() const noexcept override { return true; }
    void adopt_core_objects(void* stream, void* blas, void* dnn) override;
    void warm_up() override;
    [[nodiscard]] std::optional<std::uint64_t> driver_free_bytes() const override;

    // The cuBLAS workspace that goes with every BLAS handle: the size cuBLAS's own
    // pool uses on Hopper (32 MiB; 4 MiB on older GPUs).
    static constexpr std::uint64_t kBlasWorkspaceBytes = 32u << 20;

private:
    int ordinal_;
    std::string name_;
    std::unique_ptr<CudaMemoryResource> memory_;
    std::unique_ptr<CudaPinnedResource> pinned_;
    std::unique_ptr<CudaBackend> backend_;
};

}  // namespace trainhost::device
