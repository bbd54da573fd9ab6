// Devices in a session: naming them, and the core-owned moves of the model
// between them, verified before training goes on.
#include "errors.hpp"
#include "lifecycle/fit_state.hpp"
#include "lifecycle/session.hpp"

#include "device/device_registry.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <ostream>

namespace trainhost::lifecycle {

using resources::Phase;

device::DeviceIndex Session::device_index(std::string_view name) const {
    const std::string wanted = name == "cpu" ? std::string("cpu:0") : name == "cuda" ? std::string("cuda:0") : std::string(name);
    for (device::DeviceIndex i = 0; i < devices_.size(); ++i)
        if (devices_[i]->name() == wanted) return i;
    if (auto unopened = unopened_.find(wanted); unopened != unopened_.end())
        throw resources::ResourceError(TH_INVALID_ARGUMENT, unopened->second);
    std::vector<std::string> names;
    for (const auto& dev : devices_) names.push_back(dev->name());
    throw resources::ResourceError(TH_INVALID_ARGUMENT, fmt::format("no device '{}' in this run (devices: {}{})", name,
                                                                    fmt::join(names, ", "),
                                                                    !wanted.starts_with("cuda") ? ""
                                                                    : device::cuda_built()
                                                                        ? "; no such CUDA device answers"
                                                                        : "; this build has no CUDA backend"));
}

// The first GPU that opened and passed its warm-up, if any.
std::optional<device::DeviceIndex> Session::usable_gpu() const {
    for (device::DeviceIndex i = 0; i < devices_.size(); ++i)
        if (devices_[i]->name().starts_with("cuda:") && !unusable_.contains(i)) return i;
    return std::nullopt;
}

// Why usable_gpu() found none: a GPU that opened but failed its first use, else why
// none opened (`cuda_status`: none listed, or the first that could not be opened).
std::string Session::why_no_gpu(const std::string& cuda_status) const {
    for (const auto& [index, why] : unusable_)
        if (devices_[index]->name().starts_with("cuda:")) return why;
    return cuda_status;
}

void Session::request_move(resources::OwnerId, std::string_view device) {
    // auto: the best device this run can use (the first GPU, else the first CPU device).
    const device::DeviceIndex target = device == "auto" ? usable_gpu().value_or(device_index("cpu:0")) : device_index(device);
    if (auto found = unusable_.find(target); found != unusable_.end())
        throw resources::ResourceError(TH_INVALID_ARGUMENT, fmt::format("{} cannot be used: {}", devices_[target]->name(),
                                                                        found->second));
    pending_move_ = target;
}

// The core owns every move: parameters, gradients, activations, optimizer state and
// attached plugin state go together, the old buffers are freed before this returns,
// and nothing of the model may be left behind.
void Session::apply_pending_move() {
    if (!pending_move_) return;
    const device::DeviceIndex target = *std::exchange(pending_move_, std::nullopt);
    if (target == model_device_) return;
    const device::DeviceIndex source = model_device_;
    FitState& fit = *fit_;
    device::Backend& backend = devices_[target]->backend();
    // Scratch and the host batch, nothing to copy: taken first, so that a target without room for them
    // fails the move before anything has moved.
    nn::Tensor loss_workspace = make_loss_workspace(backend, target);
    HostBatch host = make_host_batch(target);
    fit.model->move_to(target, backend);
    fit.optimizer->move_to(target, backend);
    fit.accumulator->move_to(target, backend);
    fit.labels.move_to(target);
    fit.targets.move_to(target);
    fit.host = std::move(host);
    fit.loss_workspace = std::move(loss_workspace);
    // The model is there now, whether or not the plugins' state follows: a fit that
    // fails below must read, save and take new buffers where the model is.
    model_device_ = target;
    state_.device = devices_[target]->name().c_str();
    // What plugins took in the hook that asked, still on the old device, goes too.
    ledger_->relocate_attached(target, hook_first_lease_);
    if (options_.verbose)
        out_ << fmt::format("moved the model from {} to {}\n", devices_[source]->name(), devices_[target]->name());
    for (const resources::LeaseRecord& lease : ledger_->leases_on(source))
        if (lease.owner == resources::kCoreOwner && lease.scope <= TH_SCOPE_FIT)
            throw FitFailure(fmt::format("internal error: core lease {} ({}) stayed on {} after the move", lease.id,
                                         lease.tag, devices_[source]->name()),
                             kExitResourceContract);
    if (options_.config.on_violation == resources::ViolationPolicy::ignore) return;
    auto stranded = ledger_->stranded_on(source, "model_move", options_.config.on_violation);
    if (stranded.empty()) return;
    std::string first = resources::format_leak(stranded.front());
    record_leaks(std::move(stranded));
    if (options_.config.on_violation == resources::ViolationPolicy::fail)
        throw FitFailure(fmt::format("resource contract violated at the model's move from {} to {}: {}",
                                     devices_[source]->name(), devices_[target]->name(), first),
                         kExitResourceContract);
}

void Session::settle_devices(FitRecord& record, const std::vector<std::optional<std::uint64_t>>& free_at_start) {
    for (device::DeviceIndex i = 0; i < devices_.size(); ++i) {
        if (unusable_.contains(i)) continue;  // it never computed; a fault there must not end the session's report
        try {
            devices_[i]->synchronize();
            devices_[i]->memory().trim();
        } catch (const std::exception& e) {
            // A fault the device kept from earlier work: the fit fails with it, unless it
            // failed first, and nothing runs there again; the report and the verdict still come.
            const std::string why = fmt::format("{}: {}", devices_[i]->name(), e.what());
            unusable_[i] = why;
            if (record.failure.empty()) {
                record.failure = why;
                record.failure_exit = kExitTraining;
                err_ << "error: " << why << '\n';
            } else {
                err_ << fmt::format("warning: {} (nothing will run there again)\n", why);
            }
        }
    }
    record.after_teardown = memory_snapshot();
    // The ground truth beyond the ledger: the driver's own count must be back where
    // the fit started, within the driver's page granularity.
    constexpr std::uint64_t kDriverGranularity = 2u << 20;
    for (device::DeviceIndex i = 0; i < devices_.size(); ++i) {
        if (!free_at_start[i] || unusable_.contains(i)) continue;
        const auto now = devices_[i]->driver_free_bytes();
        if (!now) continue;
        const std::uint64_t missing = *free_at_start[i] > *now ? *free_at_start[i] - *now : 0;
        record.unaccounted_bytes[devices_[i]->name()] = missing > kDriverGranularity ? missing : 0;
        if (missing <= kDriverGranularity) continue;
        // CUDA loads a library kernel's code into device memory at its first launch, and the
        // warm-up's small shapes do not reach every kernel a fit's shapes pick: the first
        // fit's count may hold such code. From the second fit on it is memory alone.
        err_ << fmt::format("warning: {}: {} of device memory are in use after fit {} that nobody in the ledger "
                            "accounts for{}\n",
                            devices_[i]->name(), resources::human_bytes(missing), record.index + 1,
                            record.index == 0 ? " (in a run's first fit this may also be kernel code the driver "
                                                "loaded on first use; later fits count memory alone)"
                                              : "");
    }
}

MemorySnapshot Session::memory_snapshot() const {
    MemorySnapshot snapshot;
    for (const auto& dev : devices_) {
        const device::MemoryStats stats = dev->memory().stats();
        snapshot.in_use += stats.in_use;
        snapshot.reserved += stats.reserved;
    }
    for (resources::OwnerId owner = 0; owner < ledger_->owner_count(); ++owner) {
        const resources::OwnerUsage& usage = ledger_->usage(owner);
        snapshot.by_owner.push_back(
            OwnerBytes{ledger_->owner_name(owner), usage.bytes_in_use, usage.bytes_allocated, usage.bytes_reserved});
        snapshot.allocated += usage.bytes_allocated;
    }
    return snapshot;
}

}  // namespace trainhost::lifecycle
