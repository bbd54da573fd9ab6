// What the functions behind th_host_api share: the phase each call is allowed in,
// the guard that turns every C++ error into a status and last_error text, and the
// check of declared writes. Private to core/plugin.
#pragma once

#include "plugin/host_services.hpp"

#include <cstdint>
#include <exception>
#include <fmt/format.h>
#include <string>
#include <string_view>
#include <utility>

namespace trainhost::plugin::host_call {

using resources::Phase;

struct PhaseWindow {
    th_hook first;
    th_hook last;
    bool in_exception;
    th_hook also = TH_HOOK_COUNT;  // one more hook outside [first, last]; COUNT: none
};

// From which hook to which hook a call is allowed; exception counts separately.
constexpr PhaseWindow kAnyHook{TH_HOOK_SETUP, TH_HOOK_TEARDOWN, true};
constexpr PhaseWindow kTraining{TH_HOOK_FIT_START, TH_HOOK_FIT_END, true};
constexpr PhaseWindow kStoppable{TH_HOOK_FIT_START, TH_HOOK_EPOCH_END, false};
constexpr PhaseWindow kMoves{TH_HOOK_TO_DEVICE, TH_HOOK_EPOCH_START, false};
// While the batch's gradients exist and the optimizer has not used them yet.
constexpr PhaseWindow kGradients{TH_HOOK_AFTER_BACKWARD, TH_HOOK_BEFORE_OPTIMIZER_STEP, false};
// For the optimizer steps that follow: up to the last epoch's end.
constexpr PhaseWindow kLearningRate{TH_HOOK_SETUP, TH_HOOK_EPOCH_END, false};
// After a batch's forward pass: the training step's hooks, and each validation batch's end.
constexpr PhaseWindow kBatchOutputs{TH_HOOK_BEFORE_BACKWARD, TH_HOOK_BATCH_END, false, TH_HOOK_VAL_BATCH_END};
// Calls that are harmless at any moment of an instance's life, destructors included.
constexpr PhaseWindow kAlways{TH_HOOK_SETUP, TH_HOOK_COUNT, true};

[[nodiscard]] bool allowed(Phase phase, PhaseWindow window);
// Sets last_error and gives back `status`.
th_status fail(th_host* host, th_status status, std::string message);
// A call from a thread other than the instance's: counted, and nothing else touched.
[[nodiscard]] bool refused_off_thread(th_host* host, const char* what) noexcept;
// From ABI 1.2 a plugin changes only what its entry declares in `writes`, so the
// order derived from declarations holds while it runs; a refusal is a misuse.
[[nodiscard]] th_status check_declared_write(th_host* host, const char* what, std::string_view name);
// Looks the parameter up; fails through last_error when the index is out of range.
[[nodiscard]] ParamAccess* find_param(th_host* host, std::uint32_t index, ParamAccess& storage);

// Runs `body` if the phase allows `what`; records the refusal as a misuse otherwise.
template <typename Body>
th_status guarded(th_host* host, const char* what, PhaseWindow window, Body&& body) noexcept {
    if (host == nullptr) return TH_INVALID_ARGUMENT;
    if (refused_off_thread(host, what)) return TH_OUT_OF_PHASE;
    if (host->services == nullptr)
        return fail(host, TH_OUT_OF_PHASE,
                    fmt::format("{} after the plugin instance ended: a handle or HostLink kept past it (in a global, "
                                "say) is dead, and the ledger took back its leases when the instance ended",
                                what));
    try {
        resources::Ledger& ledger = host->services->ledger();
        Phase phase = ledger.phase();
        if (!allowed(phase, window)) {
            std::string detail = fmt::format("{} is not allowed in phase {} (allowed from {} to {}{})", what,
                                             resources::phase_name(phase), resources::hook_name(window.first),
                                             resources::hook_name(window.last),
                                             window.also == TH_HOOK_COUNT
                                                 ? std::string()
                                                 : fmt::format(", and in {}", resources::hook_name(window.also)));
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

// Tensor operations on parameters and the batch in flight (host_api_tensors.cpp).
th_status param_copy_to(th_host* host, std::uint32_t index, th_handle dst);
th_status param_copy_from(th_host* host, std::uint32_t index, th_handle src);
th_status param_apply_mask(th_host* host, std::uint32_t index, th_handle mask);
th_status param_mask_below(th_host* host, std::uint32_t index, float threshold, th_handle mask);
th_status magnitude_threshold(th_host* host, const std::uint32_t* indices, const th_handle* masks, std::uint32_t count,
                              std::uint64_t k, float* out);
th_status fill(th_host* host, th_handle buffer, float value);
th_status output_read(th_host* host, float* dst, std::uint64_t count, std::uint64_t* rows, std::uint64_t* width);
th_status label_read(th_host* host, std::int32_t* dst, std::uint64_t count, std::uint64_t* rows);

}  // namespace trainhost::plugin::host_call
