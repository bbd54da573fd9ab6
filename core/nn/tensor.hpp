// Core-owned device memory: every buffer of the model, its gradients, its optimizer
// state and its activations is a ledger lease of the owner "core".
#pragma once

#include "device/backend.hpp"
#include "resources/ledger.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace trainhost::nn {

// Device memory by default; pinned host memory of the device (TH_RESOURCE_PINNED_MEMORY)
// for what the host fills and the device reads.
class Buffer {
public:
    Buffer() = default;
    Buffer(resources::Ledger& ledger, std::size_t bytes, th_scope scope, std::string tag, device::DeviceIndex device,
           th_resource_kind kind = TH_RESOURCE_DEVICE_MEMORY)
        : ledger_(&ledger),
          handle_(ledger.acquire(resources::kCoreOwner, kind, bytes, scope, std::move(tag), device)),
          address_(ledger.address(resources::kCoreOwner, handle_, 0, bytes)), bytes_(bytes), device_(device),
          kind_(kind) {}
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Buffer(Buffer&& other) noexcept { *this = std::move(other); }
    Buffer& operator=(Buffer&& other) noexcept {
        if (this != &other) {
            reset();
            ledger_ = std::exchange(other.ledger_, nullptr);
            handle_ = other.handle_;
            address_ = std::exchange(other.address_, nullptr);
            bytes_ = std::exchange(other.bytes_, 0);
            device_ = other.device_;
            kind_ = other.kind_;
        }
        return *this;
    }
    ~Buffer() { reset(); }

    void reset() noexcept {
        if (ledger_ == nullptr) return;
        try {
            ledger_->release(resources::kCoreOwner, handle_, bytes_);
        } catch (...) {
            // The ledger has recorded the misuse; a destructor cannot do more.
        }
        ledger_ = nullptr;
        address_ = nullptr;
    }

    template <typename T>
    [[nodiscard]] T* as() const noexcept {
        return static_cast<T*>(address_);
    }
    // Host memory only (the CPU's, or pinned): the whole buffer as elements of T.
    template <typename T>
    [[nodiscard]] std::span<T> span() const noexcept {
        return {as<T>(), bytes_ / sizeof(T)};
    }
    [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
    [[nodiscard]] device::DeviceIndex device() const noexcept { return device_; }
    // Identifies the current storage; changes on every move.
    [[nodiscard]] std::uint64_t storage_id() const noexcept { return handle_.id; }

    // Re-homes the buffer on `target`: a new lease there (same kind, scope and tag),
    // the contents copied, the old lease released, all before returning. Device
    // memory only: pinned memory is host memory, re-made rather than moved.
    void move_to(device::DeviceIndex target);

private:
    resources::Ledger* ledger_ = nullptr;
    th_handle handle_{};
    void* address_ = nullptr;
    std::size_t bytes_ = 0;
    device::DeviceIndex device_ = 0;
    th_resource_kind kind_ = TH_RESOURCE_DEVICE_MEMORY;
};

class Tensor {
public:
    Tensor() = default;
    Tensor(resources::Ledger& ledger, std::vector<std::size_t> shape, th_scope scope, std::string tag,
           device::DeviceIndex device)
        : shape_(std::move(shape)), numel_(count(shape_)),
          buffer_(ledger, numel_ * sizeof(float), scope, std::move(tag), device) {}

    [[nodiscard]] float* data() const noexcept { return buffer_.as<float>(); }
    [[nodiscard]] std::size_t numel() const noexcept { return numel_; }
    [[nodiscard]] const std::vector<std::size_t>& shape() const noexcept { return shape_; }
    [[nodiscard]] std::size_t bytes() const noexcept { return numel_ * sizeof(float); }
    [[nodiscard]] bool empty() const noexcept { return numel_ == 0 || data() == nullptr; }
    [[nodiscard]] const Buffer& buffer() const noexcept { return buffer_; }
    // The tensor lent to a backend call as scratch.
    [[nodiscard]] device::Workspace as_workspace() const noexcept { return {data(), numel_}; }
    void move_to(device::DeviceIndex target) {
        if (!empty()) buffer_.move_to(target);
    }

private:
    static std::size_t count(const std::vector<std::size_t>& shape) {
        std::size_t n = 1;
        for (std::size_t d : shape) n *= d;
        return n;
    }
    std::vector<std::size_t> shape_;
    std::size_t numel_ = 0;
    Buffer buffer_;
};

using ParamId = std::uint64_t;

// A trainable tensor and its gradient. The id is stable for a model built from the
// same spec: optimizer and plugin state are keyed by it, never by address.
struct Parameter {
    ParamId id = 0;
    std::string name;
    Tensor value;
    Tensor grad;
};

}  // namespace trainhost::nn
