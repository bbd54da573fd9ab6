// The upstream allocator of one device. The ledger records on top of it; this
// layer only allocates, frees, copies and counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace trainhost::device {

struct MemoryStats {
    std::uint64_t in_use = 0;    // bytes handed out, as requested
    std::uint64_t reserved = 0;  // bytes the allocator holds, rounding and caches included
    std::uint64_t peak_in_use = 0;
    std::uint64_t allocations = 0;  // live allocations
};

class MemoryResource {
public:
    MemoryResource() = default;
    MemoryResource(const MemoryResource&) = delete;
    MemoryResource& operator=(const MemoryResource&) = delete;
    virtual ~MemoryResource() = default;

    [[nodiscard]] virtual const std::string& device_name() const noexcept = 0;
    // Returns nullptr when the device is out of memory; `reserved` receives the
    // rounded size actually set aside. Any other failure (a device fault left by an
    // earlier kernel, say) throws, naming the device and the call: it must not read
    // as "out of memory".
    [[nodiscard]] virtual void* allocate(std::size_t bytes, std::size_t& reserved) = 0;
    // The `reserved` that allocate(bytes) would set aside, known before allocating, so
    // that a budget counts a thousand one-byte leases as the memory they really hold.
    [[nodiscard]] virtual std::size_t rounded(std::size_t bytes) const noexcept = 0;
    virtual void deallocate(void* address, std::size_t bytes, std::size_t reserved) noexcept = 0;
    virtual void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) = 0;
    virtual void copy_from_host(void* device_dst, const void* host_src, std::size_t bytes) = 0;
    // Whether the host can read and write this memory directly (the CPU's, pinned
    // memory): a copy between it and another device then needs no staging buffer.
    [[nodiscard]] virtual bool host_addressable() const noexcept { return false; }
    // Gives cached memory back to the system (no-op where nothing is cached).
    virtual void trim() noexcept {}
    [[nodiscard]] virtual MemoryStats stats() const noexcept = 0;
};

}  // namespace trainhost::device
