// The C functions behind th_host_api. Each one checks the phase, turns every C++
// error into a status plus last_error text, and never lets an exception out.
#include "plugin/host_services.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

namespace trainhost::plugin {

namespace {

using resources::Phase;

struct PhaseWindow {
    th_hook first;
    th_hook last;
    bool in_exception;
};

// From which hook to which hook a call is allowed; exception counts separately.
constexpr PhaseWindow kAnyHook{TH_HOOK_SETUP, TH_HOOK_TEARDOWN, true};
constexpr PhaseWindow kTraining{TH_HOOK_FIT_START, TH_HOOK_FIT_END, true};
constexpr PhaseWindow kStoppable{TH_HOOK_FIT_START, TH_HOOK_EPOCH_END, false};
constexpr PhaseWindow kMoves{TH_HOOK_TO_DEVICE, TH_HOOK_EPOCH_START, false};
// Calls that are harmless at any moment of an instance's life, destructors included.
constexpr PhaseWindow kAlways{TH_HOOK_SETUP, TH_HOOK_COUNT, true};

bool allowed(Phase phase, PhaseWindow window) {
    if (window.last == TH_HOOK_COUNT) return true;
    if (phase == Phase::exception) return window.in_exception;
    auto value = static_cast<std::uint32_t>(phase);
    return value >= window.first && value <= window.last;
}

th_status fail(th_host* host, th_status status, std::string message) {
    host->last_error = std::move(message);
    return status;
}

// Runs `body` if the phase allows `what`; records the refusal as a misuse otherwise.
template <typename Body>
th_status guarded(th_host* host, const char* what, PhaseWindow window, Body&& body) noexcept {
    if (host == nullptr || host->services == nullptr) return TH_INVALID_ARGUMENT;
    try {
        resources::Ledger& ledger = host->services->ledger();
        Phase phase = ledger.phase();
        if (!allowed(phase, window)) {
            std::string detail = fmt::format("{} is not allowed in phase {} (allowed from {} to {})", what,
                                             resources::phase_name(phase), resources::hook_name(window.first),
                                             resources::hook_name(window.last));
            ledger.record_misuse(host->owner, resources::MisuseKind::out_of_phase, 0, detail);
            return fail(host, TH_OUT_OF_PHASE, detail);
        }
        return body();
    } catch (const resources::ResourceError& e) {
        return fail(host, e.status(), e.what());
    } catch (const std::exception& e) {
        return fail(host, TH_ERROR, e.what());
    } catch (...) {
        return fail(host, TH_ERROR, "unknown error");
    }
}


const char* last_error(th_host* host) { return host ? host->last_error.c_str() : "no host"; }

void log(th_host* host, th_log_level level, const char* message) {
    if (host == nullptr || host->services == nullptr || message == nullptr) return;
    try {
        host->services->log(host->owner, level, message);
    } catch (...) {
    }
}

th_status train_state(th_host* host, th_train_state* out) {
    return guarded(host, "train_state", kAlways, [&] {
        if (out == nullptr || out->struct_size < offsetof(th_train_state, failure))
            return fail(host, TH_INVALID_ARGUMENT, "train_state needs a th_train_state with struct_size set");
        th_train_state state = host->services->train_state();
        std::memcpy(out, &state, std::min<std::size_t>(out->struct_size, sizeof state));
        out->struct_size = std::min<std::uint32_t>(out->struct_size, sizeof state);
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
        host->services->set_metric(key, value);
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

// Looks the parameter up; fails through last_error when the index is out of range.
ParamAccess* find_param(th_host* host, std::uint32_t index, ParamAccess& storage) {
    if (index >= host->services->param_count()) {
        host->last_error = fmt::format("parameter index {} out of range (the model has {})", index,
                                       host->services->param_count());
        return nullptr;
    }
    storage = host->services->param(index);
    return &storage;
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

th_status param_copy(th_host* host, const char* what, std::uint32_t index, std::uint64_t count, auto&& copy) {
    return guarded(host, what, kAnyHook, [&] {
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
    return param_copy(host, "param_read", index, count, [&](ParamAccess& p, device::MemoryResource& memory) {
        memory.copy_to_host(dst, p.data, count * sizeof(float));
    });
}

th_status param_write(th_host* host, std::uint32_t index, const float* src, std::uint64_t count) {
    return param_copy(host, "param_write", index, count, [&](ParamAccess& p, device::MemoryResource& memory) {
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
        resources::Ledger& ledger = host->services->ledger();
        void* device = ledger.address(host->owner, src, offset, bytes);
        memory_of(ledger, ledger.record(host->owner, src)).copy_to_host(dst, device, bytes);
        return TH_OK;
    });
}

th_status copy_from_host(th_host* host, th_handle dst, std::uint64_t offset, const void* src, std::uint64_t bytes) {
    return guarded(host, "copy_from_host", kAlways, [&] {
        resources::Ledger& ledger = host->services->ledger();
        void* device = ledger.address(host->owner, dst, offset, bytes);
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
        host->services->request_move(host->owner, device ? device : "auto");
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
        return a;
    }();
    return api;
}

}  // namespace trainhost::plugin
