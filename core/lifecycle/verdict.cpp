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
    // it is one lease leaked, and its bytes count once. Memory is named by its bytes,
    // an object (a stream, a handle: no bytes of its own) by its kind, so that a
    // plugin leaking only handles is not said to have leaked 0 B.
    struct Leaked {
        std::uint64_t bytes = 0;
        std::map<std::string, std::size_t> objects;
    };
    std::map<std::string, Leaked> leaked_by_owner;
    std::set<std::uint64_t> leaked_leases;
    for (const resources::Leak& leak : result.leaks) {
        if (!leaked_leases.insert(leak.lease.id).second) continue;
        Leaked& leaked = leaked_by_owner[leak.owner];
        if (resources::is_memory(leak.lease.kind)) leaked.bytes += leak.lease.bytes_requested;
        else
            ++leaked.objects[std::string(resources::kind_name(leak.lease.kind))];
    }
    std::vector<std::string> culprits;
    for (const auto& [owner, leaked] : leaked_by_owner) {
        std::vector<std::string> what;
        if (leaked.bytes > 0 || leaked.objects.empty()) what.push_back(resources::human_bytes(leaked.bytes));
        for (const auto& [kind, count] : leaked.objects)
            what.push_back(count == 1 ? kind : fmt::format("{} x{}", kind, count));
        culprits.push_back(fmt::format("{} leaked {}", owner, fmt::join(what, ", ")));
    }
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
