#include "device/cpu/cpu_memory_resource.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace trainhost::device {

namespace {
// Beyond any machine's memory, and the rounding must not wrap around.
constexpr std::size_t kLargest = std::size_t{1} << 44;
}  // namespace

std::size_t CpuMemoryResource::rounded(std::size_t bytes) const noexcept {
    if (bytes > kLargest) return bytes;
    return (std::max<std::size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
}

void* CpuMemoryResource::allocate(std::size_t bytes, std::size_t& reserved) noexcept {
    if (bytes > kLargest) return nullptr;
    reserved = rounded(bytes);
    void* address = std::aligned_alloc(kAlignment, reserved);
    if (address == nullptr) return nullptr;
    stats_.in_use += bytes;
    stats_.reserved += reserved;
    stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
    ++stats_.allocations;
    return address;
}

void CpuMemoryResource::deallocate(void* address, std::size_t bytes, std::size_t reserved) noexcept {
    if (address == nullptr) return;
    std::free(address);
    stats_.in_use -= bytes;
    stats_.reserved -= reserved;
    --stats_.allocations;
}

void CpuMemoryResource::copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) {
    std::memcpy(host_dst, device_src, bytes);
}

void CpuMemoryResource::copy_from_host(void* device_dst, const void* host_src, std::size_t bytes) {
    std::memcpy(device_dst, host_src, bytes);
}

}  // namespace trainhost::device
