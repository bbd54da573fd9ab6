#include "resources/ledger.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>

namespace trainhost::resources {

Ledger::Ledger(std::vector<device::Device*> devices) : devices_(std::move(devices)) {
    (void)register_owner("core");
}

Ledger::~Ledger() {
    live_.for_each([&](const LeaseRecord& lease) { free_upstream(lease); });
}

OwnerId Ledger::register_owner(const std::string& name) {
    owners_.push_back(name);
    usage_.emplace_back();
    return static_cast<OwnerId>(owners_.size() - 1);
}

const std::string& Ledger::owner_name(OwnerId owner) const { return owners_.at(owner); }

void* Ledger::allocate_upstream(th_resource_kind kind, std::uint64_t bytes, device::DeviceIndex index,
                                std::size_t& reserved) {
    device::Device& dev = *devices_[index];
    switch (kind) {
    case TH_RESOURCE_DEVICE_MEMORY: return dev.memory().allocate(bytes, reserved);
    case TH_RESOURCE_PINNED_MEMORY: return dev.pinned().allocate(bytes, reserved);
    default: reserved = dev.object_bytes(kind); return dev.create_object(kind);
    }
}

void Ledger::free_upstream(const LeaseRecord& lease) noexcept {
    device::Device& dev = *devices_[lease.device];
    switch (lease.kind) {
    case TH_RESOURCE_DEVICE_MEMORY: dev.memory().deallocate(lease.address, lease.bytes_requested, lease.bytes_reserved); break;
    case TH_RESOURCE_PINNED_MEMORY: dev.pinned().deallocate(lease.address, lease.bytes_requested, lease.bytes_reserved); break;
    default: dev.destroy_object(lease.kind, lease.address); break;
    }
}

void Ledger::count_in(const LeaseRecord& lease) noexcept {
    OwnerUsage& usage = usage_[lease.owner];
    ++usage.leases;
    if (lease.kind == TH_RESOURCE_DEVICE_MEMORY) {
        usage.bytes_in_use += lease.bytes_requested;
        usage.bytes_allocated += lease.bytes_reserved;
    }
    usage.bytes_reserved += lease.bytes_reserved;
    usage.peak_bytes_in_use = std::max(usage.peak_bytes_in_use, usage.bytes_in_use);
    ++leases_per_scope_[lease.scope];
}

void Ledger::count_out(const LeaseRecord& lease) noexcept {
    OwnerUsage& usage = usage_[lease.owner];
    --usage.leases;
    if (lease.kind == TH_RESOURCE_DEVICE_MEMORY) {
        usage.bytes_in_use -= lease.bytes_requested;
        usage.bytes_allocated -= lease.bytes_reserved;
    }
    usage.bytes_reserved -= lease.bytes_reserved;
    --leases_per_scope_[lease.scope];
}

void Ledger::check_budget(OwnerId owner, device::DeviceIndex device, std::uint64_t bytes) const {
    const OwnerUsage& usage = usage_.at(owner);
    if (usage.budget == 0) return;
    // What the allocator would set aside, not what was asked: else many small leases
    // hold many times the limit (a thousand 1-byte leases are 64 KB on the CPU).
    const std::uint64_t set_aside = devices_[device]->memory().rounded(bytes);
    if (usage.bytes_allocated <= usage.budget && set_aside <= usage.budget - usage.bytes_allocated) return;
    std::map<std::pair<OwnerId, th_scope>, std::uint64_t> holders;
    live_.for_each([&](const LeaseRecord& lease) {
        if (lease.kind == TH_RESOURCE_DEVICE_MEMORY) holders[{lease.owner, lease.scope}] += lease.bytes_reserved;
    });
    std::vector<std::pair<std::uint64_t, std::string>> ranked;
    for (const auto& [key, held] : holders)
        ranked.emplace_back(held, fmt::format("{} ({} scope) {}", owners_[key.first], scope_name(key.second),
                                              human_bytes(held)));
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<std::string> top;
    for (std::size_t i = 0; i < ranked.size() && i < 5; ++i) top.push_back(ranked[i].second);
    // Exact counts where the rounding hides inside the units' own ("976.6 KiB (976.6 KiB as allocated)").
    std::string asked = human_bytes(bytes);
    if (set_aside != bytes)
        asked = human_bytes(set_aside) != asked
                    ? fmt::format("{} ({} as allocated)", asked, human_bytes(set_aside))
                    : fmt::format("{} bytes ({} as allocated)", bytes, set_aside);
    throw ResourceError(TH_OUT_OF_MEMORY,
                        fmt::format("{} is over its device_memory_limit of {}: holds {}, asked for {} more; top holders: "
                                    "{}",
                                    owners_.at(owner), human_bytes(usage.budget), human_bytes(usage.bytes_allocated),
                                    asked, top.empty() ? std::string("none") : fmt::format("{}", fmt::join(top, ", "))));
}

th_handle Ledger::acquire(OwnerId owner, th_resource_kind kind, std::uint64_t bytes, th_scope scope, std::string tag,
                          device::DeviceIndex device) {
    if (scope < TH_SCOPE_STEP || scope > TH_SCOPE_SESSION)
        throw ResourceError(TH_INVALID_ARGUMENT, fmt::format("invalid scope {}", static_cast<int>(scope)));
    if (kind < TH_RESOURCE_DEVICE_MEMORY || kind > TH_RESOURCE_DNN_HANDLE)
        throw ResourceError(TH_INVALID_ARGUMENT, fmt::format("invalid resource kind {}", static_cast<int>(kind)));
    if (owner != kCoreOwner && scope == TH_SCOPE_SESSION)
        throw ResourceError(TH_INVALID_ARGUMENT, "a plugin's lease cannot outlive the plugin: use scope plugin or narrower");
    if (device >= devices_.size()) throw ResourceError(TH_INVALID_ARGUMENT, fmt::format("no device {}", device));
    if (is_memory(kind) && bytes == 0) throw ResourceError(TH_INVALID_ARGUMENT, "a memory lease needs at least one byte");
    if (kind == TH_RESOURCE_DEVICE_MEMORY) check_budget(owner, device, bytes);

    // Everything that can throw happens before the upstream allocation (which itself
    // throws only having taken nothing), so that a failure never leaves memory that
    // nobody lists.
    auto stack = capture_stacks_ ? capture_stack() : nullptr;
    // So that noting a growth candidate cannot throw after the allocation; doubling, so
    // that a long list costs no copy per call.
    std::vector<GrowthCandidate>* const candidates = growth_candidates_for(owner, TH_SCOPE_STEP, scope);
    if (candidates != nullptr && candidates->size() == candidates->capacity())
        candidates->reserve(std::max<std::size_t>(16, 2 * candidates->size()));
    live_.reserve_one();
    std::size_t reserved = 0;
    void* address = allocate_upstream(kind, bytes, device, reserved);
    if (address == nullptr)
        throw ResourceError(TH_OUT_OF_MEMORY,
                            fmt::format("{}: out of memory: cannot provide {}{} for {} (tag {})", devices_[device]->name(),
                                        kind_name(kind), is_memory(kind) ? fmt::format(" ({} bytes)", bytes) : "",
                                        owners_.at(owner), tag));
    std::uint32_t slot = 0;
    LeaseRecord& lease = live_.insert(slot);
    lease.id = next_id_++;
    lease.generation = 1;
    lease.kind = kind;
    lease.owner = owner;
    lease.scope = scope;
    lease.bytes_requested = is_memory(kind) ? bytes : 0;
    lease.bytes_reserved = reserved;
    lease.acquired_in = phase_;
    lease.acquired_at = position_;
    lease.tag = std::move(tag);
    lease.address = address;
    lease.device = device;
    lease.slot = slot;
    lease.attached_param.reset();
    lease.growth_window = LeaseRecord::GrowthWindow::none;
    lease.stack = std::move(stack);
    const th_handle handle{lease.id, lease.generation, slot + 1};
    if (candidates != nullptr) watch_growth(lease, *candidates);
    count_in(lease);
    return handle;
}

// Every misuse through a handle that finds no live lease; apart from checked(), whose
// path for a good handle stays short.
void Ledger::refuse_missing(OwnerId owner, th_handle handle, const char* operation) {
    // A live lease reached through a handle not copied whole (its id alone, say):
    // diagnosed as what it would be through the whole handle, never used. So is the
    // caller's reclaimed lease, which only its whole handle ends late.
    const LeaseRecord* by_id = nullptr;
    if (handle.id != 0)
        live_.for_each([&](const LeaseRecord& lease) { by_id = lease.id == handle.id ? &lease : by_id; });
    const auto reclaimed = reclaimed_.find(handle.id);
    const bool own_reclaimed_in_part = reclaimed != reclaimed_.end() && reclaimed->second.owner == owner &&
                                       !same_handle(reclaimed->second.handle, handle);
    if (by_id != nullptr || own_reclaimed_in_part) {
        const bool foreign = by_id != nullptr && by_id->owner != owner;
        std::string detail = fmt::format("{} of lease {}{} through a handle that was not copied whole (copy "
                                         "th_handle as it is)",
                                         operation, handle.id,
                                         foreign ? fmt::format(", which belongs to {},", owners_.at(by_id->owner)) : "");
        record_misuse(owner, foreign ? MisuseKind::foreign_handle : MisuseKind::unknown_handle, handle.id, detail);
        throw ResourceError(TH_INVALID_HANDLE, detail);
    }
    const bool released = handle.id != 0 && handle.id < next_id_;
    // Another owner's lease, gone: foreign, not the caller's double free or use after free.
    if (const std::optional<OwnerId> previous = previous_owner(handle.id); previous && *previous != owner) {
        std::string detail = fmt::format("{} of lease {}, which belonged to {} and was {}", operation, handle.id,
                                         owners_.at(*previous),
                                         reclaimed_.contains(handle.id) ? "reclaimed by the core" : "released");
        record_misuse(owner, MisuseKind::foreign_handle, handle.id, detail);
        throw ResourceError(TH_INVALID_HANDLE, detail);
    }
    MisuseKind kind = reclaimed_.contains(handle.id) ? MisuseKind::use_after_reclaim
                      : released && std::string_view(operation) == "release" ? MisuseKind::double_free
                      : released ? MisuseKind::use_after_free
                                 : MisuseKind::unknown_handle;
    std::string detail = kind == MisuseKind::use_after_reclaim
                             ? fmt::format("{} of lease {}, which the core reclaimed", operation, handle.id)
                         : released ? fmt::format("{} of lease {}, which was already released", operation, handle.id)
                                    : fmt::format("{} of lease {}, which does not exist", operation, handle.id);
    record_misuse(owner, kind, handle.id, detail);
    throw ResourceError(TH_INVALID_HANDLE, detail);
}

bool Ledger::same_handle(const th_handle& a, const th_handle& b) noexcept {
    return a.id == b.id && a.generation == b.generation && a.reserved == b.reserved;
}

void Ledger::remember_released(std::uint64_t id, OwnerId owner) noexcept {
    recently_released_[released_count_++ % recently_released_.size()] = {id, owner};
}

std::optional<OwnerId> Ledger::previous_owner(std::uint64_t id) const {
    if (const auto reclaimed = reclaimed_.find(id); reclaimed != reclaimed_.end()) return reclaimed->second.owner;
    for (const ReleasedLease& released : recently_released_)
        if (released.id == id && id != 0) return released.owner;
    return std::nullopt;
}

LeaseRecord& Ledger::checked(OwnerId owner, th_handle handle, const char* operation) {
    LeaseRecord* found = live_.find(handle);
    if (found == nullptr) refuse_missing(owner, handle, operation);
    LeaseRecord& lease = *found;
    if (lease.owner != owner) {
        std::string detail = fmt::format("{} of lease {}, which belongs to {}", operation, handle.id,
                                         owners_.at(lease.owner));
        record_misuse(owner, MisuseKind::foreign_handle, handle.id, detail);
        throw ResourceError(TH_INVALID_HANDLE, detail);
    }
    // Generations never change (a reclaimed id is remembered instead), so another
    // generation is a handle not copied whole, diagnosed as refuse_missing does.
    if (lease.generation != handle.generation) refuse_missing(owner, handle, operation);
    return lease;
}

void Ledger::release(OwnerId owner, th_handle handle, std::uint64_t bytes) {
    if (live_.find(handle) == nullptr)
        if (const auto reclaimed = reclaimed_.find(handle.id);
            reclaimed != reclaimed_.end() && reclaimed->second.owner == owner && !reclaimed->second.owner_ended &&
            same_handle(reclaimed->second.handle, handle)) {
            if (reclaimed->second.memory && bytes != reclaimed->second.bytes) {
                std::string detail = fmt::format("release of lease {} as {} bytes; it held {} (reclaimed)", handle.id,
                                                 bytes, reclaimed->second.bytes);
                record_misuse(owner, MisuseKind::size_mismatch, handle.id, detail);
                throw ResourceError(TH_INVALID_ARGUMENT, detail);
            }
            reclaimed_.erase(reclaimed);  // from now on an ordinary released lease
            remember_released(handle.id, owner);
            return;
        }
    LeaseRecord& found = checked(owner, handle, "release");
    if (is_memory(found.kind) && bytes != found.bytes_requested) {
        std::string detail = fmt::format("release of lease {} as {} bytes; it holds {}", handle.id, bytes,
                                         found.bytes_requested);
        record_misuse(owner, MisuseKind::size_mismatch, handle.id, detail);
        throw ResourceError(TH_INVALID_ARGUMENT, detail);
    }
    // Un-record first, then give back upstream (the slot's contents stay intact
    // until the next insert, so the record is still readable here).
    count_out(found);
    live_.erase(found.slot);
    free_upstream(found);
    remember_released(handle.id, owner);
}

void Ledger::promote(OwnerId owner, th_handle handle, th_scope scope) {
    LeaseRecord& lease = checked(owner, handle, "promote");
    if (scope < lease.scope || scope > TH_SCOPE_SESSION || (owner != kCoreOwner && scope == TH_SCOPE_SESSION))
        throw ResourceError(TH_INVALID_ARGUMENT, fmt::format("cannot promote lease {} from scope {} to {}", handle.id,
                                                             scope_name(lease.scope), scope_name(scope)));
    std::vector<GrowthCandidate>* candidates = growth_candidates_for(owner, lease.scope, scope);
    // Room first, so that noting the candidate cannot throw once the scope has changed.
    if (candidates != nullptr && candidates->size() == candidates->capacity())
        candidates->reserve(std::max<std::size_t>(16, 2 * candidates->size()));
    --leases_per_scope_[lease.scope];
    lease.scope = scope;
    ++leases_per_scope_[lease.scope];
    if (candidates != nullptr) watch_growth(lease, *candidates);
}

void Ledger::attach(OwnerId owner, th_handle handle, std::uint64_t param_id) {
    LeaseRecord& lease = checked(owner, handle, "attach");
    if (lease.kind != TH_RESOURCE_DEVICE_MEMORY)
        throw ResourceError(TH_INVALID_ARGUMENT, fmt::format("only device memory can be attached to a parameter, not "
                                                             "{}",
                                                             kind_name(lease.kind)));
    lease.attached_param = param_id;
}

void* Ledger::address(OwnerId owner, th_handle handle, std::uint64_t offset, std::uint64_t bytes) {
    LeaseRecord& lease = checked(owner, handle, "access");
    if (!is_memory(lease.kind))
        throw ResourceError(TH_INVALID_ARGUMENT,
                            fmt::format("lease {} is of kind {}, not memory", handle.id, kind_name(lease.kind)));
    if (offset > lease.bytes_requested || bytes > lease.bytes_requested - offset) {
        // A range whose end does not fit in 64 bits is named by its start and length, never as a wrapped end.
        const std::string range = bytes > UINT64_MAX - offset
                                      ? fmt::format("{} bytes at offset {}", bytes, offset)
                                      : fmt::format("bytes [{}, {})", offset, offset + bytes);
        std::string detail = fmt::format("access of {} of lease {}, which holds {} bytes", range, handle.id,
                                         lease.bytes_requested);
        record_misuse(owner, MisuseKind::out_of_range, handle.id, detail);
        throw ResourceError(TH_INVALID_ARGUMENT, detail);
    }
    return static_cast<std::byte*>(lease.address) + offset;
}

void* Ledger::object(OwnerId owner, th_handle handle, th_resource_kind kind) {
    LeaseRecord& lease = checked(owner, handle, "use");
    if (lease.kind != kind)
        throw ResourceError(TH_INVALID_ARGUMENT, fmt::format("lease {} is of kind {}, not {}", handle.id,
                                                             kind_name(lease.kind), kind_name(kind)));
    return lease.address;
}

const LeaseRecord& Ledger::record(OwnerId owner, th_handle handle, const char* operation) {
    return checked(owner, handle, operation);
}

void Ledger::relocate_attached(device::DeviceIndex target, std::uint64_t taken_from) {
    device::Device& destination = *devices_.at(target);
    live_.for_each([&](LeaseRecord& lease) {
        const bool taken_in_hook = taken_from > 0 && lease.id >= taken_from && lease.owner != kCoreOwner &&
                                   lease.kind == TH_RESOURCE_DEVICE_MEMORY;
        if (!(lease.attached_param || taken_in_hook) || lease.device == target) return;
        std::size_t reserved = 0;
        void* moved = destination.memory().allocate(lease.bytes_requested, reserved);
        // A plugin's buffer that does not fit there stays, and is reported stranded as
        // the policy says; the model's own state must go.
        if (moved == nullptr && !lease.attached_param) return;
        if (moved == nullptr)
            throw ResourceError(TH_OUT_OF_MEMORY, fmt::format("{}: cannot move lease {} ({} bytes) of {}",
                                                              destination.name(), lease.id, lease.bytes_requested,
                                                              owners_[lease.owner]));
        try {
            std::vector<std::byte> staging(lease.bytes_requested);
            devices_[lease.device]->memory().copy_to_host(staging.data(), lease.address, staging.size());
            destination.memory().copy_from_host(moved, staging.data(), staging.size());
        } catch (...) {
            // The lease stays whole where it was; the copy that did not get there is given back.
            destination.memory().deallocate(moved, lease.bytes_requested, reserved);
            throw;
        }
        free_upstream(lease);
        count_out(lease);
        lease.address = moved;
        lease.bytes_reserved = reserved;
        lease.device = target;
        count_in(lease);
    });
}

template <typename Matches>
std::vector<Leak> Ledger::collect(std::string_view boundary, ViolationPolicy policy, LeakRule rule, Matches&& matches) {
    std::vector<Leak> leaks;
    live_.for_each([&](const LeaseRecord& lease) {
        if (matches(lease)) leaks.push_back(Leak{lease, owners_.at(lease.owner), std::string(boundary), rule});
    });
    // Report in acquisition order, whatever the hash map's order.
    std::sort(leaks.begin(), leaks.end(), [](const Leak& a, const Leak& b) { return a.lease.id < b.lease.id; });
    if (policy != ViolationPolicy::ignore) {
        for (const Leak& leak : leaks) {
            reclaimed_.emplace(leak.lease.id,
                               Reclaimed{th_handle{leak.lease.id, leak.lease.generation, leak.lease.slot + 1}, leak.lease.owner,
                                         is_memory(leak.lease.kind), leak.lease.bytes_requested});
            count_out(leak.lease);
            live_.erase(leak.lease.slot);
            free_upstream(leak.lease);
        }
    }
    return leaks;
}

std::vector<Leak> Ledger::end_scope(th_scope scope, std::string_view boundary, ViolationPolicy policy) {
    bool any = false;
    for (int s = TH_SCOPE_STEP; s <= scope; ++s) any = any || leases_per_scope_[s] > 0;
    if (!any) return {};
    return collect(boundary, policy, LeakRule::scope_end, [&](const LeaseRecord& lease) { return lease.scope <= scope; });
}

std::vector<Leak> Ledger::end_owner(OwnerId owner, th_scope widest, std::string_view boundary, ViolationPolicy policy) {
    std::vector<Leak> leaks;
    if (usage_.at(owner).leases > 0)
        leaks = collect(boundary, policy, LeakRule::owner_end,
                        [&](const LeaseRecord& lease) { return lease.owner == owner && lease.scope <= widest; });
    // The instance that could still give these back late is gone: a release of one now
    // comes from another instance under the same name (a later fit's), a use after reclaim.
    for (auto& [id, reclaimed] : reclaimed_)
        if (reclaimed.owner == owner) reclaimed.owner_ended = true;
    return leaks;
}

std::vector<Leak> Ledger::stranded_on(device::DeviceIndex source, std::string_view boundary, ViolationPolicy policy) {
    return collect(boundary, policy, LeakRule::stranded, [&](const LeaseRecord& lease) {
        return lease.device == source && lease.owner != kCoreOwner && lease.kind == TH_RESOURCE_DEVICE_MEMORY &&
               !lease.attached_param && lease.scope <= TH_SCOPE_PLUGIN;
    });
}

// Memory that outlives the window its hook is checked in: taken (from = step) or
// promoted (from = its old scope, epoch scope into the fit's among them) past the
// step in a step hook, checked per step; past the epoch in an epoch-level hook
// (epoch_start, the validation hooks, epoch_end), checked per epoch.
std::vector<Ledger::GrowthCandidate>* Ledger::growth_candidates_for(OwnerId owner, th_scope from, th_scope to) noexcept {
    if (!growth_tracked_ || owner == kCoreOwner || to < TH_SCOPE_EPOCH) return nullptr;
    const auto phase = static_cast<std::uint32_t>(phase_);
    // Past the step: taken into epoch or fit scope, or promoted from epoch scope into
    // the fit's, which a spare taken at epoch_start and kept a step at a time grows alike.
    const bool past_step = from < TH_SCOPE_EPOCH || (from < TH_SCOPE_FIT && to >= TH_SCOPE_FIT);
    if (step_hooks_ == StepHooks::predict_pass) {
        const bool in_pass = phase == TH_HOOK_VAL_BATCH_START || phase == TH_HOOK_VAL_BATCH_END;
        return in_pass && past_step ? &taken_in_steps_ : nullptr;
    }
    const bool in_step = phase >= TH_HOOK_BATCH_START && phase <= TH_HOOK_BATCH_END;
    const bool in_epoch = phase == TH_HOOK_EPOCH_START || (phase >= TH_HOOK_VALIDATION_START && phase <= TH_HOOK_EPOCH_END);
    if (in_step && past_step) return &taken_in_steps_;
    if (in_epoch && from < TH_SCOPE_FIT && to >= TH_SCOPE_FIT) return &taken_in_epoch_hooks_;
    return nullptr;
}

void Ledger::watch_growth(LeaseRecord& lease, std::vector<GrowthCandidate>& candidates) {
    lease.growth_window =
        &candidates == &taken_in_steps_ ? LeaseRecord::GrowthWindow::step : LeaseRecord::GrowthWindow::epoch;
    lease.growth_hook = phase_;
    candidates.push_back(GrowthCandidate{th_handle{lease.id, lease.generation, lease.slot + 1}, position_});
}

// What the owner of `like` holds that the growth rule watched in the same window as
// it, taken in the same hook (step: also of its scope class, epoch or fit).
Ledger::GrowthLevel Ledger::growth_level(const LeaseRecord& like) const {
    GrowthLevel level;
    const bool epoch_scoped = like.scope == TH_SCOPE_EPOCH;
    live_.for_each([&](const LeaseRecord& lease) {
        if (lease.owner != like.owner || lease.growth_window != like.growth_window ||
            lease.growth_hook != like.growth_hook)
            return;
        if (like.growth_window == LeaseRecord::GrowthWindow::step && (lease.scope == TH_SCOPE_EPOCH) != epoch_scoped)
            return;
        ++level.leases;
        level.bytes += lease.bytes_requested;
    });
    return level;
}

void Ledger::begin_fit_growth_window(StepHooks steps) {
    growth_tracked_ = true;
    growth_reported_.clear();
    step_hooks_ = steps;
    warmup_step_fit_.clear();
    warmup_epoch_.clear();
    taken_in_epoch_hooks_.clear();
    begin_epoch_growth_window();
}

void Ledger::begin_epoch_growth_window() {
    warmup_step_epoch_.clear();
    taken_in_steps_.clear();
}

void Ledger::end_growth_window() {
    growth_tracked_ = false;
    taken_in_steps_.clear();
    taken_in_epoch_hooks_.clear();
}

namespace {

std::uint64_t beyond(std::uint64_t a, std::uint64_t b) noexcept { return a > b ? a - b : 0; }

}  // namespace

// Each candidate still held: its owner's first step (or epoch) with one is the
// warm-up, and sets the level; one taken after it is growth where the owner then holds
// more than it ever did, in leases or bytes, in that window. A buffer made anew in
// place of one freed (the latest output kept, a best copy replaced) holds it level.
// Only as many candidates as the excess needs are named, each once. Each hook has a
// warm-up of its own: state made lazily where it is first needed (a monitor's, at the
// first validation) can come epochs after the first epoch_start
// (check_val_every_n_epoch), and an optimizer step's steps after the first batch
// (accumulate_grad_batches).
std::vector<Leak> Ledger::grown(std::vector<GrowthCandidate>& candidates, std::string_view boundary, bool per_epoch) {
    std::vector<Leak> leaks;
    std::map<const Warmup*, GrowthLevel> unnamed;  // each warm-up's excess at this check, yet to be named
    for (const GrowthCandidate& candidate : candidates) {
        const LeaseRecord* found = live_.find(candidate.handle);
        if (found == nullptr || growth_reported_.contains(found->id)) continue;
        const std::uint64_t when = per_epoch ? candidate.at.epoch : candidate.at.window;
        auto& warmups = per_epoch                          ? warmup_epoch_
                        : found->scope == TH_SCOPE_EPOCH ? warmup_step_epoch_
                                                         : warmup_step_fit_;
        Warmup& warmup =
            warmups.try_emplace(WarmupKey{found->owner, found->growth_hook}, Warmup{when, {}}).first->second;
        auto excess = unnamed.find(&warmup);
        if (excess == unnamed.end()) {  // the level once per warm-up and check: it walks the live leases
            const GrowthLevel held = growth_level(*found);
            excess = unnamed.emplace(&warmup, GrowthLevel{beyond(held.leases, warmup.level.leases),
                                                          beyond(held.bytes, warmup.level.bytes)})
                         .first;
            warmup.level = GrowthLevel{std::max(warmup.level.leases, held.leases), std::max(warmup.level.bytes, held.bytes)};
        }
        if (when <= warmup.when || (excess->second.leases == 0 && excess->second.bytes == 0)) continue;
        excess->second = GrowthLevel{beyond(excess->second.leases, 1), beyond(excess->second.bytes, found->bytes_requested)};
        growth_reported_.insert(found->id);
        leaks.push_back(Leak{*found, owners_.at(found->owner), std::string(boundary), LeakRule::growth});
    }
    candidates.clear();
    return leaks;
}

std::vector<Leak> Ledger::grown_in_step(std::string_view boundary) { return grown(taken_in_steps_, boundary, false); }

std::vector<Leak> Ledger::grown_in_epoch(std::string_view boundary) {
    return grown(taken_in_epoch_hooks_, boundary, true);
}

void Ledger::record_misuse(OwnerId owner, MisuseKind kind, std::uint64_t lease_id, std::string detail) {
    misuses_.push_back(Misuse{kind, owners_.at(owner), phase_, lease_id, std::move(detail)});
}

std::vector<LeaseRecord> Ledger::leases_of(OwnerId owner) const {
    std::vector<LeaseRecord> leases;
    live_.for_each([&](const LeaseRecord& lease) {
        if (lease.owner == owner) leases.push_back(lease);
    });
    std::sort(leases.begin(), leases.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    return leases;
}

std::vector<LeaseRecord> Ledger::leases_on(device::DeviceIndex device) const {
    std::vector<LeaseRecord> leases;
    live_.for_each([&](const LeaseRecord& lease) {
        if (lease.device == device) leases.push_back(lease);
    });
    std::sort(leases.begin(), leases.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    return leases;
}

}  // namespace trainhost::resources
