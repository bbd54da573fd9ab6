// What the ledger knows about one lease: who holds what, since when, for how long.
#pragma once

#include "trainhost/abi.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace trainhost::resources {

using OwnerId = std::uint32_t;
inline constexpr OwnerId kCoreOwner = 0;

// Lifecycle phases: every hook, plus the moments between hooks where the core or
// a plugin's constructor/destructor runs.
enum class Phase : std::uint32_t {
    setup = TH_HOOK_SETUP,
    teardown = TH_HOOK_TEARDOWN,
    exception = TH_HOOK_EXCEPTION,
    create = TH_HOOK_COUNT,  // inside a plugin's create()
    destroy,                 // inside a plugin's destroy()
    core,                    // the core's own work between hooks (forward, backward, step)
};

[[nodiscard]] std::string_view phase_name(Phase phase) noexcept;
[[nodiscard]] std::string_view hook_name(th_hook hook) noexcept;
[[nodiscard]] std::string_view kind_name(th_resource_kind kind) noexcept;
[[nodiscard]] std::string_view scope_name(th_scope scope) noexcept;
[[nodiscard]] bool is_memory(th_resource_kind kind) noexcept;

// Position in training when a lease was taken.
struct TrainPosition {
    std::uint32_t fit = 0;
    std::uint32_t epoch = 0;
    std::uint64_t step = 0;    // the training batch (or predict pass) in this fit
    // The optimizer step's window of batches (accumulate_grad_batches), which the
    // growth rule takes as one step: memory held for each of its batches and given
    // back at its optimizer step is level. The batch where nothing accumulates.
    std::uint64_t window = 0;
};

// Where a lease was taken, captured only when stacks are switched on.
struct AllocationStack;
[[nodiscard]] std::shared_ptr<const AllocationStack> capture_stack();
[[nodiscard]] std::string format_stack(const AllocationStack& stack);

struct LeaseRecord {
    std::uint64_t id = 0;
    std::uint32_t generation = 0;
    th_resource_kind kind = TH_RESOURCE_DEVICE_MEMORY;
    OwnerId owner = kCoreOwner;
    th_scope scope = TH_SCOPE_FIT;
    std::uint64_t bytes_requested = 0;
    std::uint64_t bytes_reserved = 0;  // after the allocator's rounding
    Phase acquired_in = Phase::core;
    TrainPosition acquired_at;
    std::string tag;
    void* address = nullptr;  // memory kinds: the allocation; others: the object
    std::uint32_t device = 0;  // index into the ledger's devices
    std::uint32_t slot = 0;    // where the ledger keeps it
    // Set when the lease is state of a model parameter: it then moves with it.
    std::optional<std::uint64_t> attached_param;
    // Set when the growth rule watches the lease: taken or promoted past the window of
    // a step hook (checked per step) or of an epoch-level hook (per epoch, by hook).
    enum class GrowthWindow : std::uint8_t { none, step, epoch } growth_window = GrowthWindow::none;
    Phase growth_hook = Phase::core;
    std::shared_ptr<const AllocationStack> stack;
};

}  // namespace trainhost::resources
