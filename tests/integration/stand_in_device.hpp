// A device that is cpu:0 in everything a test does not override, under any name: the
// base of stand-ins that fail the way only a GPU would.
#pragma once

#include "device/cpu/cpu_device.hpp"

#include <string>
#include <utility>

namespace test_support {

class StandInDevice : public trainhost::device::Device {
public:
    explicit StandInDevice(std::string name) : name_(std::move(name)) {}

    [[nodiscard]] const std::string& name() const noexcept override { return name_; }
    [[nodiscard]] trainhost::device::MemoryResource& memory() noexcept override { return cpu_.memory(); }
    [[nodiscard]] trainhost::device::MemoryResource& pinned() noexcept override { return cpu_.pinned(); }
    [[nodiscard]] trainhost::device::Backend& backend() noexcept override { return cpu_.backend(); }
    [[nodiscard]] void* create_object(th_resource_kind kind) override { return cpu_.create_object(kind); }
    void destroy_object(th_resource_kind kind, void* object) noexcept override { cpu_.destroy_object(kind, object); }
    [[nodiscard]] std::uint64_t object_bytes(th_resource_kind kind) const noexcept override {
        return cpu_.object_bytes(kind);
    }
    void stream_synchronize(void* stream) override { cpu_.stream_synchronize(stream); }
    void event_record(void* event, void* stream) override { cpu_.event_record(event, stream); }
    [[nodiscard]] bool event_query(void* event) override { return cpu_.event_query(event); }
    void synchronize() override { cpu_.synchronize(); }

private:
    std::string name_;
    trainhost::device::CpuDevice cpu_{0};
};

}  // namespace test_support
