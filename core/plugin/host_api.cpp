// The C functions behind th_host_api. Each one checks the phase, turns every C++
// error into a status plus last_error text, and never lets an exception out.
#include "config/run_config.hpp"
#include "plugin/declarations.hpp"
#include "plugin/host_call.hpp"
#include "plugin/host_services.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <stdexcept>
#include <thread>
#include <vector>

namespace trainhost::plugin {

namespace host_call {

bool allowed(Phase phase, PhaseWindow window) {
    if (window.last == TH_HOOK_COUNT) return true;
    if (phase == Phase::exception) return window.in_exception;
    auto value = static_cast<std::uint32_t>(phase);
    return (value >= window.first && value <= window.last) || (window.also != TH_HOOK_COUNT && value == window.also);
}

th_status fail(th_host* host, th_status status, std::string message) {
    host->last_error = std::move(message);
    return status;
}

bool refused_off_thread(th_host* host, const char* what) noexcept {
    if (std::this_thread::get_id() == host->thread) return false;
    const char* none = nullptr;
    host->first_foreign_call.compare_exchange_strong(none, what);
    host->foreign_thread_calls.fetch_add(1);
    return true;
}

th_status check_declared_write(th_host* host, const char* what, std::string_view name) {
    if (!host->declared_writes || any_covers(*host->declared_writes, name)) return TH_OK;
    resources::Ledger& ledger = host->services->ledger();
    const std::vector<std::string>& declared = *host->declared_writes;
    std::string detail = fmt::format("{} changes {}, which plugin '{}' does not declare (its writes: {}); add \"{}\" "
                                     "to its writes",
                                     what, name, ledger.owner_name(host->owner),
                                     declared.empty() ? std::string("none") : fmt::format("{}", fmt::join(declared, ",")),
                                     name);
    ledger.record_misuse(host->owner, resources::MisuseKind::undeclared_write, 0, detail);
    return fail(host, TH_UNDECLARED, std::move(detail));
}

ParamAccess* find_param(th_host* host, std::uint32_t index, ParamAccess& storage) {
    if (index >= host->services->param_count()) {
        host->last_error = fmt::format("parameter index {} out of range (the model has {})", index,
                                       host->services->param_count());
        return nullptr;
    }
    storage = host->services->param(index);
    return &storage;
}

}  // namespace host_call

namespace {

using namespace host_call;

constexpr const char* kOffThread =
    "the host API serves only the thread that runs the plugin's hooks; a call from another thread is refused, and "
    "reported as a wrong_thread misuse";

const char* last_error(th_host* host) {
    if (host == nullptr) return "no host";
    return std::this_thread::get_id() == host->thread ? host->last_error.c_str() : kOffThread;
}

void log(th_host* host, th_log_level level, const char* message) {
    if (host == nullptr || refused_off_thread(host, "log") || host->services == nullptr || message == nullptr) return;
    try {
        // Taken as the int it is: a C++ enum must not hold a value it does not define.
        static_assert(sizeof level == sizeof(int));
        int raw = 0;
        std::memcpy(&raw, &level, sizeof raw);
        host->services->log(host->owner, raw, message);
    } catch (...) {
    }
}

th_status train_state(th_host* host, th_train_state* out) {
    return guarded(host, "train_state", kAlways, [&] {
        if (out == nullptr || out->struct_size < offsetof(th_train_state, failure))
            return fail(host, TH_INVALID_ARGUMENT, "train_state needs a th_train_state with struct_size set");
        th_train_state state = host->services->train_state();
        // Taken before the copy, which overwrites struct_size with the host's own.
        const auto size = std::min<std::uint32_t>(out->struct_size, sizeof state);
        std::memcpy(out, &state, size);
        out->struct_size = size;
        return TH_OK;
    });
}

th_status metric_get(th_host* host, const char* key, double* out) {
    return guarded(host, "metric_get", kAlways, [&] {
        if (key == nullptr || out == nullptr) return fail(host, TH_INVALID_ARGUMENT, "metric_get needs a key and an output");
        auto value = host->services->metric(key);
        if (!value) return fail(host, TH_NOT_FOUND, fmt::format("no metric named '{}' (yet)", key));
        *out = *value;
        return TH_OK;
    });
}

th_status metric_set(th_host* host, const char* key, double value) {
    return guarded(host, "metric_set", kTraining, [&] {
        if (key == nullptr || *key == '\0') return fail(host, TH_INVALID_ARGUMENT, "metric_set needs a key");
        // Names no declaration could name ('*', ',', a blank) stay fine for plugins from
        // before declarations (ABI 1.2); an empty name, a control character or a byte that
        // is no UTF-8 is refused from any plugin.
        const std::string why = host->declared_writes ? invalid_metric_key(key) : unusable_metric_key(key);
        if (!why.empty()) return fail(host, TH_INVALID_ARGUMENT, "metric_set: " + why);
        if (th_status s = check_declared_write(host, "metric_set", std::string(kMetricPrefix) + key); s != TH_OK)
            return s;
        host->services->set_metric(key, value);
        return TH_OK;
    });
}

th_status metric_erase(th_host* host, const char* key) {
    return guarded(host, "metric_erase", kTraining, [&] {
        if (key == nullptr || *key == '\0') return fail(host, TH_INVALID_ARGUMENT, "metric_erase needs a key");
        if (const std::string why = invalid_metric_key(key); !why.empty())
            return fail(host, TH_INVALID_ARGUMENT, "metric_erase: " + why);
        if (th_status s = check_declared_write(host, "metric_erase", std::string(kMetricPrefix) + key); s != TH_OK)
            return s;
        host->services->erase_metric(key);
        return TH_OK;
    });
}

th_status request_stop(th_host* host, const char* reason) {
    return guarded(host, "request_stop", kStoppable, [&] {
        host->services->request_stop(host->owner, reason ? reason : "");
        return TH_OK;
    });
}

th_status param_count(th_host* host, std::uint32_t* out) {
    return guarded(host, "param_count", kAnyHook, [&] {
        if (out == nullptr) return fail(host, TH_INVALID_ARGUMENT, "param_count needs an output");
        *out = static_cast<std::uint32_t>(host->services->param_count());
        return TH_OK;
    });
}


th_status param_info(th_host* host, std::uint32_t index, th_param_info* out) {
    return guarded(host, "param_info", kAnyHook, [&] {
        if (out == nullptr || out->struct_size < sizeof(th_param_info))
            return fail(host, TH_INVALID_ARGUMENT, "param_info needs a th_param_info with struct_size set");
        ParamAccess storage;
        ParamAccess* param = find_param(host, index, storage);
        if (!param) return TH_INVALID_ARGUMENT;
        out->param_id = param->id;
        out->name = param->name->c_str();
        out->numel = param->numel;
        out->rank = static_cast<std::uint32_t>(std::min<std::size_t>(param->shape.size(), 4));
        std::copy_n(param->shape.begin(), out->rank, out->shape);
        out->storage_id = param->storage_id;
        out->device = host->services->ledger().device(param->device).name().c_str();
        return TH_OK;
    });
}

// `changes`: the declared name the call writes ("params"), empty for a read.
th_status param_copy(th_host* host, const char* what, PhaseWindow window, std::string_view changes, std::uint32_t index,
                     const void* buffer, std::uint64_t count, auto&& copy) {
    return guarded(host, what, window, [&] {
        if (buffer == nullptr && count > 0) return fail(host, TH_INVALID_ARGUMENT, fmt::format("{} needs a buffer", what));
        if (!changes.empty())
            if (th_status s = check_declared_write(host, what, changes); s != TH_OK) return s;
        ParamAccess storage;
        ParamAccess* param = find_param(host, index, storage);
        if (!param) return TH_INVALID_ARGUMENT;
        if (count != param->numel)
            return fail(host, TH_INVALID_ARGUMENT, fmt::format("{}: parameter {} has {} elements, the buffer {}", what,
                                                               *param->name, param->numel, count));
        copy(*param, host->services->ledger().device(param->device).memory());
        return TH_OK;
    });
}

th_status param_read(th_host* host, std::uint32_t index, float* dst, std::uint64_t count) {
    return param_copy(host, "param_read", kAnyHook, std::string_view(), index, dst, count,
                    [&](ParamAccess& p, device::MemoryResource& memory) {
        memory.copy_to_host(dst, p.data, count * sizeof(float));
    });
}

th_status param_write(th_host* host, std::uint32_t index, const float* src, std::uint64_t count) {
    return param_copy(host, "param_write", kAnyHook, kParamsName, index, src, count,
                    [&](ParamAccess& p, device::MemoryResource& memory) {
        memory.copy_from_host(p.data, src, count * sizeof(float));
    });
}

th_status acquire(th_host* host, th_resource_kind kind, std::uint64_t bytes, th_scope scope, const char* tag,
                  th_handle* out) {
    return guarded(host, "acquire", kAnyHook, [&] {
        if (out == nullptr) return fail(host, TH_INVALID_ARGUMENT, "acquire needs an output handle");
        auto& services = *host->services;
        *out = services.ledger().acquire(host->owner, kind, bytes, scope, tag ? tag : "", services.model_device());
        return TH_OK;
    });
}

th_status release(th_host* host, th_handle handle, std::uint64_t bytes) {
    return guarded(host, "release", kAlways, [&] {
        host->services->ledger().release(host->owner, handle, bytes);
        return TH_OK;
    });
}

th_status promote(th_host* host, th_handle handle, th_scope scope) {
    return guarded(host, "promote", kAnyHook, [&] {
        host->services->ledger().promote(host->owner, handle, scope);
        return TH_OK;
    });
}

th_status attach_to_param(th_host* host, th_handle handle, std::uint32_t param_index) {
    return guarded(host, "attach_to_param", kAnyHook, [&] {
        ParamAccess storage;
        ParamAccess* param = find_param(host, param_index, storage);
        if (!param) return TH_INVALID_ARGUMENT;
        host->services->ledger().attach(host->owner, handle, param->id);
        return TH_OK;
    });
}

// The memory resource behind a memory lease: its device's, pinned or not.
device::MemoryResource& memory_of(resources::Ledger& ledger, const resources::LeaseRecord& lease) {
    device::Device& dev = ledger.device(lease.device);
    return lease.kind == TH_RESOURCE_PINNED_MEMORY ? dev.pinned() : dev.memory();
}

th_status copy_to_host(th_host* host, th_handle src, std::uint64_t offset, void* dst, std::uint64_t bytes) {
    return guarded(host, "copy_to_host", kAlways, [&] {
        if (dst == nullptr && bytes > 0) return fail(host, TH_INVALID_ARGUMENT, "copy_to_host needs a buffer");
        resources::Ledger& ledger = host->services->ledger();
        void* device = ledger.address(host->owner, src, offset, bytes);
        if (bytes == 0) return TH_OK;  // the handle checked; a null buffer may come with nothing to copy
        memory_of(ledger, ledger.record(host->owner, src)).copy_to_host(dst, device, bytes);
        return TH_OK;
    });
}

th_status copy_from_host(th_host* host, th_handle dst, std::uint64_t offset, const void* src, std::uint64_t bytes) {
    return guarded(host, "copy_from_host", kAlways, [&] {
        if (src == nullptr && bytes > 0) return fail(host, TH_INVALID_ARGUMENT, "copy_from_host needs a buffer");
        resources::Ledger& ledger = host->services->ledger();
        void* device = ledger.address(host->owner, dst, offset, bytes);
        if (bytes == 0) return TH_OK;  // the handle checked; a null buffer may come with nothing to copy
        memory_of(ledger, ledger.record(host->owner, dst)).copy_from_host(device, src, bytes);
        return TH_OK;
    });
}

th_status stream_synchronize(th_host* host, th_handle stream) {
    return guarded(host, "stream_synchronize", kAlways, [&] {
        resources::Ledger& ledger = host->services->ledger();
        void* object = ledger.object(host->owner, stream, TH_RESOURCE_STREAM);
        ledger.device(ledger.record(host->owner, stream).device).stream_synchronize(object);
        return TH_OK;
    });
}

th_status event_record(th_host* host, th_handle event, th_handle stream) {
    return guarded(host, "event_record", kAlways, [&] {
        resources::Ledger& ledger = host->services->ledger();
        void* event_object = ledger.object(host->owner, event, TH_RESOURCE_EVENT);
        void* stream_object = ledger.object(host->owner, stream, TH_RESOURCE_STREAM);
        if (ledger.record(host->owner, event).device != ledger.record(host->owner, stream).device)
            return fail(host, TH_INVALID_ARGUMENT, "event and stream live on different devices");
        ledger.device(ledger.record(host->owner, event).device).event_record(event_object, stream_object);
        return TH_OK;
    });
}

th_status event_query(th_host* host, th_handle event, int* complete) {
    return guarded(host, "event_query", kAlways, [&] {
        if (complete == nullptr) return fail(host, TH_INVALID_ARGUMENT, "event_query needs an output");
        resources::Ledger& ledger = host->services->ledger();
        void* object = ledger.object(host->owner, event, TH_RESOURCE_EVENT);
        *complete = ledger.device(ledger.record(host->owner, event).device).event_query(object) ? 1 : 0;
        return TH_OK;
    });
}

th_status move_model(th_host* host, const char* device) {
    return guarded(host, "move_model", kMoves, [&] {
        if (th_status s = check_declared_write(host, "move_model", kDeviceName); s != TH_OK) return s;
        host->services->request_move(host->owner, device ? device : "auto");
        return TH_OK;
    });
}

th_status metric_count(th_host* host, std::uint32_t* out) {
    return guarded(host, "metric_count", kAlways, [&] {
        if (out == nullptr) return fail(host, TH_INVALID_ARGUMENT, "metric_count needs an output");
        *out = static_cast<std::uint32_t>(host->services->metric_count());
        return TH_OK;
    });
}

th_status metric_at(th_host* host, std::uint32_t index, const char** key, double* value) {
    return guarded(host, "metric_at", kAlways, [&] {
        if (key == nullptr || value == nullptr) return fail(host, TH_INVALID_ARGUMENT, "metric_at needs outputs");
        if (index >= host->services->metric_count())
            return fail(host, TH_INVALID_ARGUMENT, fmt::format("metric index {} out of range", index));
        auto [name, number] = host->services->metric_at(index);
        *key = name->c_str();
        *value = number;
        return TH_OK;
    });
}

th_status owner_count(th_host* host, std::uint32_t* out) {
    return guarded(host, "owner_count", kAlways, [&] {
        if (out == nullptr) return fail(host, TH_INVALID_ARGUMENT, "owner_count needs an output");
        *out = static_cast<std::uint32_t>(host->services->ledger().owner_count());
        return TH_OK;
    });
}

th_status owner_usage(th_host* host, std::uint32_t owner, th_owner_usage* out) {
    return guarded(host, "owner_usage", kAlways, [&] {
        // A plugin built before ABI 1.3 has no room for bytes_allocated.
        if (out == nullptr || out->struct_size < offsetof(th_owner_usage, bytes_allocated))
            return fail(host, TH_INVALID_ARGUMENT, "owner_usage needs a th_owner_usage with struct_size set");
        resources::Ledger& ledger = host->services->ledger();
        if (owner >= ledger.owner_count()) return fail(host, TH_INVALID_ARGUMENT, fmt::format("no owner {}", owner));
        const resources::OwnerUsage& usage = ledger.usage(owner);
        th_owner_usage filled{};
        filled.struct_size = std::min<std::uint32_t>(out->struct_size, sizeof filled);
        filled.name = ledger.owner_name(owner).c_str();
        filled.leases = usage.leases;
        filled.bytes_in_use = usage.bytes_in_use;
        filled.bytes_reserved = usage.bytes_reserved;
        filled.peak_bytes_in_use = usage.peak_bytes_in_use;
        filled.bytes_allocated = usage.bytes_allocated;
        std::memcpy(out, &filled, filled.struct_size);
        return TH_OK;
    });
}



th_status grad_read(th_host* host, std::uint32_t index, float* dst, std::uint64_t count) {
    return param_copy(host, "grad_read", kGradients, std::string_view(), index, dst, count,
                      [&](ParamAccess& p, device::MemoryResource& memory) {
        memory.copy_to_host(dst, p.grad, count * sizeof(float));
    });
}

th_status grad_scale(th_host* host, std::uint32_t index, float factor) {
    return guarded(host, "grad_scale", kGradients, [&] {
        if (th_status s = check_declared_write(host, "grad_scale", kGradsName); s != TH_OK) return s;
        if (!std::isfinite(factor))
            return fail(host, TH_INVALID_ARGUMENT, fmt::format("grad_scale: a factor must be finite, not {}", factor));
        ParamAccess storage;
        ParamAccess* param = find_param(host, index, storage);
        if (!param) return TH_INVALID_ARGUMENT;
        host->services->ledger().device(param->device).backend().scale(param->grad, param->numel, factor);
        return TH_OK;
    });
}

th_status lr_get(th_host* host, double* out) {
    return guarded(host, "lr_get", kAnyHook, [&] {
        if (out == nullptr) return fail(host, TH_INVALID_ARGUMENT, "lr_get needs an output");
        *out = host->services->learning_rate();
        return TH_OK;
    });
}



th_status lr_set(th_host* host, double lr) {
    return guarded(host, "lr_set", kLearningRate, [&] {
        if (th_status s = check_declared_write(host, "lr_set", kLearningRateName); s != TH_OK) return s;
        if (!(lr >= 0 && lr <= config::kMaxLearningRate))  // NaN too
            return fail(host, TH_INVALID_ARGUMENT,
                        fmt::format("a learning rate is in [0, {}], as the config's, not {}",
                                    config::kMaxLearningRate, lr));
        host->services->set_learning_rate(lr);
        return TH_OK;
    });
}

th_status state_write(th_host* host, const void* bytes, std::uint64_t size) {
    return guarded(host, "state_write", kAlways, [&] {
        if (bytes == nullptr && size > 0) return fail(host, TH_INVALID_ARGUMENT, "state_write needs bytes");
        host->services->state_write(host->owner, bytes, size);
        return TH_OK;
    });
}

th_status save_checkpoint(th_host* host, const char* path, int weights_only) {
    return guarded(host, "save_checkpoint", kTraining, [&] {
        if (path == nullptr || *path == '\0') return fail(host, TH_INVALID_ARGUMENT, "save_checkpoint needs a path");
        host->services->save_checkpoint(host->owner, path, weights_only != 0);
        return TH_OK;
    });
}

}  // namespace

const th_host_api& host_api() noexcept {
    static const th_host_api api = [] {
        th_host_api a{};
        a.struct_size = sizeof a;
        a.abi_major = TH_ABI_MAJOR;
        a.abi_minor = TH_ABI_MINOR;
        a.last_error = &last_error;
        a.log = &log;
        a.train_state = &train_state;
        a.metric_get = &metric_get;
        a.metric_set = &metric_set;
        a.request_stop = &request_stop;
        a.param_count = &param_count;
        a.param_info = &param_info;
        a.param_read = &param_read;
        a.param_write = &param_write;
        a.acquire = &acquire;
        a.release = &release;
        a.promote = &promote;
        a.attach_to_param = &attach_to_param;
        a.copy_to_host = &copy_to_host;
        a.copy_from_host = &copy_from_host;
        a.stream_synchronize = &stream_synchronize;
        a.event_record = &event_record;
        a.event_query = &event_query;
        a.move_model = &move_model;
        a.metric_count = &metric_count;
        a.metric_at = &metric_at;
        a.owner_count = &owner_count;
        a.owner_usage = &owner_usage;
        a.param_copy_to = &param_copy_to;
        a.param_copy_from = &param_copy_from;
        a.param_apply_mask = &param_apply_mask;
        a.param_mask_below = &param_mask_below;
        a.magnitude_threshold = &magnitude_threshold;
        a.fill = &fill;
        a.state_write = &state_write;
        a.save_checkpoint = &save_checkpoint;
        a.grad_read = &grad_read;
        a.grad_scale = &grad_scale;
        a.lr_get = &lr_get;
        a.lr_set = &lr_set;
        a.output_read = &output_read;
        a.label_read = &label_read;
        a.metric_erase = &metric_erase;
        return a;
    }();
    return api;
}

}  // namespace trainhost::plugin
