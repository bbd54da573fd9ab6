// Core-owned device memory: every buffer of the model, its gradients, its optimizer
// state and its activations is a ledger lease of the owner "core".
#pragma once

#include "resources/ledger.hpp"

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace trainhost::nn {

class Buffer {
public:
    Buffer() = default;
    Buffer(resources::Ledger& ledger, std::size_t bytes, th_scope scope, std::string tag)
        : ledger_(&ledger), handle_(ledger.acquire(resources::kCoreOwner, TH_RESOURCE_DEVICE_MEMORY, bytes, scope,
                                                   std::move(tag))),
          address_(ledger.address(resources::kCoreOwner, handle_, 0, bytes)), bytes_(bytes) {}
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
        }
        return *this;
    }
    ~Buffer() { reset(); }

    void reset() noexcept {
        if (ledger_ == nullptr) return;
        try {
            ledger_->release(resources::kCoreOwner, handle_);
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
    [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

private:
    resources::Ledger* ledger_ = nullptr;
    th_handle handle_{};
    void* address_ = nullptr;
    std::size_t bytes_ = 0;
};

class Tensor {
public:
    Tensor() = default;
    Tensor(resources::Ledger& ledger, std::vector<std::size_t> shape, th_scope scope, std::string tag)
        : shape_(std::move(shape)), numel_(count(shape_)),
          buffer_(ledger, numel_ * sizeof(float), scope, std::move(tag)) {}

    [[nodiscard]] float* data() const noexcept { return buffer_.as<float>(); }
    [[nodiscard]] std::size_t numel() const noexcept { return numel_; }
    [[nodiscard]] const std::vector<std::size_t>& shape() const noexcept { return shape_; }
    [[nodiscard]] std::size_t bytes() const noexcept { return numel_ * sizeof(float); }

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
