// Breaches of the ownership contract, as found by the ledger.
#pragma once

#include "resources/lease.hpp"

#include <string>
#include <string_view>

namespace trainhost::resources {

enum class ViolationPolicy { fail, warn, ignore };

[[nodiscard]] std::string_view policy_name(ViolationPolicy policy) noexcept;

// Why the ledger calls a lease a leak.
enum class LeakRule {
    scope_end,  // still held when its scope ended
    owner_end,  // still held when its owner was destroyed
    stranded,   // left on the device the model moved away from
    growth,     // wider-than-step memory taken after the fit's first step: a pool that only grows
};

[[nodiscard]] std::string_view rule_name(LeakRule rule) noexcept;

struct Leak {
    LeaseRecord lease;
    std::string owner;
    std::string detected_at;  // the boundary: "batch_end", "epoch_end", "teardown", "destroy", ...
    LeakRule rule = LeakRule::scope_end;
};

enum class MisuseKind {
    double_free,
    use_after_free,
    foreign_handle,
    unknown_handle,
    use_after_reclaim,
    size_mismatch,
    out_of_range,
    out_of_phase,
    undeclared_write,
    wrong_thread,
};

[[nodiscard]] std::string_view misuse_name(MisuseKind kind) noexcept;

struct Misuse {
    MisuseKind kind = MisuseKind::unknown_handle;
    std::string owner;
    Phase phase = Phase::core;
    std::uint64_t lease_id = 0;
    std::string detail;
};

// One line each, `key=value` fields, so that logs can be grepped and parsed:
// leak: plugin=pruning kind=device_memory bytes=25165824 tag=lottery_originals scope=fit acquired_in=setup fit=3 epoch=0 step=0 id=4711 detected_at=teardown rule=scope_end
[[nodiscard]] std::string format_leak(const Leak& leak);
[[nodiscard]] std::string format_misuse(const Misuse& misuse);

// "1.5 MiB", "512 B": sizes as people read them.
[[nodiscard]] std::string human_bytes(std::uint64_t bytes);

}  // namespace trainhost::resources
