// One compute device as the ledger and the model see it: its memory, its pinned
// host memory for transfers, its numeric backend, and the library and ordering
// objects (streams, events, BLAS and DNN handles) that plugins may lease.
#pragma once

#include "device/backend.hpp"
#include "device/memory_resource.hpp"
#include "trainhost/abi.h"

#include <cstdint>
#include <optional>
#include <string>

namespace trainhost::device {

using DeviceIndex = std::uint32_t;

class Device {
public:
    Device() = default;
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;
    virtual ~Device() = default;

    [[nodiscard]] virtual const std::string& name() const noexcept = 0;  // "cpu:0", "cuda:0"
    [[nodiscard]] virtual MemoryResource& memory() noexcept = 0;
    [[nodiscard]] virtual MemoryResource& pinned() noexcept = 0;
    [[nodiscard]] virtual Backend& backend() noexcept = 0;

    // Streams, events, BLAS and DNN handles. nullptr when the device is out of the
    // memory or handles the object needs; any other failure throws, as allocate does.
    [[nodiscard]] virtual void* create_object(th_resource_kind kind) = 0;
    virtual void destroy_object(th_resource_kind kind, void* object) noexcept = 0;
    // What one object of `kind` costs the device, for accounting.
    [[nodiscard]] virtual std::uint64_t object_bytes(th_resource_kind kind) const noexcept = 0;

    // Ordering: wait for a stream's work; record and query events on a stream.
    virtual void stream_synchronize(void* stream) = 0;
    virtual void event_record(void* event, void* stream) = 0;
    [[nodiscard]] virtual bool event_query(void* event) = 0;
    virtual void synchronize() = 0;

    // A device whose backend computes on library handles and a stream asks for them
    // here, as leases of the core, so that the ledger lists the core's own handles too.
    [[nodiscard]] virtual bool wants_core_objects() const noexcept { return false; }
    virtual void adopt_core_objects(void* /*stream*/, void* /*blas*/, void* /*dnn*/) {}
    // Runs every operation of the backend once, after adopt_core_objects (CUDA loads
    // its modules lazily), so that no fit sees that one-time memory as its own.
    // Throws, naming the device, when the device cannot compute.
    virtual void warm_up() {}
    // Free memory as the driver sees it (the ground truth beyond the ledger); none on the CPU.
    [[nodiscard]] virtual std::optional<std::uint64_t> driver_free_bytes() const { return std::nullopt; }
};

}  // namespace trainhost::device
