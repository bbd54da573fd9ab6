// The ownership ledger: every resource the core or a plugin takes is recorded here
// with its owner and scope, and every scope boundary asks the ledger what is left.
//
// Ordering rule (as RMM's tracking adaptor): record only after the upstream
// allocation succeeded, un-record before the upstream free, so the ledger never
// lists a resource that does not exist and never frees one it did not list.
#pragma once

#include "device/device.hpp"
#include "resources/lease.hpp"
#include "resources/lease_table.hpp"
#include "resources/violation.hpp"

#include <array>
#include <deque>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace trainhost::resources {

// A refused host call: the status to return across the ABI and the reason.
class ResourceError : public std::runtime_error {
public:
    ResourceError(th_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
    [[nodiscard]] th_status status() const noexcept { return status_; }

private:
    th_status status_;
};

struct OwnerUsage {
    std::uint64_t leases = 0;
    std::uint64_t bytes_in_use = 0;     // device memory, as requested
    std::uint64_t bytes_allocated = 0;  // device memory, after the allocator's rounding
    std::uint64_t bytes_reserved = 0;   // device and pinned memory after rounding, plus objects
    std::uint64_t peak_bytes_in_use = 0;
    std::uint64_t budget = 0;          // limit on bytes_allocated; 0 = none
};

class Ledger {
public:
    explicit Ledger(std::vector<device::Device*> devices);
    Ledger(const Ledger&) = delete;
    Ledger& operator=(const Ledger&) = delete;
    // Anything still listed is given back upstream so the process never leaks.
    ~Ledger();

    [[nodiscard]] OwnerId register_owner(const std::string& name);
    [[nodiscard]] const std::string& owner_name(OwnerId owner) const;
    // Device memory an owner may hold at once, as the allocator rounds it (0 = unlimited).
    void set_budget(OwnerId owner, std::uint64_t bytes) { usage_.at(owner).budget = bytes; }
    void set_capture_stacks(bool capture) noexcept { capture_stacks_ = capture; }

    // Where training is now; stamped onto each new lease and misuse.
    void set_position(Phase phase, TrainPosition position) noexcept {
        phase_ = phase;
        position_ = position;
    }
    [[nodiscard]] Phase phase() const noexcept { return phase_; }
    [[nodiscard]] TrainPosition position() const noexcept { return position_; }

    // Throws ResourceError (and counts a misuse where the caller is at fault).
    [[nodiscard]] th_handle acquire(OwnerId owner, th_resource_kind kind, std::uint64_t bytes, th_scope scope,
                                    std::string tag, device::DeviceIndex device = 0);
    // For memory kinds `bytes` must be the size acquired (a mismatch is a misuse). The
    // owner's first release of a lease the core reclaimed as a leak, while the instance
    // it was reclaimed from lives, is taken as that leak's late end: already reported,
    // it is no misuse (an RAII holder releases whatever it holds when it goes); a
    // second is a double free, and one after end_owner a use after reclaim.
    void release(OwnerId owner, th_handle handle, std::uint64_t bytes);
    void promote(OwnerId owner, th_handle handle, th_scope scope);
    // Makes a memory lease part of a parameter's state: it moves with the model.
    void attach(OwnerId owner, th_handle handle, std::uint64_t param_id);

    // A memory lease's bytes [offset, offset+bytes), checked against its size.
    [[nodiscard]] void* address(OwnerId owner, th_handle handle, std::uint64_t offset, std::uint64_t bytes);
    // A non-memory lease's object, checked against the kind the caller expects.
    [[nodiscard]] void* object(OwnerId owner, th_handle handle, th_resource_kind kind);
    [[nodiscard]] const LeaseRecord& record(OwnerId owner, th_handle handle, const char* operation = "query");

    [[nodiscard]] device::Device& device(device::DeviceIndex index) const { return *devices_.at(index); }
    [[nodiscard]] std::size_t device_count() const noexcept { return devices_.size(); }

    // Moves every lease attached to a parameter onto `target`: allocate there, copy,
    // free the old buffer, in that order. The handles stay valid. So are the plugins'
    // device memory leases of id `taken_from` on: those taken in the hook that asked
    // for the move, which waits for the hook's end (0: none).
    void relocate_attached(device::DeviceIndex target, std::uint64_t taken_from = 0);
    // The id the next lease will have.
    [[nodiscard]] std::uint64_t next_lease_id() const noexcept { return next_id_; }

    // Scope boundary: leases of `scope` or narrower, any owner. Each one found is
    // a leak; unless the policy is ignore it is reclaimed (freed, handle invalidated).
    std::vector<Leak> end_scope(th_scope scope, std::string_view boundary, ViolationPolicy policy);
    // Owner boundary: every lease of `owner` up to `widest` scope.
    std::vector<Leak> end_owner(OwnerId owner, th_scope widest, std::string_view boundary, ViolationPolicy policy);
    // After the model left `source`: plugin device memory still there, and not
    // attached to a parameter, is stranded (plugin memory follows the model).
    std::vector<Leak> stranded_on(device::DeviceIndex source, std::string_view boundary, ViolationPolicy policy);
    // Steady state, the growth rule: memory an owner keeps may be set up once, lazily
    // (an optimizer's state in the first step, an average that starts at step 1000),
    // so each owner's first step that keeps memory is its warm-up; keeping more in a
    // later step is a pool that only grows. Per fit for fit scope and wider, per
    // epoch for epoch scope. A fit opens the window with the hooks its steps run in:
    // a training batch's, or a predict pass's (whose validation batch hooks are then
    // step hooks, and which has no epochs), forgetting every warm-up; each epoch
    // forgets those of epoch scope. end_growth_window closes it, and until the next
    // opens nothing is noted.
    enum class StepHooks { training_batch, predict_pass };
    void begin_fit_growth_window(StepHooks steps);
    void begin_epoch_growth_window();
    void end_growth_window();
    // Plugin leases of epoch scope or wider taken in a step hook since the last call,
    // and still held, after their owner's warm-up step. Reported, not reclaimed: the
    // plugin may still give them back before their scope ends.
    std::vector<Leak> grown_in_step(std::string_view boundary);
    // The same per epoch: plugin leases of fit scope or wider taken in this epoch's
    // epoch_start, validation or epoch_end hooks, still held, in an epoch after the
    // owner's warm-up epoch.
    std::vector<Leak> grown_in_epoch(std::string_view boundary);

    void record_misuse(OwnerId owner, MisuseKind kind, std::uint64_t lease_id, std::string detail);

    [[nodiscard]] const std::vector<Misuse>& misuses() const noexcept { return misuses_; }
    [[nodiscard]] const OwnerUsage& usage(OwnerId owner) const { return usage_.at(owner); }
    [[nodiscard]] std::size_t owner_count() const noexcept { return owners_.size(); }
    [[nodiscard]] std::size_t live_leases() const noexcept { return live_.size(); }
    [[nodiscard]] std::vector<LeaseRecord> leases_of(OwnerId owner) const;
    // Leases on a device, by kind; for the device-residency checks and tests.
    [[nodiscard]] std::vector<LeaseRecord> leases_on(device::DeviceIndex device) const;

private:
    LeaseRecord& checked(OwnerId owner, th_handle handle, const char* operation);
    [[nodiscard]] static bool same_handle(const th_handle& a, const th_handle& b) noexcept;
    [[noreturn, gnu::cold, gnu::noinline]] void refuse_missing(OwnerId owner, th_handle handle, const char* operation);
    void check_budget(OwnerId owner, device::DeviceIndex device, std::uint64_t bytes) const;
    void* allocate_upstream(th_resource_kind kind, std::uint64_t bytes, device::DeviceIndex device,
                            std::size_t& reserved);
    void free_upstream(const LeaseRecord& lease) noexcept;
    void count_in(const LeaseRecord& lease) noexcept;
    void count_out(const LeaseRecord& lease) noexcept;
    template <typename Matches>
    std::vector<Leak> collect(std::string_view boundary, ViolationPolicy policy, LeakRule rule, Matches&& matches);

    std::vector<device::Device*> devices_;
    // A deque, so a name handed out (th_owner_usage.name) stays put when more owners register.
    std::deque<std::string> owners_;
    std::vector<OwnerUsage> usage_;
    LeaseTable live_;
    struct Reclaimed {
        th_handle handle;  // whole, so only a handle copied as it is ends the leak
        OwnerId owner;
        bool memory;
        std::uint64_t bytes;
        bool owner_ended = false;  // its instance destroyed: no late release can come from it
    };
    std::unordered_map<std::uint64_t, Reclaimed> reclaimed_;  // by lease id, until the owner releases it
    // Who released the latest leases, so a handle to another owner's released lease is
    // told apart from the caller's own double free. Bounded: an older one is only "released".
    struct ReleasedLease {
        std::uint64_t id = 0;
        OwnerId owner = 0;
    };
    std::array<ReleasedLease, 1024> recently_released_{};
    std::uint64_t released_count_ = 0;
    void remember_released(std::uint64_t id, OwnerId owner) noexcept;
    [[nodiscard]] std::optional<OwnerId> previous_owner(std::uint64_t id) const;
    std::uint64_t leases_per_scope_[TH_SCOPE_SESSION + 1] = {};
    std::vector<Misuse> misuses_;
    std::uint64_t next_id_ = 1;
    // A lease the growth rule looks at, where it was taken or promoted.
    struct GrowthCandidate {
        th_handle handle;
        TrainPosition at;
    };
    // What an owner holds in one growth window: leases and their bytes.
    struct GrowthLevel {
        std::uint64_t leases = 0;
        std::uint64_t bytes = 0;
    };
    // The owner's first step (or epoch) with a candidate, and the most it has held since.
    struct Warmup {
        std::uint64_t when = 0;
        GrowthLevel level;
    };
    // The growth rule's list that a lease taken (from = step) or promoted from `from` to
    // `to` now belongs on, if any.
    [[nodiscard]] std::vector<GrowthCandidate>* growth_candidates_for(OwnerId owner, th_scope from, th_scope to) noexcept;
    void watch_growth(LeaseRecord& lease, std::vector<GrowthCandidate>& candidates);
    [[nodiscard]] GrowthLevel growth_level(const LeaseRecord& like) const;
    std::vector<Leak> grown(std::vector<GrowthCandidate>& candidates, std::string_view boundary, bool per_epoch);

    bool growth_tracked_ = false;                   // a fit's growth window is open
    StepHooks step_hooks_ = StepHooks::training_batch;
    std::vector<GrowthCandidate> taken_in_steps_;        // candidates for the growth rule per step
    std::vector<GrowthCandidate> taken_in_epoch_hooks_;  // and per epoch
    using WarmupKey = std::pair<OwnerId, Phase>;  // by owner and hook
    std::map<WarmupKey, Warmup> warmup_step_fit_;    // fit scope and wider: the owner's warm-up step in that hook
    std::map<WarmupKey, Warmup> warmup_step_epoch_;  // epoch scope, this epoch
    std::map<WarmupKey, Warmup> warmup_epoch_;  // taken outside steps: the owner's warm-up epoch in that hook
    std::unordered_set<std::uint64_t> growth_reported_;  // lease ids named once, not again at a later check
    bool capture_stacks_ = false;
    Phase phase_ = Phase::core;
    TrainPosition position_;
};

}  // namespace trainhost::resources
