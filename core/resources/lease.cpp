#include "resources/lease.hpp"

namespace trainhost::resources {

std::string_view hook_name(th_hook hook) noexcept {
    switch (hook) {
    case TH_HOOK_SETUP: return "setup";
    case TH_HOOK_TO_DEVICE: return "to_device";
    case TH_HOOK_FIT_START: return "fit_start";
    case TH_HOOK_EPOCH_START: return "epoch_start";
    case TH_HOOK_BATCH_START: return "batch_start";
    case TH_HOOK_BEFORE_BACKWARD: return "before_backward";
    case TH_HOOK_AFTER_BACKWARD: return "after_backward";
    case TH_HOOK_BEFORE_OPTIMIZER_STEP: return "before_optimizer_step";
    case TH_HOOK_AFTER_OPTIMIZER_STEP: return "after_optimizer_step";
    case TH_HOOK_BATCH_END: return "batch_end";
    case TH_HOOK_VALIDATION_START: return "validation_start";
    case TH_HOOK_VAL_BATCH_START: return "val_batch_start";
    case TH_HOOK_VAL_BATCH_END: return "val_batch_end";
    case TH_HOOK_VALIDATION_END: return "validation_end";
    case TH_HOOK_EPOCH_END: return "epoch_end";
    case TH_HOOK_FIT_END: return "fit_end";
    case TH_HOOK_TEARDOWN: return "teardown";
    case TH_HOOK_EXCEPTION: return "exception";
    case TH_HOOK_COUNT: break;
    }
    return "unknown";
}

std::string_view phase_name(Phase phase) noexcept {
    switch (phase) {
    case Phase::create: return "create";
    case Phase::destroy: return "destroy";
    case Phase::core: return "core";
    default: return hook_name(static_cast<th_hook>(phase));
    }
}

std::string_view kind_name(th_resource_kind kind) noexcept {
    switch (kind) {
    case TH_RESOURCE_DEVICE_MEMORY: return "device_memory";
    case TH_RESOURCE_PINNED_MEMORY: return "pinned_memory";
    case TH_RESOURCE_STREAM: return "stream";
    case TH_RESOURCE_EVENT: return "event";
    case TH_RESOURCE_BLAS_HANDLE: return "blas_handle";
    case TH_RESOURCE_DNN_HANDLE: return "dnn_handle";
    }
    return "unknown";
}

std::string_view scope_name(th_scope scope) noexcept {
    switch (scope) {
    case TH_SCOPE_STEP: return "step";
    case TH_SCOPE_EPOCH: return "epoch";
    case TH_SCOPE_FIT: return "fit";
    case TH_SCOPE_PLUGIN: return "plugin";
    case TH_SCOPE_SESSION: return "session";
    }
    return "unknown";
}

bool is_memory(th_resource_kind kind) noexcept {
    return kind == TH_RESOURCE_DEVICE_MEMORY || kind == TH_RESOURCE_PINNED_MEMORY;
}

}  // namespace trainhost::resources
