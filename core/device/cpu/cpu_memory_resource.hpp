#pragma once

#include "device/memory_resource.hpp"

namespace trainhost::device {

// Host memory, 64-byte aligned so that vectorised kernels never split a cache line.
class CpuMemoryResource final : public MemoryResource {
public:
    static constexpr std::size_t kAlignment = 64;
    explicit CpuMemoryResource(std::string name = "cpu") : name_(std::move(name)) {}

    [[nodiscard]] const std::string& device_name() const noexcept override { return name_; }
    [[nodiscard]] void* allocate(std::size_t bytes, std::size_t& reserved) noexcept override;
    [[nodiscard]] std::size_t rounded(std::size_t bytes) const noexcept override;
    void deallocate(void* address, std::size_t bytes, std::size_t reserved) noexcept override;
    void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) override;
    void copy_from_host(void* device_dst, const void* host_src, std::size_t bytes) override;
    [[nodiscard]] MemoryStats stats() const noexcept override { return stats_; }
    [[nodiscard]] bool host_addressable() const noexcept override { return true; }

private:
    std::string name_;
    MemoryStats stats_;
};

}  // namespace trainhost::device
