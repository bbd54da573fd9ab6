#include "resources/ledger.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace trainhost::resources {

Ledger::Ledger(device::MemoryResource& memory) : memory_(memory) {
    (void)register_owner("core");
}

Ledger::~Ledger() {
    for (auto& [id, lease] : live_) free_upstream(lease);
}

OwnerId Ledger::register_owner(const std::string& name) {
    owners_.push_back(name);
    usage_.emplace_back();
    return static_cast<OwnerId>(owners_.size() - 1);
}

const std::string& Ledger::owner_name(OwnerId owner) const { return owners_.at(owner); }

th_handle Ledger::acquire(OwnerId owner, th_resource_kind kind, std::uint64_t bytes, th_scope scope, std::string tag) {
    if (scope < TH_SCOPE_STEP || scope > TH_SCOPE_SESSION)
        throw ResourceError(TH_INVALID_ARGUMENT, fmt::format("invalid scope {}", static_cast<int>(scope)));
    if (owner != kCoreOwner && scope == TH_SCOPE_SESSION)
        throw ResourceError(TH_INVALID_ARGUMENT, "a plugin's lease cannot outlive the plugin: use scope plugin or narrower");
    if (!is_memory(kind))
        throw ResourceError(TH_UNSUPPORTED, fmt::format("resource kind {} is not available on the {} backend",
                                                        kind_name(kind), memory_.device_name()));
    if (bytes == 0) throw ResourceError(TH_INVALID_ARGUMENT, "a memory lease needs at least one byte");

    std::size_t reserved = 0;
    void* address = memory_.allocate(bytes, reserved);
    if (address == nullptr)
        throw ResourceError(TH_OUT_OF_MEMORY, fmt::format("{}: cannot allocate {} bytes for {} (tag {})",
                                                          memory_.device_name(), bytes, owners_.at(owner), tag));
    LeaseRecord lease;
    lease.id = next_id_++;
    lease.generation = 1;
    lease.kind = kind;
    lease.owner = owner;
    lease.scope = scope;
    lease.bytes_requested = bytes;
    lease.bytes_reserved = reserved;
    lease.acquired_in = phase_;
    lease.acquired_at = position_;
    lease.tag = std::move(tag);
    lease.address = address;

    OwnerUsage& usage = usage_.at(owner);
    ++usage.leases;
    usage.bytes_in_use += bytes;
    usage.bytes_reserved += reserved;
    usage.peak_bytes_in_use = std::max(usage.peak_bytes_in_use, usage.bytes_in_use);
    ++leases_per_scope_[scope];
    th_handle handle{lease.id, lease.generation, 0};
    live_.emplace(lease.id, std::move(lease));
    return handle;
}

LeaseRecord& Ledger::checked(OwnerId owner, th_handle handle, const char* operation) {
    auto found = live_.find(handle.id);
    if (found == live_.end()) {
        MisuseKind kind = reclaimed_.contains(handle.id) ? MisuseKind::use_after_reclaim
                          : (handle.id != 0 && handle.id < next_id_) ? MisuseKind::double_free
                                                                     : MisuseKind::unknown_handle;
        if (kind == MisuseKind::double_free && std::string_view(operation) != "release")
            kind = MisuseKind::unknown_handle;
        std::string detail = kind == MisuseKind::use_after_reclaim
                                 ? fmt::format("{} of lease {}, which the core reclaimed", operation, handle.id)
                             : kind == MisuseKind::double_free
                                 ? fmt::format("{} of lease {}, which was already released", operation, handle.id)
                                 : fmt::format("{} of lease {}, which does not exist", operation, handle.id);
        record_misuse(owner, kind, handle.id, detail);
        throw ResourceError(TH_INVALID_HANDLE, detail);
    }
    LeaseRecord& lease = found->second;
    if (lease.owner != owner) {
        std::string detail = fmt::format("{} of lease {}, which belongs to {}", operation, handle.id,
                                         owners_.at(lease.owner));
        record_misuse(owner, MisuseKind::foreign_handle, handle.id, detail);
        throw ResourceError(TH_INVALID_HANDLE, detail);
    }
    if (lease.generation != handle.generation) {
        std::string detail = fmt::format("{} of lease {} through a stale handle", operation, handle.id);
        record_misuse(owner, MisuseKind::use_after_reclaim, handle.id, detail);
        throw ResourceError(TH_INVALID_HANDLE, detail);
    }
    return lease;
}

void Ledger::release(OwnerId owner, th_handle handle) {
    LeaseRecord lease = std::move(checked(owner, handle, "release"));
    live_.erase(handle.id);
    free_upstream(lease);
}

void Ledger::free_upstream(const LeaseRecord& lease) noexcept {
    OwnerUsage& usage = usage_[lease.owner];
    --usage.leases;
    usage.bytes_in_use -= lease.bytes_requested;
    usage.bytes_reserved -= lease.bytes_reserved;
    --leases_per_scope_[lease.scope];
    memory_.deallocate(lease.address, lease.bytes_requested, lease.bytes_reserved);
}

void Ledger::promote(OwnerId owner, th_handle handle, th_scope scope) {
    LeaseRecord& lease = checked(owner, handle, "promote");
    if (scope < lease.scope || scope > TH_SCOPE_SESSION || (owner != kCoreOwner && scope == TH_SCOPE_SESSION))
        throw ResourceError(TH_INVALID_ARGUMENT, fmt::format("cannot promote lease {} from scope {} to {}", handle.id,
                                                             scope_name(lease.scope), scope_name(scope)));
    --leases_per_scope_[lease.scope];
    lease.scope = scope;
    ++leases_per_scope_[lease.scope];
}

void* Ledger::address(OwnerId owner, th_handle handle, std::uint64_t offset, std::uint64_t bytes) {
    LeaseRecord& lease = checked(owner, handle, "access");
    if (offset > lease.bytes_requested || bytes > lease.bytes_requested - offset) {
        std::string detail = fmt::format("access of bytes [{}, {}) of lease {}, which holds {} bytes", offset,
                                         offset + bytes, handle.id, lease.bytes_requested);
        record_misuse(owner, MisuseKind::out_of_range, handle.id, detail);
        throw ResourceError(TH_INVALID_ARGUMENT, detail);
    }
    return static_cast<std::byte*>(lease.address) + offset;
}

std::vector<Leak> Ledger::collect(std::string_view boundary, ViolationPolicy policy, auto&& matches) {
    std::vector<Leak> leaks;
    for (const auto& [id, lease] : live_)
        if (matches(lease)) leaks.push_back(Leak{lease, owners_.at(lease.owner), std::string(boundary)});
    // Report in acquisition order, whatever the hash map's order.
    std::sort(leaks.begin(), leaks.end(), [](const Leak& a, const Leak& b) { return a.lease.id < b.lease.id; });
    if (policy != ViolationPolicy::ignore) {
        for (const Leak& leak : leaks) {
            auto node = live_.extract(leak.lease.id);
            reclaimed_.insert(leak.lease.id);
            free_upstream(node.mapped());
        }
    }
    return leaks;
}

std::vector<Leak> Ledger::end_scope(th_scope scope, std::string_view boundary, ViolationPolicy policy) {
    bool any = false;
    for (int s = TH_SCOPE_STEP; s <= scope; ++s) any = any || leases_per_scope_[s] > 0;
    if (!any) return {};
    return collect(boundary, policy, [&](const LeaseRecord& lease) { return lease.scope <= scope; });
}

std::vector<Leak> Ledger::end_owner(OwnerId owner, th_scope widest, std::string_view boundary,
                                    ViolationPolicy policy) {
    if (usage_.at(owner).leases == 0) return {};
    return collect(boundary, policy,
                   [&](const LeaseRecord& lease) { return lease.owner == owner && lease.scope <= widest; });
}

void Ledger::record_misuse(OwnerId owner, MisuseKind kind, std::uint64_t lease_id, std::string detail) {
    misuses_.push_back(Misuse{kind, owners_.at(owner), phase_, lease_id, std::move(detail)});
}

std::vector<LeaseRecord> Ledger::leases_of(OwnerId owner) const {
    std::vector<LeaseRecord> leases;
    for (const auto& [id, lease] : live_)
        if (lease.owner == owner) leases.push_back(lease);
    std::sort(leases.begin(), leases.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    return leases;
}

}  // namespace trainhost::resources
