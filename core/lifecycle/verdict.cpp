#include "lifecycle/verdict.hpp"

#include "errors.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>

namespace trainhost::lifecycle {

void finish_verdict(SessionResult& result) {
    const bool violated = !result.leaks.empty() || !result.misuses.empty();
    int exit_code = kExitOk;
    for (const FitRecord& fit : result.fits)
        if (fit.failure_exit != 0 && exit_code == kExitOk) exit_code = fit.failure_exit;
    if (exit_code == kExitOk && violated && result.policy == resources::ViolationPolicy::fail)
        exit_code = kExitResourceContract;
    result.exit_code = exit_code;

    const std::size_t fits = result.fits.size();
    if (!violated) {
        std::vector<std::string> peaks;
        for (const OwnerSummary& owner : result.owners)
            peaks.push_back(fmt::format("{} {}", owner.name, resources::human_bytes(owner.usage.peak_bytes_in_use)));
        result.verdict = fmt::format("resources: clean - every lease given back ({} fit{}, 0 leaks, 0 misuses); peak in "
                                     "use: {}",
                                     fits, fits == 1 ? "" : "s", fmt::join(peaks, ", "));
        return;
    }
    // A growth lease still held at teardown is found again there, and listed twice;
    // it is one lease leaked, and its bytes count once.
    std::map<std::string, std::uint64_t> leaked_by_owner;
    std::set<std::uint64_t> leaked_leases;
    for (const resources::Leak& leak : result.leaks)
        if (leaked_leases.insert(leak.lease.id).second) leaked_by_owner[leak.owner] += leak.lease.bytes_requested;
    std::vector<std::string> culprits;
    for (const auto& [owner, bytes] : leaked_by_owner) culprits.push_back(fmt::format("{} leaked {}", owner, resources::human_bytes(bytes)));
    // In order of first occurrence, each kind once per plugin with its count.
    std::vector<std::pair<std::string, std::size_t>> misused;
    for (const resources::Misuse& misuse : result.misuses) {
        const std::string what = fmt::format("{} {}", misuse.owner, resources::misuse_name(misuse.kind));
        auto found = std::find_if(misused.begin(), misused.end(), [&](const auto& m) { return m.first == what; });
        if (found == misused.end()) misused.emplace_back(what, 1);
        else ++found->second;
    }
    for (const auto& [what, count] : misused)
        culprits.push_back(count == 1 ? what : fmt::format("{} x{}", what, count));
    const std::size_t leaks = leaked_leases.size();
    result.verdict = fmt::format("resources: VIOLATION - {} leak{}, {} misuse{} (policy {}): {}", leaks,
                                 leaks == 1 ? "" : "s", result.misuses.size(),
                                 result.misuses.size() == 1 ? "" : "s", resources::policy_name(result.policy),
                                 fmt::join(culprits, "; "));
}

}  // namespace trainhost::lifecycle
