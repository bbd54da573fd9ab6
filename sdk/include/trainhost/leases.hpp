// Leases on the host's resources (device memory, streams, events) as RAII objects of
// the plugin: move-only, given back when destroyed, and refused for use once they hold
// nothing, as a moved-from unique_ptr is null.
#pragma once

#include "trainhost/abi.h"
#include "trainhost/host_link.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <utility>

namespace trainhost::sdk {

// RAII lease on a host resource; released when destroyed. Move-only, like a
// unique_ptr: ownership is explicit and moves with the object.
class Lease {
public:
    Lease() = default;
    Lease(HostLink link, th_handle handle, th_resource_kind kind, std::uint64_t bytes) noexcept
        : link_(link), handle_(handle), kind_(kind), bytes_(bytes), held_(true) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept {
        if (this != &other) {
            reset();
            link_ = other.link_;
            handle_ = other.handle_;
            kind_ = other.kind_;
            bytes_ = other.bytes_;
            held_ = std::exchange(other.held_, false);
        }
        return *this;
    }
    ~Lease() { reset(); }

    // Gives the resource back now. A failure (the core reclaimed it already) is
    // reported by the core's ledger, so there is nothing useful to throw here.
    void reset() noexcept {
        if (held_) {
            held_ = false;
            link_.api().release(link_.host(), handle_, bytes_);
        }
    }
    // Gives up ownership without giving the resource back, as unique_ptr::release
    // does: the caller now answers for releasing the handle.
    // An object that holds nothing gives the null handle: its old one may be another
    // object's lease now, which the caller would then release under it.
    [[nodiscard]] th_handle detach() noexcept {
        if (!std::exchange(held_, false)) return th_handle{};
        return handle_;
    }
    // Extends the lease's life to a wider scope.
    void promote(th_scope scope) {
        held_link("promote").check(link_.api().promote(link_.host(), handle_, scope), "promote");
    }

    [[nodiscard]] explicit operator bool() const noexcept { return held_; }
    // The null handle where this object holds nothing, as detach() gives: its old one
    // may be another object's lease now.
    [[nodiscard]] th_handle handle() const noexcept { return held_ ? handle_ : th_handle{}; }
    // The handle for a host call, refused as every use is where this object holds no lease.
    [[nodiscard]] th_handle held_handle(const char* what) const {
        (void)held_link(what);
        return handle_;
    }
    [[nodiscard]] th_resource_kind kind() const noexcept { return kind_; }
    [[nodiscard]] std::uint64_t bytes() const noexcept { return bytes_; }

protected:
    // The link of a lease this object holds. One it does not hold (never taken, moved
    // from, reset or detached) has no link, or the handle of a lease that is now
    // another object's or given back: using it is refused here, as a unique_ptr's
    // would be null.
    [[nodiscard]] const HostLink& held_link(const char* what) const {
        if (!held_)
            throw Error(TH_INVALID_HANDLE, std::string(what) +
                                               ": this object holds no lease (never taken, moved from, reset or "
                                               "detached)");
        return link_;
    }

private:
    HostLink link_{nullptr, nullptr};
    th_handle handle_{};
    th_resource_kind kind_{TH_RESOURCE_DEVICE_MEMORY};
    std::uint64_t bytes_ = 0;
    bool held_ = false;
};

// Device memory owned by the plugin, on whatever device the model lives on.
class DeviceBuffer : public Lease {
public:
    using Lease::Lease;
    void upload(std::span<const float> values, std::uint64_t offset_bytes = 0) {
        const HostLink& link = held_link("copy_from_host");
        link.check(link.api().copy_from_host(link.host(), handle(), offset_bytes, values.data(), values.size_bytes()),
                   "copy_from_host");
    }
    void download(std::span<float> values, std::uint64_t offset_bytes = 0) const {
        const HostLink& link = held_link("copy_to_host");
        link.check(link.api().copy_to_host(link.host(), handle(), offset_bytes, values.data(), values.size_bytes()),
                   "copy_to_host");
    }
    // Makes this buffer state of a parameter: it then moves with the model.
    void attach_to_param(std::uint32_t param_index) {
        const HostLink& link = held_link("attach_to_param");
        link.check(link.api().attach_to_param(link.host(), handle(), param_index), "attach_to_param");
    }
};

// An in-order queue of device work.
class Stream : public Lease {
public:
    using Lease::Lease;
    void synchronize() {
        const HostLink& link = held_link("stream_synchronize");
        link.check(link.api().stream_synchronize(link.host(), handle()), "stream_synchronize");
    }
};

// Marks a point in a stream's work; complete once everything before it ran.
class Event : public Lease {
public:
    using Lease::Lease;
    void record(const Stream& stream) {
        const HostLink& link = held_link("event_record");
        link.check(link.api().event_record(link.host(), handle(), stream.held_handle("event_record")), "event_record");
    }
    [[nodiscard]] bool complete() const {
        const HostLink& link = held_link("event_query");
        int done = 0;
        link.check(link.api().event_query(link.host(), handle(), &done), "event_query");
        return done != 0;
    }
};

}  // namespace trainhost::sdk
