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
    case MisuseKind::use_after_free: return "use_after_free";
    case MisuseKind::size_mismatch: return "size_mismatch";
    case MisuseKind::undeclared_write: return "undeclared_write";
    case MisuseKind::wrong_thread: return "wrong_thread";
    }
    return "unknown";
}

std::string_view rule_name(LeakRule rule) noexcept {
    switch (rule) {
    case LeakRule::scope_end: return "scope_end";
    case LeakRule::owner_end: return "owner_end";
    case LeakRule::stranded: return "stranded";
    case LeakRule::growth: return "growth";
    }
    return "unknown";
}

std::string format_leak(const Leak& leak) {
    const LeaseRecord& l = leak.lease;
    std::string line = fmt::format("leak: plugin={} kind={} bytes={} tag={} scope={} acquired_in={} fit={} epoch={} step={} id={} "
                       "detected_at={} rule={}",
                       leak.owner, kind_name(l.kind), l.bytes_requested, l.tag.empty() ? "-" : l.tag,
                       scope_name(l.scope), phase_name(l.acquired_in), l.acquired_at.fit, l.acquired_at.epoch,
                       l.acquired_at.step, l.id, leak.detected_at, rule_name(leak.rule));
    return line;
}

std::string format_misuse(const Misuse& misuse) {
    return fmt::format("misuse: plugin={} kind={} phase={} id={} detail={}", misuse.owner, misuse_name(misuse.kind),
                       phase_name(misuse.phase), misuse.lease_id, misuse.detail);
}

std::string human_bytes(std::uint64_t bytes) {
    if (bytes < 1024) return fmt::format("{} B", bytes);
    if (bytes < 1024 * 1024) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
    if (bytes < 1024ull * 1024 * 1024) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024));
    return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
}

}  // namespace trainhost::resources
