// The ownership ledger: every resource the core or a plugin takes is recorded here
// with its owner and scope, and every scope boundary asks the ledger what is left.
//
// Ordering rule (as RMM's tracking adaptor): record only after the upstream
// allocation succeeded, un-record before the upstream free, so the ledger never
// lists memory that does not exist and never frees memory it did not list.
#pragma once

#include "device/memory_resource.hpp"
#include "resources/lease.hpp"
#include "resources/violation.hpp"

#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
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
    std::uint64_t bytes_in_use = 0;
    std::uint64_t bytes_reserved = 0;
    std::uint64_t peak_bytes_in_use = 0;
};

class Ledger {
public:
    explicit Ledger(device::MemoryResource& memory);
    Ledger(const Ledger&) = delete;
    Ledger& operator=(const Ledger&) = delete;
    // Anything still listed is given back upstream so the process never leaks.
    ~Ledger();

    [[nodiscard]] OwnerId register_owner(const std::string& name);
    [[nodiscard]] const std::string& owner_name(OwnerId owner) const;

    // Where training is now; stamped onto each new lease and misuse.
    void set_position(Phase phase, TrainPosition position) noexcept {
        phase_ = phase;
        position_ = position;
    }
    [[nodiscard]] Phase phase() const noexcept { return phase_; }
    [[nodiscard]] TrainPosition position() const noexcept { return position_; }

    // Throws ResourceError (and counts a misuse where the caller is at fault).
    [[nodiscard]] th_handle acquire(OwnerId owner, th_resource_kind kind, std::uint64_t bytes, th_scope scope,
                                    std::string tag);
    void release(OwnerId owner, th_handle handle);
    void promote(OwnerId owner, th_handle handle, th_scope scope);
    // Checks that [offset, offset+bytes) lies inside a memory lease of `owner`.
    [[nodiscard]] void* address(OwnerId owner, th_handle handle, std::uint64_t offset, std::uint64_t bytes);
    [[nodiscard]] device::MemoryResource& memory() noexcept { return memory_; }

    // Scope boundary: leases of `scope` or narrower, any owner. Each one found is
    // a leak; unless the policy is ignore it is reclaimed (freed, handle invalidated).
    std::vector<Leak> end_scope(th_scope scope, std::string_view boundary, ViolationPolicy policy);
    // Owner boundary: every lease of `owner` up to `widest` scope.
    std::vector<Leak> end_owner(OwnerId owner, th_scope widest, std::string_view boundary, ViolationPolicy policy);

    void record_misuse(OwnerId owner, MisuseKind kind, std::uint64_t lease_id, std::string detail);

    [[nodiscard]] const std::vector<Misuse>& misuses() const noexcept { return misuses_; }
    [[nodiscard]] const OwnerUsage& usage(OwnerId owner) const { return usage_.at(owner); }
    [[nodiscard]] std::size_t owner_count() const noexcept { return owners_.size(); }
    [[nodiscard]] std::size_t live_leases() const noexcept { return live_.size(); }
    [[nodiscard]] std::vector<LeaseRecord> leases_of(OwnerId owner) const;

private:
    LeaseRecord& checked(OwnerId owner, th_handle handle, const char* operation);
    void free_upstream(const LeaseRecord& lease) noexcept;
    std::vector<Leak> collect(std::string_view boundary, ViolationPolicy policy, auto&& matches);

    device::MemoryResource& memory_;
    std::vector<std::string> owners_;
    std::vector<OwnerUsage> usage_;
    std::unordered_map<std::uint64_t, LeaseRecord> live_;
    std::unordered_set<std::uint64_t> reclaimed_;
    std::uint64_t leases_per_scope_[TH_SCOPE_SESSION + 1] = {};
    std::vector<Misuse> misuses_;
    std::uint64_t next_id_ = 1;
    Phase phase_ = Phase::core;
    TrainPosition position_;
};

}  // namespace trainhost::resources
