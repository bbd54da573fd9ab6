// The device-side tensor operations on parameters (pruning's masks and thresholds)
// and the batch in flight (its outputs and labels), behind th_host_api.
#include "plugin/declarations.hpp"
#include "plugin/host_call.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <optional>
#include <stdexcept>
#include <vector>

namespace trainhost::plugin::host_call {

namespace {

// A device-memory lease of this plugin holding exactly one float per parameter entry,
// on the parameter's device.
float* param_sized(th_host* host, const char* what, th_handle handle, const ParamAccess& param) {
    resources::Ledger& ledger = host->services->ledger();
    const resources::LeaseRecord& lease = ledger.record(host->owner, handle, what);
    const std::uint64_t bytes = param.numel * sizeof(float);
    if (lease.kind != TH_RESOURCE_DEVICE_MEMORY || lease.bytes_requested != bytes || lease.device != param.device)
        throw resources::ResourceError(
            TH_INVALID_ARGUMENT, fmt::format("{}: lease {} must be device memory of {} bytes on {} for parameter {}",
                                             what, handle.id, bytes, ledger.device(param.device).name(), *param.name));
    return static_cast<float*>(ledger.address(host->owner, handle, 0, bytes));
}

// `changes`: the declared name the call writes ("params"), empty for a read.
th_status param_op(th_host* host, const char* what, std::string_view changes, std::uint32_t index, th_handle handle,
                   auto&& op) {
    return guarded(host, what, kAnyHook, [&] {
        if (!changes.empty())
            if (th_status s = check_declared_write(host, what, changes); s != TH_OK) return s;
        ParamAccess storage;
        ParamAccess* param = find_param(host, index, storage);
        if (!param) return TH_INVALID_ARGUMENT;
        // The parameter's own device, not the model's: after a move that failed part
        // way the two can differ, and a backend must never touch another's memory.
        op(*param, param_sized(host, what, handle, *param), host->services->ledger().device(param->device).backend());
        return TH_OK;
    });
}

// The batch's outputs, or why there are none; the shape is written either way, and
// `copy` runs only into a buffer (`dst`, `count` values) that holds `values` of them.
template <typename Copy>
th_status batch_read(th_host* host, const char* what, const void* dst, std::uint64_t count, std::uint64_t* rows,
                     std::uint64_t* width, Copy&& copy) {
    return guarded(host, what, kBatchOutputs, [&] {
        const std::optional<BatchOutputs> batch = host->services->batch_outputs();
        if (!batch)
            return fail(host, TH_UNSUPPORTED,
                        fmt::format("{}: this batch has no outputs (it was skipped before its forward pass)", what));
        if (rows != nullptr) *rows = batch->rows;
        if (width != nullptr) *width = batch->width;
        return copy(*batch, [&](std::uint64_t values) {
            if (dst != nullptr && count >= values) return TH_OK;
            return fail(host, TH_BUFFER_TOO_SMALL, fmt::format("{}: the batch holds {} values, the buffer {}", what,
                                                               values, dst != nullptr ? count : 0));
        });
    });
}

}  // namespace

th_status param_copy_to(th_host* host, std::uint32_t index, th_handle dst) {
    return param_op(host, "param_copy_to", std::string_view(), index, dst,
                    [](ParamAccess& p, float* buffer, device::Backend& backend) {
        backend.copy(p.data, buffer, p.numel);
    });
}

th_status param_copy_from(th_host* host, std::uint32_t index, th_handle src) {
    return param_op(host, "param_copy_from", kParamsName, index, src,
                    [](ParamAccess& p, float* buffer, device::Backend& backend) {
        backend.copy(buffer, p.data, p.numel);
    });
}

th_status param_apply_mask(th_host* host, std::uint32_t index, th_handle mask) {
    return param_op(host, "param_apply_mask", kParamsName, index, mask,
                    [](ParamAccess& p, float* buffer, device::Backend& backend) {
        backend.multiply_by_mask(p.data, buffer, p.numel);
    });
}

th_status param_mask_below(th_host* host, std::uint32_t index, float threshold, th_handle mask) {
    return param_op(host, "param_mask_below", std::string_view(), index, mask,
                    [&](ParamAccess& p, float* buffer, device::Backend& backend) {
        backend.mask_below(p.data, threshold, buffer, p.numel);
    });
}

th_status magnitude_threshold(th_host* host, const std::uint32_t* indices, const th_handle* masks, std::uint32_t count,
                              std::uint64_t k, float* out) {
    return guarded(host, "magnitude_threshold", kAnyHook, [&] {
        if (out == nullptr || (count > 0 && indices == nullptr))
            return fail(host, TH_INVALID_ARGUMENT, "magnitude_threshold needs parameter indices and an output");
        std::vector<device::Backend::MaskedSpan> spans;
        std::uint64_t total = 0;
        std::optional<device::DeviceIndex> on;  // the one device all the parameters are on
        for (std::uint32_t i = 0; i < count; ++i) {
            ParamAccess storage;
            ParamAccess* param = find_param(host, indices[i], storage);
            if (!param) return TH_INVALID_ARGUMENT;
            if (on && *on != param->device)
                return fail(host, TH_INVALID_ARGUMENT,
                            fmt::format("magnitude_threshold: parameter {} is on {}, parameter {} on {}", indices[0],
                                        host->services->ledger().device(*on).name(), indices[i],
                                        host->services->ledger().device(param->device).name()));
            on = param->device;
            const float* mask = masks && masks[i].id != 0 ? param_sized(host, "magnitude_threshold", masks[i], *param)
                                                          : nullptr;
            spans.push_back({param->data, mask, param->numel});
            total += param->numel;
        }
        if (k > total)
            return fail(host, TH_INVALID_ARGUMENT,
                        fmt::format("magnitude_threshold: k = {} but the parameters hold {} entries", k, total));
        // Past the entries the masks keep, or a NaN among them: the backend's refusal is
        // the caller's argument, not a failure of the host.
        try {
            device::Backend& backend =
                on ? host->services->ledger().device(*on).backend() : host->services->model_backend();
            *out = backend.kth_smallest_magnitude(spans, k);
        } catch (const std::invalid_argument& e) {
            return fail(host, TH_INVALID_ARGUMENT, fmt::format("{} (of the entries the masks keep)", e.what()));
        }
        return TH_OK;
    });
}

th_status fill(th_host* host, th_handle buffer, float value) {
    return guarded(host, "fill", kAlways, [&] {
        resources::Ledger& ledger = host->services->ledger();
        const resources::LeaseRecord& lease = ledger.record(host->owner, buffer, "fill");
        if (lease.kind != TH_RESOURCE_DEVICE_MEMORY || lease.bytes_requested % sizeof(float) != 0)
            return fail(host, TH_INVALID_ARGUMENT, "fill needs device memory holding whole floats");
        float* data = static_cast<float*>(ledger.address(host->owner, buffer, 0, lease.bytes_requested));
        ledger.device(lease.device).backend().fill(data, lease.bytes_requested / sizeof(float), value);
        return TH_OK;
    });
}

th_status output_read(th_host* host, float* dst, std::uint64_t count, std::uint64_t* rows, std::uint64_t* width) {
    return batch_read(host, "output_read", dst, count, rows, width, [&](const BatchOutputs& batch, auto&& fits) {
        const std::uint64_t values = batch.rows * batch.width;
        if (th_status s = fits(values); s != TH_OK) return s;
        host->services->ledger().device(host->services->model_device()).memory().copy_to_host(
            dst, batch.outputs, values * sizeof(float));
        return TH_OK;
    });
}

th_status label_read(th_host* host, std::int32_t* dst, std::uint64_t count, std::uint64_t* rows) {
    return batch_read(host, "label_read", dst, count, rows, nullptr, [&](const BatchOutputs& batch, auto&& fits) {
        if (batch.labels == nullptr) return fail(host, TH_UNSUPPORTED, "label_read: this run's data has no class labels");
        if (th_status s = fits(batch.rows); s != TH_OK) return s;
        std::copy_n(batch.labels, batch.rows, dst);
        return TH_OK;
    });
}

}  // namespace trainhost::plugin::host_call
