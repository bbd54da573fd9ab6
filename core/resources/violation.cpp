#include "resources/violation.hpp"

#include <fmt/format.h>

namespace trainhost::resources {

std::string_view policy_name(ViolationPolicy policy) noexcept {
    switch (policy) {
    case ViolationPolicy::fail: return "fail";
    case ViolationPolicy::warn: return "warn";
    case ViolationPolicy::ignore: return "ignore";
    }
    return "unknown";
}

std::string_view misuse_name(MisuseKind kind) noexcept {
    switch (kind) {
    case MisuseKind::double_free: return "double_free";
    case MisuseKind::foreign_handle: return "foreign_handle";
    case MisuseKind::unknown_handle: return "unknown_handle";
    case MisuseKind::use_after_reclaim: return "use_after_reclaim";
    case MisuseKind::out_of_range: return "out_of_range";
    case MisuseKind::out_of_phase: return "out_of_phase";
    case MisuseKind::over_budget: return "over_budget";
    }
    return "unknown";
}

std::string format_leak(const Leak& leak) {
    const LeaseRecord& l = leak.lease;
    return fmt::format("leak: plugin={} kind={} bytes={} tag={} scope={} acquired_in={} fit={} epoch={} step={} id={} "
                       "detected_at={}",
                       leak.owner, kind_name(l.kind), l.bytes_requested, l.tag.empty() ? "-" : l.tag,
                       scope_name(l.scope), phase_name(l.acquired_in), l.acquired_at.fit, l.acquired_at.epoch,
                       l.acquired_at.step, l.id, leak.detected_at);
}

std::string format_misuse(const Misuse& misuse) {
    return fmt::format("misuse: plugin={} kind={} phase={} id={} detail={}", misuse.owner, misuse_name(misuse.kind),
                       phase_name(misuse.phase), misuse.lease_id, misuse.detail);
}

}  // namespace trainhost::resources
