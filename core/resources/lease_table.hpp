// Storage of live leases: a slot vector with a free list, so that recording and
// un-recording cost no hashing and no allocation once warm. A handle carries its
// slot (in th_handle.reserved, off by one so that 0 means "none"); the id is
// checked too, so a stale handle never finds a slot's new tenant.
#pragma once

#include "resources/lease.hpp"

#include <cstdint>
#include <vector>

namespace trainhost::resources {

class LeaseTable {
public:
    // Makes sure the next insert cannot throw.
    void reserve_one() {
        if (free_.empty()) {
            slots_.emplace_back();
            free_.push_back(static_cast<std::uint32_t>(slots_.size() - 1));
        }
    }

    // A free slot to fill; `slot` receives its index. Never throws after reserve_one().
    [[nodiscard]] LeaseRecord& insert(std::uint32_t& slot) {
        reserve_one();
        slot = free_.back();
        free_.pop_back();
        slots_[slot].live = true;
        ++live_;
        return slots_[slot].lease;
    }

    [[nodiscard]] LeaseRecord* find(const th_handle& handle) noexcept {
        const std::uint64_t slot = std::uint64_t{handle.reserved} - 1;
        if (handle.reserved == 0 || slot >= slots_.size()) return nullptr;
        Slot& s = slots_[slot];
        return s.live && s.lease.id == handle.id ? &s.lease : nullptr;
    }

    void erase(std::uint32_t slot) noexcept {
        slots_[slot].live = false;
        slots_[slot].lease.stack.reset();
        free_.push_back(slot);
        --live_;
    }

    [[nodiscard]] std::size_t size() const noexcept { return live_; }

    template <typename Visit>
    void for_each(Visit&& visit) {
        for (Slot& s : slots_)
            if (s.live) visit(s.lease);
    }
    template <typename Visit>
    void for_each(Visit&& visit) const {
        for (const Slot& s : slots_)
            if (s.live) visit(s.lease);
    }

private:
    struct Slot {
        LeaseRecord lease;
        bool live = false;
    };
    std::vector<Slot> slots_;
    std::vector<std::uint32_t> free_;
    std::size_t live_ = 0;
};

}  // namespace trainhost::resources
