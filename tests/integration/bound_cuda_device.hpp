// A CudaDevice set up the way a session sets it up (its own stream, BLAS and DNN
// handle made by create_object and adopted) and device memory from its pool, for
// the [cuda] tests of the backend. Header-only.
#pragma once

#include "device/cuda/cuda_device.hpp"
#include "device/memory_resource.hpp"
#include "trainhost/abi.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace bound_cuda_device {

using trainhost::device::Backend;
using trainhost::device::CudaDevice;
using trainhost::device::MemoryResource;

// A stream, BLAS handle or DNN handle of the device, given back to it at the end.
class DeviceObject {
public:
    DeviceObject(CudaDevice& device, th_resource_kind kind)
        : device_(device), kind_(kind), object_(device.create_object(kind)) {
        REQUIRE(object_ != nullptr);
    }
    DeviceObject(const DeviceObject&) = delete;
    DeviceObject& operator=(const DeviceObject&) = delete;
    ~DeviceObject() { device_.destroy_object(kind_, object_); }
    [[nodiscard]] void* get() const { return object_; }

private:
    CudaDevice& device_;
    th_resource_kind kind_;
    void* object_;
};

// CudaDevice(0) computing on objects it made itself, adopted as the session
// adopts the core's leases. Members are destroyed in reverse: the destructor
// unbinds first, then the handles and the stream go, then the device and its
// pool. Buffers must be declared after this, so they are freed while the
// stream they are ordered on is still bound.
class BoundCudaDevice {
public:
    BoundCudaDevice() {
        try {
            device_.adopt_core_objects(stream_.get(), blas_.get(), dnn_.get());
        } catch (...) {
            device_.adopt_core_objects(nullptr, nullptr, nullptr);  // a half-done bind must not outlive the stream
            throw;
        }
    }
    BoundCudaDevice(const BoundCudaDevice&) = delete;
    BoundCudaDevice& operator=(const BoundCudaDevice&) = delete;
    ~BoundCudaDevice() { device_.adopt_core_objects(nullptr, nullptr, nullptr); }

    [[nodiscard]] Backend& backend() { return device_.backend(); }
    [[nodiscard]] MemoryResource& memory() { return device_.memory(); }

private:
    CudaDevice device_{0};
    DeviceObject stream_{device_, TH_RESOURCE_STREAM};
    DeviceObject blas_{device_, TH_RESOURCE_BLAS_HANDLE};
    DeviceObject dnn_{device_, TH_RESOURCE_DNN_HANDLE};
};

// Device memory from the device's own pool. Every transfer goes through the
// MemoryResource, which enqueues it on the bound stream (the one the backend
// computes on) and waits for it, so each upload is ordered before the next
// operation and each download after the last one. Starts as 0xff bytes (NaN
// floats), so an element an operation forgets to write fails the comparison.
template <typename T>
class PoolBuffer {
public:
    PoolBuffer(MemoryResource& memory, std::size_t n) : memory_(memory), n_(n) {
        data_ = static_cast<T*>(memory_.allocate(bytes_allocated(), reserved_));
        REQUIRE(data_ != nullptr);
        const std::vector<unsigned char> nan_bytes(bytes_allocated(), 0xff);
        memory_.copy_from_host(data_, nan_bytes.data(), nan_bytes.size());
    }
    PoolBuffer(MemoryResource& memory, const std::vector<T>& values) : PoolBuffer(memory, values.size()) {
        memory_.copy_from_host(data_, values.data(), values.size() * sizeof(T));
    }
    PoolBuffer(const PoolBuffer&) = delete;
    PoolBuffer& operator=(const PoolBuffer&) = delete;
    ~PoolBuffer() { memory_.deallocate(data_, bytes_allocated(), reserved_); }

    [[nodiscard]] T* get() const { return data_; }
    [[nodiscard]] std::size_t size() const { return n_; }
    // Throws where an earlier operation faulted asynchronously.
    [[nodiscard]] std::vector<T> download() const {
        std::vector<T> values(n_);
        memory_.copy_to_host(values.data(), data_, n_ * sizeof(T));
        return values;
    }

private:
    [[nodiscard]] std::size_t bytes_allocated() const { return std::max<std::size_t>(n_, 1) * sizeof(T); }

    MemoryResource& memory_;
    std::size_t n_;
    std::size_t reserved_ = 0;
    T* data_ = nullptr;
};

}  // namespace bound_cuda_device
