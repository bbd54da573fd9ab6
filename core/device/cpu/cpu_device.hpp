#pragma once

#include "device/cpu/cpu_backend.hpp"
#include "device/cpu/cpu_memory_resource.hpp"
#include "device/device.hpp"

namespace trainhost::device {

// Host memory and OpenBLAS. Several logical CPU devices ("cpu:0", "cpu:1") may
// exist, each with its own accounting, so that device moves are exercised on
// machines without a GPU.
class CpuDevice final : public Device {
public:
    explicit CpuDevice(unsigned ordinal);

    [[nodiscard]] const std::string& name() const noexcept override { return name_; }
    [[nodiscard]] MemoryResource& memory() noexcept override { return memory_; }
    [[nodiscard]] MemoryResource& pinned() noexcept override { return pinned_; }
    [[nodiscard]] Backend& backend() noexcept override { return backend_; }
    [[nodiscard]] void* create_object(th_resource_kind kind) noexcept override;
    void destroy_object(th_resource_kind kind, void* object) noexcept override;
    [[nodiscard]] std::uint64_t object_bytes(th_resource_kind kind) const noexcept override;
    void stream_synchronize(void* stream) override;
    void event_record(void* event, void* stream) override;
    [[nodiscard]] bool event_query(void* event) override;
    void synchronize() override {}

private:
    std::string name_;
    CpuMemoryResource memory_;
    CpuMemoryResource pinned_;
    CpuBackend backend_;
};

}  // namespace trainhost::device
